#!/usr/bin/perl
# The monitoring the package ships, checked against the module (issue 57
# §4), in seconds, by make test:
#
#   rules       promtool check rules conf/prometheus/lessons-alerts.yml
#   tests       promtool test rules t/promtool/lessons-alerts.test.yml;
#               and each alert of the rules has a case there where it
#               fires and one where it does not
#   dashboard   conf/grafana/lessons-dashboard.json is JSON, its panels
#               ask the dashboard's Prometheus variable, and its queries
#               are PromQL (promtool checks them as recording rules,
#               Grafana's variables replaced)
#   drift       every series the rules, their tests and the dashboard
#               name is one the module exports, with labels it has and
#               label values it gives; the exposition is the module's
#               own (build/monitor/exposition prints it from the code the
#               lessons-metrics handler runs, or t/api/metrics.t gives
#               the running server's answer).  Recording rules (names
#               with a colon) are the rules file's, with the labels they
#               keep.  job and instance are Prometheus's, and the keys
#               families' source (a keys URL) is the admin's: their
#               values are free.
#   docs        docs/operations.md names every alert and recording rule
#
#   t/promtool/check.pl PROMTOOL EXPOSITION
#   t/promtool/check.pl --drift [--absent PREFIX]... EXPOSITION
#               the drift check alone; series whose names begin with
#               PREFIX may be missing from EXPOSITION (t/api/metrics.t's
#               server has no LessonsDBLease, so no lessons_db_lease_*)
#
# Prints one "ok"/"not ok" line per check with what is wrong, and last
# "N passed, N failed"; exits 1 when a check fails.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../tools";
use File::Temp ();
use JSON::PP ();
use YAML::XS ();
use LessonsChecks;

my $ROOT      = "$FindBin::Bin/../..";
my $RULES     = "$ROOT/conf/prometheus/lessons-alerts.yml";
my $TESTS     = "$FindBin::Bin/lessons-alerts.test.yml";
my $DASHBOARD = "$ROOT/conf/grafana/lessons-dashboard.json";
my $DOCS      = "$ROOT/docs/operations.md";

# Labels whose values are not the module's to give: Prometheus's, and a
# keys URL's (source of lessons_keys*; lessons_catalog_versions_total's
# source is the module's: statement or lease).
sub free_label {
    my ($name, $label) = @_;
    return $label eq 'job' || $label eq 'instance'
        || ($label eq 'source' && $name =~ /\Alessons_keys/);
}
# Labels Prometheus adds to every series it scrapes.
my @TARGET = qw(job instance);
# Words of PromQL that name no series: the binary operators' and the
# aggregations' (an aggregation's by clause may come before its "(").
my %KEYWORD = map { $_ => 1 } qw(and or unless bool offset by without on
    ignoring group_left group_right sum min max avg group stddev stdvar
    count count_values bottomk topk quantile);

my $drift_only = @ARGV && $ARGV[0] eq '--drift' ? shift @ARGV : undef;
my @absent;
while ($drift_only && @ARGV > 1 && $ARGV[0] eq '--absent') {
    shift @ARGV;
    push @absent, shift @ARGV;
}
my $promtool = $drift_only ? undef : shift @ARGV;
my $exposition = shift @ARGV;
die "usage: $0 PROMTOOL EXPOSITION | --drift EXPOSITION\n"
    unless $exposition && ($drift_only || $promtool);

# Runs a command; its output when it failed, else ().
sub run {
    my @cmd = @_;
    my $out = `@{[ join ' ', map { "'$_'" } @cmd ]} 2>&1`;
    return $? == 0 ? () : (split(/\n/, $out), "(exit " . ($? >> 8) . ")");
}

# ---- the exposition: name => { label => { value => 1 } } ----------------
my %exported;
for (split /\n/, slurp($exposition)) {
    next if /\A#/ || !/\S/;
    my ($name, $labels) = /\A([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+\z/
        or die "check: $exposition: not a sample: $_\n";
    $exported{$name} //= {};
    while (($labels // '') =~ /\G,?([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/gc) {
        (my $v = $2) =~ s/\\(.)/$1 eq 'n' ? "\n" : $1/ge;
        $exported{$name}{$1}{$v} = 1;
    }
}
die "check: $exposition: no lessons_ series\n" unless grep /\Alessons_/, keys %exported;

# ---- PromQL, as far as our expressions go -------------------------------
# The selectors of an expression: [ name, [ [label, op, value], ... ] ],
# and the labels its by/without/on/ignoring/group_* clauses name.
sub promql_refs {
    my ($expr) = @_;
    my (@sel, @grouping);
    my $s = $expr;
    while (1) {
        $s =~ /\G\s+/gc;
        last if pos($s) && pos($s) >= length $s;
        last if !length $s;
        if ($s =~ /\G\[[^\]]*\]/gc) { next }                    # a range
        if ($s =~ /\G(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')/gc) { next }
        if ($s =~ /\G([a-zA-Z_:][a-zA-Z0-9_:]*)/gc) {
            my $id = $1;
            my $at = pos($s);
            if ($s =~ /\G\s*\(/gc) {
                if ($id =~ /\A(?:by|without|on|ignoring|group_left|group_right)\z/) {
                    $s =~ /\G([^)]*)\)/gc or die "check: unclosed ( in $expr\n";
                    push @grouping, grep length, map { s/\s//gr } split /,/, $1;
                }
                else {
                    pos($s) = $at;              # a function: its arguments next
                }
                next;
            }
            next if $KEYWORD{$id};
            my @m;
            if ($s =~ /\G\s*\{/gc) {
                while ($s =~ /\G\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?/gc) {
                    push @m, [ $1, $2, $3 =~ s/\\(.)/$1/gr ];
                }
                $s =~ /\G\s*\}/gc or die "check: cannot read the selector of $id in $expr\n";
            }
            push @sel, [ $id, \@m ];
            next;
        }
        if ($s =~ /\G\{/gc) {
            die "check: a selector without a name in $expr\n";
        }
        $s =~ /\G(?:[0-9.]+(?:e[+-]?[0-9]+)?|[-+*\/%^(),<>=!]+)/gci
            or die "check: cannot read " . substr($s, pos($s) // 0, 20) . " in $expr\n";
    }
    return (\@sel, \@grouping);
}

# The recording rules: name => { label => { value => 1 } }, from the
# selectors of its expression, the labels its by clause keeps.
my $rules = eval { YAML::XS::LoadFile($RULES) } // die "check: $RULES: $@";
my (%recorded, @alerts, @recordings);
for my $g (@{ $rules->{groups} }) {
    for my $r (@{ $g->{rules} }) {
        if ($r->{record}) {
            push @recordings, $r->{record};
            my ($sel, $grouping) = promql_refs($r->{expr});
            my %labels;
            for my $l (@$grouping) {
                $labels{$l} //= {};
                for my $s (@$sel) {
                    my $vals = ($exported{ $s->[0] } // {})->{$l} or next;
                    $labels{$l}{$_} = 1 for keys %$vals;
                }
            }
            $recorded{ $r->{record} } = \%labels;
        }
        push @alerts, $r->{alert} if $r->{alert};
    }
}

# What is wrong with one selector, given the series known.
sub selector_problems {
    my ($where, $name, $matchers, $known) = @_;
    my $labels = $known->{$name};
    return () if !$labels && grep { index($name, $_) == 0 } @absent;
    return "$where: $name is not a series the module exports" unless $labels;
    my @p;
    for my $m (@$matchers) {
        my ($l, $op, $v) = @$m;
        next if $l eq '__name__';
        if (!$labels->{$l} && !grep { $_ eq $l } @TARGET) {
            push @p, "$where: $name has no label $l";
            next;
        }
        next if free_label($name, $l) || $v =~ /\$/;   # or Grafana's variables
        my @values = keys %{ $labels->{$l} };
        if ($op eq '=' || $op eq '!=') {
            push @p, "$where: $name\{$l} is never \"$v\" (it is " . join(', ', sort @values) . ")"
                unless $labels->{$l}{$v};
            next;
        }
        for my $alt (split /\|/, $v) {
            if ($alt =~ /\A[a-zA-Z0-9_]+\z/) {
                push @p, "$where: $name\{$l} is never \"$alt\" (it is " . join(', ', sort @values) . ")"
                    unless $labels->{$l}{$alt};
            }
            elsif (!grep { /\A(?:$alt)\z/ } @values) {
                push @p, "$where: $name\{$l=~\"$alt\"} matches none of its values";
            }
        }
    }
    return @p;
}

# Every selector and grouping label of an expression.
sub expr_problems {
    my ($where, $expr) = @_;
    my ($sel, $grouping) = eval { promql_refs($expr) };
    return "$where: $@" unless $sel;
    my %known = (%exported, %recorded);
    my @p = map { selector_problems($where, $_->[0], $_->[1], \%known) } @$sel;
    my %has = map { $_ => 1 } @TARGET;
    for my $s (@$sel) {
        $has{$_} = 1 for keys %{ $known{ $s->[0] } // {} };
    }
    # A series allowed to be absent (--absent) has no labels to know.
    my $excused = grep {
        my $name = $_->[0];
        !$known{$name} && grep { index($name, $_) == 0 } @absent
    } @$sel;
    push @p, map { "$where: no series of it has the label $_" } grep { !$has{$_} } @$grouping
        unless $excused;
    push @p, "$where: names no series" unless @$sel || $expr =~ /\Atime\(\)/;
    return @p;
}

# ---- promtool ------------------------------------------------------------
unless ($drift_only) {
    report('promtool check rules conf/prometheus/lessons-alerts.yml',
           run($promtool, 'check', 'rules', $RULES));
    report('promtool test rules t/promtool/lessons-alerts.test.yml',
           run($promtool, 'test', 'rules', $TESTS));
}

# ---- each alert fires in its tests, and is seen not firing -----------------
my $tests = eval { YAML::XS::LoadFile($TESTS) } // die "check: $TESTS: $@";
{
    my (%fires, %quiet);
    for my $g (@{ $tests->{tests} }) {
        for my $t (@{ $g->{alert_rule_test} // [] }) {
            if (@{ $t->{exp_alerts} // [] }) { $fires{ $t->{alertname} } = 1 }
            else                             { $quiet{ $t->{alertname} } = 1 }
        }
    }
    report('every alert has a case where it fires and one where it does not',
           (map { "$_: no case where it fires" } grep { !$fires{$_} } @alerts),
           (map { "$_: no case where it does not fire" } grep { !$quiet{$_} } @alerts));
}

# ---- the dashboard ---------------------------------------------------------
my $dash = eval { JSON::PP->new->decode(slurp($DASHBOARD)) };
report('conf/grafana/lessons-dashboard.json is JSON', $dash ? () : ($@));
$dash //= {};
my (@queries, @ds_problems);
{
    my @vars = @{ ($dash->{templating} // {})->{list} // [] };
    push @ds_problems, 'no datasource variable of type prometheus'
        unless grep { ($_->{type} // '') eq 'datasource' && ($_->{query} // '') eq 'prometheus' } @vars;
    for my $v (grep { ($_->{type} // '') eq 'query' } @vars) {
        push @queries, [ "variable $v->{name}", ref $v->{query} ? $v->{query}{query} : $v->{query} ];
    }
    my @panels = @{ $dash->{panels} // [] };
    while (my $p = shift @panels) {
        push @panels, @{ $p->{panels} // [] };
        next if ($p->{type} // '') eq 'row';
        my @targets = @{ $p->{targets} // [] };
        push @ds_problems, "panel \"$p->{title}\": no query" unless @targets;
        for my $t ($p, @targets) {
            my $uid = ($t->{datasource} // {})->{uid} // '';
            push @ds_problems, "panel \"$p->{title}\": datasource $uid, not \${datasource}"
                unless $uid eq '${datasource}';
        }
        push @queries, map { [ "panel \"$p->{title}\" $_->{refId}", $_->{expr} ] } @targets;
    }
}
report('the dashboard\'s panels ask its Prometheus variable', @ds_problems);

# Grafana's variables as a query gets them, label_values() as its
# selector: then promtool reads each as a recording rule.
sub grafana_promql {
    my ($q) = @_;
    $q =~ s/\$__rate_interval|\$__interval|\$__range/5m/g;
    $q =~ s/\A\s*label_values\(\s*(.*?)\s*,\s*([a-zA-Z_]+)\s*\)\s*\z/$1/s;
    return $q;
}
unless ($drift_only) {
    my $tmp = File::Temp->new(SUFFIX => '.yml');
    print $tmp YAML::XS::Dump({ groups => [ { name => 'dashboard', rules => [
        map { { record => sprintf('dashboard:query:%d', $_), expr => grafana_promql($queries[$_][1]) } }
            0 .. $#queries ] } ] });
    close $tmp;
    report('the dashboard\'s queries are PromQL (promtool check rules)',
           @queries ? run($promtool, 'check', 'rules', $tmp->filename) : ('no queries'));
}

# ---- drift ---------------------------------------------------------------
{
    my @p;
    for my $g (@{ $rules->{groups} }) {
        for my $r (@{ $g->{rules} }) {
            push @p, expr_problems('rule ' . ($r->{alert} // $r->{record}), $r->{expr});
        }
    }
    report('the rules name only series and label values the module exports', @p);
}
{
    my @p;
    for my $g (@{ $tests->{tests} }) {
        for my $s (@{ $g->{input_series} // [] }) {
            my ($sel) = eval { promql_refs($s->{series}) };
            if (!$sel || @$sel != 1) {
                push @p, "input series $s->{series}: not one series";
                next;
            }
            push @p, selector_problems("input series $s->{series}", $sel->[0][0], $sel->[0][1], \%exported);
        }
        for my $t (@{ $g->{promql_expr_test} // [] }) {
            push @p, expr_problems("expression $t->{expr}", $t->{expr});
        }
    }
    report('the tests\' series are the module\'s, with its labels and values', @p);
}
report('the dashboard\'s queries name only series and label values the module exports',
       map { expr_problems($_->[0], grafana_promql($_->[1])) } @queries);

# ---- the docs name every rule --------------------------------------------
unless ($drift_only) {
    my $docs = slurp($DOCS);
    report('docs/operations.md names every alert and recording rule',
           map { "$_ is not named" } grep { index($docs, "`$_`") < 0 } @alerts, @recordings);
}

checks_done();
