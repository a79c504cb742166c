# A database that answers is never shed (issue 18, "zero 5xx under
# ordinary load"): more concurrent API requests than a process lets hold
# a database connection (Apache::Test: 10 threads a process, so 7
# holders) wait their turn and succeed, even while a statement takes a
# while.  Here each round's 30 creates are sent at once while a lock
# from outside holds the table for 0.3 s (a slow statement, well under
# the gate's one-second stall bound): every one is stored and answered
# 201.  The gate before this test shed the eighth of a process at once.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use Time::HiRes qw(sleep);
use LessonsTest;
use LessonsTest::Lock qw(hold_lock release);
use LessonsTest::Parallel qw(start_held collect);

my $N = 30;                         # Apache::Test's MaxClients
my $ROUNDS = 3;

seed({ level_id => 1, title => 'Vor der Last', sort_order => 1 });
my $before = db_count();
for my $round (1 .. $ROUNDS) {
    my ($go, @kids) = start_held(map {
        [ "post$round.$_", POST => undef, '/api/lessons',
          json => { levelId => 2, title => "Last $round.$_", order => $_ } ]
    } 1 .. $N);
    my $lock = hold_lock();
    sleep 1;                        # every client connected, waiting
    $go->();
    sleep 0.3;
    if (LessonsTest::db_driver() eq 'pgsql') {
        diag 'requests waiting on the lock: ', db_rows("SELECT count(*) AS n"
            . " FROM pg_stat_activity WHERE wait_event_type = 'Lock'")->[0]{n};
    }
    release($lock);
    my %codes;
    $codes{ $_->{code} }++ for collect(@kids);
    is_deeply \%codes, { 201 => $N },
        "round $round: $N concurrent creates behind a 0.3 s lock, every "
        . "one 201 (none shed)" or diag explain \%codes;
    my $rows = db_rows("SELECT title FROM lessons WHERE title LIKE "
                       . sq("Last $round.%"));
    is scalar @$rows, $N, "round $round: all $N rows stored";

    ($go, @kids) = start_held(map {
        [ "get$round.$_", GET => undef, '/api/lessons' ] } 1 .. $N);
    sleep 1;
    $go->();
    %codes = ();
    $codes{ $_->{code} }++ for collect(@kids);
    is_deeply \%codes, { 200 => $N },
        "round $round: $N concurrent reads, every one 200"
        or diag explain \%codes;
}
is db_count(), $before + $ROUNDS * $N, 'the row count is the arithmetic';

done_testing;
