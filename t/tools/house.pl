#!/usr/bin/perl
# The checks that keep the house standing, run by make test:
#
#   circles     the call graph between the module's files (read from the
#               objects' symbols with nm) has no circle; the module
#               record (lessons_module), data every file reads, is not a
#               call and does not count
#   folders     the folders of modules/ (@FOLDERS below) keep their order:
#               a folder's files include and call only its own and those
#               the table lets it use, each of them declared before it,
#               so that no two folders lean on each other in a circle;
#               the httpd-free folders include no httpd header; every
#               #include of ours names its folder
#   merge       every field of lessons_dir_conf and lessons_srv_conf is
#               handled by its merge function, or says in its declaration
#               why not ("not merged")
#   directives  every directive of mod_lessons.c's command table has its
#               entry in the reference (docs/directives.md, "## Name
#               Directive") with the table's context, the reference names
#               no directive the table lacks, and the summary table at the
#               reference's top lists the same directives, each linking
#               to an anchor of the page
#   defaults    where README or a document names a directive and its
#               default in one sentence, the value is the reference's
#               Default row (units converted)
#   log tags    every tag the module logs with LESSONSLOG(n) has its row
#               in docs/operations.md's table of log lines (a row may
#               name several tags), so that an admin can look up any line
#   shares      every file of t/api has its row in
#               t/tools/integration-costs, which names no other, so that
#               make test's shares of the suite stay even
#
#   t/tools/house.pl [--layers] [ROOT [OBJDIR]]
#                                       (defaults: the checkout, build/obj)
#   --layers also prints the call graph between files as layers: each file
#   calls only files of lower layers (layer 0 calls none of ours); and the
#   folders' order.
#
# Prints one "ok"/"not ok" line per check with what is wrong, and last
# "N passed, N failed"; exits 1 when a check fails.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use LessonsChecks;

my $layers = @ARGV && $ARGV[0] eq '--layers' ? shift @ARGV : undef;
my $root = $ARGV[0] // "$FindBin::Bin/../..";
my $objdir = $ARGV[1] // "$root/build/obj";

# ---- the folders of modules/ --------------------------------------------
# Lowest first: each folder may use (include, call) its own files and
# those of the folders it names, all declared above it, so the order has
# no circle by construction.  httpd/ is the glue (mod_lessons.h,
# mod_lessons_*.c, with mod_lessons.c at the top of the tree): it may use
# every folder, and none may use it.  The others are httpd-free: their
# files are lessons_*.[ch], compiled without httpd's headers.
my @FOLDERS = (
    # folder   may use
    [ base  => [] ],                    # pool buffers, digests, JSON, the
                                        # lesson record
    [ ops   => [] ],                    # counters, throttled log lines
    [ keys  => [qw(base)] ],            # where the keys come from
    [ store => [qw(base)] ],            # the database; how threads share it
    [ auth  => [qw(base ops keys)] ],   # a request's token and proof checked
    [ api   => [qw(base store)] ],      # the API's requests and responses
    [ httpd => [qw(base ops keys store auth api)] ],    # the glue
);
my $GLUE = 'httpd';
my %USES = map { $_->[0] => { map { $_ => 1 } @{ $_->[1] } } } @FOLDERS;
# An httpd header: httpd's own include directory (httpd.h, http_*.h,
# ap_*.h, util_*.h, mod_*.h -- mod_lessons.h too --, mpm_*.h, ...).
my $HTTPD_HEADER = qr/\A(?:httpd|os|scoreboard|unixd|heartbeat|cache_common
                         |(?:ap|apache|http|mod|mpm|util)_\w+)\.h\z/x;

# The folder of a file named as the objects name it ("auth/lessons_token.c",
# "mod_lessons.c"): the top's file is the glue's.
sub folder_of {
    my ($file) = @_;
    return $file =~ m{\A(\w+)/} ? $1 : $GLUE;
}

# ---- circles ------------------------------------------------------------
# The call graph between files: {file}{file it calls}{symbol}.  An object
# is named by its source ("auth/lessons_token.c"); one whose source is
# gone (an object of before a file moved) is left out.
my %edge;
my $graph_read;
sub graph {
    return $graph_read if defined $graph_read;
    my @objs;
    my @dirs = ($objdir);
    while (my $d = shift @dirs) {
        opendir my $dh, $d or last;
        for my $e (sort grep { !/\A\./ } readdir $dh) {
            if (-d "$d/$e") { push @dirs, "$d/$e" }
            elsif ($e =~ /\.o\z/) { push @objs, "$d/$e" }
        }
        closedir $dh;
    }
    my (%def, %uses);
    for my $o (@objs) {
        (my $file = substr($o, length($objdir) + 1)) =~ s/\.o\z/.c/;
        next unless -e ($file =~ m{/} ? "$root/modules/$file" : "$root/$file");
        open my $nm, '-|', 'nm', $o or die "house: nm $o: $!\n";
        $uses{$file} //= {};
        while (<$nm>) {
            my ($type, $sym) = /^\s*(?:[0-9a-f]+\s+)?([A-Za-z])\s+(\S+)$/
                or next;
            if ($type eq 'U') { $uses{$file}{$sym} = 1 }
            elsif ($type eq 'T') { $def{$sym} = $file }     # functions only
        }
        close $nm;
    }
    return $graph_read = 0 unless %uses;
    for my $f (keys %uses) {
        for my $sym (keys %{ $uses{$f} }) {
            my $g = $def{$sym};
            next if !defined $g || $g eq $f;
            $edge{$f}{$g}{$sym} = 1;
        }
    }
    return $graph_read = 1;
}

sub circles {
    return ("no objects in $objdir: run make first") unless graph();
    # Tarjan's strongly connected components: a circle is one of two or
    # more files.
    my ($index, @stack, %on, %idx, %low, @sccs) = (0);
    my $visit;
    $visit = sub {
        my ($v) = @_;
        $idx{$v} = $low{$v} = $index++;
        push @stack, $v;
        $on{$v} = 1;
        for my $w (sort keys %{ $edge{$v} || {} }) {
            if (!exists $idx{$w}) {
                $visit->($w);
                $low{$v} = $low{$w} if $low{$w} < $low{$v};
            }
            elsif ($on{$w} && $idx{$w} < $low{$v}) {
                $low{$v} = $idx{$w};
            }
        }
        if ($low{$v} == $idx{$v}) {
            my @scc;
            while (1) {
                my $w = pop @stack;
                $on{$w} = 0;
                push @scc, $w;
                last if $w eq $v;
            }
            push @sccs, [ sort @scc ] if @scc > 1;
        }
    };
    my %files = map { $_ => 1 } keys %edge, map { keys %$_ } values %edge;
    $visit->($_) for grep { !exists $idx{$_} } sort keys %files;
    my @problems;
    print_layers(\%files, \%edge) if $layers && !@sccs;
    for my $scc (@sccs) {
        my %in = map { $_ => 1 } @$scc;
        my @calls;
        for my $f (@$scc) {
            for my $g (sort grep { $in{$_} } keys %{ $edge{$f} || {} }) {
                push @calls, "$f -> $g (" . join(', ', sort keys %{ $edge{$f}{$g} }) . ')';
            }
        }
        push @problems, 'circle: ' . join(' ', @$scc), map { "  $_" } @calls;
    }
    return @problems;
}

# Each node's layer: one above the highest it uses (no circles, so each
# is reached once per path), as {layer}[nodes, in the order given].
sub layers {
    my ($nodes, $edge) = @_;
    my %layer;
    my $of;
    $of = sub {
        my ($f) = @_;
        return $layer{$f} if exists $layer{$f};
        my $l = 0;
        for my $g (keys %{ $edge->{$f} || {} }) {
            my $lg = $of->($g) + 1;
            $l = $lg if $lg > $l;
        }
        return $layer{$f} = $l;
    };
    my %by;
    push @{ $by{ $of->($_) } }, $_ for @$nodes;
    return \%by;
}

# Each file calls only files of lower layers.
sub print_layers {
    my ($files, $edge) = @_;
    my $by = layers([ sort keys %$files ], $edge);
    for my $l (sort { $b <=> $a } keys %$by) {
        print "    layer $l: ", join(' ', @{ $by->{$l} }), "\n";
    }
}

# ---- folders ------------------------------------------------------------
# Each file of modules/ (and mod_lessons.c) with the folders it uses: by
# its #include lines, and by its calls (the objects' graph, when built).
sub folders {
    my @problems;
    my %rank;
    for my $i (0 .. $#FOLDERS) {
        my ($f, $uses) = @{ $FOLDERS[$i] };
        for my $u (@$uses) {
            push @problems, "\@FOLDERS: $f uses $u, which is not declared "
                          . "before it (the order would have a circle)"
                unless exists $rank{$u};
        }
        $rank{$f} = $i;
    }
    opendir my $dh, "$root/modules" or return ("modules/: $!");
    my @entries = sort grep { !/\A\./ } readdir $dh;
    closedir $dh;
    my @files = ('mod_lessons.c');
    for my $e (@entries) {
        if (!-d "$root/modules/$e") {
            push @problems, "modules/$e: every file of modules/ is in a "
                          . "folder of \@FOLDERS";
            next;
        }
        if (!exists $USES{$e}) {
            push @problems, "modules/$e/: not in \@FOLDERS (say what it "
                          . "may use, below what it uses)";
            next;
        }
        opendir my $fh, "$root/modules/$e" or next;
        for my $name (sort grep { !/\A\./ } readdir $fh) {
            my $want = $e eq $GLUE ? qr/\Amod_lessons(?:_\w+)?\.[ch]\z/
                                   : qr/\Alessons_\w+\.[ch]\z/;
            push @problems, "modules/$e/$name: " . ($e eq $GLUE
                    ? "the glue's files are mod_lessons*.[ch]"
                    : "an httpd-free folder holds lessons_*.[ch]")
                unless $name =~ $want;
            push @files, "$e/$name";
        }
        closedir $fh;
    }
    my %use;
    for my $file (@files) {
        my $from = folder_of($file);
        my $path = $file eq 'mod_lessons.c' ? $file : "modules/$file";
        my $n = 0;
        for my $line (split /\n/, slurp("$root/$path")) {
            $n++;
            my ($name) = $line =~ /^\s*#\s*include\s*[<"]([^>"]+)[>"]/
                or next;
            if ($from ne $GLUE && $name =~ $HTTPD_HEADER) {
                push @problems, "$path:$n: includes $name, an httpd header, "
                              . "in an httpd-free folder";
            }
            elsif ($name =~ m{\A(?:lessons|mod_lessons)\w*\.[ch]\z}) {
                push @problems, "$path:$n: includes \"$name\": name its "
                              . "folder (\"FOLDER/$name\")";
            }
            elsif ($name =~ m{\A(\w+)/(\w+\.[ch])\z} && exists $USES{$1}) {
                my $to = $1;
                push @problems, "$path:$n: includes $name, which is not there"
                    unless -e "$root/modules/$name";
                $use{$from}{$to} = 1 if $to ne $from;
                push @problems, "$path:$n: includes $name: $from/ may not "
                              . "use $to/ (\@FOLDERS)"
                    unless $to eq $from || $USES{$from}{$to};
            }
        }
    }
    if (graph()) {
        for my $f (sort keys %edge) {
            my $from = folder_of($f);
            for my $g (sort keys %{ $edge{$f} }) {
                my $to = folder_of($g);
                next if $to eq $from;
                $use{$from}{$to} = 1;
                push @problems, "$f calls $g ("
                              . join(', ', sort keys %{ $edge{$f}{$g} })
                              . "): $from/ may not use $to/ (\@FOLDERS)"
                    unless $USES{$from}{$to};
            }
        }
    }
    print_folders(\%use) if $layers && !@problems;
    return @problems;
}

# The folders' order as they are used: each line's folders use only
# those of the lines below.
sub print_folders {
    my ($use) = @_;
    my $by = layers([ map { $_->[0] } @FOLDERS ], $use);
    for my $l (sort { $b <=> $a } keys %$by) {
        print "    folders $l: ", join(' ', map {
            my $f = $_;
            my @u = sort keys %{ $use->{$f} || {} };
            @u ? "$f/ (uses " . join(' ', map { "$_/" } @u) . ')' : "$f/";
        } @{ $by->{$l} }), "\n";
    }
}

# ---- merge --------------------------------------------------------------
sub fields_of {
    my ($header, $type) = @_;
    my ($body) = $header =~ /typedef struct \{\n((?:(?!typedef struct).)*?)\n\} \Q$type\E;/s
        or die "house: no typedef of $type in mod_lessons.h\n";
    my (@fields, $last);
    for my $line (split /\n/, $body) {
        if ($line =~ /^\s+[^\/\s*][^;]*?\(\*(\w+)\)\s*\([^;]*;(.*)$/
            || $line =~ /^\s+[^\/\s*][^;]*?[\s*](\w+)(?:\[[^\]]*\])?;(.*)$/) {
            $last = { name => $1, text => $2 };
            push @fields, $last;
        }
        elsif ($last && $line =~ /^\s+\*\s*(.*)$/) {
            $last->{text} .= " $1";     # the comment goes on
        }
    }
    return @fields;
}

sub merge {
    my $header = slurp("$root/modules/httpd/mod_lessons.h");
    my $config = slurp("$root/modules/httpd/mod_lessons_config.c");
    my @problems;
    for my $pair ([ lessons_dir_conf => 'lessons_merge_dir_conf' ],
                  [ lessons_srv_conf => 'lessons_merge_srv_conf' ]) {
        my ($type, $fn) = @$pair;
        my ($body) = $config =~ /^void \*\Q$fn\E\(.*?\n\{\n(.*?)\n\}\n/ms
            or do { push @problems, "$fn not found in mod_lessons_config.c"; next };
        for my $f (fields_of($header, $type)) {
            next if $f->{text} =~ /not\s+merged/;
            push @problems, "$type.$f->{name}: not in $fn (merge it, or say "
                          . "\"not merged\" and why in its declaration)"
                unless $body =~ /(?:->|\.)\Q$f->{name}\E\b/;
        }
    }
    return @problems;
}

# ---- directives ---------------------------------------------------------
# The context a reference entry must give for the table's flags.
sub context_of {
    my ($flags, $global_only) = @_;
    return 'server config' if $global_only;
    return 'server config, virtual host, directory' if $flags =~ /ACCESS_CONF/;
    return 'server config, virtual host';
}

sub directives {
    my $table = slurp("$root/mod_lessons.c");
    my $ref = slurp("$root/docs/directives.md");
    my (%cmd, @problems);
    my $setters = join '', map { slurp($_) } glob("$root/modules/httpd/*.c");

    # AP_INIT_xxx("Name", handler, data, FLAGS, "help"): the flags are
    # the first RSRC_CONF/ACCESS_CONF expression after the name.  A
    # section directive ("<Name") is "<Name>" in the reference.
    while ($table =~ /AP_INIT_\w+\(\s*"(<?\w+)"(.*?)\b((?:RSRC_CONF|ACCESS_CONF)(?:\s*\|\s*(?:RSRC_CONF|ACCESS_CONF))*)/gs) {
        my ($name, $between, $flags) = ($1, $2, $3);
        $name .= '>' if $name =~ /\A</;
        # A number's spec says GLOBAL_ONLY when the directive is main
        # server only: look it up by the spec's name.
        my ($spec) = $between =~ /&(\w+_n)\b/;
        my $global = $spec && $table =~ /\b\Q$spec\E = \{[^}]*GLOBAL_ONLY/s;
        # Or its setter refuses any other context first thing
        # ("const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);").
        my ($setter) = $between =~ /\A\s*,\s*(\w+)/;
        $global ||= $setter && $setters =~ /^const char \*\Q$setter\E\((?:(?!^\}).)*?^    const char \*err = ap_check_cmd_context\(cmd, GLOBAL_ONLY\);/ms;
        $cmd{$name} = context_of($flags, $global);
    }
    my %ref;
    # "## \<Name\> Directive" for a section directive (escaped, so that
    # Markdown shows the brackets).
    while ($ref =~ /^## (\\?<?\w+\\?>?) Directive\n(.*?)(?=^## |\z)/msg) {
        my ($name, $body) = ($1, $2);
        $name =~ tr/\\//d;
        my ($context) = $body =~ /^\| Context: \| (.*?) \|$/m;
        $ref{$name} = $context // '';
        push @problems, "$name: docs/directives.md's entry has no $_ row"
            for grep { $body !~ /^\| $_: \|/m } qw(Description Syntax Context);
    }
    push @problems, "$_: in the command table, not in docs/directives.md"
        for grep { !exists $ref{$_} } sort keys %cmd;
    push @problems, "$_: in docs/directives.md, not in the command table"
        for grep { !exists $cmd{$_} } sort keys %ref;
    push @problems, "$_: docs/directives.md gives context \"$ref{$_}\", the "
                  . "command table \"$cmd{$_}\""
        for grep { exists $ref{$_} && $ref{$_} ne '' && $ref{$_} ne $cmd{$_} }
            sort keys %cmd;
    # The summary at the page's top: "| [`Name`](#anchor) | ... |" rows,
    # each linking to an anchor the page has (a heading's, as GitHub
    # makes them, or an <a name>).
    my %anchor = map { $_ => 1 } $ref =~ /<a name="([^"]+)">/g;
    for my $heading ($ref =~ /^#+ (.*)$/mg) {
        (my $slug = lc $heading) =~ s/[^\w\- ]//g;
        $slug =~ tr/ /-/;
        $anchor{$slug} = 1;
    }
    my %summary;
    while ($ref =~ /^\| \[`(<?Lessons\w+>?)`\]\(#([^)]*)\) \|/mg) {
        my ($name, $link) = ($1, $2);
        $summary{$name} = 1;
        push @problems, "$name: the summary links to #$link, which is no "
                      . "anchor of docs/directives.md"
            unless $anchor{$link};
    }
    push @problems, "$_: in the command table, not in docs/directives.md's "
                  . "summary"
        for grep { !$summary{$_} } sort keys %cmd;
    push @problems, "$_: in docs/directives.md's summary, not in the "
                  . "command table"
        for grep { !$cmd{$_} } sort keys %summary;
    push @problems, 'no directive found in mod_lessons.c' unless %cmd;
    return @problems;
}

# ---- defaults -----------------------------------------------------------
# A default as a number of base units (seconds, bytes) or a lower-case
# word: "3600", "16M", "64 KiB", "an hour", "`off`".
sub default_value {
    my ($value, $unit) = @_;
    my %per = (k => 1024, kib => 1024, m => 1024**2, mib => 1024**2,
               g => 1024**3, gib => 1024**3, ms => 0.001, s => 1,
               second => 1, seconds => 1, minute => 60, minutes => 60,
               hour => 3600, hours => 3600, day => 86400, days => 86400);
    $value = lc $value;
    $unit = lc($unit // '');
    $value = 1 if $value =~ /\Aan?\z/;
    if ($value =~ /\A([0-9][0-9,]*(?:\.[0-9]+)?)([kmg])?\z/) {
        (my $n = $1) =~ tr/,//d;
        my $u = $2 // $unit;
        return $n * ($u eq '' ? 1 : ($per{$u} // 1));
    }
    return $value;
}

# What README and the other documents say a directive's default is, where
# a sentence names the directive and its default ("`LessonsX` default
# 3600 s", "`LessonsX` seconds (default 60)", "`LessonsX` (an hour by
# default)", "`LessonsX` is off (the default)"), must be what the
# reference's Default row says: a statement that drifted (README once
# said keys were refreshed every 5 minutes, the default being 3600 s)
# fails here.
sub defaults {
    my $ref = slurp("$root/docs/directives.md");
    my (%default, @problems, $seen);
    while ($ref =~ /^## (\w+) Directive\n(.*?)(?=^## |\z)/msg) {
        my ($name, $body) = ($1, $2);
        my ($row) = $body =~ /^\| Default: \| (.*?) \|$/m;
        next unless defined $row;
        # The first code span; a directive's own line ("`LessonsX 20 5`")
        # gives its first value.
        my ($code) = $row =~ /`([^`]+)`/ or next;
        $code =~ s/\A\Q$name\E\s+//;
        ($code) = split /\s+/, $code;
        $default{$name} = default_value($code);
    }
    my $unit = qr/(KiB|MiB|GiB|ms|s|seconds?|minutes?|hours?|days?)\b/;
    my $gap = qr/(?:(?!`Lessons)[^.`]|`[^`]*`(?<!`Lessons\w{0,40}`)){0,60}?/;
    for my $doc ('README.md', map { "docs/$_" } sort grep { $_ ne 'directives.md' }
                 map { m{([^/]+)\z} } glob("$root/docs/*.md")) {
        (my $text = slurp("$root/$doc")) =~ s/\s+/ /g;
        my @said;
        while ($text =~ /`(Lessons\w+)`$gap\bdefault\b[\s:,]*(?:is\s+)?`?([0-9][0-9,.]*[kKmMgG]?|off|on|any|an?)`?(?:\s*$unit)?/gi) {
            push @said, [$1, $2, $3, $&];
        }
        while ($text =~ /`(Lessons\w+)`$gap\b(an?|[0-9][0-9,.]*)\s*$unit?\s*by default/gi) {
            push @said, [$1, $2, $3, $&];
        }
        while ($text =~ /`(Lessons\w+)` is (\w+) \(the default\)/g) {
            push @said, [$1, $2, undef, $&];
        }
        for my $s (@said) {
            my ($name, $value, $u, $where) = @$s;
            next unless exists $default{$name};
            $seen++;
            my $got = default_value($value, $u);
            push @problems, "$doc: \"$where\": the reference's default "
                          . "for $name is $default{$name}"
                unless $got eq $default{$name};
        }
    }
    push @problems, 'no statement of a default found in README.md or docs/'
        unless $seen;
    return @problems;
}

sub logtags {
    my %code;
    for my $file ("$root/mod_lessons.c", glob("$root/modules/*/*.[ch]")) {
        my $text = slurp($file);
        (my $short = $file) =~ s{\A\Q$root\E/}{};
        $code{$1} //= $short while $text =~ /LESSONSLOG\((\d{5})\)/g;
    }
    my $ops = slurp("$root/docs/operations.md");
    my %row;
    while ($ops =~ /^\| ((?:\d{5}(?:, )?)+) \|/mg) {
        $row{$_} = 1 for split /, /, $1;
    }
    return map { "$_ ($code{$_}) has no row in docs/operations.md's table of log lines" }
           sort grep { !$row{$_} } keys %code;
}

sub shares {
    my %file = map { (my $f = $_) =~ s{\A\Q$root\E/}{}; ($f => 1) }
               glob("$root/t/api/*.t");
    my %row;
    for (split /\n/, slurp("$root/t/tools/integration-costs")) {
        next if /\A#/ || !/\S/;
        /\A\s*\d+\s+\d+ (t\/api\/\S+\.t)(?: alone)?\z/
            or return "t/tools/integration-costs: \"$_\" is not \"SQLITE PGSQL t/api/FILE.t [alone]\" (seconds)";
        $row{$1} = 1;
    }
    return (map({ "$_ has no row in t/tools/integration-costs (its seconds)" }
                sort grep { !$row{$_} } keys %file),
            map({ "t/tools/integration-costs names $_, which is not there" }
                sort grep { !$file{$_} } keys %row));
}

report('no circles between the files of the module', circles());
report('the folders of modules/ in their order, httpd only in httpd/',
       folders());
report('every config field is merged, or says why not', merge());
report('the directive table and the reference agree', directives());
report('the defaults the documents state are the reference\'s', defaults());
report('every log tag has its row in docs/operations.md', logtags());
report('every file of t/api has its cost for make test\'s shares', shares());
checks_done();
