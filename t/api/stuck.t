# A stuck database (issue 11 item 2): with the lessons table locked in
# PostgreSQL (LOCK TABLE ... ACCESS EXCLUSIVE, as a migration does), or
# another process holding SQLite's write lock, every API request is
# answered within the bound (LessonsDBTimeout 2 here) with 503
# problem+json and Retry-After; a write answered anything but 2xx
# changed nothing and every 2xx write is stored; the rest of the server
# keeps serving; once the lock is gone the API answers again by itself.
# Time bounds are asserted with wide slack (five times the setting).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use IO::Handle ();
use Time::HiRes qw(time sleep);
use LessonsTest;
use LessonsTest::Parallel qw(start collect parallel);
use LessonsTest::Lock qw(hold_lock release);

my $pg = $ENV{LESSONS_TEST_DRIVER} eq 'pgsql';
my $BOUND = 2;

# lessons_stuck_long's access log: [begin, usecs, pid, tid, method, path,
# status] a request.
sub served_by_long {
    open my $fh, '<', Apache::Test::vars('t_logs') . '/stuck_long.log'
        or return;
    return map { [ split ' ' ] } <$fh>;
}

seed({ level_id => 1, title => 'Vor der Sperre', sort_order => 1 });

my $n = 0;
sub post_job {
    my ($vhost) = @_;
    $n++;
    return [ "post$n", POST => $vhost, '/api/lessons',
             json => { levelId => 2, title => "Gesperrt $n", order => $n } ];
}

# ---- the lock is held: bounded answers, nothing half done
my $lock = hold_lock();
my @res = parallel(
    (map { [ "get$_", GET => 'lessons_stuck', '/api/lessons' ] } 1 .. 4),
    [ 'item', GET => 'lessons_stuck', '/api/lessons/level/1' ],
    (map { post_job('lessons_stuck') } 1 .. 6),
);
my $slowest = 0;
for my $r (@res) {
    $slowest = $r->{secs} if $r->{secs} > $slowest;
    cmp_ok $r->{secs}, '<', 5 * $BOUND, "locked: $r->{tag} answered within "
        . 5 * $BOUND . " s ($r->{secs} s)";
    if ($pg || $r->{tag} =~ /^post/) {
        # PostgreSQL's lock stops reads too; SQLite's only writes.
        ok $r->{code} == 503 || ($r->{tag} =~ /^post/ && $r->{code} == 201),
            "locked: $r->{tag} answered $r->{code} (503 expected)";
    }
    else {
        is $r->{code}, 200, "locked: SQLite readers never wait ($r->{tag})";
    }
    if ($r->{code} == 503) {
        like $r->{type}, qr{\Aapplication/problem\+json}, "locked: $r->{tag} problem+json";
        like $r->{retry}, qr/\A\d+\z/, "locked: $r->{tag} Retry-After";
    }
}
diag sprintf 'slowest answer while locked: %.2f s', $slowest;
my $created = grep { $_->{tag} =~ /^post/ && $_->{code} == 201 } @res;
my $refused = grep { $_->{tag} =~ /^post/ && $_->{code} == 503 } @res;
is $created + $refused, 6, 'locked: every POST answered 201 or 503';
cmp_ok $refused, '>', 0, 'locked: writes were refused while locked';

# ---- the rest of the server keeps serving, even with a long bound and
# more stuck API requests than a process has threads
{
    # More writers than the server has threads (Apache::Test: 30).
    my @posts = start(map { post_job('lessons_stuck_long') } 1 .. 40);
    if ($pg) {
        # Wait until every thread the server lets wait is stuck on the
        # lock: all 30 without the gate; with it, 7 a process plus those
        # that wait until the gate counts the database as stalled.
        my $t0 = time;
        while (time - $t0 < 6) {
            last if db_rows("SELECT count(*) AS n FROM pg_stat_activity"
                . " WHERE wait_event_type = 'Lock'")->[0]{n} >= 30;
            sleep 0.2;
        }
    }
    sleep 0.5;
    my $sent = time;
    my @others = parallel(
        map { [ "other$_", GET => 'lessons_stuck_long', "/not-the-api/$_" ] } 1 .. 3);
    # Where each one's time went: before its request line was read (the
    # listen queue, or a process with no free thread) or after.
    my %served = map { $_->[5] => $_ } served_by_long();
    for my $r (@others) {
        (my $path = $r->{tag}) =~ s{\Aother}{/not-the-api/};
        my $in = $served{$path};
        is $r->{code}, 404, "locked: $r->{tag} still served (404 from httpd)";
        ok $in, "locked: $r->{tag} is in the access log";
        my $where = $in ? sprintf ' (line read after %.2f s, served in %.3f s, pid %d)',
                              $in->[0] - $sent, $in->[1] / 1e6, $in->[2]
                        : '';
        cmp_ok $r->{secs}, '<', 5,
            "locked: $r->{tag} answered at once ($r->{secs} s)$where";
        cmp_ok $in ? $in->[1] / 1e6 : 99, '<', 1,
            "locked: $r->{tag} served at once once read$where";
    }
    # The writes still waiting go on once the lock is gone.
    release($lock);
    my @done = collect(@posts);
    if (grep { $_->{secs} >= 5 } @others) {
        # How the writers were spread over the processes.
        my %per;
        $per{ $_->[2] }++ for grep { $_->[4] eq 'POST' } served_by_long();
        diag 'long bound: writes a process: '
            . join ', ', map { "$_: $per{$_}" } sort keys %per;
    }
    my @shed = grep { $_->{code} == 503 } @done;
    $refused += @shed;
    $created += grep { $_->{code} == 201 } @done;
    is @shed + (grep { $_->{code} == 201 } @done), 40,
        'long bound: every POST answered 201 or 503';
    diag sprintf 'long bound: %d of 40 writes shed (503), %d waited and '
        . 'were stored (201)', scalar @shed, 40 - @shed;
}

# ---- the lock is gone: the API answers again by itself, within seconds
my $back;
for (1 .. 50) {
    my $res = call(GET => '/api/lessons', vhost => 'lessons_stuck');
    if ($res->code == 200) { $back = 1; last }
    sleep 0.2;
}
ok $back, 'unlocked: GET answers 200 again';
is call(POST => '/api/lessons', vhost => 'lessons_stuck',
        json => { levelId => 2, title => 'Nach der Sperre', order => 1 })->code,
    201, 'unlocked: POST answers 201 again';

# Every 2xx write is stored, and no refused one is.
my $stored = db_rows("SELECT count(*) AS n FROM lessons WHERE title LIKE 'Gesperrt %'")
    ->[0]{n};
is $stored, $created, "rows stored ($stored) equal 201 answers ($created)";
diag "writes while locked: $created answered 201, $refused answered 503, $stored stored";

done_testing;
