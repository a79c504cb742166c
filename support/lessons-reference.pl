#!/usr/bin/perl
# Writes lessons-reference.conf: every directive of mod_lessons, commented
# out, grouped by where it may go, each with the command table's help
# string and the reference's Syntax and Default rows.  It is made at
# build time from the two sources the module and its manual are made of,
# so that it cannot say something they do not:
#
#   the directive table   the AP_INIT_* entries of mod_lessons.c: name,
#                         context flags, help string (what httpd itself
#                         prints for a misused directive)
#   the reference         docs/directives.md's "## Name Directive" entries:
#                         Syntax, Default and Context rows
#
#   support/lessons-reference.pl TABLE REFERENCE > lessons-reference.conf
#   support/lessons-reference.pl --check TABLE FILE
#
# --check reads the table again and FILE (a conf made before): every
# directive of the table must have its entry in FILE (a "# Name" heading
# and a commented example line), and every line of FILE must be a
# comment, so that the file changes nothing when it is included.  Prints
# one "ok"/"not ok" line per check and "N passed, N failed" (as
# t/tools/house.pl does); exits 1 when a check fails.
#
# A directive of the table that the reference lacks is still written,
# from its help string alone, with a warning: make lint (house.pl) is
# where the reference's gaps fail.  An AP_INIT entry this script cannot
# read fails the run, so that no directive is ever left out unseen.
# Core Perl only: the package build runs it.
use strict;
use warnings;

sub slurp {
    my ($path) = @_;
    open my $fh, '<', $path or die "lessons-reference: $path: $!\n";
    local $/;
    return scalar <$fh>;
}

# The text of C string literals one after the other ("a" "b"), with the
# escapes the table uses.
sub c_strings {
    my ($text) = @_;
    my $out = '';
    while ($text =~ /"((?:[^"\\]|\\.)*)"/gs) {
        my $s = $1;
        $s =~ s/\\(["\\])/$1/g;
        $s =~ s/\\n/ /g;
        $out .= $s;
    }
    return $out;
}

# Every AP_INIT_* entry of the table: [name, flags, help].  The entry
# runs from its name to the closing parenthesis of the macro; the flags
# are the first RSRC_CONF/ACCESS_CONF/OR_* expression, the help string
# the string literals after it.
sub table {
    my ($path) = @_;
    my $c = slurp($path);
    my ($body) = $c =~ /command_rec\s+\w+\[\]\s*=\s*\{(.*?)\n\};/s
        or die "lessons-reference: no command_rec table in $path\n";
    $body =~ s{/\*.*?\*/}{ }gs;     # comments between entries
    my @cmds;
    my $flag = qr/(?:RSRC_CONF|ACCESS_CONF|OR_\w+|EXEC_ON_READ)/;
    my $entry = qr/AP_INIT_\w+\(\s*"(<?\w+)"\s*,(.*?)\)\s*,\s*
                   (?=AP_INIT_|\{\s*NULL)/sx;
    while ($body =~ /$entry/g) {
        my ($name, $rest) = ($1, $2);
        my ($flags, $help) =
            $rest =~ /\b($flag(?:\s*\|\s*$flag)*)\s*,\s*(".*)\z/s
            or die "lessons-reference: $path: cannot read the flags and "
                 . "help string of $name\n";
        $flags =~ s/\s+//g;
        push @cmds, { name => $name, flags => $flags,
                      help => c_strings($help) };
    }
    # Any entry the pattern above missed (another macro form) fails the
    # run rather than leaving a directive out.
    my $all = () = $body =~ /AP_INIT_\w+\(/g;
    die "lessons-reference: $path: read " . scalar(@cmds) . " of $all "
      . "directive entries\n" if $all != @cmds || !@cmds;
    return @cmds;
}

# Every directive name of the table, found the simplest way, for --check:
# a second reading that does not share table()'s pattern.
sub table_names {
    my ($path) = @_;
    my $c = slurp($path);
    return $c =~ /AP_INIT_\w+\(\s*"(<?\w+)"/g;
}

# The reference's rows per directive ("<Name" for a section directive,
# as the table spells it).
sub reference {
    my ($path) = @_;
    my $ref = slurp($path);
    my %rows;
    while ($ref =~ /^## (\\?<?\w+\\?>?) Directive\n(.*?)(?=^## |\z)/msg) {
        my ($name, $body) = ($1, $2);
        $name =~ tr/\\//d;
        $name =~ s/>\z//;
        for my $row (qw(Syntax Default Context)) {
            my ($v) = $body =~ /^\| $row: \| (.*?) \|$/m;
            $rows{$name}{$row} = plain($v) if defined $v;
        }
    }
    return \%rows;
}

# Markdown table text as plain text: no backticks, no escapes.
sub plain {
    my ($s) = @_;
    $s =~ s/`//g;
    $s =~ s/\\([|<>*_\\])/$1/g;
    return $s;
}

# "# " lines of at most 79 columns; a word longer than that gets a line
# of its own.
sub wrap {
    my ($indent, $text) = @_;
    my @lines;
    my $line = '';
    for my $word (split ' ', $text) {
        if ($line ne '' && length("$indent$line $word") > 79) {
            push @lines, "$indent$line";
            $line = $word;
        }
        else {
            $line = $line eq '' ? $word : "$line $word";
        }
    }
    push @lines, "$indent$line" if $line ne '';
    return map { "$_\n" } @lines;
}

# The commented example: the default where it is one value, else the
# syntax line; a section directive as its opening and closing lines.
sub example {
    my ($name, $rows) = @_;
    my $syntax = $rows->{Syntax};
    my $default = $rows->{Default} // '';
    if ($name =~ /\A</) {
        (my $bare = $name) =~ s/\A<//;
        my ($open) = defined $syntax ? $syntax =~ /\A(<\Q$bare\E[^>]*>)/ : ();
        $open //= "$name ...>";
        return ("#$open\n", "#    ...\n", "#</$bare>\n");
    }
    if ($default =~ /\A[^\s;,()]+\z/ && $default !~ /\A(?:none|not)\z/) {
        return ("#$name $default\n");
    }
    return ("#" . ($syntax // $name) . "\n");
}

# Where a context lets a directive go, for the group headings.
my %WHERE = (
    'server config' =>
        'Main server only: outside any <VirtualHost>, as in '
        . 'mods-available/lessons.conf.',
    'server config, virtual host' =>
        'The main server or a <VirtualHost>, not inside <Location> or '
        . '<Directory>.',
    'server config, virtual host, directory' =>
        'The main server, a <VirtualHost>, or a <Location> or <Directory> '
        . '(normally the API\'s <Location>, beside "SetHandler lessons", as '
        . 'in conf-available/lessons-api.conf).',
);
my @ORDER = ('server config', 'server config, virtual host',
             'server config, virtual host, directory');

# The context of a directive the reference lacks, from its flags alone.
sub flags_context {
    my ($flags) = @_;
    return $flags =~ /ACCESS_CONF/ ? 'server config, virtual host, directory'
                                    : 'server config, virtual host';
}

sub generate {
    my ($table_path, $ref_path) = @_;
    my @cmds = table($table_path);
    my $ref = reference($ref_path);
    my %groups;
    for my $cmd (@cmds) {
        my $rows = $ref->{ $cmd->{name} } || {};
        if (!%$rows) {
            warn "lessons-reference: $cmd->{name} has no entry in "
               . "$ref_path: written from its help string alone\n";
        }
        my $context = $rows->{Context} // flags_context($cmd->{flags});
        push @{ $groups{$context} }, [ $cmd, $rows ];
    }
    my @contexts = ((grep { $groups{$_} } @ORDER),
                    sort grep { !exists $WHERE{$_} } keys %groups);
    my $out = '';
    $out .= "# lessons-reference.conf: every directive of mod_lessons, "
          . "commented out.\n"
          . "#\n";
    $out .= join '', wrap('# ',
          'Made when the module was built, from the directive table in '
        . 'mod_lessons.c (each directive\'s help string, as httpd prints '
        . 'it) and from docs/directives.md (Syntax, Default, Context), by '
        . 'support/lessons-reference.pl: a directive this file names is '
        . 'one the module has.  Nothing here is in effect: copy the lines '
        . 'you need into mods-available/lessons.conf, '
        . 'conf-available/lessons-api.conf or one of your <VirtualHost>s, '
        . 'without the "#".  docs/directives.md (in this package\'s docs) says '
        . 'what each one does.');
    for my $context (@contexts) {
        $out .= "#\n#" . ('=' x 77) . "\n";
        $out .= join '', wrap('# ', "Context: $context.");
        $out .= join '', wrap('# ', $WHERE{$context}) if $WHERE{$context};
        $out .= '#' . ('=' x 77) . "\n";
        for my $entry (sort { lc($a->[0]{name} =~ s/\A<//r)
                              cmp lc($b->[0]{name} =~ s/\A<//r) }
                       @{ $groups{$context} }) {
            my ($cmd, $rows) = @$entry;
            my $heading = $cmd->{name} =~ /\A</ ? "$cmd->{name}>"
                                                : $cmd->{name};
            $out .= "#\n# $heading\n";
            $out .= join '', wrap('#   ', $cmd->{help});
            $out .= join '', wrap('#   ', "Syntax:  $rows->{Syntax}")
                if defined $rows->{Syntax};
            $out .= join '', wrap('#   ', "Default: $rows->{Default}")
                if defined $rows->{Default};
            $out .= join '', example($cmd->{name}, $rows);
        }
    }
    return $out;
}

sub check {
    my ($table_path, $file) = @_;
    my @names = table_names($table_path);
    my $text = slurp($file);
    my ($passed, $failed) = (0, 0);
    my $report = sub {
        my ($what, @problems) = @_;
        if (@problems) {
            $failed++;
            print "not ok - $what\n", map { "    $_\n" } @problems;
        }
        else {
            $passed++;
            print "ok - $what\n";
        }
    };
    my @missing;
    for my $name (@names) {
        my $heading = $name =~ /\A</ ? "$name>" : $name;
        push @missing, "$heading: in $table_path, not in $file"
            unless $text =~ /^# \Q$heading\E\n/m
                && $text =~ /^#\Q$name\E[\s>]/m;
    }
    push @missing, "no directive found in $table_path" unless @names;
    $report->("every directive of the table is in $file", @missing);
    my $n = 0;
    my @live = grep { $n++; !/\A(?:#.*)?\z/ } split /\n/, $text;
    $report->("every line of $file is a comment",
              map { "not a comment: $_" } @live);
    print "$passed passed, $failed failed\n";
    return $failed ? 1 : 0;
}

if (@ARGV == 3 && $ARGV[0] eq '--check') {
    exit check($ARGV[1], $ARGV[2]);
}
if (@ARGV == 2 && $ARGV[0] !~ /\A-/) {
    print generate(@ARGV);
    exit 0;
}
print STDERR "usage: $0 TABLE REFERENCE > lessons-reference.conf\n"
           . "       $0 --check TABLE FILE\n";
exit 2;
