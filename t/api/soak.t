# Soak with faults (issue 18): 64 clients of a server of the test's own,
# under the event MPM and then prefork, mixed reads and writes (creates,
# updates with and without If-Match, deletes; every write a title of its
# own), for a bounded time, while faults come one after another:
#   both:       a graceful restart, and a reload of a changed config;
#               a key rotation at the keys URL with the provider down
#               for 5 s (reads of /idp/api/lessons carry the provider's
#               tokens: the old key's must pass throughout, the new
#               key's may get 401 only until the provider is back);
#   SQLite:     the write lock held from outside; the disk full (a small
#               tmpfs that t/tools/integration.sh mounts when it runs as
#               root: LESSONS_TEST_SMALLFS; skipped with a reason else);
#   PostgreSQL: a restart; the server stopped for 10 s; the table locked.
# Each client writes only lessons it created, one request at a time, so
# what each of its ids must hold is known from its own log.  A third of
# its creates send an Idempotency-Key (issue 21), and are sent again with
# it, body and all, after an answer that leaves the outcome open (no
# answer, a 5xx, 409), until one says what happened; those lessons are
# not written again, so their titles name their keys.  Afterwards:
#   - every 5xx is a 503 with Retry-After, inside a fault's window (the
#     fault, then up to GRACE s of recovery);
#   - every id a 2xx create made holds its last 2xx write unless a 2xx
#     delete removed it; a write answered non-2xx changed nothing;
#   - a client reading its own lesson reads its last 2xx write
#     (read-your-writes); the seeded lessons nobody writes stay as seeded;
#   - the row count is the arithmetic;
#   - every key holds exactly one lesson, the one its 201 named, and one
#     kept key (the retries of each, and the replays, as diagnostics).
# Per MPM and fault: requests, outcomes and the recovery time (end of
# the fault to the first 2xx write after it), as diagnostics.
# LESSONS_SOAK_CALM (seconds between faults, default 5) lengthens it.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp qw(tempdir);
use HTTP::Tiny;
use JSON::PP;
use POSIX qw(WNOHANG _exit);
use Time::HiRes qw(time sleep);
use LessonsTest;
use LessonsTest::IdP qw(start_idp idp_control idp_token);
use LessonsTest::Lock qw(hold_lock release);
use LessonsTest::Parallel qw(renew_suite_server);

my $CLIENTS = 64;
my $CALM    = $ENV{LESSONS_SOAK_CALM} || 5;
my $GRACE   = 15;                   # recovery a fault's window allows
my $DRIVER  = LessonsTest::db_driver();
my $JSON    = JSON::PP->new->utf8->canonical;
my $TOKEN   = good_token(claims => { exp => time + 7200 });

my $tmp = tempdir(DIR => $ENV{LESSONS_TEST_TMPDIR} || '/tmp', CLEANUP => 1);

# The identity provider whose keys URL /idp/api/lessons trusts.  Clients
# read its current token from $TOKENS ("generation<TAB>token", replaced
# by rename when a rotation publishes a new one).
my $IDP    = start_idp($tmp);
my $TOKENS = "$tmp/idp-token";
my $GEN    = 0;
sub publish_token {
    my ($token) = @_;
    $GEN++;
    open my $fh, '>', "$TOKENS.new" or die "$TOKENS.new: $!";
    print $fh "$GEN\t$token\n";
    close $fh or die "$TOKENS.new: $!";
    rename "$TOKENS.new", $TOKENS or die "$TOKENS: $!";
    return $GEN;
}
publish_token(idp_token($IDP));

# SQLite: the soak's own database, on the small file system when there is
# one (so that it can fill up); PostgreSQL: the suite's.
my ($dbparams, $smallfs) = ($ENV{LESSONS_TEST_DBPARAMS}, $ENV{LESSONS_TEST_SMALLFS});
if ($DRIVER eq 'sqlite3') {
    my $dir = $smallfs && -d $smallfs && -w $smallfs ? $smallfs : $tmp;
    $dbparams = "$dir/soak.db";
    system("sqlite3 '$dbparams' < '$ENV{LESSONS_TEST_WORK}/src/sql/schema.sqlite.sql'"
           . " >/dev/null") == 0 or BAIL_OUT('cannot make the soak database');
    $ENV{LESSONS_TEST_DB} = $ENV{LESSONS_TEST_DBPARAMS} = $dbparams;
}

my @SEEDED = map { { level_id => 1 + $_ % 5, title => "Gesät $_", sort_order => $_ } } 1 .. 5;
seed(@SEEDED);
my %seeded = map { $_->{id} => $_->{title} } @{ db_rows('SELECT id, title FROM lessons') };

# ---- the server -----------------------------------------------------------
my %MPM = (
    event   => "StartServers 2\nServerLimit 2\nThreadsPerChild 40\n"
             . "MaxRequestWorkers 80\nThreadLimit 40\n",
    # Every child from the start (and after each restart): 64 clients
    # on kept-alive connections hold 64 children.
    prefork => "StartServers 64\nServerLimit 64\nMaxRequestWorkers 64\n"
             . "MinSpareServers 8\nMaxSpareServers 64\n",
);

sub write_conf {
    my ($dir, $port, $mpm, $extra) = @_;
    return httpd_conf($dir, $port, <<"EOF", mpm => $mpm);
KeepAlive On
MaxKeepAliveRequests 0
$MPM{$mpm}
LessonsDBTimeout 5
LogLevel warn lessons:info
<Location "/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"
</Location>
<Location "/idp/api/lessons">
    SetHandler lessons
    LessonsJWTKey RS256 $IDP->{jwks}
    LessonsJWTKeysCA "$IDP->{ca}"
    LessonsJWTKeysRefresh 5
    LessonsJWTKeysMinRefresh 1
</Location>
$extra
EOF
}

sub stop_server {
    my ($pid) = @_;
    kill 'TERM', $pid;
    for (1 .. 300) { last unless kill 0, $pid; sleep 0.1 }
}

# ---- the clients -----------------------------------------------------------
# Each logs one line per request: start end op id status retry-after
# title (the title sent, or the title read), and why a request got no
# answer (HTTP::Tiny's message; '-' else).
sub client {
    my ($n, $port, $log, $stop) = @_;
    srand($$ ^ time);
    my $http = HTTP::Tiny->new(timeout => 30, keep_alive => 1);
    # A POST goes on a connection of its own: on a kept-alive one that the
    # server closes as it is sent (a graceful restart's old child), it
    # would fail unanswered, and a POST is not retried (HTTP::Tiny retries
    # the idempotent methods once).
    my $fresh = HTTP::Tiny->new(timeout => 30, keep_alive => 0);
    my $base = "http://127.0.0.1:$port/api/lessons";
    my %h = (Authorization => "Bearer $TOKEN");
    my (@mine, %etag);
    my @sample = sort keys %seeded;
    my $w = 0;
    my ($idp_ino, $idp_gen, $idp_token) = (0, 0, '');
    open my $out, '>', $log or die "$log: $!";
    $out->autoflush(1);
    until (-e $stop) {
        my $r = rand;
        my ($op, $id, $title, $res, $url, %opt) = ('', 0, '-');
        if ($r < 0.18 || !@mine) {
            $op = $r < 0.06 ? 'create-key' : 'create';
            $title = "soak-$n-" . ++$w . ($op eq 'create-key' ? '-k' : '');
            $url = $base;
            %opt = (method => 'POST', content => $JSON->encode({
                levelId => 1 + int rand 5, title => $title, order => $w }));
        }
        elsif ($r < 0.30) {
            $op = 'update-if-match';
            $id = $mine[rand @mine];
            $title = "soak-$n-" . ++$w;
            $url = "$base/$id";
            %opt = (method => 'PUT', content => $JSON->encode({ title => $title }),
                    if_match => $etag{$id} // '"none"');
        }
        elsif ($r < 0.40) {
            $op = 'update';
            $id = $mine[rand @mine];
            $title = "soak-$n-" . ++$w;
            $url = "$base/$id";
            %opt = (method => 'PUT', content => $JSON->encode({ title => $title }));
        }
        elsif ($r < 0.48) {
            $op = 'delete';
            $id = $mine[rand @mine];
            $url = "$base/$id";
            %opt = (method => 'DELETE');
        }
        elsif ($r < 0.70) {
            $op = 'read-mine';
            $id = $mine[rand @mine];
            $url = "$base/$id";
        }
        elsif ($r < 0.80) {
            $op = 'read-seeded';
            $id = $sample[rand @sample];
            $url = "$base/$id";
        }
        elsif ($r < 0.88) {
            $op = 'read-idp';
            my $ino = (stat $TOKENS)[1] // 0;
            if ($ino != $idp_ino && open my $fh, '<', $TOKENS) {
                ($idp_gen, $idp_token) = split /\t/, scalar(<$fh>) // '';
                chomp $idp_token if defined $idp_token;
                $idp_ino = $ino;
            }
            $id = $sample[rand @sample];
            $url = "http://127.0.0.1:$port/idp/api/lessons/$id";
            $title = "gen $idp_gen";
        }
        else {
            $op = 'read-list';
            $url = rand() < 0.5 ? $base : "$base/level/" . (1 + int rand 5);
        }
        my %hdr = $op eq 'read-idp' ? (Authorization => "Bearer $idp_token") : %h;
        $hdr{'Content-Type'} = 'application/json' if defined $opt{content};
        $hdr{'If-Match'} = $opt{if_match} if $opt{if_match};
        $hdr{'Idempotency-Key'} = qq{"$title"} if $op eq 'create-key';
        # A create with a key is sent again until its outcome is known (for
        # 20 s and more: longer than the longest fault).
        for my $try (1 .. ($op eq 'create-key' ? 80 : 1)) {
            sleep 0.25 if $try > 1;
            my $t0 = time;
            $res = ($op =~ /^create/ ? $fresh : $http)->request($opt{method} || 'GET', $url,
                                  { headers => \%hdr,
                                    defined $opt{content} ? (content => $opt{content}) : () });
            my $t1 = time;
            my $st = $res->{status};
            my $ra = $res->{headers}{'retry-after'} ? 'ra' : '-';
            # A write whose commit lost its connection: its outcome is unknown.
            $ra .= '-u' if $st == 503 && ($res->{content} // '') =~ /may have been stored/;
            my $unknown = $st == 599 || $ra =~ /-u$/;
            my $body = $st =~ /^2/ && ($res->{content} // '') =~ /^\{/
                     ? eval { $JSON->decode($res->{content}) } : undef;
            if ($op eq 'create' && $st == 201 && $body && $body->{id}) {
                $id = $body->{id};
                push @mine, $id;
            }
            if ($op =~ /^read-(mine|seeded)$/) {
                $title = $st == 200 && $body ? $body->{title} // '?' : '-';
            }
            my $why = '-';
            if ($st == 599) {           # HTTP::Tiny's own failure: why
                ($why = $res->{content} // '') =~ s/\s+/ /g;
            }
            $etag{$id} = $res->{headers}{etag} if $id && $res->{headers}{etag};
            $etag{$id} = '"stale"' if $op eq 'update-if-match' && $st == 412;
            if ($op eq 'delete' && ($st == 204 || $unknown)) {
                @mine = grep { $_ != $id } @mine;
            }
            if ($op eq 'create-key' && $st == 201 && $body && $body->{id}) {
                $id = $body->{id};
                $why = 'replayed' if ($res->{headers}{'idempotent-replayed'} // '') eq 'true';
            }
            printf $out "%.3f\t%.3f\t%s\t%s\t%s\t%s\t%s\t%s\n", $t0, $t1, $op, $id, $st, $ra,
                $title, $why;
            last unless $st == 599 || $st >= 500 || $st == 409;
        }
    }
    close $out;
}

# ---- one soak: an MPM, the faults, the checks ------------------------------
sub fill_disk {
    my ($dir) = @_;
    system("dd if=/dev/zero of='$dir/filler' bs=64k >/dev/null 2>&1");
    return -s "$dir/filler";
}

# A server starts with no key set for the keys URL: one process fetches
# it for all (issue 42), and requests answer 503 until then
# (docs/identity-providers.md; jwks.t tests it).  The soak is about faults
# in a running server, so its clients start once the server has its set
# (LESSONS00213, logged by the process that fetched it; the others take
# it from the shared block at their next request), or after 60 s, when
# the checks say what happened.
sub warm_keys {
    my ($dir, $mpm) = @_;
    my $t0 = time;
    my $seen = 0;
    while (time - $t0 < 60 && !$seen) {
        if (open my $fh, '<', "$dir/error_log") {
            while (<$fh>) {
                $seen = 1, last if /LESSONS00213: keys URL \Q$IDP->{jwks}\E:/;
            }
        }
        sleep 0.2 unless $seen;
    }
    diag sprintf '%s: the key set %s %.1f s after the start', $mpm,
        $seen ? 'was in use' : 'was still missing', time - $t0;
}

# Has some client's write that started after $t succeeded?
sub write_ok_after {
    my ($dir, $t) = @_;
    for my $n (1 .. $CLIENTS) {
        open my $fh, '<', "$dir/client-$n.log" or next;
        while (my $line = <$fh>) {
            my ($t0, undef, $op, undef, $st) = split /\t/, $line;
            return 1 if $t0 >= $t && $op =~ /^(create|update|delete)/ && $st =~ /^2/;
        }
    }
    return 0;
}

sub soak {
    my ($mpm) = @_;
    my $dir = tempdir(DIR => $tmp, CLEANUP => 1);
    my $port = free_port();
    my $conf = write_conf($dir, $port, $mpm, '');
    my $httpd = start_httpd($conf, $port);
    warm_keys($dir, $mpm);
    my $stop = "$dir/stop";
    my @kids;
    for my $n (1 .. $CLIENTS) {
        my $pid = fork // die "fork: $!";
        if (!$pid) { client($n, $port, "$dir/client-$n.log", $stop); _exit(0) }
        push @kids, $pid;
    }
    my @faults;
    my $fault = sub {
        my ($name, $start, $end) = @_;
        my $t0 = time;
        my $info = $start->() // '';
        $end->() if $end;
        push @faults, { name => $name, start => $t0, end => time, info => $info,
                        $name =~ /^key rotation/ ? (gen => $GEN) : () };
        sleep $CALM;
    };
    sleep $CALM;
    $fault->('graceful restart', sub {
        system(LessonsTest::httpd_bin(), '-f', $conf, '-k', 'graceful') == 0 or die "graceful failed\n";
        sleep 1; '' });
    $fault->('reload, changed config', sub {
        write_conf($dir, $port, $mpm, "# reloaded at @{[ time ]}\nLessonsMaxBodySize 32768");
        system(LessonsTest::httpd_bin(), '-f', $conf, '-k', 'graceful') == 0 or die "reload failed\n";
        sleep 1; '' });
    # A new key signs, the provider goes down before any client has its
    # token, then comes back: the fault ends when it listens again.
    $fault->('key rotation, keys URL down 5 s', sub {
        my $kid = idp_control($IDP, POST => '/keys', { alg => 'RS256' })->{kid};
        my $token = idp_token($IDP);
        idp_control($IDP, POST => '/stop');
        publish_token($token);
        sleep 5;
        "new kid $kid" }, sub { idp_control($IDP, POST => '/start') });
    my $lock;
    $fault->('table locked from outside, 3 s', sub { $lock = hold_lock(); sleep 3; '' },
             sub { release($lock) });
    if ($DRIVER eq 'sqlite3') {
        if ($smallfs && index($dbparams, $smallfs) == 0) {
            $fault->('disk full, 3 s', sub {
                my $size = fill_disk($smallfs);
                sleep 3;
                "filler of $size bytes" }, sub { unlink "$smallfs/filler" });
        }
    }
    else {
        $fault->('PostgreSQL restarted', sub { pg_ctl('restart', '-m', 'fast'); '' });
        $fault->('PostgreSQL stopped for 10 s', sub {
            pg_ctl('stop', '-m', 'fast'); sleep 10; '' }, sub { pg_start() });
    }
    # The last fault's recovery is judged like the others' (up to GRACE
    # s): the clients go on until a write after it succeeds, or that long.
    my $until = time + $GRACE;
    sleep 0.5 while time < $until && !write_ok_after($dir, $faults[-1]{end});
    open my $s, '>', $stop or die "$stop: $!";
    close $s;
    waitpid $_, 0 for @kids;
    stop_server($httpd);
    check($mpm, $dir, \@faults);
}

# ---- the checks ---------------------------------------------------------------
# The server's database fault lines (LESSONS0030x, 0031x), the first
# ten: why a 5xx was answered, for the diagnostics (the server's
# directory goes with the test).
sub db_fault_lines {
    my ($dir) = @_;
    open my $fh, '<', "$dir/error_log" or return "no error_log in $dir: $!";
    my @lines = grep { /LESSONS003[01][0-9]/ } <$fh>;
    chomp @lines;
    return @lines ? ('error_log:', @lines[0 .. ($#lines < 9 ? $#lines : 9)])
                  : 'error_log: no database fault line';
}

# The server's own lines about its life (httpd's core and MPM, and any
# emerg, alert or crit line): the last 15, for a server that stopped
# answering (a graceful restart that failed, a parent that died).
sub server_life_lines {
    my ($dir) = @_;
    open my $fh, '<', "$dir/error_log" or return "no error_log in $dir: $!";
    my @lines = grep { /\[(?:core|mpm_\w+):|:(?:emerg|alert|crit)\]|exit signal/ } <$fh>;
    chomp @lines;
    splice @lines, 0, @lines - 15 if @lines > 15;
    return @lines ? ('error_log, the server\'s life:', @lines)
                  : 'error_log: no line of the server\'s life';
}

sub check {
    my ($mpm, $dir, $faults) = @_;
    my (@all, %clients);
    for my $n (1 .. $CLIENTS) {
        open my $fh, '<', "$dir/client-$n.log" or die "client $n: $!";
        while (my $line = <$fh>) {
            chomp $line;
            my %r;
            @r{qw(t0 t1 op id st ra title why)} = split /\t/, $line;
            $r{client} = $n;
            push @all, \%r;
            push @{ $clients{$n} }, \%r;
        }
    }
    my %status;
    $status{ $_->{st} }++ for @all;
    diag sprintf "%s/%s: %d requests: %s", $DRIVER, $mpm, scalar @all,
        join(', ', map { "$_: $status{$_}" } sort keys %status);
    ok @all > 1000, "$mpm: the clients made requests (" . scalar(@all) . ')';

    my $in_window = sub {
        my ($r) = @_;
        grep { $r->{t1} >= $_->{start} && $r->{t0} <= $_->{end} + $GRACE } @$faults;
    };
    my @bad5xx = grep { $_->{st} >= 500 && $_->{st} != 599
                        && !($_->{st} == 503 && $_->{ra} =~ /^ra/ && $in_window->($_)) } @all;
    is scalar @bad5xx, 0, "$mpm: every 5xx is a 503 with Retry-After inside a fault's window"
        or diag join "\n", (map { "$_->{op} $_->{id} $_->{st} $_->{ra} at $_->{t0}" }
                                grep { defined } @bad5xx[0 .. 9]),
                           (map { sprintf '%s %.3f-%.3f', $_->{name}, $_->{start}, $_->{end} } @$faults),
                           db_fault_lines($dir);
    my @lost = grep { $_->{st} == 599 } @all;
    my @lost_out = grep { !$in_window->($_) } @lost;
    # The faults and the server's log first: a server that died leaves
    # thousands of these, and the summary shows only the first lines.
    is scalar @lost_out, 0, "$mpm: no request without an answer outside a fault ("
        . scalar(@lost) . ' inside)'
        or diag join "\n",
            'faults: ' . join(', ', map { sprintf '%s %.3f-%.3f', $_->{name}, $_->{start}, $_->{end} } @$faults),
            server_life_lines($dir),
            (map { "$_->{op} $_->{id} at $_->{t0}-$_->{t1}: $_->{why}" } grep { defined } @lost_out[0 .. 9]),
            (@lost_out > 10 ? sprintf('... and %d more', @lost_out - 10) : ());
    # A 401 only for the newest key's token, until the provider is back
    # (and the fault's grace after).
    my ($rotation) = grep { $_->{gen} } @$faults;
    my $new_key_401 = sub {
        my ($r) = @_;
        $rotation && $r->{op} eq 'read-idp' && $r->{st} == 401
            && $r->{title} eq "gen $rotation->{gen}" && $r->{t0} <= $rotation->{end} + $GRACE;
    };
    my @other = grep { $_->{st} !~ /^(200|201|204|412|503|599)$/ && !$new_key_401->($_)
                       && !($_->{op} eq 'create-key' && $_->{st} == 409) } @all;
    is scalar @other, 0, "$mpm: no other answer (4xx but 412, 409 for a create with a key"
        . " while its first is in flight, and 401 for the new key's token"
        . ' until the provider is back)'
        or diag join "\n", map { "$_->{op} $_->{id} $_->{st}" } @other[0 .. 9];

    # What each id must hold, from its owner's log.  %maybe holds, per
    # id, the titles of the writes since its last known one whose outcome
    # is unknown (any of them may have been stored; a delete's as undef).
    # An update the client gave up on (599: no answer within its timeout)
    # may still wait in the server's socket and be stored after the
    # client's later writes: %late keeps such titles for good.
    my (%want, %maybe, %late, %history);
    my ($creates, $deletes, $unknown) = (0, 0, 0);
    my ($ryw_n, $seed_bad, @ryw_bad) = (0, 0);
    my $may_hold = sub {
        my ($id, $title) = @_;
        my $w = $want{$id};
        return 1 if defined $w && $w eq $title;
        return scalar grep { defined && $_ eq $title }
                           @{ $maybe{$id} || [] }, @{ $late{$id} || [] };
    };
    for my $n (sort keys %clients) {
        for my $r (@{ $clients{$n} }) {
            my ($op, $id, $st) = @$r{qw(op id st)};
            push @{ $history{$id} }, $r if $id && $op !~ /^read-(seeded|idp|list)$/;
            if ($op eq 'read-mine' && $st == 200) {
                $ryw_n++;
                push @ryw_bad, $r unless $may_hold->($id, $r->{title});
            }
            elsif ($op eq 'read-seeded' && $st == 200) {
                $seed_bad++ unless ($seeded{$id} // '') eq $r->{title};
            }
            elsif ($op =~ /^create/ && $st == 201) {
                $want{$id} = $r->{title};
                $creates++;
            }
            elsif ($op =~ /^update/ && $st == 200) {
                $want{$id} = $r->{title};
                delete $maybe{$id};
            }
            elsif ($op eq 'delete' && $st == 204) {
                $want{$id} = undef;
                delete $maybe{$id};
                $deletes++;
            }
            elsif ($st == 599 || $r->{ra} =~ /-u$/) {   # outcome unknown
                push @{ $maybe{$id} }, $r->{title} if $op =~ /^update/;
                push @{ $late{$id} }, $r->{title} if $op eq 'update' && $st == 599;
                if ($op eq 'delete') { push @{ $maybe{$id} }, $want{$id}; $want{$id} = undef }
                # A create with a key is asked again: counted below, if
                # no answer ever came.
                $unknown++ if $op =~ /^(create|update|delete)$/;
            }
        }
    }
    is scalar @ryw_bad, 0, "$mpm: each of $ryw_n reads of a client's own lesson saw its last write"
        or diag join "\n", map {
            my $bad = $_;
            "read of $bad->{id} at $bad->{t0}-$bad->{t1} saw $bad->{title}; its requests:\n"
            . join "\n", map { "  $_->{t0}-$_->{t1} $_->{op} $_->{st} $_->{ra} $_->{title} $_->{why}" }
                          @{ $history{ $bad->{id} } } } @ryw_bad[0 .. ($#ryw_bad < 4 ? $#ryw_bad : 4)];
    is $seed_bad, 0, "$mpm: the seeded lessons read as seeded";

    # Creates with a key: every attempt, and whether one said what
    # happened (a 201, or a refusal).
    my %keyed;
    for my $r (grep { $_->{op} eq 'create-key' } @all) {
        my $k = $keyed{ $r->{title} } //= { tries => 0 };
        $k->{tries}++;
        $k->{id} = $r->{id} if $r->{st} == 201;
        $k->{replayed}++ if $r->{st} == 201 && $r->{why} eq 'replayed';
        $k->{known} = 1 if $r->{st} =~ /^[24]/ && $r->{st} != 409;
    }
    my @unresolved = grep { !$keyed{$_}{known} } keys %keyed;
    $unknown += @unresolved;
    {
        my %lessons = map { $_->{title} => $_->{n} } @{ db_rows(
            "SELECT title, count(*) AS n FROM lessons WHERE title LIKE 'soak-%-k' GROUP BY title") };
        my %ids = map { $_->{title} => $_->{id} } @{ db_rows(
            "SELECT title, min(id) AS id FROM lessons WHERE title LIKE 'soak-%-k' GROUP BY title") };
        my %kept = map { $_->{idem_key} => $_->{n} } @{ db_rows(
            "SELECT idem_key, count(*) AS n FROM lessons_idempotency WHERE idem_key LIKE 'soak-%-k'"
            . ' GROUP BY idem_key') };
        my @bad;
        for my $key (sort keys %keyed) {
            my $k = $keyed{$key};
            my $n = $lessons{$key} // 0;
            if (defined $k->{id}) {
                push @bad, "$key: $n lessons, " . ($kept{$key} // 0) . " kept keys, its 201 named"
                    . " $k->{id}, the table holds " . ($ids{$key} // 'none')
                    unless $n == 1 && ($kept{$key} // 0) == 1 && $ids{$key} == $k->{id};
            }
            elsif ($n > 1) {
                push @bad, "$key (never answered 201): $n lessons";
            }
        }
        my ($tries, $replays, $retried) = (0, 0, 0);
        for (values %keyed) {
            $tries += $_->{tries};
            $replays += $_->{replayed} // 0;
            $retried++ if $_->{tries} > 1;
        }
        my $stored = 0;
        $stored += $_ for values %lessons;
        is scalar @bad, 0, "$mpm: every Idempotency-Key holds one lesson, the one its 201 named"
            . ' (' . scalar(keys %keyed) . ' keys)' or diag join "\n", @bad[0 .. ($#bad < 9 ? $#bad : 9)];
        diag sprintf '%s/%s: Idempotency-Key: %d keys, %d requests (%d keys sent again, %d answers'
            . ' replayed, %d never answered), %d lessons stored',
            $DRIVER, $mpm, scalar(keys %keyed), $tries, $retried, $replays, scalar @unresolved,
            $stored;
    }

    my $rows = db_rows("SELECT id, title FROM lessons WHERE title LIKE 'soak-%'");
    my %have = map { $_->{id} => $_->{title} } @$rows;
    my @wrong;
    for my $id (sort { $a <=> $b } keys %want) {
        my $w = $want{$id};
        my $h = $have{$id};
        next if defined $h ? $may_hold->($id, $h)
                           : !defined $w || grep { !defined } @{ $maybe{$id} || [] };
        push @wrong, "id $id: want " . ($w // 'deleted') . ', have ' . ($h // 'nothing');
    }
    is scalar @wrong, 0, "$mpm: every created id holds its last 2xx write, or is deleted ("
        . scalar(keys %want) . ' ids)' or diag join "\n", @wrong[0 .. 9];
    my @stray = grep { !exists $want{$_} } keys %have;
    ok @stray <= $unknown, "$mpm: rows from writes answered non-2xx: " . scalar(@stray)
        . " (at most the $unknown without an answer)";
    my $count = db_count();
    my $expect = scalar(keys %seeded) + $creates - $deletes;
    ok $unknown ? abs($count - $expect) <= $unknown : $count == $expect,
        "$mpm: row count $count = seeded + $creates created - $deletes deleted"
        . ($unknown ? " (give or take the $unknown writes of unknown outcome)" : '');

    my $told = 0;
    for my $f (@$faults) {
        my @in = grep { $_->{t1} >= $f->{start} && $_->{t0} <= $f->{end} } @all;
        my %o;
        $o{ $_->{st} }++ for @in;
        my ($first) = sort { $a->{t1} <=> $b->{t1} }
                      grep { $_->{op} =~ /create|update|delete/ && $_->{st} =~ /^2/
                             && $_->{t0} >= $f->{end} } @all;
        my $rec = $first ? sprintf('%.2f s', $first->{t1} - $f->{end}) : 'never';
        diag sprintf "%s/%s: %s (%.1f s%s): %d requests during it: %s; recovered in %s",
            $DRIVER, $mpm, $f->{name}, $f->{end} - $f->{start},
            $f->{info} ? ", $f->{info}" : '', scalar @in,
            join(', ', map { "$_: $o{$_}" } sort keys %o) || 'none', $rec;
        ok $first, "$mpm: writes succeed again after: $f->{name}"
            or $told++ or diag join "\n", server_life_lines($dir);
    }
    if ($rotation) {
        my @new = grep { $_->{op} eq 'read-idp' && $_->{title} eq "gen $rotation->{gen}" } @all;
        my @refused = grep { $_->{st} == 401 } @new;
        my ($last) = sort { $b->{t1} <=> $a->{t1} } @refused;
        my @after = grep { $_->{st} == 200 && $_->{t0} > $rotation->{end} } @new;
        diag sprintf "%s/%s: new key: %d reads, %d refused (401) while the provider was down"
            . " or until each process refetched; the last refusal %s after it was back",
            $DRIVER, $mpm, scalar @new, scalar @refused,
            $last ? sprintf('%.2f s', $last->{t1} - $rotation->{end}) : 'never';
        ok @after > 0, "$mpm: the new key's token passes after the provider is back ("
            . scalar(@after) . ' reads)';
        my @old = grep { $_->{op} eq 'read-idp' && $_->{title} ne "gen $rotation->{gen}" } @all;
        ok @old > 0 && !grep({ $_->{st} == 401 } @old),
            "$mpm: the old key's token never got 401 (" . scalar(@old) . ' reads)';
    }
    db_do("DELETE FROM lessons WHERE title LIKE 'soak-%'");
    db_do("DELETE FROM lessons_idempotency WHERE idem_key LIKE 'soak-%'");
}

if ($DRIVER eq 'sqlite3' && !($smallfs && index($dbparams, $smallfs) == 0)) {
    SKIP: { skip 'disk full: no small file system (LESSONS_TEST_SMALLFS, '
                 . 'which t/tools/integration.sh mounts when it runs as root)', 1 }
}
for my $mpm (qw(event prefork)) { soak($mpm) }
# The suite's own server met the same database restarts: a pooled
# connection that was idle then fails its next request (503).  A graceful
# restart gives the next test files fresh children and connections.
if ($DRIVER eq 'pgsql') {
    ok defined renew_suite_server(), "the suite's server, restarted gracefully, answers again";
}

done_testing;
