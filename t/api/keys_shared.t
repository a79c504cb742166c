# One key set per server (issue 42): a keys URL's set is fetched by one
# process and used by all, under prefork and event, with children
# recycled all the time (MaxConnectionsPerChild) and every request on a
# connection of its own, so that each lands where it lands.
#
#   - every request is 200 from the first set on, in every child, new
#     ones included, and no child fetches for itself;
#   - over a quiet window the provider sees at most window/refresh + 2
#     fetches for the whole server;
#   - after a rotation, a token of the new key is 200 within
#     MinRefresh and a few seconds, and then 20 in a row across children;
#   - the provider down, then children recycled and a graceful restart:
#     still 200 everywhere, with no fetch needed;
#   - one token's answers never go from 200 to anything else while its
#     key is published;
#   - a reload that changes a URL's algorithms fetches its set anew.
#
# Each server here is started by the suite (the access log names the
# child that answered: %P).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use IO::Socket::INET;
use Time::HiRes qw(time sleep);
use LessonsTest;
use LessonsTest::IdP qw(start_idp idp_control);

my $dir     = File::Temp->newdir;
my $REFRESH = 2;        # LessonsJWTKeysRefresh
my $MIN     = 1;        # LessonsJWTKeysMinRefresh


my $idp = start_idp("$dir");
sub control { idp_control($idp, @_) }
sub token_now { LessonsTest::IdP::idp_token($idp) }

my %MPM = (
    prefork => "StartServers 3\nMinSpareServers 2\nMaxSpareServers 4\n"
             . "ServerLimit 6\nMaxRequestWorkers 6\n",
    event   => "StartServers 2\nServerLimit 4\nThreadsPerChild 4\n"
             . "ThreadLimit 4\nMaxRequestWorkers 8\nMinSpareThreads 4\n"
             . "MaxSpareThreads 8\n",
);

# One request on a connection of its own: its status (0: no answer).
sub hit {
    my ($port, $path, $token) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
                                  Timeout => 15) or return 0;
    print $s "GET $path HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
           . "Authorization: Bearer $token\r\n\r\n";
    my $line = <$s> // '';
    close $s;
    return $line =~ m{^HTTP/1\.[01] (\d{3})} ? $1 : 0;
}

# The children that answered since offset $from of the access log.
sub answered_by {
    my ($from) = @_;
    open my $fh, '<', "$dir/access_log" or return ();
    seek $fh, $from, 0;
    my %pids;
    while (<$fh>) {
        $pids{$1}++ if /^(\d+) /;
    }
    return %pids;
}

sub fetches { control(GET => '/state')->{jwks_requests_by_query}{shared} // 0 }

for my $mpm (qw(prefork event)) {
    my $port = free_port();
    my $query = "shared";
    my $conf = httpd_conf("$dir", $port, <<"EOF", mpm => $mpm);
LogFormat "%P %>s %U" pid
CustomLog "$dir/access_log" pid
LogLevel info
KeepAlive Off
MaxConnectionsPerChild 15
$MPM{$mpm}
<Location "/api/lessons">
    SetHandler lessons
    LessonsJWTKey RS256 $idp->{jwks}?$query
    LessonsJWTKeysCA "$dir/ca.crt"
    LessonsJWTKeysRefresh $REFRESH
    LessonsJWTKeysMinRefresh $MIN
</Location>
EOF
    unlink "$dir/access_log";
    my $log_from = -s "$dir/error_log" || 0;
    control(POST => '/reset-count');
    my $pid = start_httpd($conf, $port);
    my $token1 = token_now();
    my @history;            # every answer to $token1, in order

    # ---- from the first set on: 200 in every child, new ones too --------
    my $first = 0;
    for (1 .. 100) {
        last if ($first = hit($port, '/api/lessons', $token1)) == 200;
        sleep 0.1;
    }
    is $first, 200, "$mpm: the first set is in use";
    my @st = map { hit($port, '/api/lessons', $token1) } 1 .. 60;
    push @history, $first, @st;
    my %by = answered_by(0);
    is scalar(grep { $_ != 200 } @st), 0,
        "$mpm: 60 requests, children recycled every 15: all 200"
        or diag "@st";
    ok keys(%by) >= 4, "$mpm: answered by " . keys(%by) . ' children';
    my $errlog = do { local (@ARGV, $/) = ("$dir/error_log"); <> // '' };
    $errlog = substr $errlog, $log_from;
    my $sets = () = $errlog =~ /LESSONS00213: keys URL \Q$idp->{jwks}?$query\E:/g;
    is $sets, 1, "$mpm: one process fetched the set for the server (one LESSONS00213)";

    # ---- a quiet window: about one fetch per refresh for the server ------
    my $window = 3 * $REFRESH;
    my $before = fetches();
    my $t0 = time;
    my @quiet;
    while (time - $t0 < $window) {
        push @quiet, hit($port, '/api/lessons', $token1);
        sleep 0.05;
    }
    push @history, @quiet;
    my $n = fetches() - $before;
    diag "$mpm: $n fetch(es) in $window s with refresh $REFRESH s, "
        . scalar(@quiet) . " requests, " . scalar(keys %{ { answered_by(0) } })
        . " children so far";
    ok $n <= $window / $REFRESH + 2, "$mpm: $n fetches in $window s (at most "
        . ($window / $REFRESH + 2) . ' for the server)';
    is scalar(grep { $_ != 200 } @quiet), 0, "$mpm: ... every answer 200";

    # ---- rotation: the new key's token in every child --------------------
    my $kid2 = control(POST => '/keys', { alg => 'RS256' })->{kid};
    my $token2 = token_now();
    my $t1 = time;
    my $ok2 = 0;
    while (time - $t1 < $MIN + 8) {
        last if ($ok2 = hit($port, '/api/lessons', $token2)) == 200;
        sleep 0.2;
    }
    is $ok2, 200, sprintf("$mpm: the new key's token is 200 after %.1f s", time - $t1);
    my @rot = map { hit($port, '/api/lessons', $token2) } 1 .. 20;
    is scalar(grep { $_ != 200 } @rot), 0, "$mpm: then 20 in a row, across children"
        or diag "@rot";
    push @history, map { hit($port, '/api/lessons', $token1) } 1 .. 10;

    # ---- the provider down: recycling and a graceful restart -------------
    control(POST => '/stop');
    my @down = map { hit($port, '/api/lessons', $_ % 2 ? $token1 : $token2) } 1 .. 30;
    is scalar(grep { $_ != 200 } @down), 0,
        "$mpm: provider down, children recycled: every answer 200" or diag "@down";
    system(LessonsTest::httpd_bin(), '-f', $conf, '-k', 'graceful') == 0
        or die "graceful failed\n";
    sleep 1;
    my @after = map { hit($port, '/api/lessons', $_ % 2 ? $token1 : $token2) } 1 .. 30;
    is scalar(grep { $_ != 200 } @after), 0,
        "$mpm: provider down, after a graceful restart: every answer 200"
        or diag "@after";
    push @history, @down[grep { $_ % 2 == 0 } 0 .. $#down],
                   @after[grep { $_ % 2 == 0 } 0 .. $#after];
    control(POST => '/start');

    # ---- a reload that changes how the set is read: fetched anew ---------
    # (the algorithms are part of a source's identity: the old set, read
    # for RS256 alone, is not the new source's)
    (my $text = do { local (@ARGV, $/) = ($conf); <> }) =~
        s/LessonsJWTKey RS256 /LessonsJWTKey RS256 ES256 /;
    { open my $fh, '>', $conf or die $!; print $fh $text; close $fh or die $! }
    my $fetched = fetches();
    system(LessonsTest::httpd_bin(), '-f', $conf, '-k', 'graceful') == 0
        or die "graceful failed\n";
    my @reload;
    my $t2 = time;
    while (time - $t2 < 15) {
        my $st = hit($port, '/api/lessons', $token2);
        push @reload, $st;
        last if $st == 200 && @reload >= 5
                && !grep { $_ != 200 } @reload[-5 .. -1];
        sleep 0.1;
    }
    my @then = map { hit($port, '/api/lessons', $token2) } 1 .. 20;
    is scalar(grep { $_ != 200 } @then), 0,
        "$mpm: after a reload that changed the algorithms, 20 in a row 200"
        or diag "@reload / @then";
    ok fetches() > $fetched, "$mpm: ... with the set fetched anew for it";

    # ---- one token never flaps -------------------------------------------
    my ($seen200, $flaps) = (0, 0);
    for (@history) {
        $seen200 ||= $_ == 200;
        $flaps++ if $seen200 && $_ != 200;
    }
    is $flaps, 0, "$mpm: one token's " . scalar(@history)
        . ' answers never went from 200 to anything else';

    kill 'TERM', $pid;
    for (1 .. 100) { last unless kill 0, $pid; sleep 0.1 }
}

done_testing();
