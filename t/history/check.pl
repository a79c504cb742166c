#!/usr/bin/perl
# The history checker of issue 56 (in the spirit of Jepsen's Knossos and
# Elle, for the one promise docs/scaling.md makes): reads a history that
# t/history/clients.pl wrote and prints every violation with the
# operations that show it; the last line is the summary
#   ops=N reads=N writes=N unknown=N violations=N [kind=N ...]
# Exit 0 when the history passes, 1 when it does not, 2 on bad input.
#
#   check.pl HISTORY.jsonl [--max N]   (--max: violations printed, 100)
#
# A history is JSON lines, one operation each:
#   c  client         s  server (index)     u  path under /api/lessons
#   op init|create|update|delete|get|list|level|reval
#   id the lesson's id (create: once known)
#   t0 t1  invocation and completion, CLOCK_MONOTONIC of one machine
#   st status (0: no answer: timeout, refused, reset)   e  the ETag
#   im If-Match sent (update, delete)   inm If-None-Match sent (reval)
#   ti title sent, lv levelId sent (create, update)
#   b  the state the body shows: a lesson "id\ttitle\tlevelId\tdigest",
#      a list an array of those; init: the lessons before the history
#
# What is checked (a write is made when answered 2xx, not made when
# answered 4xx, and unknown -- possibly made, never before it was sent --
# when answered 5xx or not at all):
#   stale      every read returns a state at least as new as every write
#              that completed before the read began: a lesson's version
#              (or a list element's) at least the newest such write's; a
#              lesson deleted before is 404 and in no list; a lesson
#              created before is in every list it belongs to
#   phantom    no read shows a state that no write produced, one a write
#              produced with other fields, one from a write refused, or
#              one from a write sent after the read completed
#   etag       no ETag names two bodies on one path
#   304        a 304 only where the tag still named the current state:
#              checked as a read of the state the tag was given with
#   lost       every 2xx update or delete with If-Match was made on the
#              version it named: no two of them name the same version of
#              one lesson, and an update's new tag is that version + 1
#
# Versions come from the lesson ETags ("L<id>.<version>.<epoch>"): a
# create makes version 1, an update with If-Match on version v makes
# v + 1, whatever its outcome, so every state a read shows has a known
# version through its title (every write's title is unique).  One sweep
# over the writes by completion time and the reads by invocation time
# keeps each lesson's floor (the newest version written, or deleted):
# the check is linear but for the sort.
use strict;
use warnings;

use JSON::PP;

my $DEL = 9e15;         # the "version" of a deleted lesson: newer than any
my $max_print = 100;
my $file;
while (@ARGV) {
    my $a = shift @ARGV;
    if ($a eq '--max') { $max_print = shift @ARGV } else { $file = $a }
}
defined $file or die "usage: check.pl HISTORY.jsonl [--max N]\n";
open my $in, '<', $file or do { print "check.pl: $file: $!\n"; exit 2 };

my $js = JSON::PP->new->canonical;
my (@ops, @reads, @writes);
my $n_unknown = 0;
while (my $line = <$in>) {
    next unless $line =~ /\S/;
    my $o = eval { $js->decode($line) };
    if (!$o || ref $o ne 'HASH' || !defined $o->{op}) {
        print "check.pl: $file line $.: not an operation\n";
        exit 2;
    }
    $o->{n} = $.;
    $o->{st} //= 0;
    push @ops, $o;
}
close $in;

my (%viol, $printed);
sub show {
    my ($o) = @_;
    my %c = %$o;
    delete $c{b} if ref $c{b};          # a list's body: too long to print
    return $js->encode(\%c);
}
sub violation {
    my ($kind, $msg, @o) = @_;
    $viol{$kind}++;
    return if ++$printed > $max_print;
    print "VIOLATION $kind: $msg\n";
    print "    ", show($_), "\n" for grep { defined } @o;
}

sub version_of { my ($e) = @_; return defined $e && $e =~ /\A"L\d+\.(\d+)\./ ? $1 + 0 : undef }
sub split_state { return split /\t/, $_[0], 4 }

# --- the writes ---------------------------------------------------------------
# Each write: outcome ok | fail | unknown; ver, the version it makes
# ($DEL for a delete); its result's state (ok) or what it sent.
my (%by_title, %init, %ok_writes_of, %tried_of);
for my $o (@ops) {
    my $op = $o->{op};
    if ($op eq 'init') {
        my ($id, $ti, $lv, $dig) = split_state($o->{b} // '');
        my $w = { %$o, id => $id + 0, ver => version_of($o->{e}) // 1,
                  title => $ti, rlv => $lv, dig => $dig, outcome => 'ok',
                  t0 => -9e18, t1 => -9e18, init => 1 };
        $init{"$id\t$ti"} = $w;
        push @{$ok_writes_of{$w->{id}}}, $w;
        next;
    }
    if ($op eq 'get' || $op eq 'list' || $op eq 'level' || $op eq 'reval') {
        push @reads, $o;
        next;
    }
    push @writes, $o;
    my $st = $o->{st};
    $o->{outcome} = ($st >= 200 && $st < 300) ? 'ok'
                  : ($st >= 400 && $st < 500) ? 'fail' : 'unknown';
    $n_unknown++ if $o->{outcome} eq 'unknown';
    if ($op eq 'create') {
        $o->{ver} = 1;
    } else {
        my $named = version_of($o->{im});
        $o->{named} = $named;
        $o->{ver} = $op eq 'delete' ? $DEL : defined $named ? $named + 1 : undef;
    }
    if (defined $o->{ti}) {
        violation('phantom', "title $o->{ti} written twice", $by_title{$o->{ti}}, $o)
            if $by_title{$o->{ti}};
        $o->{title} = $o->{ti};
        $by_title{$o->{ti}} = $o;
    }
    if ($o->{outcome} eq 'ok' && defined $o->{b} && !ref $o->{b}) {
        my ($id, $ti, $lv, $dig) = split_state($o->{b});
        $o->{id} //= $id + 0;
        @$o{qw(rlv dig)} = ($lv, $dig);
        my $v = version_of($o->{e});
        violation('lost', "$op of lesson $id answered version $v, not the "
                  . "$o->{ver} its If-Match makes", $o)
            if defined $v && defined $o->{ver} && $v != $o->{ver};
    }
    next unless defined $o->{id};
    push @{$ok_writes_of{$o->{id}}}, $o if $o->{outcome} eq 'ok';
    push @{$tried_of{$o->{id}}}, $o if $o->{outcome} ne 'fail';
}

# lost: two writes answered 2xx on one version of one lesson (or two
# creates of one id).
for my $id (keys %ok_writes_of) {
    my %on;
    for my $w (@{$ok_writes_of{$id}}) {
        next if $w->{init};
        my $k = $w->{op} eq 'create' ? 'create' : $w->{named} // next;
        if (my $other = $on{$k}) {
            violation('lost', "two writes of lesson $id answered 2xx on "
                      . ($k eq 'create' ? 'its creation' : "version $k"), $other, $w);
        }
        $on{$k} = $w;
    }
}

# --- ETags: one body per tag and path ----------------------------------------
# A lesson's tag comes from the row its body is made of, a list's from its
# bytes (lessons_etag.h): two bodies under one tag, lesson or list, are a
# violation.  A 304 to a tag is checked as a read of the body that client
# holds.
my %body_of;            # "path\0etag" => [state, op]: the first seen
sub path_of {
    my ($o) = @_;
    return "/$o->{id}" if $o->{op} =~ /\A(?:create|update|init)\z/ && defined $o->{id};
    return $o->{u} // '';
}
my %held;               # "client\0path\0etag" => the body of its last 200
for my $o (@ops) {
    if ($o->{op} eq 'reval' && $o->{st} == 304) {
        $o->{held} = $held{"$o->{c}\0" . ($o->{u} // '') . "\0" . ($o->{inm} // '')};
        next;
    }
    next unless defined $o->{e} && defined $o->{b} && ($o->{st} == 200 || $o->{st} == 201);
    my $state = ref $o->{b} ? join("\n", @{$o->{b}}) : $o->{b};
    my $path = path_of($o);
    my $k = "$path\0$o->{e}";
    $held{"$o->{c}\0$k"} = $o;
    if (my $seen = $body_of{$k}) {
        next if $seen->[0] eq $state;
        violation('etag', "ETag $o->{e} names two bodies on $path", $seen->[1], $o);
    } else {
        $body_of{$k} = [$state, $o];
    }
}

# --- the reads, against each lesson's floor ----------------------------------
my %floor;              # id => the newest write completed so far (ok)
my %alive;              # id => 1 while the floor is not a delete

# The write a state comes from, and whether the state is one it made.
sub state_write {
    my ($r, $state, $ver) = @_;
    my ($id, $ti, $lv, $dig) = split_state($state);
    my $w = $by_title{$ti} // $init{"$id\t$ti"};
    if (!$w) {
        violation('phantom', "lesson $id titled $ti: no write made it", $r);
        return;
    }
    my $bad;
    if ($w->{outcome} eq 'fail') {
        $bad = "the write was refused ($w->{st})";
    } elsif ($w->{t0} >= $r->{t1}) {
        $bad = "the write was sent after the read completed";
    } elsif (defined $w->{id} && $w->{id} != $id) {
        $bad = "the write made lesson $w->{id}, the read shows $id";
    } elsif (defined $ver && defined $w->{ver} && $ver != $w->{ver}) {
        $bad = "the write made version $w->{ver}, the read's tag says $ver";
    } elsif (defined $w->{dig} ? $w->{dig} ne $dig
             : defined $w->{lv} && $w->{lv} != $lv) {
        $bad = "the write made it with other fields";
    }
    if ($bad) {
        violation('phantom', "lesson $id titled $ti: $bad", $w, $r);
        return;
    }
    $w->{id} //= $id + 0;      # an unknown create's id, once seen
    return $w;
}

# A lesson's state read (or named by a 304's tag) against its floor.
sub check_lesson {
    my ($r, $state, $ver, $what) = @_;
    my $w = state_write($r, $state, $ver) // return;
    my $id = (split_state($state))[0];
    my $f = $floor{$id} // return;
    if ($f->{ver} == $DEL) {
        violation($what, "lesson $id was deleted before the read began", $f, $r);
    } elsif (defined $w->{ver} && $w->{ver} < $f->{ver}) {
        violation($what, "lesson $id: version $w->{ver} ($w->{title}), but "
                  . "version $f->{ver} ($f->{title}) was written before the "
                  . "read began", $f, $r);
    } elsif (defined $w->{ver} && $w->{ver} == $f->{ver} && $w != $f) {
        violation('phantom', "lesson $id: version $w->{ver} is $f->{title}, "
                  . "the read shows $w->{title}", $f, $r);
    }
}

# Was a delete of the lesson sent (answered 2xx or unknown) before T?
sub delete_sent {
    my ($id, $t) = @_;
    return grep { $_->{op} eq 'delete' && $_->{t0} < $t } @{$tried_of{$id} || []};
}

sub check_absent {
    my ($r, $id) = @_;
    my $f = $floor{$id} // return;
    return if $f->{ver} == $DEL || delete_sent($id, $r->{t1});
    violation('stale', "lesson $id: 404, but it was written before the "
              . "read began and no delete was sent", $f, $r);
}

sub check_list {
    my ($r, $states, $what) = @_;
    my ($level) = ($r->{u} // '') =~ m{\A/level/(\d+)\z};
    my %seen;
    for my $state (@$states) {
        my ($id, undef, $lv) = split_state($state);
        violation('phantom', "lesson $id twice in one list", $r) if $seen{$id}++;
        violation('phantom', "lesson $id of level $lv in the list of level $level", $r)
            if defined $level && $lv != $level;
        check_lesson($r, $state, undef, $what);
    }
    for my $id (keys %alive) {
        next if $seen{$id};
        my $f = $floor{$id};
        next if delete_sent($id, $r->{t1});
        if (defined $level) {
            next if !defined $f->{rlv} || $f->{rlv} != $level;
            # A newer write sent before the read completed may have
            # moved it to another level.
            next if grep { $_->{t0} < $r->{t1} && (!defined $_->{ver}
                                                   || $_->{ver} > $f->{ver}) }
                         @{$tried_of{$id} || []};
        }
        violation($what, "lesson $id (version $f->{ver}, $f->{title}) was "
                  . "written before the read began, the list lacks it", $f, $r);
    }
}

my $n_reads = 0;
sub check_read {
    my ($r) = @_;
    my $st = $r->{st};
    my $path = $r->{u} // '';
    my $lesson = $path =~ m{\A/(\d+)\z} ? $1 : undef;
    if ($st == 304) {
        $n_reads++;
        my $tag = $r->{inm} // '';
        if (defined $lesson) {
            my $held = $r->{held};
            my $ver = version_of($tag);
            if (!$held || !defined $ver) {
                violation('304', "304 for $path to a tag the client was not given", $r);
                return;
            }
            check_lesson($r, $held->{b}, $ver, '304');
        } else {
            my $held = $r->{held};
            if (!$held) {
                violation('304', "304 for list '$path' to a tag the client was not given", $r);
                return;
            }
            check_list($r, $held->{b}, '304');
        }
    } elsif ($st == 200 && defined $r->{b}) {
        $n_reads++;
        if (ref $r->{b}) {
            check_list($r, $r->{b}, 'stale');
        } else {
            check_lesson($r, $r->{b}, version_of($r->{e}), 'stale');
        }
    } elsif ($st == 404 && defined $lesson) {
        $n_reads++;
        check_absent($r, $lesson);
    }
}

# The sweep: a write counts for the reads that began after it completed.
my @done = sort { $a->{t1} <=> $b->{t1} }
           map { @$_ } values %ok_writes_of;
my @by_start = sort { $a->{t0} <=> $b->{t0} } @reads;
my $i = 0;
for my $r (@by_start) {
    while ($i < @done && $done[$i]{t1} < $r->{t0}) {
        my $w = $done[$i++];
        my $f = $floor{$w->{id}};
        next if $f && defined $w->{ver} && $f->{ver} >= $w->{ver};
        $floor{$w->{id}} = $w;
        if ($w->{ver} == $DEL) { delete $alive{$w->{id}} } else { $alive{$w->{id}} = 1 }
    }
    check_read($r);
}

my $total = 0;
$total += $_ for values %viol;
print "... ", $printed - $max_print, " more violations not printed\n"
    if $printed && $printed > $max_print;
my $kinds = join '', map { " $_=$viol{$_}" } sort keys %viol;
printf "ops=%d reads=%d writes=%d unknown=%d violations=%d%s\n",
    scalar @ops, $n_reads, scalar @writes, $n_unknown, $total, $kinds;
exit($total ? 1 : 0);
