# A provider that accepts connections and never answers (issue 57,
# section 2): each process lets only a few of its requests wait for a
# source's first fetch (a quarter of its threads), whichever process
# fetches; the rest are answered 503 with Retry-After at once, and the
# server's other sections keep their threads.  Before, a process whose
# source another process was fetching let every request wait for it,
# 10 s each: a burst of tokens held every thread of the server.
#
# A server of its own: the event MPM, two processes of 8 threads (2 may
# wait in each), a section whose keys URL is a port that accepts and
# never answers, and a neighbour section with a key file.  24 token
# requests to the first at once, then the neighbour asked while they
# wait.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use IO::Socket::INET ();
use POSIX ();
use Time::HiRes qw(time sleep);
use LessonsTest;

plan skip_all => 'no database involved: run on SQLite'
    unless LessonsTest::db_driver() eq 'sqlite3';

my $dir = File::Temp->newdir(CLEANUP => !$ENV{LESSONS_TEST_KEEP});

# ---- the provider that never answers: it accepts and holds on ---------
my $hole = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0,
                                 Listen => 64, ReuseAddr => 1)
    or die "listen: $!";
my $hole_port = $hole->sockport;
my $holder = fork // die "fork: $!";
if (!$holder) {
    my @held;
    while (my $c = $hole->accept) { push @held, $c }
    POSIX::_exit(0);
}
close $hole;
END { kill 'KILL', $holder if $holder }

my $port = free_port();
my $conf = httpd_conf($dir, $port, <<"EOF");
LogLevel info
StartServers 2
ServerLimit 2
ThreadsPerChild 8
MaxRequestWorkers 16
MinSpareThreads 8
MaxSpareThreads 16
<Location "/stall/api/lessons">
    SetHandler lessons
    LessonsJWTKey RS256 https://127.0.0.1:$hole_port/jwks
</Location>
@{[ api_location() ]}
EOF
start_httpd($conf, $port);

# One request over a raw socket: "code seconds retry-after".
sub ask {
    my ($path, $token) = @_;
    my $t = time;
    my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
                                     Timeout => 30) or return "0 0 -";
    print {$sock} "GET $path HTTP/1.1\r\nHost: 127.0.0.1:$port\r\n"
        . "Authorization: Bearer $token\r\nConnection: close\r\n\r\n";
    local $/;
    my $res = <$sock> // '';
    my ($code) = $res =~ m{\AHTTP/1\.1 (\d{3}) };
    my ($retry) = $res =~ m{^Retry-After: *(\S+)\r?$}mi;
    return sprintf '%d %.3f %s', $code // 0, time - $t, $retry // '-';
}

# ---- the burst: 24 at once to the stalled source ----------------------
my $rs = token(alg => 'RS256');
pipe my $rd, my $wr or die "pipe: $!";
my @kids;
for (1 .. 24) {
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $rd;
        my $line = ask('/stall/api/lessons', $rs);
        syswrite $wr, "$line\n";
        POSIX::_exit(0);
    }
    push @kids, $pid;
}
close $wr;

# ---- meanwhile the neighbour: answered as ever -------------------------
sleep 0.5;
my $hs = good_token();
my (@near, $slowest);
my $until = time + 6;
while (time < $until) {
    my ($code, $secs) = split ' ', ask('/api/lessons', $hs);
    push @near, $code;
    $slowest = $secs if !defined $slowest || $secs > $slowest;
    sleep 0.2;
}
cmp_ok scalar(@near), '>=', 5, 'the neighbour was asked while the burst waited';
is_deeply [ grep { $_ != 200 } @near ], [], 'the neighbour: every answer 200';
cmp_ok $slowest, '<', 3, "the neighbour: none waited ($slowest s at most)";

my @burst = map { [ split ' ' ] } <$rd>;
waitpid $_, 0 for @kids;
is scalar(@burst), 24, '24 answers from the stalled source';
is_deeply [ grep { $_->[0] != 503 } @burst ], [], '... all 503 (no key set)';
my @waited = grep { $_->[1] >= 3 } @burst;
cmp_ok scalar(@waited), '<=', 4, 'at most 2 of each process\'s requests waited for the fetch ('
    . scalar(@waited) . ')';
is_deeply [ grep { $_->[2] eq '-' } @burst ], [], '... each with Retry-After';
cmp_ok((sort { $b <=> $a } map { $_->[1] } @burst)[0], '<', 13,
       '... none beyond the fetch\'s 10 s and a little');

done_testing();
