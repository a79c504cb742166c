# PostgreSQL restarts and outages (issue 6 item 1).  apr_dbd_pgsql
# reconnects a broken pooled connection underneath mod_dbd (PQreset), and
# the statements prepared on the old backend are gone: every request used
# to answer 500 until Apache restarted.  Now: during a restart and while
# the database is stopped, every answer is 200 or 503 (problem+json,
# Retry-After) and comes within the bound; once the database is back the
# service recovers by itself, on every pooled connection; a write during
# the outage is done (201, stored) or refused (503, not stored).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use Time::HiRes qw(time sleep);
use LessonsTest;
use LessonsTest::Parallel qw(start collect parallel settle renew_suite_server);

plan skip_all => 'PostgreSQL only' unless $ENV{LESSONS_TEST_DRIVER} eq 'pgsql';

my $BOUND = 2;                  # LessonsDBTimeout of lessons_stuck
my $VHOST = 'lessons_stuck';


seed({ level_id => 1, title => 'Neustart', sort_order => 1 });

my $n = 0;
sub burst {
    my ($gets, $posts) = @_;
    return parallel(
        (map { [ 'get', GET => $VHOST, '/api/lessons' ] } 1 .. $gets),
        (map { $n++; [ 'post', POST => $VHOST, '/api/lessons',
                       json => { levelId => 2, title => "Ausfall $n", order => $n } ] }
             1 .. $posts));
}

my ($created, $refused) = (0, 0);
sub tally {
    my ($phase, @res) = @_;
    my %seen;
    for my $r (@res) {
        $seen{$r->{code}}++;
        $created++ if $r->{tag} eq 'post' && $r->{code} == 201;
        $refused++ if $r->{tag} eq 'post' && $r->{code} == 503;
        cmp_ok $r->{secs}, '<', 5 * $BOUND, "$phase: answered within "
            . 5 * $BOUND . " s" if $r->{code} != 200 && $r->{code} != 201;
        if ($r->{code} == 503) {
            like $r->{retry}, qr/\A\d+\z/, "$phase: 503 has Retry-After";
            like $r->{type}, qr{\Aapplication/problem\+json}, "$phase: 503 is problem+json";
        }
    }
    my @bad = grep { !/\A(?:200|201|503)\z/ } keys %seen;
    ok !@bad, "$phase: only 200, 201 or 503 (" . join(', ', map { "$_ x$seen{$_}" }
                                                  sort keys %seen) . ")";
    diag "$phase: " . join(', ', map { "$_ x$seen{$_}" } sort keys %seen);
}

# Wait until a burst of requests, spread over the pooled connections,
# all answer 200; returns the seconds it took.
sub recovered {
    my ($phase) = @_;
    return settle($VHOST, 12, sub { tally("$phase (recovering)", @_) });
}

# ---- warm every pooled connection
is scalar(grep { $_->{code} == 200 } burst(12, 0)), 12, 'warm: 12 of 12 answer 200';

# ---- restart under traffic
{
    my @kids = start(map { [ 'get', GET => $VHOST, '/api/lessons' ] } 1 .. 6);
    pg_ctl('restart', '-m', 'fast');
    tally('restart', collect(@kids));
    tally('restart', burst(8, 4));
    my $secs = recovered('after restart');
    ok defined $secs, 'after restart: every pooled connection answers 200 again';
    diag sprintf 'after restart: recovered in %.2f s', $secs // -1;
}

# ---- stopped: bounded 503s, writes refused or done
pg_ctl('stop', '-m', 'fast');
{
    my @res = burst(8, 6);
    tally('stopped', @res);
    is scalar(grep { $_->{code} == 503 } @res), 14, 'stopped: every request 503';
}

# ---- started again: recovery without an Apache restart
pg_start();
{
    my $secs = recovered('after start');
    ok defined $secs, 'after start: every pooled connection answers 200 again';
    diag sprintf 'after start: recovered in %.2f s', $secs // -1;
    tally('after start', burst(4, 4));
}

my $stored = db_rows("SELECT count(*) AS n FROM lessons WHERE title LIKE 'Ausfall %'")->[0]{n};
is $stored, $created, "writes: stored ($stored) equal 201 answers ($created)";
diag "writes: $created answered 201, $refused answered 503, $stored stored";

# The database restarted under every child of the suite's server, and the
# bursts above reach the pooled connections of only some: a connection
# left spent gives a later test file one 503 (restore.t counted one in a
# clean-clone CI under ASan).  Fresh children and connections instead.
ok defined renew_suite_server(), "the suite's server, restarted gracefully, answers again";

done_testing;
