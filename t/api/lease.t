# Read leases on PostgreSQL (issue 56, LessonsDBLease; docs/scaling.md,
# "Read leases").  Two servers, B and C, each of two processes, hold a
# lease on the suite's database:
#   - each holds one (a row of lessons_leases), and its GETs take no
#     catalogue version from the database (lessons_catalog_versions_total
#     by source: lease, not statement);
#   - a write through either one is seen at once through the other, on
#     the lesson and on the lists;
#   - a write through psql (no server waits for it) is seen soon;
#   - with C stopped (SIGSTOP) past its lease, a write through B waits at
#     most about a lease; once C's row has lapsed, B's writes make no
#     check; and C, resumed, serves nothing stale;
#   - a write through D (one process, DBDMax 1) that waits for C, stopped
#     inside its lease, gives its pooled connection back first: a GET
#     through D is answered meanwhile;
#   - with the listening connections terminated, a write through B is
#     seen at once through C, and both servers hold a lease again, C
#     serving from it only once its new run is 65% of a lease old;
#   - with datagrams on both, a burst of writes through B is answered
#     under C's holds, each seen at once through C;
#   - C has LessonsDBLeasePeer and B has not: each write of either is
#     told by NOTIFY (C's check finds B without an address), so servers
#     with and without it share a database; lease_peer.t runs every case
#     with it on both (LESSONS_LEASE_PEERS="B C"), where each write
#     reaches the other by datagram;
#   - LessonsDBLease in a virtual host, or out of bounds, is refused, and
#     LessonsDBLeasePeer in a virtual host, by name or as a wildcard.
# The many-client proof under faults is t/history (make history).
use strict;
use warnings FATAL => 'all';
use utf8;

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use JSON::PP ();
use POSIX ();
use Time::HiRes qw(time sleep);
use LessonsTest;

plan skip_all => 'read leases are PostgreSQL\'s' unless LessonsTest::db_driver() eq 'pgsql';

my $JSON = JSON::PP->new->utf8->canonical;
# Which servers have LessonsDBLeasePeer (lease_peer.t: both).
my %with_peer = map { ($_ => 1) } split ' ', ($ENV{LESSONS_LEASE_PEERS} // 'C');
# A server of a lease of 1 s, its MPM's and pool's sizes as $sizes says,
# reached at $peer (a port for LessonsDBLeasePeer) if given.  Its pid.
sub start_leased {
    my ($dir, $port, $sizes, $peer) = @_;
    my $peer_line = $peer ? "LessonsDBLeasePeer 127.0.0.1:$peer" : '';
    return start_httpd(httpd_conf($dir, $port, <<"EOF"), $port);
LogLevel info lessons:trace1
$sizes
LessonsDBLease 1
$peer_line
@{[ api_location() ]}
<Location "/metrics">
    SetHandler lessons-metrics
</Location>
EOF
}

my %server;
for my $name (qw(B C)) {
    my $dir = File::Temp->newdir(CLEANUP => !$ENV{LESSONS_TEST_KEEP});
    diag("$name: $dir") if $ENV{LESSONS_TEST_KEEP};
    my $port = free_port();
    my $peer = $with_peer{$name} ? free_port() : undef;
    my $pid = start_leased($dir, $port, <<"EOF", $peer);
StartServers 2
MinSpareThreads 2
MaxSpareThreads 10
ServerLimit 2
ThreadsPerChild 5
MaxRequestWorkers 10
EOF
    $server{$name} = { dir => $dir, port => $port, pid => $pid, peer => $peer,
                       base => "http://127.0.0.1:$port" };
}
my ($B, $C) = map { $server{$_}{base} } qw(B C);

sub leases {
    return db_rows('SELECT server, term, acked FROM lessons_leases '
                   . 'ORDER BY server');
}

# Each server's row (their names hold their parents' pids), within 10 s.
sub wait_leases {
    my ($label) = @_;
    my %want = map { ($server{$_}{pid} => 1) } keys %server;
    my $rows = [];
    for (1 .. 100) {
        $rows = leases();
        my %have = map { m{/(\d+)/} ? ($1 => 1) : () }
                   map { $_->{server} } @$rows;
        return $rows if !grep { !$have{$_} } keys %want;
        sleep 0.1;
    }
    fail("$label: both servers hold a lease");
    diag(explain($rows));
    return $rows;
}

sub versions_taken {
    my ($base) = @_;
    my $res = call(GET => '/metrics', base => $base, token => undef);
    my %n = (statement => 0, lease => 0);
    my $text = $res->content;
    $n{$1} = $2 while $text
        =~ /^lessons_catalog_versions_total\{source="(\w+)"\} (\d+)$/mg;
    return \%n;
}

my $rows = wait_leases('start');

# The lease's gauges: what the admin sees of it.
sub lease_gauges {
    my ($base) = @_;
    my $text = call(GET => '/metrics', base => $base, token => undef)->content;
    my %g = map { $text =~ /^lessons_db_lease_$_ (\S+)$/m ? ($_ => $1) : () }
            qw(valid listening remaining_seconds length_seconds
               other_servers run_seconds);
    $g{held} = $1
        if $text =~ /^lessons_db_lease_unchecked_writes_total\{how="held"\} (\d+)$/m;
    return \%g;
}
is(scalar(grep { $_->{server} =~ m{/$server{B}{pid}/} } @$rows), 1,
   'B holds one lease');
# Where each is reached: at its address with a key, or by NOTIFY ('').
my %peer_of = map { m{/(\d+)/} ? ($1 => $_) : () } map { $_->{server} } @$rows;
my $peers = { map { ($_->{server} => $_->{peer}) }
              @{ db_rows('SELECT server, peer FROM lessons_leases') } };
for my $name (qw(B C)) {
    my $row = $peers->{ $peer_of{ $server{$name}{pid} } // '' } // 'no row';
    if ($server{$name}{peer}) {
        like($row, qr/\A127\.0\.0\.1:$server{$name}{peer} [0-9a-f]{64}\z/,
             "${name}'s row has its address and a key of 256 bits");
    }
    else {
        is($row, '', "${name}'s row has no address (no LessonsDBLeasePeer)");
    }
}

my $gauges = {};
for (1 .. 50) {
    $gauges = lease_gauges($B);
    last if ($gauges->{valid} // 0) == 1;
    sleep 0.1;
}
is_deeply([ @$gauges{qw(valid listening length_seconds)} ], [ 1, 1, '1.000' ],
          'B\'s metrics: its lease holds, its holder listens, a lease is 1 s')
    or diag(explain($gauges));
cmp_ok($gauges->{remaining_seconds} // -1, '>', 0,
       'B\'s metrics: the time its lease has left');
cmp_ok($gauges->{remaining_seconds} // 99, '<=', 0.9,
       'B\'s metrics: never more than 90% of a lease');
cmp_ok($gauges->{run_seconds} // -1, '>=', 0.65,
       'B\'s metrics: it serves from a run at least 65% of a lease old');
# Each renewal reads the other servers' leases: each sees the other.
for my $name (qw(B C)) {
    my $others;
    for (1 .. 50) {
        $others = lease_gauges($server{$name}{base})->{other_servers};
        last if ($others // -1) == 1;
        sleep 0.1;
    }
    is($others, 1, "${name}'s metrics: one other server holds a lease");
}

my ($id, $beside) = seed({ level_id => 1, title => 'Leased', sort_order => 1 },
                { level_id => 2, title => 'Beside it', sort_order => 1 });
sub title_of {
    my ($base, $path) = @_;
    my $res = call(GET => $path // "/api/lessons/$id", base => $base);
    return $res->code . ' ' . (eval { $JSON->decode($res->content)->{title} }
                               // '');
}
sub put_title {
    my ($base, $title) = @_;
    my $t0 = time;
    my $res = call(PUT => "/api/lessons/$id", base => $base,
                   json => { title => $title });
    return ($res->code, time - $t0);
}

# ---- GETs with no statement
# (Not through $_: what call() reads may end with $_ undefined.)
for my $base ($B, $B, $C, $C) {           # built and cached
    title_of($base);
}
my $before = versions_taken($B);
title_of($B) for 1 .. 200;
call(GET => '/api/lessons', base => $B) for 1 .. 20;
my $after = versions_taken($B);
my $by_lease = $after->{lease} - $before->{lease};
my $by_statement = $after->{statement} - $before->{statement};
cmp_ok($by_lease, '>=', 218, "B: 220 GETs took the lease's version "
       . "($by_lease)");
cmp_ok($by_statement, '<=', 2, "B: and at most 2 from a statement "
       . "($by_statement)");

# ---- a write through one server, seen at once through the other
my @stale;
my $writing = 0;
for my $n (1 .. 20) {
    my ($w, $r) = $n % 2 ? ($B, $C) : ($C, $B);
    my $title = "Lease $n";
    my ($code, $took) = put_title($w, $title);
    $writing += $took;
    push @stale, "$n: PUT $code" unless $code == 200;
    my $got = title_of($r);
    push @stale, "$n: GET gave $got" unless $got eq "200 $title";
    my $list = call(GET => '/api/lessons', base => $r);
    my $items = eval { $JSON->decode($list->content) } || [];
    my ($item) = grep { $_->{id} == $id } @$items;
    push @stale, "$n: the list gave " . ($item ? $item->{title} : 'nothing')
        unless $item && $item->{title} eq $title;
}
is_deeply(\@stale, [], '20 writes, alternating: each seen at once through '
          . 'the other server, lesson and list');
# Acknowledged, not waited out: an acknowledgement the writer's server
# does not hear makes each write wait out the other's lease (1 s; with
# the catch-up's notification on a wrong channel, 20 s in all).
cmp_ok($writing, '<', 8, sprintf('the 20 writes were acknowledged, not '
       . 'waited out (%.2f s in all)', $writing));
# How: by datagram when both have an address, else by NOTIFY
# (LESSONS00799 at trace1 counts the datagrams answered: after a check,
# "(N by datagram)"; after an INVALIDATE with no check, "N answered";
# a write under the other's hold, answered by datagram before it, 1).
for my $name (qw(B C)) {
    my $log = "$server{$name}{dir}/error_log";
    open my $fh, '<', $log or die "$log: $!";
    my @acks = map {
        /LESSONS00799: .* \((\d+) by datagram\)/ ? $1
        : /LESSONS00799: .* made no check: it told \d+ listed server\(s\), (\d+) answered/ ? $1
        : /LESSONS00799: .* told no one: every listed server holds/ ? 1
        : ()
    } <$fh>;
    my $by_datagram = grep { $_ > 0 } @acks;
    if (keys %with_peer == 2) {
        # Most, not all: a renewal's acknowledgement heard first settles
        # a write before the datagram's answer comes.
        cmp_ok($by_datagram, '>=', 5, "$name: most of its 10 writes were "
               . "answered by datagram ($by_datagram of " . @acks . ')');
    }
    else {
        is($by_datagram, 0, "$name: no write answered by datagram with B "
           . 'reached by NOTIFY (' . @acks . ' writes)');
    }
}

# ---- a burst of writes through B under holds (both with datagrams)
# Writes close together: B's rounds ask C to hold its drop for 50 ms,
# and the writes that come while C holds are answered at once, telling
# no one (lessons_db_lease_unchecked_writes_total{how="held"}).  Each is
# still seen at once through C, lesson and list.  Two writers beside
# the burst keep B's writes close together however slow each one is
# (under ASan one after another came too far apart to be held): a write
# that comes while another's round is out is held.
if (keys %with_peer == 2) {
    my $held = lease_gauges($B)->{held} // -1;
    my $stop = File::Temp->new;
    my @writers;
    for my $w (1 .. 2) {
        my $kid = fork // die "fork: $!";
        if (!$kid) {
            my $k = 0;
            while (-s $stop->filename == 0 && $k < 2000) {
                call(PUT => "/api/lessons/$beside", base => $B,
                     json => { title => 'Beside ' . $w . '.' . $k++ });
            }
            POSIX::_exit(0);
        }
        push @writers, $kid;
    }
    my @missed;
    for my $n (1 .. 30) {
        my $title = "Burst $n";
        my ($code) = put_title($B, $title);
        push @missed, "$n: PUT $code" unless $code == 200;
        my $got = title_of($C);
        push @missed, "$n: GET gave $got" unless $got eq "200 $title";
        my $items = eval {
            $JSON->decode(call(GET => '/api/lessons', base => $C)->content)
        } || [];
        my ($item) = grep { $_->{id} == $id } @$items;
        push @missed, "$n: the list gave " . ($item ? $item->{title} : 'nothing')
            unless $item && $item->{title} eq $title;
    }
    print {$stop} "stop\n";
    $stop->flush;
    waitpid $_, 0 for @writers;
    is_deeply(\@missed, [], '30 writes through B in a burst beside two '
              . 'writers: each seen at once through C, lesson and list');
    my $now_held = lease_gauges($B)->{held} // -1;
    cmp_ok($now_held - $held, '>=', 1, 'B answered some of the burst\'s '
           . 'writes under C\'s hold, telling no one ('
           . ($now_held - $held) . ')');
    # Renewed ahead: a write that found half the hold gone sent the next
    # HOLD on its way out, and B's readers heard C answer it (LESSONS00800),
    # which kept the writes after it held.
    my $log = "$server{B}{dir}/error_log";
    open my $fh, '<', $log or die "$log: $!";
    my ($renewed, $heard) = (0, 0);
    while (<$fh>) {
        $renewed++ if /LESSONS00799: .*\(it renewed the holds of 1 server/;
        $heard++ if /LESSONS00800: .* answered a renewal of its hold/;
    }
    close $fh;
    cmp_ok($renewed, '>=', 1, "B's writes renewed C's hold ahead ($renewed)");
    cmp_ok($heard, '>=', 1, "B heard C answer the renewals ($heard)");
    # Every write's time on the lease, a histogram: the burst's and its
    # writers' are in it, the buckets never fall, +Inf is the count, and
    # promtool takes the answer.
    my $text = call(GET => '/metrics', base => $B, token => undef)->content;
    my @buckets = $text =~ /^lessons_db_lease_write_wait_seconds_bucket\{le="[^"]+"\} (\d+)$/mg;
    my ($count) = $text =~ /^lessons_db_lease_write_wait_seconds_count (\d+)$/m;
    is(scalar(@buckets), 7, "B's writes' time on the lease: 7 buckets");
    cmp_ok($count // 0, '>=', 30, "... counting the burst's writes ("
           . ($count // 'none') . ')');
    is_deeply([ grep { $buckets[$_] < $buckets[$_ - 1] } 1 .. $#buckets ], [],
              '... buckets that never fall');
    is($buckets[-1] // -1, $count // -2, '... the last, +Inf, is the count');
    SKIP: {
        my $promtool = $ENV{LESSONS_TEST_PROMTOOL};
        skip 'promtool not found: make promtool-deps (make test does)', 1
            unless $promtool && -x $promtool;
        my $file = File::Temp->new;
        print {$file} $text;
        $file->flush;
        my $out = `'$promtool' check metrics < '@{[ $file->filename ]}' 2>&1`;
        is($?, 0, "promtool takes B's metrics with the lease's") or diag($out);
    }
}

# ---- a write through psql: seen soon (nobody answered it)
db_do("UPDATE lessons SET title = 'Through psql' WHERE id = $id");
my $seen = 0;
for (1 .. 50) {
    if (title_of($B) eq '200 Through psql'
        && title_of($C) eq '200 Through psql') {
        $seen = 1;
        last;
    }
    sleep 0.1;
}
ok($seen, 'a write through psql is seen through both within 5 s');

# ---- C stopped past its lease
kill 'STOP', -$server{C}{pid};
my ($code, $took) = put_title($B, 'While C sleeps');
is($code, 200, 'with C stopped, a write through B is answered');
cmp_ok($took, '<', 3, sprintf('within about a lease (%.2f s)', $took));
is(title_of($B), '200 While C sleeps', 'B serves it');
($code, $took) = put_title($B, 'While C still sleeps');
cmp_ok($took, '<', 1.5, sprintf('C, once its lease ended, is not waited '
       . 'for again (%.2f s)', $took));
sleep 1.5;
# C's row has lapsed, and B's renewals list no other lease: B's writes
# make no check (LESSONS00799 at trace1 says so).
sub no_checks {
    open my $fh, '<', "$server{B}{dir}/error_log" or die "B's error_log: $!";
    return scalar grep { /LESSONS00799: .*the write made no check/ } <$fh>;
}
for (1 .. 50) {
    last if (lease_gauges($B)->{other_servers} // -1) == 0;
    sleep 0.1;
}
my $alone = no_checks();
($code, $took) = put_title($B, 'B alone');
is($code, 200, 'with C stopped past its lease, a write through B');
cmp_ok($took, '<', 1.5, sprintf('is answered without waiting (%.2f s)', $took));
is(title_of($B), '200 B alone', 'B serves it');
is(no_checks() - $alone, 1, 'B made no check for it: no other lease listed');
kill 'CONT', -$server{C}{pid};
my @after_pause = map { title_of($C) } 1 .. 6;
is_deeply(\@after_pause, [ ('200 B alone') x 6 ],
          'C, resumed, serves nothing stale');

# ---- a write that waits for a stopped server holds no pooled connection
# D: one process with one pooled connection (DBDMax 1).  With C stopped
# inside its lease, a write through D waits for C's lease to end; a GET
# through D that needs the database (the lesson the write changed) is
# answered meanwhile, not after the write: the write gave its
# connection back before it waited.  Held through the wait (up to a
# lease), it kept the process's reads waiting at the gate.  With
# datagrams on B and C (lease_peer.t) D has an address too, and its
# write makes no check; else it makes one.
{
    my $dir = File::Temp->newdir(CLEANUP => !$ENV{LESSONS_TEST_KEEP});
    my $port = free_port();
    my $pid = start_leased($dir, $port, <<"EOF",
@{[ one_process_conf(5) ]}DBDMin 1
DBDKeep 1
DBDMax 1
EOF
                           keys %with_peer == 2 ? free_port() : undef);
    my $D = "http://127.0.0.1:$port";
    my $g = {};
    for (1 .. 50) {
        $g = lease_gauges($D);
        last if ($g->{valid} // 0) == 1 && ($g->{other_servers} // 0) == 2;
        sleep 0.1;
    }
    is_deeply([ @$g{qw(valid other_servers)} ], [ 1, 2 ],
              'D holds a lease and lists B\'s and C\'s')
        or diag(explain($g));
    title_of($D);                           # built, and D's connection made
    kill 'STOP', -$server{C}{pid};
    my $t0 = time;
    pipe(my $from_put, my $to_parent) or die "pipe: $!";
    my $kid = fork // die "fork: $!";
    if (!$kid) {
        close $from_put;
        my ($code) = put_title($D, 'While C sleeps, through D');
        printf {$to_parent} "%d %.6f\n", $code, time;
        close $to_parent;
        POSIX::_exit(0);
    }
    close $to_parent;
    sleep 0.2;
    my $got = title_of($D);
    my $read_done = time;
    my ($put_code, $put_done) = split ' ', (<$from_put> // '0 0');
    waitpid $kid, 0;
    kill 'CONT', -$server{C}{pid};
    is($put_code, 200, 'with C stopped, a write through D is answered');
    cmp_ok($put_done - $t0, '>=', 0.3, sprintf('after waiting for C\'s '
           . 'lease (%.2f s)', $put_done - $t0));
    is($got, '200 While C sleeps, through D',
       'a GET through D meanwhile reads the write');
    cmp_ok($read_done, '<', $put_done, sprintf('and is answered %.2f s '
           . 'before the write: the write waits with no pooled connection',
           $put_done - $read_done));
    kill 'TERM', $pid;
    for (1 .. 100) {
        last unless kill 0, $pid;
        sleep 0.1;
    }
    # B and C list D no more (its row is gone or lapsed) before going on.
    for my $base ($B, $C) {
        for (1 .. 50) {
            last if (lease_gauges($base)->{other_servers} // -1) == 1;
            sleep 0.1;
        }
    }
}

# ---- the listening connections terminated
my $terms = { map { ($_->{server} => $_->{term}) } @{ leases() } };
db_rows("SELECT pg_terminate_backend(pid) AS t FROM pg_stat_activity "
        . "WHERE application_name = 'mod_lessons lease'");
($code) = put_title($B, 'After the listeners');
is($code, 200, 'a write right after the listeners were terminated');
is(title_of($C), '200 After the listeners', 'is seen at once through C');
my $renewed = 0;
for (1 .. 100) {
    $rows = leases();
    $renewed = grep { ($terms->{$_->{server}} // 1e18) < $_->{term} }
               @$rows;
    last if $renewed >= 2;
    sleep 0.1;
}
cmp_ok($renewed, '>=', 2, 'both servers renew their leases again');
# Served from once the new run is old enough (below): within 5 s.
for (1 .. 50) {
    last if (lease_gauges($C)->{valid} // 0) == 1;
    sleep 0.1;
}
$before = versions_taken($C);
title_of($C) for 1 .. 50;
$after = versions_taken($C);
cmp_ok($after->{lease} - $before->{lease}, '>=', 48,
       'C serves from its lease again');
is(lease_gauges($C)->{valid}, 1, 'and its metrics say so');

# ---- a lease starts in two steps
# The listeners terminated again, C watched from that moment: having lost
# its listener, it serves from its lease again only once its run
# (renewals without a break) is 65% of a lease old.  Every scrape must
# say so; one of them should see the run begun and not served yet (that
# lasts at least 0.65 s).
db_rows("SELECT pg_terminate_backend(pid) AS t FROM pg_stat_activity "
        . "WHERE application_name = 'mod_lessons lease'");
my (@too_young, $warming, $lost, $back);
for (1 .. 400) {
    my $g = lease_gauges($C);
    my ($valid, $run) = ($g->{valid} // -1, $g->{run_seconds} // -1);
    push @too_young, "valid with a run of $run s" if $valid == 1 && $run < 0.65;
    $lost = 1 if $valid == 0;
    $warming = 1 if $valid == 0 && $run > 0;
    if ($lost && $valid == 1) {
        $back = 1;
        last;
    }
    sleep 0.02;
}
ok($back, 'C lost its lease with its listener and holds it again');
is_deeply(\@too_young, [], 'C served from no run younger than 65% of a lease');
ok($warming, 'C\'s run began before it served from it');

# A server without the directive has no lease to show.
my $plain = call(GET => '/metrics', token => undef);
is($plain->code, 200, 'the suite\'s server (no LessonsDBLease) has metrics');
unlike($plain->content, qr/^lessons_db_lease_/m, '... and no lease gauges');

# ---- where the directive may be written
my $cdir = File::Temp->newdir;
# Each [config, why] refused by httpd -t, naming the directive.
sub refused {
    my ($directive, @cases) = @_;
    for my $case (@cases) {
        my ($rc, $out) = conf_test($cdir, $case->[0]);
        isnt($rc, 0, "$directive $case->[1] is refused");
        like($out, qr/\Q$directive\E/, '... naming the directive');
    }
}
refused('LessonsDBLease',
        ["<VirtualHost 127.0.0.1:*>\nLessonsDBLease 2\n"
         . "</VirtualHost>\n", 'in a virtual host'],
        ["LessonsDBLease 0.05\n", 'below 0.1 s'],
        ["LessonsDBLease 61\n", 'over 60 s'],
        ["LessonsDBLease soon\n", 'not a number']);
my ($rc, $out) = conf_test($cdir, "LessonsDBLease 2.5\n");
is($rc, 0, 'LessonsDBLease 2.5 in server config is taken') or diag($out);
refused('LessonsDBLeasePeer',
        ["<VirtualHost 127.0.0.1:*>\nLessonsDBLeasePeer 127.0.0.1:9\n"
         . "</VirtualHost>\n", 'in a virtual host'],
        ["LessonsDBLeasePeer localhost:9000\n", 'by name'],
        ["LessonsDBLeasePeer 0.0.0.0:9000\n", 'as a wildcard'],
        ["LessonsDBLeasePeer [::]:9000\n", 'as an IPv6 wildcard'],
        ["LessonsDBLeasePeer 127.0.0.1\n", 'without a port']);
($rc, $out) = conf_test($cdir, "LessonsDBLease 2\nLessonsDBLeasePeer [::1]:9000\n");
is($rc, 0, 'LessonsDBLeasePeer [::1]:9000 in server config is taken') or diag($out);

done_testing();
