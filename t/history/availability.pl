#!/usr/bin/perl
# What clients saw of a fault (issue 58), from a history that
# t/history/clients.pl wrote and the moments the faults began
# (t/history/run.sh's marks, CLOCK_MONOTONIC as the history's t0 and t1):
#   - for each fault, the time from it to the completion of the first
#     write answered 2xx that was sent after it (service back), and the
#     longest pause between writes answered 2xx from it on, which must
#     be within --recovery;
#   - every answer 5xx is a 503 (the database unavailable, with
#     Retry-After), never a 500 or another;
#   - every request was answered (no timeout, no reset) and none took
#     longer than --longest seconds (LessonsDBTimeout, and what a
#     connection attempt to a frozen host may add).
# Prints one line per fault and a summary; exit 0 when everything holds,
# 1 when not, 2 on bad input.
#
#   availability.pl HISTORY.jsonl MARKS --recovery S --longest S
use strict;
use warnings;

use Getopt::Long qw(GetOptions);
use JSON::PP;

my %o = (recovery => 15, longest => 8);
GetOptions(\%o, 'recovery=f', 'longest=f') && @ARGV == 2
    or do { print "usage: availability.pl HISTORY.jsonl MARKS --recovery S --longest S\n"; exit 2 };
my ($file, $marks) = @ARGV;

my @ops;
open my $in, '<', $file or do { print "availability.pl: $file: $!\n"; exit 2 };
while (my $line = <$in>) {
    my $r = eval { decode_json($line) } or do { print "availability.pl: $file:$.: not JSON\n"; exit 2 };
    push @ops, $r unless ($r->{op} // '') eq 'init';
}
close $in;
my @marks;
open $in, '<', $marks or do { print "availability.pl: $marks: $!\n"; exit 2 };
while (my $line = <$in>) {
    push @marks, $1 if $line =~ /^\s*([0-9.]+)\s*$/;
}
close $in;

my %WRITE = map { $_ => 1 } qw(create update delete);
my ($bad, %st, $longest) = (0);
$longest = 0;
for my $r (@ops) {
    my $s = $r->{st} // 0;
    $st{$s}++;
    my $d = $r->{t1} - $r->{t0};
    $longest = $d if $d > $longest;
}
# Completions of the writes answered 2xx, in order.
my @done = sort { $a <=> $b } map { $_->{t1} }
    grep { $WRITE{$_->{op}} && $_->{st} >= 200 && $_->{st} < 300 } @ops;
for my $m (@marks) {
    my ($first) = grep { $_ >= $m } map { $_->{t1} } sort { $a->{t1} <=> $b->{t1} }
        grep { $WRITE{$_->{op}} && $_->{t0} >= $m && $_->{st} >= 200 && $_->{st} < 300 } @ops;
    if (!defined $first) {
        $bad++;
        print "not ok fault: no write answered 2xx after it\n";
        next;
    }
    # The longest pause in answered writes from the fault on (a planned
    # switchover's, which begins a while after the command).
    my ($prev, $gap) = ($m, 0);
    for my $t (grep { $_ > $m } @done) {
        $gap = $t - $prev if $t - $prev > $gap;
        $prev = $t;
    }
    my $ok = $gap <= $o{recovery};
    $bad++ unless $ok;
    printf "%s fault: the first write sent after it answered 2xx in %.1f s; "
        . "writes paused %.1f s at most (at most %g)\n",
        $ok ? 'ok' : 'not ok', $first - $m, $gap, $o{recovery};
}
my $other5xx = 0;
$other5xx += $st{$_} for grep { $_ >= 500 && $_ != 503 } keys %st;
my $none = $st{0} // 0;
$bad++ if $other5xx || $none || $longest > $o{longest};
printf "%s answers: %s; 5xx other than 503: %d; no answer: %d; longest request %.1f s (at most %g)\n",
    ($other5xx || $none || $longest > $o{longest}) ? 'not ok' : 'ok',
    join(' ', map { "$_: $st{$_}" } sort { $a <=> $b } keys %st),
    $other5xx, $none, $longest, $o{longest};
exit($bad ? 1 : 0);
