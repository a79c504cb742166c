#!/usr/bin/perl
# docs/benchmarks.md from make bench's measurements (t/bench/bench.sh).
#   report.pl RESULTS CALLGRIND META "DBS"
# RESULTS: db route kind round rps p50-ms p99-ms requests non2xx sockerr
#          statements (PostgreSQL's, for the module's runs; else - or none)
# CALLGRIND: db route kind instructions-per-request
# META: db key value.  The rest comes from BENCH_* environment variables.
use strict;
use warnings;
use utf8;
binmode STDOUT, ':encoding(UTF-8)';

my ($results, $cgfile, $metafile, $dbs) = @ARGV;
my @dbs = split ' ', $dbs;
my %E = map { $_ => $ENV{"BENCH_$_"} // '' } qw(DATE MACHINE SOFTWARE REV COMMAND
    SECONDS ROUNDS DUR CONNS CPUS CG_N CG_WARM RSS_N RSS_WARM QUICK LESSON_ID MAXCLIENTS ONLY
    FIGURES);
utf8::decode($_) for values %E;

my (%runs, %cg, %meta);
sub rows { my ($f) = @_; open my $fh, '<', $f or die "$f: $!"; map { chomp; [split /\t/] } <$fh> }
for (rows($results)) {
    my ($db, $route, $kind, $round, $rps, $p50, $p99, $n, $bad, $err, $stmts) = @$_;
    push @{ $runs{$db}{$route}{$kind} }, { round => $round, rps => $rps, p50 => $p50, p99 => $p99,
                                            n => $n, bad => $bad, err => $err,
                                            spr => defined $stmts && $stmts =~ /^\d+$/ && $n
                                                   ? $stmts / $n : undef };
}
$cg{$_->[0]}{$_->[1]}{$_->[2]} = $_->[3] for rows($cgfile);
$meta{$_->[0]}{$_->[1]} = $_->[2] for rows($metafile);

sub median {
    my @v = sort { $a <=> $b } @_;
    return undef unless @v;
    return @v % 2 ? $v[$#v / 2] : ($v[@v / 2 - 1] + $v[@v / 2]) / 2;
}
# Median of each figure over the rounds, errors summed.
sub stat_of {
    my ($db, $route, $kind) = @_;
    my $r = $runs{$db}{$route}{$kind} or return undef;
    # Of the figures a run has (a run without percentiles writes "-").
    my %s = map { my $k = $_; ($k => median(grep { /^[\d.]+$/ } map { $_->{$k} } @$r)) }
            qw(rps p50 p99);
    $s{non2xx} += $_->{bad} for @$r;     # answers other than 2xx/3xx
    $s{sockerr} += $_->{err} for @$r;   # wrk: no answer (reset, closed)
    $s{rounds} = @$r;
    my @spr = grep { defined } map { $_->{spr} } @$r;
    $s{spr} = median(@spr) if @spr;     # statements per request
    return \%s;
}
sub num { my ($v) = @_; defined $v ? sprintf('%.0f', $v) =~ s/(\d)(?=(\d{3})+$)/$1,/gr : 'n/a' }
sub ms  { my ($v) = @_; defined $v ? sprintf($v < 10 ? '%.2f' : '%.1f', $v) : 'n/a' }
sub x   { my ($v) = @_; defined $v ? sprintf('%.2fx', $v) : 'n/a' }

my ($met, $missed) = (0, 0);
sub verdict {
    my ($ok) = @_;
    $ok ? $met++ : $missed++;
    return $ok ? 'met' : '**missed**';
}

my %label = (
    all      => 'GET all',
    id       => "GET by id ($E{LESSON_ID})",
    beginner => 'GET beginner',
    level3   => 'GET level/3',
    r304     => 'GET all, 304 revalidation',
    gzip     => 'GET all, gzip',
    id_rs    => 'GET by id, RS256',
    id_es    => 'GET by id, ES256',
    idmax    => "GET by id, $E{MAXCLIENTS} clients (MaxRequestWorkers)",
    cert     => 'GET by id, certificate-bound (TLS)',
    intro    => 'GET by id, introspected (cached)',
);
my %twin_of = (id_rs => 'id', id_es => 'id');
my @order = qw(all id beginner level3 r304 gzip id_rs id_es cert intro idmax);
# The token rows (t/bench/token-rows.sh): no twin; against their HS256
# runs (kind hs256) on the same server.
my %token_row = (cert => 1, intro => 1);
# Issue 19: GETs at least their twin on both; a 304 on PostgreSQL at
# least 0.8x the twin's 304 (a version read it cannot skip).
my %min_ratio = (sqlite3 => 1.0, pgsql => 1.0);
my %min_ratio_304 = (sqlite3 => 1.0, pgsql => 0.8);
# Writes (issue 19) at the bench's 32 clients.
my %min_writes = (sqlite3 => 2000, pgsql => 3000);
my $min_writes_clients = 32;
# Issue 45: on the configuration a Debian admin gets (t/bench/shipped.sh),
# every GET route at least its twin on SQLite, 0.95x on PostgreSQL.
my %min_ratio_shipped = (sqlite3 => 1.0, pgsql => 0.95);
my %dbname = (sqlite3 => 'SQLite', pgsql => 'PostgreSQL');

# The write rows (bench.sh's write_rounds): createN and updateN at N
# clients, under the server's database name (shipped-pgsql for the
# shipped server's).
sub write_route {
    my ($route) = @_;
    return undef unless $route =~ /^(create|update)(\d+)$/;
    return { op => $1, clients => $2 };
}
sub write_label {
    my ($route) = @_;
    my $w = write_route($route) or return $route;
    return sprintf('%s, %d clients', $w->{op} eq 'create' ? 'POST create' : 'PUT update',
                   $w->{clients});
}
# This database's write routes: creates before updates, fewer clients
# first.
sub write_routes {
    my ($db) = @_;
    return map { $_->[0] }
           sort { $a->[1]{op} cmp $b->[1]{op} || $a->[1]{clients} <=> $b->[1]{clients} }
           grep { $_->[1] } map { [$_, write_route($_)] } keys %{ $runs{$db} || {} };
}
my @notes;
# A write row's targets (issue 45): PostgreSQL creates and updates
# >= 0.7x pgbench running the module's own statement on as many
# connections; SQLite creates >= 1.0x a bare loop of the module's INSERT,
# one writer against 8 clients, 8 writers against 32; at the bench's 32
# clients >= 2,000/s (SQLite), 3,000/s (PostgreSQL) as before.
# $db is RESULTS' (shipped-pgsql), $base its driver (pgsql).
sub write_targets {
    my ($db, $base, $route, $w, $s) = @_;
    my $m = $meta{$db} || {};
    my $stmt = ($meta{$base} || {})->{"stmt_$w->{op}"} // 'n/a';
    my $where = $dbname{$base} . ($db ne $base ? " ($db)" : '');
    my @t;
    push @t, sprintf('≥ %s/s: %s', num($min_writes{$base}), verdict($s->{rps} >= $min_writes{$base}))
        if $w->{clients} == $min_writes_clients;
    if (my $pg = stat_of($db, $route, 'pgbench')) {
        my $r = $pg->{rps} ? $s->{rps} / $pg->{rps} : 0;
        my $check = $m->{"stmt_check_$route"} // '';
        push @t, sprintf('≥ 0.7x pgbench running `%s` on %d connections (%s tps): %s, %s%s',
                         $stmt, $w->{clients}, num($pg->{rps}), x($r), verdict($r >= 0.7),
                         $check eq 'same' ? ' (pg_stat_statements: the text the module ran)'
                         : $check eq 'differ' ? ' (**pg_stat_statements: not the text the module ran**)'
                         : $check eq 'module-batched' ? ' (the module ran only batches: texts not compared)'
                         : '');
        push @notes, "$where: $route: pgbench's statement is not the one the module ran (pg_stat_statements, in the run's wrk.log)."
            if $check eq 'differ';
    }
    # What share of the machine's CPU the database got (not a target):
    # the API's HTTP side takes its CPU from the same 2 CPUs that
    # PostgreSQL and pgbench share.
    my %share;
    for my $kind (qw(mod pgbench)) {
        my @v = grep { defined } map { $m->{"pgcpu_${route}_${kind}_$_"} } 1 .. ($E{ROUNDS} || 1);
        $share{$kind} = median(@v);
    }
    push @t, sprintf('PostgreSQL CPU share %.0f%% (under pgbench %.0f%%)',
                     100 * $share{mod}, 100 * $share{pgbench})
        if defined $share{mod} && defined $share{pgbench};
    # SQLite's group commit against writers that share no commit.
    for my $kind (sort grep { /^loop\d+$/ } keys %{ $runs{$db}{$route} }) {
        my $lp = stat_of($db, $route, $kind);
        my ($n) = $kind =~ /(\d+)/;
        my $r = $lp->{rps} ? $s->{rps} / $lp->{rps} : 0;
        push @t, sprintf('≥ 1.0x a bare loop of one-row `%s` transactions, %s (%s/s): %s, %s',
                         $stmt, $n == 1 ? 'one writer' : "$n writers taking turns",
                         num($lp->{rps}), x($r), verdict($r >= 1.0));
    }
    return @t;
}

# The token rows' targets: within 10% of the same GET with an HS256
# token on the same server, and for the introspected row the provider
# asked at most once per process in the measured rounds (answers are
# kept per process).  $m is the database's META.
sub token_targets {
    my ($db, $route, $s, $m) = @_;
    my @t;
    my $hs = stat_of($db, $route, 'hs256');
    my $r = $hs && $hs->{rps} ? $s->{rps} / $hs->{rps} : undef;
    push @t, sprintf('within 10%% of HS256 %s (%s req/s, %s): %s',
                     $route eq 'cert' ? 'on the same TLS connections and certificate'
                                      : 'on the same server',
                     $hs ? num($hs->{rps}) : 'n/a', x($r), defined $r ? verdict($r >= 0.9) : 'n/a');
    if ($route eq 'cert') {
        my $w = stat_of($db, 'cert', 'wrk');
        push @t, sprintf('not a target: wrk on the HS256 route over TLS without a certificate %s req/s (tls-load %s of it)',
                         num($w->{rps}), $hs && $w->{rps} ? x($hs->{rps} / $w->{rps}) : 'n/a')
            if $w;
        my @c = grep { defined && /^\d+$/ } map { my $k = $_; map { $m->{"cert_connects_${k}_$_"} } 1 .. ($E{ROUNDS} || 1) } qw(mod hs256);
        my $most = (sort { $b <=> $a } @c)[0];
        push @t, sprintf('connections opened per run: at most %d (%d kept: %s)', $most, $E{CONNS},
                         $most <= $E{CONNS} ? 'every request after the first on a kept one' : 'some were closed and opened again')
            if defined $most;
    } else {
        # Answers are kept per process, each asks at its first requests
        # (as many times as it has threads waiting then): nearly every
        # request of the rounds is a hit, whatever processes the MPM
        # starts during them.
        my ($asked, $procs, $warm, $fresh) = map { $m->{"intro_$_"} } qw(asked procs asked_warm fresh);
        my $n = 0;
        $n += $_->{n} for @{ $runs{$db}{intro}{mod} || [] };
        my $hits = defined $asked && $asked =~ /^\d+$/ && $n ? 1 - $asked / $n : undef;
        push @t, sprintf('answered from the cache ≥ 99.9%% (the provider asked %s time(s) for %s requests in the rounds, %s in the warm-up; %s httpd processes, %s started during the rounds; %s): %s',
                         $asked // 'n/a', num($n), $warm // 'n/a', $procs // 'n/a', $fresh // 'n/a',
                         defined $hits ? sprintf('%.3f%%', 100 * $hits) : 'n/a',
                         defined $hits ? verdict($hits >= 0.999) : 'n/a');
    }
    return @t;
}

# The figures (issue 57): each GET row against its static twin (req/s,
# p99), each write row against the database alone (pgbench of the same
# statement, SQLite's bare loop), as gnuplot data for t/bench/figures.gp.
# Written only where BENCH_FIGURES names a directory: the full run's.
my (%fig_reads, %fig_writes);
my %fig_label = (all => 'all', id => 'by id', beginner => 'beginner', level3 => 'level/3',
                 r304 => 'all, 304', gzip => 'all, gzip', id_rs => 'by id, RS256',
                 id_es => 'by id, ES256', idmax => "by id, $E{MAXCLIENTS} clients");
sub figure_row {
    my ($db, $base, $route, $label, $s, $tw) = @_;
    my $short = $fig_label{$route} // $label;
    if (my $w = write_route($route)) {
        my ($limit) = grep { defined }
            map { stat_of($db, $route, $_) } 'pgbench', sort grep { /^loop\d+$/ } keys %{ $runs{$db}{$route} };
        push @{ $fig_writes{$base} }, [ sprintf('%s, %d', $w->{op}, $w->{clients}),
                                        $s->{rps}, $limit ? $limit->{rps} : undef ];
    } elsif ($tw && !$token_row{$route}) {
        push @{ $fig_reads{$base} }, [ $short, $s->{rps}, $tw->{rps}, $s->{p99}, $tw->{p99} ];
    }
}
# One gnuplot index block per database, in @dbs' order; a missing
# figure is gnuplot's "NaN" (no bar).
sub figure_data {
    my ($file, $rows) = @_;
    open my $fh, '>:encoding(UTF-8)', $file or die "$file: $!";
    for my $db (@dbs) {
        print $fh "# $dbname{$db}\n";
        for my $r (@{ $rows->{$db} || [] }) {
            my ($label, @v) = @$r;
            print $fh join("\t", qq("$label"), map { defined && /^[\d.]+$/ ? $_ : 'NaN' } @v), "\n";
        }
        print $fh "\n\n";
    }
    close $fh or die "$file: $!";
}

my @table;
push @table, '| Route | DB | req/s | p50 ms | p99 ms | static req/s | vs static | instr/req (static) | Targets |';
push @table, '|---|---|--:|--:|--:|--:|--:|--:|---|';
my @shipped_table = @table[0, 1];
for my $db (@dbs, map { "shipped-$_" } @dbs) {
    # The shipped rows: their own table, their database's name and meta.
    my ($shipped, $base) = $db =~ /^(shipped-)?(.*)$/;
    my $rows = $shipped ? \@shipped_table : \@table;
    my %dbname = (%dbname, $db => $dbname{$base});
    my $m = $meta{$base} || {};
    for my $route (@order, write_routes($db)) {
        my $label = $label{$route} // write_label($route);
        if ($route eq 'gzip') {
            $label .= ' (response gzip: ' . ($m->{gzip} // 'n/a') . ')';
        }
        my $s = stat_of($db, $route, 'mod');
        if ($route eq 'intro' && !$s && !$shipped && defined $m->{intro_skipped}) {
            push @$rows, "| $label | $dbname{$db} | n/a | n/a | n/a | n/a | n/a | n/a | skipped: $m->{intro_skipped} |";
            next;
        }
        if ($route eq 'r304' && !$s) {
            # Only where the GET rows ran (not under BENCH_ONLY).
            next unless stat_of($db, 'all', 'mod');
            push @$rows, "| $label | $dbname{$db} | n/a | n/a | n/a | n/a | n/a | n/a | n/a: the server sent no ETag |";
            next;
        }
        next unless $s;
        my $tw = stat_of($db, $twin_of{$route} // $route, 'twin');
        my @t;
        my $ratio = $tw && $tw->{rps} ? $s->{rps} / $tw->{rps} : undef;
        my ($instr, $tinstr) = ($cg{$db}{$route}{mod}, $cg{$db}{$route}{twin});
        my $icell = 'n/a';
        if (my $w = write_route($route)) {
            push @t, write_targets($db, $base, $route, $w, $s);
            $ratio = undef;
        } elsif ($token_row{$route}) {
            push @t, token_targets($db, $route, $s, $m);
            # Not a target: instructions against the HS256 run's, which
            # the shared machine's noise does not move.
            my ($i, $hi) = ($cg{$db}{$route}{mod}, $cg{$db}{$route}{hs256});
            if (defined $i && defined $hi && $hi > 0) {
                $icell = sprintf('%s (HS256 %s)', num($i), num($hi));
                push @t, sprintf('not a target: instructions %s of HS256\'s (%s%s a request)', x($i / $hi),
                                 $i >= $hi ? '+' : '', num($i - $hi));
            }
        } else {
            my $min = $shipped ? $min_ratio_shipped{$base}
                    : $route eq 'r304' ? $min_ratio_304{$db} : $min_ratio{$db};
            push @t, sprintf('req/s ≥ %sx static: %s',
                             $min == int($min) ? sprintf('%.1f', $min) : $min,
                             defined $ratio ? verdict($ratio >= $min) : 'n/a');
            if ($tw) {
                my $pr = $tw->{p99} ? $s->{p99} / $tw->{p99} : undef;
                push @t, sprintf('p99 ≤ 2x static (%s): %s', x($pr), defined $pr ? verdict($pr <= 2) : 'n/a');
            }
            if (defined $instr && defined $tinstr && $tinstr > 0) {
                my $lim = $route eq 'r304' ? 1.5 : 2;
                my $ir = $instr / $tinstr;
                $icell = sprintf('%s (%s)', num($instr), num($tinstr));
                push @t, sprintf('instr ≤ %sx static (%s): %s', $lim, x($ir), verdict($ir <= $lim));
            }
            if ($route eq 'id_rs' || $route eq 'id_es') {
                my $hs = stat_of($db, 'id', 'mod');
                my $r = $hs && $hs->{rps} ? $s->{rps} / $hs->{rps} : undef;
                push @t, sprintf('within 10%% of HS256 (%s): %s', x($r), defined $r ? verdict($r >= 0.9) : 'n/a');
            }
        }
        # What one PostgreSQL primary carries per GET (issue 19): the
        # threads of a process share the catalog version's reads.
        if (defined $s->{spr} && !write_route($route)) {
            push @t, sprintf('statements/req ≤ 0.25 (%.3f): %s', $s->{spr},
                             verdict($s->{spr} <= 0.25));
        }
        push @t, sprintf('answers not 2xx/3xx: %d (target 0): %s', $s->{non2xx},
                         verdict($s->{non2xx} == 0));
        push @notes, sprintf('%s on %s: %d requests got no answer (wrk socket errors: '
                             . 'connections closed or reset; the static twin and the '
                             . 'neighbour rows see them too).',
                             $label . ($shipped ? ' (shipped configuration)' : ''),
                             $dbname{$db}, $s->{sockerr}) if $s->{sockerr};
        figure_row($db, $base, $route, $label, $s, $tw) unless $shipped;
        push @$rows, sprintf('| %s | %s | %s | %s | %s | %s | %s | %s | %s |', $label, $dbname{$db},
            num($s->{rps}), ms($s->{p50}), ms($s->{p99}),
            $tw ? num($tw->{rps}) : 'n/a', x($ratio), $icell, join('; ', @t));
    }
}

my @memory;
for my $db (@dbs) {
    my $m = $meta{$db} || {};
    next unless defined $m->{rss_before};
    my ($warm, $nb, $na, $common) = split ' ', $m->{rss_children} // '0 0 0 0';
    $common //= $warm;
    if ($m->{rss_before}) {
        my $g = 100 * ($m->{rss_after} - $m->{rss_before}) / $m->{rss_before};
        push @memory, sprintf('- %s: httpd children that served the whole warm-up (%d) RSS %s kB before, %s kB after %s requests: %+.1f%% (target < 5%%: %s)%s',
            $dbname{$db}, $warm, num($m->{rss_before}), num($m->{rss_after}), num($m->{rss_requests}),
            $g, verdict($g < 5),
            ($nb != $warm || $na != $warm) ? " (children before/after: $nb/$na)" : '');
    }
    else {
        push @memory, sprintf('- %s: no httpd child served the whole warm-up (children before/after: %d/%d): %s',
            $dbname{$db}, $nb, $na, verdict(0));
    }
    if ($common != $warm && $m->{rss_all_before}) {
        push @memory, sprintf('- %s: all %d children alive before and after: %s kB, %s kB (%+.1f%%); a child the MPM started during the warm-up was still filling its cache and pool',
            $dbname{$db}, $common, num($m->{rss_all_before}), num($m->{rss_all_after}),
            100 * ($m->{rss_all_after} - $m->{rss_all_before}) / $m->{rss_all_before});
    }
    my ($alive, $ra, $rg) = split ' ', $m->{rss_again} // '0 0 0';
    if ($alive && $ra) {
        push @memory, sprintf('- %s: then another %s requests, the %d children alive throughout: %s kB to %s kB, %+.1f%% (not a target: growth that stops was warm-up, growth that goes on is a leak)',
            $dbname{$db}, num($E{RSS_N}), $alive, num($ra), num($rg), 100 * ($rg - $ra) / $ra);
    }
    my $bad = ($m->{rss_non2xx} // 0) + ($m->{rss_non2xx_again} // 0);
    push @memory, sprintf('- %s: answers not 2xx/3xx during the memory runs: %d (target 0: %s)',
        $dbname{$db}, $bad, verdict($bad == 0))
        if defined $m->{rss_non2xx};
    push @notes, "Memory run on $dbname{$db}: $m->{rss_sockerr} requests got no answer (wrk socket errors)." if $m->{rss_sockerr};
}
for my $db (@dbs) {
    my $m = $meta{$db} || {};
    push @notes, "$dbname{$db}: the server's error_log has $m->{errors} lines at level error or worse." if $m->{errors};
    push @notes, "$dbname{$db}: the gzip body did not inflate to GET all's body." if $m->{gzip_mismatch};
    my $e = ($meta{"shipped-$db"} || {})->{errors};
    push @notes, "$dbname{$db}, shipped configuration: the server's error_log has $e lines at level error or worse." if $e;
}

my $quick = $E{QUICK} ? ' (quick smoke run: BENCH_QUICK=1; not for comparing)' : '';
my $rss_n = num($E{RSS_N});
print <<"EOF";
# Benchmarks

Written by `make bench` (t/bench/); do not edit by hand, run it again.

- Command: `$E{COMMAND}`$quick
- Date: $E{DATE}; run time $E{SECONDS} s
- Machine: $E{MACHINE}
- Software: $E{SOFTWARE}
- Module: built from $E{REV}

Each route is measured against its **static twin**: the exact bytes of the
response, saved as a file and served by the same httpd (event MPM,
t/bench/httpd.conf) in the same run. Figures are medians of $E{ROUNDS}
alternating round(s) of `wrk -t1 -c$E{CONNS} -d$E{DUR}s --latency` with
keep-alive and a bearer token (`-c$E{MAXCLIENTS}`, the server's
MaxRequestWorkers, for the row that says so, measured after the others
so that no row follows the children it leaves to retire); the module
goes first in odd rounds, its twin in even ones; req/s counts 2xx/3xx responses only (any
other answer counts against a target of its row; requests wrk got no
answer for are listed under Notes); "vs static" is req/s over the twin's
req/s.
Instructions are userland instructions per request under callgrind
(`apache2 -X`, $E{CG_WARM} warm-up requests, then $E{CG_N} counted, on
keep-alive connections). Data: t/bench/bench-lessons.sql (102 lessons);
the databases keep their durable defaults (SQLite WAL, synchronous FULL;
PostgreSQL fsync and synchronous_commit on).

EOF
if ($E{ONLY} eq 'lease' || $E{ONLY} eq 'lease-writes') {
    # make bench BENCH_ONLY=lease (or lease-writes): its rows alone.
    lease_report();
    printf "Targets: %d met, %d missed.\n", $met, $missed;
    print "\nNotes:\n\n", join("\n", map { "- $_" } @notes), "\n" if @notes;
    exit 0;
}
if ($E{FIGURES}) {
    figure_data("$E{FIGURES}/reads.dat", \%fig_reads);
    figure_data("$E{FIGURES}/writes.dat", \%fig_writes);
    # The databases' names, in the blocks' order, for figures.gp's titles.
    open my $fh, '>', "$E{FIGURES}/dbs" or die "$E{FIGURES}/dbs: $!";
    print $fh join(' ', map { $dbname{$_} } @dbs), "\n";
    close $fh or die "$E{FIGURES}/dbs: $!";
    print <<"EOF";
The GET rows below as a picture (t/bench/figures.gp, drawn by the same
run): req/s and p99 of each route, the module's bar beside its static
twin's, and over each module bar its req/s over the twin's; the table
gives each row's targets.

![req/s and p99 ms of each GET route against its static twin, per database](images/bench-reads.png)

EOF
}
print join("\n", @table), "\n\n";
if ($E{FIGURES}) {
    print <<"EOF";
The write rows as a picture: the module's writes/s beside what the
database alone does with the same statement (PostgreSQL: pgbench on as
many connections; SQLite: the bare loop, one writer against 8 clients and
8 writers against 32, for creates only), and over each module bar its
share of the database alone; the table gives each row's targets.

![writes/s of each write row against the database alone, per database](images/bench-writes.png)

EOF
}
print <<"EOW";
Writes (POST create, PUT update) run at the client count their row names
(`wrk -t1 -cN`, t/bench/wrk-write.lua's bodies), each round against the
database's own speed for the same statement: on PostgreSQL `pgbench -cN
-j2 -M prepared` running the statement named in the row, printed from the
module's own tables (build/bench/statement, t/bench/statement.c) with the
same values, and checked against what pg_stat_statements shows the module
ran; on SQLite a bare loop of the module's INSERT (build/bench/sqlite-loop,
t/bench/sqlite-loop.c: prepared once, one transaction a row with the same
durability), one writer against 8 clients and 8 writers, each with its own
connection, taking turns, against 32 (all rows over the wall time; left to
SQLite's lock, 8 writers are far slower than one).

The token rows (t/bench/token-rows.sh), once, on the first database,
each against the same GET with an HS256 token on the same server in the
same rounds: **certificate-bound**: a TLS virtual host (mod_ssl,
`SSLVerifyClient optional_no_ca`) and a self-signed client certificate
on every connection; the row's section has `LessonsJWTCertBound
required` and its token a `cnf` `x5t#S256` of that certificate; its HS256
run is a section of the same virtual host with the same key and no
binding, a token without `cnf`, the same certificate on the same kind of
keep-alive connections: the ratio is the binding check's cost. Both are
driven by build/bench/tls-load (t/bench/tls-load.c: wrk's measurement,
one thread, $E{CONNS} keep-alive connections, with a client certificate,
which wrk cannot send); wrk's own figure for the HS256 route over TLS
without a certificate is given beside the row as a check on that client.
**Introspected (cached)**: an opaque token at a section with
`LessonsJWTIntrospect` and no key (every token asked about) against the
test provider (t/idp/idp.js, over TLS) with `LessonsJWTIntrospectCacheMax
3600`, so that each process asks at its first requests and serves the
rest from its cache; its HS256 run is GET by id on the same server with
the same wrk. The provider's count of introspection requests is read
after the warm-up and after the rounds: at least 99.9% of the row's
requests answered from the cache is a target (each process asks at its
first requests, once for each thread waiting then). Without node or
make idp-deps' modules the row says skipped. Target for both: req/s
within 10% of HS256 (≥ 0.90x). Their instructions per request (under
callgrind, as above; over TLS the warm-up and the counted requests on
one connection, so that no handshake is counted) are given against
their HS256 runs', not as a target.

EOW

# Issue 45: the configuration a Debian admin gets.
if (@shipped_table > 2) {
    my $m = $meta{$dbs[0]} || {};
    my $ka = $m->{shipped_keepalive} // 'n/a';
    my $wk = $m->{shipped_workers} // 'n/a';
    my $dbd = $m->{shipped_dbd} || "none: mod_dbd's defaults (DBDMin 0, DBDKeep 2, DBDMax 10 per process)";
    print <<"EOT";
**The configuration a Debian admin gets** (t/bench/shipped.sh): this
machine's `/etc/apache2/apache2.conf` and `mpm_event.conf` as Debian
ships them (`MaxKeepAliveRequests $ka`, KeepAliveTimeout 5;
ThreadsPerChild/MaxRequestWorkers $wk), the modules, confs and site a
fresh `apt-get install apache2` enables (mod_deflate, mod_status,
mod_reqtimeout, the default site's access log), `a2enmod lessons` and
`a2enconf lessons-api` with conf/lessons-api.conf as shipped but for its
key and database paths (PostgreSQL's lines appended as README's
production guide does); DBD pool: $dbd. The twins are served by that
server with EnableSendfile On and EnableMMAP Off, the fastest this machine
has; Debian leaves httpd's EnableSendfile Off and EnableMMAP On. Same
wrk, rounds and order as above; each client's connection ends after its
first request and $ka more, as a browser's or a proxy's does on this
server.
Targets: every GET route ≥ 1.0x its twin on SQLite, ≥ 0.95x on PostgreSQL.

EOT
    print join("\n", @shipped_table), "\n\n";
    # What Debian's MaxKeepAliveRequests costs (README's production page).
    my @ka;
    for my $db (@dbs) {
        for my $route (qw(all id)) {
            my ($m100, $m0) = map { stat_of($_, $route, 'mod') } "shipped-$db", "shipped0-$db";
            my ($t100, $t0) = map { stat_of($_, $route, 'twin') } "shipped-$db", "shipped0-$db";
            next unless $m100 && $m0 && $t100 && $t0 && $m100->{rps} && $t100->{rps} && $t0->{rps};
            push @ka, sprintf('| %s | %s | %s | %s | %+.0f%% | %s | %s | %+.0f%% | %s |',
                $label{$route}, $dbname{$db}, num($m100->{rps}), num($m0->{rps}),
                100 * ($m0->{rps} / $m100->{rps} - 1), num($t100->{rps}), num($t0->{rps}),
                100 * ($t0->{rps} / $t100->{rps} - 1), x($m0->{rps} / $t0->{rps}));
        }
    }
    if (@ka) {
        print "The same server with `MaxKeepAliveRequests 0` (connections kept for as\n"
            . "long as the client keeps them; KeepAliveTimeout still ends idle ones),\n"
            . "the module and its twin, same rounds:\n\n"
            . "| Route | DB | module, $ka | module, 0 | gain | static, $ka | static, 0 | gain | vs static at 0 |\n"
            . "|---|---|--:|--:|--:|--:|--:|--:|--:|\n"
            . join("\n", @ka) . "\n\n";
    }
}

# The read-lease rows (issue 56, t/bench/lease-rows.sh): LessonsDBLease
# off against on, on PostgreSQL.  The leases' statements of a run are
# META lease_stmts (by text: pg_statements_split in bench.sh); a
# run's figure is the median over its rounds of each round's own.
sub lease_median {
    my ($db, $route, $key) = @_;
    my $m = $meta{$db} || {};
    return median(map { $key->($m, $_) } grep { $_->{n} } @{ $runs{$db}{$route}{mod} || [] });
}
sub lease_spr {
    my ($db, $route, $key) = @_;
    return lease_median($db, $route, sub {
        my ($m, $r) = @_;
        my $l = $m->{ $key->($r->{round}) };
        return defined $l && $l =~ /^\d+$/ ? $l / $r->{n} : ();
    });
}
sub lease_report {
    my $lm = $meta{'lease-pgsql'} or return;
    my $L = $lm->{lease_seconds};
    my $nw = $lm->{lease_write_servers} // 'n/a';
    my (@srv, @shp, @wr);
    for my $n (split ' ', $lm->{lease_servers} // '') {
        for my $mode (qw(off on)) {
            my $route = "servers$n$mode";
            my $s = stat_of('lease-pgsql', $route, 'mod') or next;
            my $lspr = lease_spr('lease-pgsql', $route, sub { "${route}_lease_stmts_$_[0]" });
            my $lps = lease_median('lease-pgsql', $route, sub {
                my ($m, $r) = @_;
                # Over the time they were counted (the wrks' and the
                # reads' around them).
                my $l = $m->{"${route}_lease_stmts_$r->{round}"};
                my $ms = $m->{"${route}_window_ms_$r->{round}"};
                return defined $l && $l =~ /^\d+$/ && $ms ? $l / ($ms / 1000) : ();
            });
            my $vl = lease_median('lease-pgsql', $route, sub {
                my ($m, $r) = @_;
                my ($st, $le) = split ' ', $m->{"${route}_versions_$r->{round}"} // '';
                return defined $le && $st + $le > 0 ? $le / ($st + $le) : ();
            });
            my @t;
            if ($mode eq 'on') {
                push @t, sprintf('statements/GET ≤ 0.01 (%s): %s',
                                 defined $s->{spr} ? sprintf('%.4f', $s->{spr}) : 'n/a',
                                 defined $s->{spr} ? verdict($s->{spr} <= 0.01) : 'n/a');
            } else {
                push @t, 'not a target: the lease off (as without the directive)';
            }
            push @t, sprintf('answers not 2xx/3xx: %d (target 0): %s', $s->{non2xx}, verdict($s->{non2xx} == 0));
            push @notes, sprintf('Read leases, %d server(s), lease %s: %d requests got no answer (wrk socket errors).',
                                 $n, $mode, $s->{sockerr}) if $s->{sockerr};
            push @srv, sprintf('| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |', $n,
                $mode eq 'on' ? "$L s" : 'off', num($s->{rps}), ms($s->{p99}),
                defined $s->{spr} ? sprintf('%.4f', $s->{spr}) : 'n/a',
                defined $s->{spr} && defined $lspr ? sprintf('%.4f', $s->{spr} - $lspr) : 'n/a',
                defined $lspr ? sprintf('%.4f', $lspr) : 'n/a',
                defined $lps ? sprintf('%.1f (%s)', $lps, $mode eq 'on' && $L ? sprintf('%.1f', 3 * $n / $L) : 0) : 'n/a',
                defined $vl ? sprintf('%.2f%%', 100 * $vl) : 'n/a', join('; ', @t));
        }
    }
    for my $route (qw(id r304)) {
        for my $mode (qw(off on)) {
            my $db = "lease$mode-shipped-pgsql";
            my $s = stat_of($db, $route, 'mod') or next;
            my $tw = stat_of($db, $route, 'twin');
            my $ratio = $tw && $tw->{rps} ? $s->{rps} / $tw->{rps} : undef;
            my $lspr = lease_spr($db, $route, sub { "lease_stmts_${route}_$_[0]" });
            my @t;
            if ($mode eq 'on') {
                push @t, sprintf('req/s ≥ 1.0x static: %s', defined $ratio ? verdict($ratio >= 1.0) : 'n/a');
                push @t, sprintf('statements/req ≤ 0.01: %s', defined $s->{spr} ? verdict($s->{spr} <= 0.01) : 'n/a');
            } else {
                push @t, 'not a target: the lease off';
            }
            push @t, sprintf('answers not 2xx/3xx: %d (target 0): %s', $s->{non2xx}, verdict($s->{non2xx} == 0));
            push @shp, sprintf('| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |', $label{$route},
                $mode eq 'on' ? "$L s" : 'off', num($s->{rps}), ms($s->{p50}), ms($s->{p99}),
                $tw ? num($tw->{rps}) : 'n/a', x($ratio),
                defined $s->{spr} ? sprintf('%.4f', $s->{spr}) : 'n/a',
                defined $lspr ? sprintf('%.4f', $lspr) : 'n/a', join('; ', @t));
        }
    }
    for my $route (write_routes('leaseon-pgsql')) {
        my ($off, $on) = map { stat_of("lease$_-pgsql", $route, 'mod') } qw(off on);
        next unless $off && $on;
        # Today's baseline: pgbench in the lease-off rounds (in the
        # lease-on ones its writes are acknowledged by the holders too).
        my ($pg, $pgon) = map { stat_of("lease$_-pgsql", $route, 'pgbench') } qw(off on);
        my $stmt = ($meta{pgsql} || {})->{ $route =~ /^update/ ? 'stmt_update' : 'stmt_create' };
        my ($a50, $a99) = ($on->{p50} - $off->{p50}, $on->{p99} - $off->{p99});
        my $pr = $pg && $pg->{rps} ? $on->{rps} / $pg->{rps} : undef;
        my $or = $off->{rps} ? $on->{rps} / $off->{rps} : undef;
        my $lspr = lease_spr('leaseon-pgsql', $route, sub { "lease_stmts_${route}_$_[0]" });
        my @t = (sprintf('added p50 ≤ 1 ms: %s', verdict($a50 <= 1)),
                 sprintf('added p99 ≤ 5 ms: %s', verdict($a99 <= 5)),
                 sprintf('≥ 0.7x pgbench running `%s` in the lease-off rounds (%s tps, %s; in the lease-on rounds %s tps): %s',
                         $stmt // 'n/a', $pg ? num($pg->{rps}) : 'n/a', x($pr),
                         $pgon ? num($pgon->{rps}) : 'n/a', defined $pr ? verdict($pr >= 0.7) : 'n/a'),
                 sprintf('writes/s not below the lease off (≥ 0.9x, within noise; %s): %s',
                         x($or), defined $or ? verdict($or >= 0.9) : 'n/a'));
        push @t, sprintf('answers not 2xx/3xx: %d (target 0): %s', $off->{non2xx} + $on->{non2xx},
                         verdict($off->{non2xx} + $on->{non2xx} == 0));
        push @wr, sprintf('| %s | %s | %s / %s | %s | %s / %s | %+.2f / %+.2f | %s / %s | %s | %s |', write_label($route),
            num($off->{rps}), ms($off->{p50}), ms($off->{p99}), num($on->{rps}), ms($on->{p50}), ms($on->{p99}),
            $a50, $a99, map({ defined $_->{spr} ? sprintf('%.2f', $_->{spr}) : 'n/a' } $off, $on),
            defined $lspr ? sprintf('%.2f', $lspr) : 'n/a', join('; ', @t));
    }
    # The lease's own time per write, from the written server's
    # histogram over the lease-on rounds (t/bench/lease-rows.sh,
    # lease_write_ways): what the lease adds to a write, without the
    # noise of two runs' tails.
    my $wm = $meta{'leaseon-pgsql'} || {};
    my @les = sort { $a <=> $b } grep { $_ ne '+Inf' } map { /^wait_(.+)$/ ? $1 : () } keys %$wm;
    my $wall = $wm->{'wait_+Inf'};
    my $own = '';
    if (@les && $wall) {
        my $within = sub { my ($s) = @_; my ($le) = grep { $_ >= $s - 1e-12 } @les;
                           defined $le ? $wm->{"wait_$le"} / $wall : undef };
        my ($w1, $w5) = map { $within->($_) } 0.001, 0.005;
        $own = sprintf("The lease's own time per write (`lessons_db_lease_write_wait_seconds`, the written server's %s writes of the lease-on rounds): %s. "
                       . "Added p50 ≤ 1 ms, by it: %s; added p99 ≤ 5 ms, by it: %s.\n\n",
                       num($wall), join(', ', map { sprintf('≤ %s ms %.2f%%', 1000 * $_, 100 * $wm->{"wait_$_"} / $wall) } @les),
                       defined $w1 ? verdict($w1 >= 0.5) : 'n/a', defined $w5 ? verdict($w5 >= 0.99) : 'n/a');
    }
    for my $db (map { ("lease$_-shipped-pgsql", "lease$_-pgsql") } qw(off on)) {
        my $e = ($meta{$db} || {})->{errors};
        push @notes, "Read leases, $db: the server's error_log has $e lines at level error or worse." if $e;
    }
    return unless @srv || @shp || @wr;
    my $missing = $lm->{lease_missing} ? " **Not every server held a lease when measured ($lm->{lease_missing}).**" : '';
    print <<"EOT";
**Read leases** (issue 56, [scaling.md](scaling.md#read-leases-gets-with-no-statement-issue-56),
t/bench/lease-rows.sh): each row with `LessonsDBLease` off (as without
the directive) and on (`LessonsDBLease $L`), on PostgreSQL, in
$E{ROUNDS} round(s) of $E{DUR} s; a server with the lease is measured
once its holder has a live lease row.$missing Statements are
pg_stat_statements' count over the run, split by their text: the
leases' are the holder's renewals, checks, acknowledgements and its
connection's set-up (every text that names `lessons_leases`, and the
SETs and LISTENs), the GETs' own the rest. Versions from the lease:
lessons-metrics' `lessons_catalog_versions_total{source="lease"}` over
both sources in the run. The leases' statements a second are counted
from the counters' reset to their reading (a little longer than the
wrks); predicted with no write: a renewal every third of the lease on
each server (scaling.md: 3/L a second per server).

GET by id on N servers at once (the many-servers row's method: its own
`wrk -t1 -c$E{CONNS}` for each):

| Servers | Lease | GETs/s (all) | p99 ms (worst) | statements/GET | GETs' own | leases' | leases' statements/s (predicted) | versions from the lease | Targets |
|--:|---|--:|--:|--:|--:|--:|--:|--:|---|
EOT
    print join("\n", @srv), "\n\n";
    if (@shp) {
        print "GET by id and the 304 against their static twins on the shipped configuration (as above), with `LessonsDBLease $L` added for \"on\":\n\n"
            . "| Route | Lease | req/s | p50 ms | p99 ms | static req/s | vs static | statements/req | leases' | Targets |\n"
            . "|---|---|--:|--:|--:|--:|--:|--:|--:|---|\n"
            . join("\n", @shp) . "\n\n";
    }
    if (@wr) {
        my $apart = ($lm->{peers_apart} // 0) eq '1'
            ? ' The other servers ran SCHED_FIFO (`BENCH_PEERS_APART=1`), standing in for hosts of their own: a datagram is answered as soon as it comes, but their work still takes this machine\'s CPUs.'
            : '';
        print "Writes on one of $nw servers (`wrk --latency`, t/bench/wrk-write.lua, as the write rows above), each of the others holding a lease too when on, so every write waits for the other " . ($nw =~ /^\d+$/ ? $nw - 1 : 'n/a') . " servers' acknowledgements; each round starts the servers afresh, lease off then on (on first in even rounds); pgbench of the same statement in the same rounds.$apart\n\n"
            . "| Write | lease off req/s | p50 / p99 ms | lease on req/s | p50 / p99 ms | added p50 / p99 ms | statements/write off / on | leases' (on) | Targets |\n"
            . "|---|--:|--:|--:|--:|--:|--:|--:|---|\n"
            . join("\n", @wr) . "\n\n" . $own;
    }
}
# A side-by-side table of two runs of one request, "within noise" of
# each other (>= 0.9x): its intro, its column names, the row's label.
sub pair_table {
    my ($intro, $cols, $label, $a, $b) = @_;
    return unless $a && $b;
    my $r = $b->{rps} ? $a->{rps} / $b->{rps} : undef;
    print $intro, "\n\n| $cols | ratio | Target |\n|---|---|---|---|---|\n";
    printf "| %s | %s | %s | %s | within noise (≥ 0.9x): %s |\n\n", $label,
        num($a->{rps}), num($b->{rps}), x($r), defined $r ? verdict($r >= 0.9) : 'n/a';
}

# The rest of the server: a neighbour location, with and without us.
pair_table("The rest of the server (not the API): a Basic-auth (bcrypt) directory\n"
           . "listing with Debian's DirectoryIndex list, on the same httpd with the\n"
           . "module loaded and the API configured, and without either:",
           'Neighbour | with mod_lessons req/s | without req/s',
           'GET /neighbour/ (Basic auth, listing)',
           stat_of('neighbour', 'listing', 'with'),
           stat_of('neighbour', 'listing', 'without'));
# The static path itself: the bench server's twin against a minimal
# httpd serving the same file (t/bench/minimal.conf).
pair_table("The static twin itself: GET all's twin on the bench server against a\n"
           . "minimal httpd serving the same file (t/bench/minimal.conf: the same MPM\n"
           . "and file settings, nothing else), same wrk and header; both with\n"
           . "EnableSendfile On and EnableMMAP Off (t/bench/httpd.conf says why):",
           'Static twin | bench server req/s | minimal httpd req/s',
           'GET /static/all',
           stat_of('sanity', 'all', 'bench'), stat_of('sanity', 'all', 'minimal'));
pair_table("The same twin against that minimal httpd writing the bench server's\n"
           . "access log (the same LogFormat and CustomLog: one write a request, which\n"
           . "every API row pays too); what is left is what the bench server's other\n"
           . "modules and mod_lessons add to a request that is not the API's:",
           'Static twin | bench server req/s | minimal httpd + access log req/s',
           'GET /static/all',
           stat_of('sanity', 'all', 'bench'), stat_of('sanity', 'all', 'minimal-log'));
# Many servers, one database (issue 19; docs/scaling.md's prediction).
for my $db (@dbs) {
    my $s = stat_of($db, 'servers', 'mod') or next;
    my $m = $meta{$db} || {};
    my @rounds = grep { defined $m->{"servers_pgcpu_$_"} } 1 .. ($E{ROUNDS} || 1);
    my $pgcpu = median(map { $m->{"servers_pgcpu_$_"} } @rounds);
    my $procs = median(map { $m->{"servers_procs_$_"} } @rounds);
    my $window = ($m->{servers_window_us} || 2000) / 1e6;
    my $reads = defined $s->{spr} ? $s->{spr} * $s->{rps} : undef;
    # Each version read of a process comes a window after its last, or
    # is sent early for at least 4 requests (lessons_flight): at most
    # P / window + GETs / 4 reads a second in all, and never more than
    # one per GET.
    my $ceiling = $procs ? $procs / $window + $s->{rps} / 4 : undef;
    $ceiling = $s->{rps} if defined $ceiling && $ceiling > $s->{rps};
    my $pred = $ceiling && $s->{rps} ? $ceiling / $s->{rps} : undef;
    my $wms = sprintf('%g', $window * 1000);
    my @t;
    push @t, sprintf('statements/GET ≤ 0.25 (%s): %s', defined $s->{spr} ? sprintf('%.3f', $s->{spr}) : 'n/a',
                     defined $s->{spr} ? verdict($s->{spr} <= 0.25) : 'n/a');
    push @t, sprintf('version reads/s within the prediction (%s ≤ %s): %s', num($reads), num($ceiling),
                     defined $reads && $ceiling ? verdict($reads <= $ceiling * 1.05) : 'n/a');
    push @t, sprintf('answers not 2xx/3xx: %d (target 0): %s', $s->{non2xx}, verdict($s->{non2xx} == 0));
    push @notes, sprintf('%d servers on %s: %d requests got no answer (wrk socket errors).',
                         $m->{servers}, $dbname{$db}, $s->{sockerr}) if $s->{sockerr};
    print <<"EOT";
Many Apache servers, one database ([scaling.md](scaling.md)): $m->{servers} separate httpds
(this server's configuration, each with its own processes and pools) on
the one $dbname{$db} database, each driven by its own `wrk -t1 -c$E{CONNS}`
on GET by id at the same time; medians of $E{ROUNDS} round(s) of $E{DUR} s.
Statements are PostgreSQL's own count (pg_stat_statements); its CPU share
is the postmaster's and backends' CPU time over all CPU time of the
machine ($E{CPUS} CPUs, shared with the httpds and the wrks). The
prediction: each version read of a process comes LessonsDBShareWindow
($wms ms) after its last, or goes early for at least 4 requests, so P
processes serving G GETs a second send at most P/window + G/4 reads a
second (and no more than G); statements per GET are at most that over G.

| Servers | GETs/s (all) | p99 ms (worst) | httpd processes | statements/GET | version reads/s | predicted at most | PostgreSQL CPU share | Targets |
|--:|--:|--:|--:|--:|--:|--:|--:|---|
EOT
    printf "| %d | %s | %s | %s | %s | %s | %s reads/s (%s/GET) | %s | %s |\n\n", $m->{servers}, num($s->{rps}),
        ms($s->{p99}), num($procs), defined $s->{spr} ? sprintf('%.3f', $s->{spr}) : 'n/a',
        num($reads), num($ceiling), defined $pred ? sprintf('%.3f', $pred) : 'n/a',
        defined $pgcpu ? sprintf('%.1f%%', 100 * $pgcpu) : 'n/a', join('; ', @t);
}
lease_report();
print "Memory (httpd children, VmRSS, on a server started for it, after a warm-up with every GET route):\n\n",
      join("\n", @memory), "\n\n" if @memory;
printf "Targets: %d met, %d missed.\n", $met, $missed;
print "\nNotes:\n\n", join("\n", map { "- $_" } @notes), "\n" if @notes;
