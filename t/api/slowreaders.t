# A read gives its database connection back before its answer goes out.
#
# 1. Clients that ask for a large list and never read it (a slow or
#    hostile reader) hold no connection, and no slot of the gate in front
#    of the pool: with every connection of the process (DBDMax 4) asked
#    for by such readers, one after another so that each makes its own
#    version read, the API still answers everybody else at once, and
#    writes still land.  Before, each held its connection until its
#    client had read the answer, and the gate turned the rest away (503).
# 2. A request to which mod_dbd has already lent a connection (here a dbd
#    RewriteMap, which keeps it until the request ends) reads on that
#    one: with DBDMax 1 a second connection could never come.
# 3. Reads answer alike under the event and prefork MPMs, with
#    DBDPersist On and Off (a connection in a pool under the request's).
# 4. The gate in front of the pool knows DBDMax (it let more requests
#    through to mod_dbd, whose wait has no bound, when DBDInitSQL ran a
#    statement that returns rows); checked on the server of 1.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use Socket qw(PF_INET SOCK_STREAM SOL_SOCKET SO_RCVBUF inet_aton
              pack_sockaddr_in);
use Time::HiRes qw(time sleep);
use LessonsTest;

my $mods  = $ENV{LESSONS_TEST_HTTPD_MODULES} || '/usr/lib/apache2/modules';
my $token = good_token();
# LessonsDBTimeout of the servers that could wait for a connection: a
# request that waited for one (the fault these tests look for) answers
# 503 after it, or keeps waiting; one that did not answers 200 well
# before it, also on a busy machine under ASan (a first request there
# took 2.1 s, once: a bound of 2 s was the bound of a flake).
my $BOUND = 10;

# About 4 MB of list: more than the sockets and httpd's output filter
# hold, so an answer nobody reads stays unfinished.
my @ids = seed(map { { level_id => 1 + $_ % 6, title => "Lang $_",
                       sort_order => $_, description => 'x' x 4000 } }
               1 .. 1000);

sub get {
    my ($base, $path) = @_;
    my $t0  = time;
    my $ua  = LessonsTest::ua();
    $ua->timeout(2 * $BOUND);       # a read that waits for ever fails
    my $res = $ua->get("$base$path", Authorization => "Bearer $token");
    return ($res, time - $t0);
}

# A client that asks for the whole list with a tiny receive window and
# reads only the first line of the answer.
sub slow_reader {
    my ($port) = @_;
    socket(my $s, PF_INET, SOCK_STREAM, 0) or die "socket: $!";
    setsockopt($s, SOL_SOCKET, SO_RCVBUF, 4096) or die "setsockopt: $!";
    connect($s, pack_sockaddr_in($port, inet_aton('127.0.0.1')))
        or die "connect: $!";
    my $req = "GET /api/lessons HTTP/1.1\r\nHost: localhost\r\n"
            . "Authorization: Bearer $token\r\n\r\n";
    defined syswrite($s, $req) or die "write: $!";
    my $line = '';
    eval {
        local $SIG{ALRM} = sub { die "no answer\n" };
        alarm 2 * $BOUND;
        while ($line !~ /\n/) {
            my $n = sysread($s, $line, 1, length $line);
            last unless $n;
        }
        alarm 0;
        1;
    } or $line = "no answer within " . 2 * $BOUND . " s";
    $line =~ s/\r?\n.*//s;
    return ($s, $line);
}

# ---- 1. readers that do not read
{
    my $dir  = File::Temp->newdir(CLEANUP => !$ENV{LESSONS_TEST_KEEP});
    my $port = free_port();
    my $conf = httpd_conf($dir, $port, one_process_conf() . <<"EOF");
LogLevel info lessons:trace1
DBDMin 1
DBDKeep 4
DBDMax 4
LessonsDBTimeout $BOUND
@{[ api_location() ]}
EOF
    start_httpd($conf, $port);
    my $base = "http://127.0.0.1:$port";
    my ($res) = get($base, '/api/lessons');
    is $res->code, 200, 'the list answers 200';
    cmp_ok length($res->content), '>', 4_000_000, 'the list is over 4 MB';

    my @slow;
    for my $n (1 .. 8) {
        my ($s, $line) = slow_reader($port);
        like $line, qr{\AHTTP/1\.1 200 }, "slow reader $n: its answer began";
        push @slow, $s;
        sleep 0.1;              # each after the last one's read landed
    }
    for my $i (0 .. 9) {
        my $id = $ids[$i * 97];
        my ($r, $secs) = get($base, "/api/lessons/$id");
        is $r->code, 200, "while 8 clients do not read: GET /$id answers 200";
        cmp_ok $secs, '<', $BOUND, "... within the bound ($secs s)";
    }
    my $t0 = time;
    my $post = LessonsTest::ua()->post("$base/api/lessons",
        Authorization => "Bearer $token",
        'Content-Type' => 'application/json',
        Content => '{"levelId":2,"title":"Trotz der Leser","order":1}');
    is $post->code, 201, 'while 8 clients do not read: a create answers 201';
    is LessonsTest::db_rows("SELECT count(*) AS n FROM lessons"
                            . " WHERE title = 'Trotz der Leser'")->[0]{n},
        1, '... and is stored';
    close $_ for @slow;
    open my $fh, '<', "$dir/error_log" or die "$dir/error_log: $!";
    my @log  = <$fh>;
    my @shed = grep { /answered 503/ } @log;
    is scalar @shed, 0, 'no request was answered 503'
        or diag @shed[0 .. ($#shed < 4 ? $#shed : 4)];
    # The gate in front of the pool learns DBDMax from mod_dbd, also
    # with a DBDInitSQL whose statement returns rows (the suite's SQLite
    # PRAGMA), which ends mod_dbd's post_connect run.
    ok((grep { /up to 4 requests of this process hold one at a time \(DBDMax 4\)/ } @log),
       'the gate holds as many requests as DBDMax lets connect');
}

# ---- 2. a connection mod_dbd lent the request first
{
    my $dir  = File::Temp->newdir(CLEANUP => !$ENV{LESSONS_TEST_KEEP});
    my $port = free_port();
    my $conf = httpd_conf($dir, $port, one_process_conf() . <<"EOF");
LoadModule rewrite_module "$mods/mod_rewrite.so"
DBDMin 1
DBDKeep 1
DBDMax 1
LessonsDBTimeout $BOUND
RewriteEngine On
RewriteMap level "dbd:SELECT name FROM levels WHERE code = %s"
RewriteRule "^/api/lessons" - [E=LEVEL_NAME:\${level:A1}]
@{[ api_location() ]}
EOF
    start_httpd($conf, $port);
    my $base = "http://127.0.0.1:$port";
    for my $path ('/api/lessons', "/api/lessons/$ids[0]",
                  '/api/lessons/beginner', '/api/lessons/level/3') {
        my ($r, $secs) = get($base, $path);
        is $r->code, 200, "beside a dbd RewriteMap, DBDMax 1: GET $path 200";
        cmp_ok $secs, '<', $BOUND, "... within the bound ($secs s)";
    }
}

# ---- 3. every way mod_dbd hands connections out: a read's connection
# given back early and at the request's end alike, also with DBDPersist
# Off (each connection then lives in a pool under the request's)
for my $mpm (qw(event prefork)) {
    for my $persist (qw(On Off)) {
        my $dir  = File::Temp->newdir;
        my $port = free_port();
        my $conf = httpd_conf($dir, $port, <<"EOF", mpm => $mpm);
DBDPersist $persist
<Location "/health">
    SetHandler lessons-health
</Location>
@{[ api_location() ]}
EOF
        start_httpd($conf, $port);
        my $base = "http://127.0.0.1:$port";
        my $what = "$mpm, DBDPersist $persist";
        for (1 .. 3) {
            my ($all) = get($base, '/api/lessons');
            is $all->code, 200, "$what: the list 200";
            my ($one) = get($base, "/api/lessons/$ids[1]");
            is $one->code, 200, "$what: a lesson 200";
            like $one->content, qr/"id":$ids[1]\b/, "$what: ... the one asked for";
            my ($none) = get($base, '/api/lessons/999999');
            is $none->code, 404, "$what: no such lesson 404";
            my ($health) = get($base, '/health');
            is $health->code, 200, "$what: health 200";
        }
        open my $fh, '<', "$dir/error_log" or die "$dir/error_log: $!";
        my @bad = grep { /exit signal|\[lessons:(?:error|crit|alert|emerg)\]/ } <$fh>;
        is scalar @bad, 0, "$what: no child died, no error logged"
            or diag @bad;
    }
}

seed();
done_testing;
