# The shape the check scripts share (t/tools/house.pl,
# t/promtool/check.pl): one "ok" or "not ok" line per check, with what is
# wrong indented below it, and last "N passed, N failed", which the
# Makefile's run_checks reads; the exit status is 1 when a check failed.
package LessonsChecks;
use strict;
use warnings;
use Exporter 'import';

our @EXPORT = qw(report slurp checks_done);

my ($passed, $failed) = (0, 0);

# One check: its name, and what is wrong with it (nothing: it passed).
sub report {
    my ($name, @problems) = @_;
    if (@problems) {
        $failed++;
        print "not ok - $name\n";
        print "    $_\n" for @problems;
    }
    else {
        $passed++;
        print "ok - $name\n";
    }
}

sub slurp {
    my ($path) = @_;
    open my $fh, '<', $path or die "$0: $path: $!\n";
    local $/;
    return scalar <$fh>;
}

# The totals line, and the exit.
sub checks_done {
    print "$passed passed, $failed failed\n";
    exit($failed ? 1 : 0);
}

1;
