# A restart storm (issue 57, section 2): graceful restarts one after
# another under load, on the event MPM and then prefork, with the
# module as built (make test-all runs it again under the sanitizers).
# An admin's `apachectl graceful` (logrotate, a2enmod, a changed key)
# must never leave clients without answers.
#
# Each MPM gets a server of its own with Debian's MPM sizes, the suite's
# HS256 section and one whose keys come from the test identity
# provider's keys URL (the set every new generation must find in the
# shared block, not fetch again).  LESSONS_STORM_RESTARTS (default 200)
# graceful restarts follow one another as `apachectl graceful` makes
# them (httpd -k graceful: the configuration read, then the signal),
# each once the generation before said "resuming normal operations",
# while clients read (lists, one lesson, the provider's section, 304s)
# and write (creates, on a connection of their own, as a client that
# must not resend a POST does).  Afterwards:
#   - every request was answered; the longest time with no answer to any
#     client is at most 5 s (the issue's bound); no request spent more
#     than 5 s in the server (10 s under the sanitizers), from its request
#     line read to its last byte (the access log's %D); and none was
#     answered later than that after it was sent, or, under prefork,
#     twice that: there a connection waits in the listening socket, not
#     in the module, while restarts come faster than the children of
#     each generation start (beside the Patroni tier's tests, a request
#     sent 2.67 s before the server read it, served in 0.095 s, while five
#     generations came and went);
#   - no 503: the database stays up, and a restart is no reason to turn
#     a request away (answers of the generation before met a writers'
#     mutex its parent had let go, and a new process's first connection
#     a file locked while the old generation's last one checkpointed it);
#   - every answer is 2xx or 304, and no 5xx at all;
#   - every lesson a 201 named is in the database with its title;
#   - every process could lock the SQLite writers' mutex (it lasts the
#     server's life; made per generation, a restart that came before a
#     new generation's children were up let it go under them);
#   - no child died of a signal, and the parent holds no more files or
#     mappings than after the first restarts (nothing kept per generation).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp qw(tempdir);
use HTTP::Tiny;
use JSON::PP;
use POSIX qw(_exit);
use Time::HiRes qw(time sleep);
use LessonsTest;
use LessonsTest::IdP qw(start_idp idp_token);

# The restart path does not depend on the database; SQLite's run is the
# one with room for it.
plan skip_all => 'restarts are the same on every database: run on SQLite'
    unless LessonsTest::db_driver() eq 'sqlite3';
# A run that has no room for it can leave it out (the suite's runs all
# hold it: make test and make test-all after the other files, the
# other release's root sanitized).
plan skip_all => 'LESSONS_STORM_MPMS=none: no restart storm in this run'
    if ($ENV{LESSONS_STORM_MPMS} // '') eq 'none';

my $RESTARTS = $ENV{LESSONS_STORM_RESTARTS} || 200;
my $CLIENTS  = 8;
my $LIMIT    = 5;                   # seconds without an answer
# One request's wait: the same, and twice that under the sanitizers,
# whose processes start and run two to three times slower.
my $SANITIZED = $ENV{LESSONS_TEST_SANITIZE};
my $WAIT      = $SANITIZED ? 2 * $LIMIT : $LIMIT;
my $JSON     = JSON::PP->new->utf8->canonical;

my $tmp = tempdir(DIR => $ENV{LESSONS_TEST_TMPDIR} || '/tmp',
                  CLEANUP => !$ENV{LESSONS_TEST_KEEP});
my $IDP       = start_idp($tmp);
my $IDP_TOKEN = idp_token($IDP);
my $TOKEN     = good_token(claims => { exp => time + 7200 });

seed(map { { level_id => 1 + $_ % 5, title => "Sturm $_", sort_order => $_ } } 1 .. 5);
my @SEEDED = map { $_->{id} } @{ db_rows('SELECT id FROM lessons ORDER BY id') };

# Debian's own sizes (/etc/apache2/mods-available/mpm_*.conf).
my %MPM = (
    event   => "StartServers 2\nMinSpareThreads 25\nMaxSpareThreads 75\n"
             . "ThreadLimit 64\nThreadsPerChild 25\nMaxRequestWorkers 150\n",
    prefork => "StartServers 5\nMinSpareServers 5\nMaxSpareServers 10\n"
             . "MaxRequestWorkers 150\n",
);

sub write_conf {
    my ($dir, $port, $mpm) = @_;
    return httpd_conf($dir, $port, <<"EOF", mpm => $mpm);
KeepAlive On
CustomLog "$dir/access_log" "%{begin:%s}t.%{begin:usec_frac}t %D %P %m %U %>s"
$MPM{$mpm}
LessonsDBTimeout 5
LogLevel warn lessons:info
@{[ api_location() ]}
<Location "/idp/api/lessons">
    SetHandler lessons
    LessonsJWTKey RS256 $IDP->{jwks}
    LessonsJWTKeysCA "$IDP->{ca}"
</Location>
EOF
}

# ---- the clients -----------------------------------------------------------
# One line per request: sent answered op status retry-after type title id.
sub client {
    my ($n, $port, $log, $stop) = @_;
    srand($$ ^ time);
    my $http  = HTTP::Tiny->new(timeout => 30, keep_alive => 1);
    my $fresh = HTTP::Tiny->new(timeout => 30, keep_alive => 0);
    my $base  = "http://127.0.0.1:$port";
    my ($w, %etag) = (0);
    open my $out, '>', $log or die "$log: $!";
    $out->autoflush(1);
    until (-e $stop) {
        my $r = rand;
        my ($op, $ua, $url, $title, %hdr) = ('read', $http, "$base/api/lessons", '-',
                                               Authorization => "Bearer $TOKEN");
        my @content;
        if ($r < 0.15) {
            ($op, $ua, $title) = ('create', $fresh, "sturm-$n-" . ++$w);
            @content = (content => $JSON->encode({ levelId => 1 + $w % 5,
                                                   title => $title, order => $w }));
            $hdr{'Content-Type'} = 'application/json';
        }
        elsif ($r < 0.45) {
            $op = 'read-one';
            $url .= '/' . $SEEDED[rand @SEEDED];
            $hdr{'If-None-Match'} = $etag{$url} if $etag{$url} && rand() < 0.5;
        }
        elsif ($r < 0.70) {
            $op = 'read-idp';
            $url = "$base/idp/api/lessons/" . $SEEDED[rand @SEEDED];
            $hdr{Authorization} = "Bearer $IDP_TOKEN";
        }
        my $t0 = time;
        my $res = $ua->request($op eq 'create' ? 'POST' : 'GET', $url,
                               { headers => \%hdr, @content });
        my $t1 = time;
        my $st = $res->{status};
        $etag{$url} = $res->{headers}{etag} if $st == 200 && $res->{headers}{etag};
        my $id = '-';
        if ($op eq 'create' && $st == 201) {
            my $body = eval { $JSON->decode($res->{content}) };
            $id = $body && $body->{id} ? $body->{id} : '?';
        }
        my $type = $res->{headers}{'content-type'} // '-';
        $type =~ s/[;\s].*//s;
        # A refusal's own words, for the diagnostics.
        my $why = '-';
        if ($st >= 400) {              # 599: HTTP::Tiny's own error
            $why = eval { $JSON->decode($res->{content})->{detail} }
                // substr($res->{content} // '', 0, 120);
        }
        $why =~ s/\s+/ /g;
        printf $out "%.3f\t%.3f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", $t0, $t1, $op, $st,
            $res->{headers}{'retry-after'} // '-', $type, $title, $id, $why;
    }
    close $out;
}

# ---- the parent's resources ------------------------------------------------
sub parent_holds {
    my ($pid) = @_;
    my @fds = glob "/proc/$pid/fd/*";
    open my $fh, '<', "/proc/$pid/maps" or return (scalar @fds, 0);
    my @maps = <$fh>;
    return (scalar @fds, scalar @maps);
}

# One MPM's storm, in a process of its own (the two run at once): the
# server, its clients and the restarts; what the checks need goes to
# $dir/storm.json.
sub storm_run {
    my ($mpm, $dir) = @_;
    my $port = free_port();
    my $conf = write_conf($dir, $port, $mpm);
    my $httpd = start_httpd($conf, $port);
    my $log = "$dir/error_log";

    # The key set is fetched at start; the storm is about restarts.
    my $http = HTTP::Tiny->new(timeout => 30);
    my $t0 = time;
    sleep 0.2 until time - $t0 > 60
        || $http->get("http://127.0.0.1:$port/idp/api/lessons",
                      { headers => { Authorization => "Bearer $IDP_TOKEN" } })->{status} == 200;
    my $keys = time - $t0;

    my $stop = "$dir/stop";
    my @kids;
    for my $n (1 .. $CLIENTS) {
        my $pid = fork // die "fork: $!";
        if (!$pid) { client($n, $port, "$dir/client-$n.log", $stop); _exit(0) }
        push @kids, $pid;
    }
    sleep 1;
    my ($begin, @took, @held) = (time);
    my $gens = generations($log);
    for my $i (1 .. $RESTARTS) {
        my $sent = time;
        # Its configtest warnings (the suite's user is not the one the
        # server names) would fill the test's output 200 times over.
        system("'@{[ LessonsTest::httpd_bin() ]}' -f '$conf' -k graceful"
               . " >'$dir/graceful.out' 2>&1") == 0
            or die "httpd -k graceful failed: see $dir/graceful.out\n";
        my $want = $gens + 1;
        sleep 0.01 until ($gens = generations($log)) >= $want || time - $sent > 60;
        push @took, time - $sent;
        last if $gens < $want;
        # The parent's files and mappings once a few generations came and
        # went (the first ones load what stays), and at the end.
        @held = parent_holds($httpd) if $i == ($RESTARTS < 10 ? $RESTARTS : 10);
    }
    my $end = time;
    my @after = parent_holds($httpd);
    sleep 1;
    open my $fh, '>', $stop or die "$stop: $!";
    close $fh;
    waitpid $_, 0 for @kids;
    stop_httpd($httpd);
    open $fh, '>', "$dir/storm.json" or die "$dir/storm.json: $!";
    print $fh $JSON->encode({ begin => $begin, end => $end, took => \@took,
                              held => \@held, after => \@after,
                              keys => $keys });
    close $fh or die "$dir/storm.json: $!";
}

sub storm_check {
    my ($mpm, $dir) = @_;
    my $log = "$dir/error_log";
    my $run = eval {
        open my $fh, '<', "$dir/storm.json" or die "$!\n";
        local $/;
        $JSON->decode(scalar <$fh>);
    };
    ok $run, "$mpm: the storm ran to its end" or return;
    my ($begin, $end) = @$run{qw(begin end)};
    my @took  = @{ $run->{took} };
    my @held  = @{ $run->{held} };
    my @after = @{ $run->{after} };

    # ---- the checks
    my @reqs;
    for my $n (1 .. $CLIENTS) {
        open my $in, '<', "$dir/client-$n.log" or next;
        while (my $line = <$in>) {
            chomp $line;
            my %r;
            @r{qw(t0 t1 op st retry type title id why)} = split /\t/, $line;
            push @reqs, \%r;
        }
    }
    my @during = grep { $_->{t1} >= $begin && $_->{t0} <= $end } @reqs;
    my %by;
    $by{$_->{st}}++ for @during;
    my $outcomes = join ', ', map { "$_ x$by{$_}" } sort keys %by;
    diag sprintf '%s: %d restarts in %.1f s (signal to "resuming": median %.2f s, '
        . 'longest %.2f s); %d requests during the storm: %s', $mpm, scalar @took,
        $end - $begin, (sort { $a <=> $b } @took)[@took / 2] // 0,
        (sort { $b <=> $a } @took)[0] // 0, scalar @during, $outcomes;

    my %why;
    $why{"$_->{op} $_->{st}: $_->{why}"}++ for grep { $_->{st} >= 400 && $_->{st} != 599 } @during;
    diag "  $why{$_} x $_" for sort keys %why;
    # What the server said of them (its warnings, by tag).
    my %said;
    if (open my $e, '<', $log) {
        while (my $line = <$e>) {
            next unless $line =~ /\[(?:lessons|dbd):(?:warn|error|crit)\].*?((?:LESSONS|AH)\d+): (.{0,160})/;
            $said{$1} //= [ 0, $2 ];
            $said{$1}[0]++;
        }
    }
    diag "  error_log: $said{$_}[0] x $_: $said{$_}[1]" for sort keys %said;

    is scalar @took, $RESTARTS, "$mpm: $RESTARTS graceful restarts, each one up";
    cmp_ok scalar @during, '>=', $RESTARTS, "$mpm: requests all through the storm";

    my @unanswered = grep { $_->{st} == 599 } @reqs;
    is scalar @unanswered, 0, "$mpm: every request answered"
        or diag map { "  $_->{op} at $_->{t0}: no answer after " . sprintf("%.1f s: %s\n", $_->{t1} - $_->{t0}, $_->{why}) }
                @unanswered[0 .. ($#unanswered < 9 ? $#unanswered : 9)];
    # Inside the server: from the request line read to the last byte
    # (the first request's wait for the key set too: a request waited
    # 10 s for one another process had fetched, once its own process
    # had it, t/unit/test_keysource.c).
    my @served;
    if (open my $acc, '<', "$dir/access_log") {
        while (my $line = <$acc>) {
            my ($at, $us, $pid, $method, $path, $st) = split ' ', $line;
            push @served, { at => $at, secs => $us / 1e6, pid => $pid,
                            req => "$method $path", st => $st } if defined $st;
        }
    }
    diag sprintf '  %s: the first key set took %.2f s to serve', $mpm, $run->{keys}
        if $run->{keys} > $LIMIT / 2;
    cmp_ok scalar @served, '>=', scalar @reqs, "$mpm: the access log has every request";
    my @inside = sort { $b->{secs} <=> $a->{secs} } @served;
    my $longest = @inside ? $inside[0]{secs} : 0;
    cmp_ok $longest, '<=', $WAIT, sprintf "%s: no request spent more than %d s in "
        . "the server (longest %.2f s)", $mpm, $WAIT, $longest
        or diag map { sprintf "  %s %s: read %.2f s into the storm by pid %s, %.2f s in the server\n",
                          $_->{req}, $_->{st}, $_->{at} - $begin, $_->{pid}, $_->{secs} }
                grep { defined } @inside[0 .. 4];

    # From the client: prefork's listening socket queue on top.
    my $bound = $mpm eq 'prefork' ? 2 * $WAIT : $WAIT;
    my @slow = sort { ($b->{t1} - $b->{t0}) <=> ($a->{t1} - $a->{t0}) } @reqs;
    my $slowest = @slow ? $slow[0]{t1} - $slow[0]{t0} : 0;
    # Where the slowest waited: the server's line that ended with it.
    my $where = sub {
        my ($r) = @_;
        my ($s, $off);
        for (@served) {
            my $d = abs($_->{at} + $_->{secs} - $r->{t1});
            ($s, $off) = ($_, $d) if !defined $off || $d < $off;
        }
        return $s ? sprintf(' (read by the server %.2f s after it was sent, %.3f s there)',
                            $s->{at} - $r->{t0}, $s->{secs}) : '';
    };
    diag sprintf "  %s: slowest %s %s, %.2f s%s\n", $mpm, $_->{op}, $_->{st},
            $_->{t1} - $_->{t0}, $where->($_)
        for grep { defined && $_->{t1} - $_->{t0} > $LIMIT / 2 } @slow[0 .. 2];
    cmp_ok $slowest, '<=', $bound, sprintf "%s: no request waited more than %d s "
        . "(longest %.2f s)", $mpm, $bound, $slowest
        or diag map { sprintf "  %s %s: sent %.2f s into the storm, answered after %.2f s%s\n",
                          $_->{op}, $_->{st}, $_->{t0} - $begin, $_->{t1} - $_->{t0},
                          $where->($_) }
                grep { defined } @slow[0 .. 4];

    # The longest stretch in which no client got any answer.
    my @ends = sort { $a <=> $b } map { $_->{t1} } grep { $_->{st} != 599 } @reqs;
    my ($gap, $at) = (0, 0);
    for my $i (1 .. $#ends) {
        next if $ends[$i] < $begin || $ends[$i - 1] > $end;
        ($gap, $at) = ($ends[$i] - $ends[$i - 1], $ends[$i - 1])
            if $ends[$i] - $ends[$i - 1] > $gap;
    }
    cmp_ok $gap, '<=', $LIMIT, sprintf '%s: the longest time without an answer '
        . 'is %.2f s (from %.1f s into the storm)', $mpm, $gap, $at - $begin;

    my @bad = grep { $_->{st} != 599 && $_->{st} !~ /\A(?:200|201|304|503)\z/ } @reqs;
    # A 500 here was once (1 request in about 2,500) a valid number read
    # as an overflow: prefork's SIGUSR1 handler set errno (EBADF) between
    # apr_strtoi64 and its check (modules/base/lessons_decimal.h).
    is scalar @bad, 0, "$mpm: every answer 2xx, 304 or 503"
        or diag map { sprintf "  %s %s %.2f s into the storm, after %.2f s: %s\n", $_->{op},
                          $_->{st}, $_->{t0} - $begin, $_->{t1} - $_->{t0}, $_->{why} }
                @bad[0 .. ($#bad < 9 ? $#bad : 9)];
    my @refused = grep { $_->{st} == 503 } @during;
    is scalar @refused, 0, "$mpm: no 503 during the storm";
    my @undocumented = grep { $_->{st} == 503
                              && ($_->{retry} !~ /\A\d+\z/
                                  || $_->{type} ne 'application/problem+json') } @reqs;
    is scalar @undocumented, 0, "$mpm: every 503 has Retry-After and a problem+json body";

    my @created = grep { $_->{op} eq 'create' && $_->{st} == 201 } @reqs;
    cmp_ok scalar @created, '>', 0, "$mpm: creates succeeded during the storm";
    my %stored = map { $_->{id} => $_->{title} }
                 @{ db_rows("SELECT id, title FROM lessons WHERE title LIKE 'sturm-%'") };
    my @lost = grep { ($stored{$_->{id}} // '') ne $_->{title} } @created;
    is scalar @lost, 0, sprintf '%s: each of the %d lessons a 201 named is stored',
        $mpm, scalar @created;

    # The writers' mutex lasts the server's life: no process of any
    # generation finds it let go (LESSONS00314).
    my $unlocked = do { open my $e, '<', $log or die "$log: $!"; grep { /LESSONS00314:/ } <$e> };
    is $unlocked, 0, "$mpm: every process could lock the SQLite writers' mutex";
    my @died = do { open my $e, '<', $log or die "$log: $!"; grep { /AH00052:|exit signal/ } <$e> };
    is scalar @died, 0, "$mpm: no child died of a signal" or diag @died[0 .. ($#died < 4 ? $#died : 4)];
    cmp_ok $after[0], '<=', ($held[0] // 0) + 2, "$mpm: the parent's open files "
        . "after the storm ($after[0]) as after 10 restarts (@{[ $held[0] // '?' ]})";
    SKIP: {
        # ASan's allocator maps more as the parent's heap moves with each
        # load of the module; what is kept per generation shows without it.
        skip "$mpm: the parent's mappings are ASan's under the sanitizers", 1
            if $SANITIZED;
        cmp_ok $after[1], '<=', ($held[1] // 0) + 8, "$mpm: the parent's mappings "
            . "after the storm ($after[1]) as after 10 restarts (@{[ $held[1] // '?' ]})";
    }

    # For a post-mortem (t/tools/integration.sh keeps its directory with
    # LESSONS_TEST_KEEP=1).
    system('cp', $log, "$ENV{LESSONS_TEST_WORK}/storm-$mpm-error_log")
        if $ENV{LESSONS_TEST_WORK};
    system("cat $dir/client-*.log > '$ENV{LESSONS_TEST_WORK}/storm-$mpm-requests'")
        if $ENV{LESSONS_TEST_WORK};
}

sub stop_httpd {
    my ($pid) = @_;
    kill 'TERM', $pid;
    for (1 .. 300) { last unless kill 0, $pid; sleep 0.1 }
}

my @mpms = split /,/, $ENV{LESSONS_STORM_MPMS} || 'event,prefork';
my (%dir, @runs);
for my $mpm (@mpms) {
    $dir{$mpm} = tempdir(DIR => $tmp, CLEANUP => !$ENV{LESSONS_TEST_KEEP});
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        my $ok = eval { storm_run($mpm, $dir{$mpm}); 1 };
        if (!$ok) {
            print STDERR "# $mpm: $@";
            # Its clients and server go too.
            if (open my $fh, '>', "$dir{$mpm}/stop") { close $fh }
            if (open my $fh, '<', "$dir{$mpm}/httpd.pid") {
                my ($httpd) = (<$fh> // '') =~ /(\d+)/;
                stop_httpd($httpd) if $httpd;
            }
        }
        _exit($ok ? 0 : 1);         # the test's END blocks are the parent's
    }
    push @runs, $pid;
}
waitpid $_, 0 for @runs;
storm_check($_, $dir{$_}) for @mpms;

done_testing();
