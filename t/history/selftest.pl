#!/usr/bin/perl
# The checker checked (no servers, a second or two): hand-made histories
# fed to t/history/check.pl, one that breaks each property it checks and
# some that must pass, among them reads and revalidations that overlap a
# write (concurrent: either state is right), writes without an answer
# (either way, but never before they were sent) and a level list that a
# concurrent update may have left.  Prints TAP; the last line sums up.
use strict;
use warnings;

use File::Temp qw(tempdir);
use FindBin;
use JSON::PP;

my $CHECK = "$FindBin::Bin/check.pl";
my $dir = tempdir(CLEANUP => 1);
my $js = JSON::PP->new->canonical;

# The lessons: state strings as clients.pl writes them.
sub st { my ($id, $title, $lv, $dig) = @_; return join "\t", $id, $title, $lv // 1, $dig // "d-$title" }
sub tag { my ($id, $v) = @_; return qq("L$id.$v.ab12") }

# Operations: op(kind, t0, t1, fields).
sub init { my ($id, $title, $v, $lv) = @_;
    return { op => 'init', c => 0, s => 0, id => $id, t0 => 0, t1 => 0.01, st => 200,
             u => "/$id", e => tag($id, $v // 1), b => st($id, $title, $lv) } }
sub update { my ($c, $t0, $t1, $id, $from, $title, $st, %x) = @_;
    my %o = (op => 'update', c => $c, s => 0, t0 => $t0, t1 => $t1, id => $id, u => "/$id",
             im => tag($id, $from), ti => $title, st => $st // 200, %x);
    if ($o{st} == 200) { $o{e} //= tag($id, $from + 1); $o{b} //= st($id, $title, $x{lv}) }
    return \%o }
sub create { my ($c, $t0, $t1, $id, $title, $st, $lv) = @_;
    my %o = (op => 'create', c => $c, s => 0, t0 => $t0, t1 => $t1, u => '', ti => $title,
             lv => $lv // 1, st => $st // 201);
    if ($o{st} == 201) { @o{qw(id e b)} = ($id, tag($id, 1), st($id, $title, $lv)) }
    return \%o }
sub del { my ($c, $t0, $t1, $id, $from, $st) = @_;
    return { op => 'delete', c => $c, s => 0, t0 => $t0, t1 => $t1, id => $id, u => "/$id",
             im => tag($id, $from), st => $st // 204 } }
sub get { my ($c, $t0, $t1, $id, $v, $title, $st, %x) = @_;
    my %o = (op => 'get', c => $c, s => 1, t0 => $t0, t1 => $t1, id => $id, u => "/$id",
             st => $st // 200, %x);
    if ($o{st} == 200) { $o{e} //= tag($id, $v); $o{b} //= st($id, $title, $x{lv}) }
    return \%o }
sub list { my ($c, $t0, $t1, $tag, $states, %x) = @_;
    return { op => 'list', c => $c, s => 1, t0 => $t0, t1 => $t1, u => '', st => 200,
             e => qq("C$tag.ab12"), b => $states, %x } }
sub reval { my ($c, $t0, $t1, $path, $inm, $st) = @_;
    my %o = (op => 'reval', c => $c, s => 2, t0 => $t0, t1 => $t1, u => $path, inm => $inm,
             st => $st // 304, e => $inm);
    $o{id} = $1 if $path =~ m{\A/(\d+)\z};
    return \%o }

my @base = (init(1, 'Eins', 1), init(2, 'Zwei', 3, 2));
my @cases = (
    # --- histories that must pass -------------------------------------------
    [pass => 'sequential: each read after the write sees it',
        update(1, 1, 2, 1, 1, 'u1-1'), get(2, 3, 4, 1, 2, 'u1-1'),
        list(2, 3, 4, 2, [st(1, 'u1-1'), st(2, 'Zwei', 2)]),
        reval(2, 5, 6, '/1', tag(1, 2))],
    [pass => 'reads overlapping a write may see either state',
        get(3, 0.2, 0.3, 1, 1, 'Eins'), update(1, 1, 2, 1, 1, 'u1-1'),
        get(2, 1.5, 2.5, 1, 1, 'Eins'), get(4, 0.5, 1.5, 1, 2, 'u1-1'),
        list(2, 1.9, 3, 1, [st(1, 'Eins'), st(2, 'Zwei', 2)]),
        reval(3, 1.9, 2.1, '/1', tag(1, 1))],
    [pass => 'a write without an answer may show or not, after it was sent',
        update(1, 1, 2, 1, 1, 'u1-1', 0),
        get(2, 3, 4, 1, 1, 'Eins'), get(2, 5, 6, 1, 2, 'u1-1'),
        create(3, 1, 2, undef, 'c3-1', 503), get(2, 7, 8, 7, 1, 'c3-1'),
        del(3, 9, 10, 2, 3, 0), get(2, 11, 12, 2, undef, undef, 404)],
    [pass => 'creates and deletes overlapping lists and reads',
        create(1, 1, 2, 5, 'c1-1'), list(2, 1.5, 2.5, 1, [st(1, 'Eins'), st(2, 'Zwei', 2)]),
        list(2, 3, 4, 2, [st(1, 'Eins'), st(2, 'Zwei', 2), st(5, 'c1-1')]),
        del(1, 5, 6, 5, 1), get(2, 5.5, 6.5, 5, 1, 'c1-1'),
        list(2, 5.5, 6.5, 3, [st(1, 'Eins'), st(2, 'Zwei', 2)])],
    [pass => 'a level list that a concurrent update may have moved a lesson out of',
        update(1, 1, 5, 2, 3, 'u1-1', 200, lv => 3),
        list(2, 2, 3, 1, [], u => '/level/2'),
        list(2, 2, 3, 2, [st(2, 'Zwei', 2)], u => '/level/2')],
    [etag => 'a list tag names two bodies (one built after a concurrent write)',
        update(1, 1, 2, 1, 1, 'u1-1'),
        list(2, 0.5, 1.5, 1, [st(1, 'Eins'), st(2, 'Zwei', 2)]),
        list(3, 1.2, 2.5, 1, [st(1, 'u1-1'), st(2, 'Zwei', 2)])],
    [pass => 'a refused update changes nothing',
        update(1, 1, 2, 1, 7, 'u1-1', 412), get(2, 3, 4, 1, 1, 'Eins')],

    # --- one violation of each kind -------------------------------------------
    [stale => 'a read after a write completed shows the older version',
        update(1, 1, 2, 1, 1, 'u1-1'), get(2, 3, 4, 1, 1, 'Eins', 200, s => 2)],
    [stale => 'a list after a write completed shows the older version',
        update(1, 1, 2, 1, 1, 'u1-1'),
        list(2, 3, 4, 1, [st(1, 'Eins'), st(2, 'Zwei', 2)])],
    [stale => 'a list after a create completed lacks the lesson',
        create(1, 1, 2, 5, 'c1-1'), list(2, 3, 4, 1, [st(1, 'Eins'), st(2, 'Zwei', 2)])],
    [stale => 'a level list after a create completed lacks the lesson',
        create(1, 1, 2, 5, 'c1-1', 201, 4), list(2, 3, 4, 1, [], u => '/level/4')],
    [stale => 'a read after a delete completed shows the lesson',
        del(1, 1, 2, 2, 3), get(2, 3, 4, 2, 3, 'Zwei', 200, lv => 2)],
    [stale => 'a list after a delete completed shows the lesson',
        del(1, 1, 2, 2, 3), list(2, 3, 4, 1, [st(1, 'Eins'), st(2, 'Zwei', 2)])],
    [stale => 'a 404 for a lesson nobody deleted',
        get(2, 3, 4, 1, undef, undef, 404)],
    [phantom => 'a state no write made',
        get(2, 3, 4, 1, 5, 'Niemand')],
    [phantom => 'the state of a refused write',
        update(1, 1, 2, 1, 1, 'u1-1', 412), get(2, 3, 4, 1, 2, 'u1-1')],
    [phantom => 'a state shown before its write was sent',
        get(2, 0.5, 0.9, 1, 2, 'u1-1'), update(1, 1, 2, 1, 1, 'u1-1')],
    [phantom => 'a write\'s title with other fields',
        update(1, 1, 2, 1, 1, 'u1-1'), get(2, 3, 4, 1, 2, 'u1-1', 200, b => st(1, 'u1-1', 1, 'other'))],
    [phantom => 'a write\'s title under another version',
        update(1, 1, 2, 1, 1, 'u1-1'), get(2, 3, 4, 1, 3, 'u1-1')],
    [etag => 'one ETag, two bodies',
        update(1, 1, 2, 1, 1, 'u1-1', 0),
        get(2, 3, 4, 1, 1, 'Eins'), get(2, 5, 6, 1, 1, 'Eins', 200, b => st(1, 'u1-1'))],
    [304 => 'a 304 to a tag a completed write made old',
        update(1, 1, 2, 1, 1, 'u1-1'), reval(2, 3, 4, '/1', tag(1, 1))],
    [304 => 'a list 304 to a tag a completed create made old',
        list(2, 0.5, 0.6, 1, [st(1, 'Eins'), st(2, 'Zwei', 2)]),
        create(1, 1, 2, 5, 'c1-1'), reval(2, 3, 4, '', '"C1.ab12"')],
    [lost => 'two updates answered 200 on one version',
        update(1, 1, 2, 1, 1, 'u1-1'), update(2, 1, 2, 1, 1, 'u2-1')],
    [lost => 'an update and a delete answered on one version',
        update(1, 1, 2, 2, 3, 'u1-1'), del(2, 1.5, 2.5, 2, 3)],
    [lost => 'an update answered with another version than If-Match makes',
        update(1, 1, 2, 1, 1, 'u1-1', 200, e => tag(1, 5))],
);

my ($n, $bad) = (0, 0);
for my $case (@cases) {
    my ($want, $name, @ops) = @$case;
    my $f = "$dir/" . ++$n . '.jsonl';
    open my $fh, '>', $f or die "$f: $!";
    print $fh $js->encode($_), "\n" for @base, @ops;
    close $fh;
    my $out = `$^X $CHECK $f 2>&1`;
    my $rc = $? >> 8;
    my ($summary) = $out =~ /^(ops=.*)$/m;
    $summary //= '(no summary)';
    my $ok = $want eq 'pass' ? $rc == 0
           : $rc == 1 && $summary =~ /\b\Q$want\E=\d/;
    print(($ok ? 'ok' : 'not ok'), " $n - $want: $name\n");
    next if $ok;
    $bad++;
    print "#   rc=$rc $summary\n";
    print map { "#   $_\n" } split /\n/, $out;
}
print "1..$n\n";
print "selftest: $n histories, ", $n - $bad, " verdicts right, $bad wrong\n";
exit($bad ? 1 : 0);
