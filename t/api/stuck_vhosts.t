# A stuck database behind two virtual hosts that share one mod_dbd pool
# (the usual :80 and :443 pair), with GETs of lessons not in the cache:
# the rest of the server is still served once the database has not
# answered for the gate's stall bound (2 s).  Two things took every
# thread of the process until LessonsDBTimeout (20 s here):
# - the gate in front of the pool was one per virtual host, so each let
#   DBDMax requests at the same connections (those past DBDMax waited
#   inside mod_dbd, whose wait has no bound) and kept waiters of its own;
#   now the virtual hosts that share a pool share its gate;
# - the GETs waiting for a version read whose leader was stuck (here in
#   preparing its statements, which the lock stops too) waited for it
#   until their deadline, outside the gate's count; now they wait for it
#   at most the stall bound, then go on to the gate, which turns away
#   those it has no room for.
#
# PostgreSQL only: a table lock stops its reads, while SQLite's readers
# never wait (t/api/stuck.t has both).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use IO::Socket::INET ();
use Time::HiRes qw(time sleep);
use LessonsTest;
use LessonsTest::Lock qw(hold_lock release);

plan skip_all => 'PostgreSQL only (SQLite readers never wait for a lock)'
    unless $ENV{LESSONS_TEST_DRIVER} eq 'pgsql';

my $token = good_token(claims => { exp => time + 3600 });
my $dir   = File::Temp->newdir(CLEANUP => !$ENV{LESSONS_TEST_KEEP});
my ($pa, $pb) = (free_port(), free_port());
$pb = free_port() while $pb == $pa;
my $api = api_location();
my $conf = httpd_conf($dir, $pa, <<"EOF");
Listen 127.0.0.1:$pb
@{[ one_process_conf(8) ]}DBDMin 1
DBDKeep 2
DBDMax 2
LessonsDBTimeout 20
<VirtualHost 127.0.0.1:$pa>
$api</VirtualHost>
<VirtualHost 127.0.0.1:$pb>
# mod_dbd's default, said again: still the same pool as the other's.
DBDPersist On
$api</VirtualHost>
EOF
start_httpd($conf, $pa);
wait_port($pb) or BAIL_OUT("httpd does not listen on $pb");

my ($seeded) = seed({ level_id => 1, title => 'Vor der Sperre', sort_order => 1 });

# One request over a raw socket: (status, seconds).
sub request {
    my ($port, $path, $auth) = @_;
    my $t0 = time;
    my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port",
                                  Timeout => 60) or return (0, 0);
    print $s "GET $path HTTP/1.0\r\nHost: localhost\r\n"
        . ($auth ? "Authorization: Bearer $token\r\n" : '') . "\r\n";
    local $/;
    my $res = <$s> // '';
    my ($code) = $res =~ m{\AHTTP/1\.\d (\d{3})};
    return ($code || 0, time - $t0);
}

for my $port ($pa, $pb) {
    my ($code) = request($port, '/api/lessons', 1);
    is $code, 200, "port $port: the API answers before the lock";
}

# ---- the lock is held: 8 API requests on each virtual host, each for a
# lesson not in the response cache (so it reads the locked table) and
# not in the table (ids past the one seeded: the ids go on from earlier
# tests' rows)
my $lock = hold_lock();
my @kids;
my $n = 0;
for my $port (($pa) x 8, ($pb) x 8) {
    my $id = $seeded + 1000 + $n++;
    pipe my $r, my $w or die "pipe: $!";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $r;
        my ($code, $secs) = request($port, "/api/lessons/$id", 1);
        print $w "$code $secs\n";
        close $w;
        exit 0;
    }
    close $w;
    push @kids, [ $pid, $r, $port ];
}
sleep 1.5;          # every request has reached the server by now: each
                    # thread of the process holds one

# The rest of the server: httpd's own 404, on either virtual host.
for my $port ($pa, $pb) {
    my ($code, $secs) = request($port, '/not-the-api/', 0);
    is $code, 404, "locked: port $port still serves the rest (404 from httpd)";
    # Slack for a busy machine (2 to 4 s under ASan): half the timeout,
    # which every request waited out before.
    cmp_ok $secs, '<', 10, "locked: ... once the stall bound is over ($secs s)";
}

release($lock);
my %codes;
for my $k (@kids) {
    my ($pid, $r, $port) = @$k;
    my ($code) = split ' ', scalar(<$r>) // '0';
    waitpid $pid, 0;
    $codes{$code}++;
    ok $code == 404 || $code == 503,
        "port $port: a locked API request answered 404 or 503 ($code)";
}
diag 'locked API requests: ' . join ', ', map { "$codes{$_} x $_" }
    sort keys %codes;

for my $port ($pa, $pb) {
    my ($code) = request($port, '/api/lessons', 1);
    is $code, 200, "port $port: the API answers again once the lock is gone";
}

done_testing;
