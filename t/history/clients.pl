#!/usr/bin/perl
# The clients of the history suite (t/history/run.sh): several forked
# processes, each sending one request at a time to a server it picks at
# random for each operation, for a bounded time, and recording every
# operation as one JSON line: who (c), where (s), what (op, id, u), when
# (t0 before the request was sent, t1 after its answer was read, both
# CLOCK_MONOTONIC, which every process of the machine shares), the
# answer (st, e: the ETag) and the state the body shows (b).  t/history/
# check.pl reads the lines; the format is described there.
#
#   clients.pl --urls U1,U2 --token T --out FILE --seconds S
#              [--clients N] [--writers N] [--timeout S] [--seed N]
#              [--final S] [--until FILE] [--writes-on N]
#
# --clients do a mix of everything; --writers (the write storm) mostly
# write.  With --writes-on N every write goes to the Nth server (from
# 0), the reads still to any: the other servers then serve only what
# they learn from it (run.sh's STOP_ALONE=all).  With --until, the clients go on past --seconds until FILE
# exists (run.sh makes it once its faults are over and writes have had
# time to come back), for at most four times --seconds: a fault that
# takes longer than planned still has load after it.
# Before they start, the parent reads every lesson once and records it
# as "init" (the state before the history); after they end, it reads
# the final state (final_reads).  Each client writes its own FILE.N;
# the parent appends them to FILE at the end.
#
# Bodies are read with regular expressions, not a JSON parser: the
# module writes flat objects in a fixed order, and JSON::PP (the only
# parser the test machine is sure to have) would take most of the CPU.
# A lesson's state is "id<TAB>title<TAB>levelId<TAB>digest", the title
# as the body escapes it and the digest over the whole object's text,
# so that a lesson read back with other fields than its write answered
# shows up.  Every write's title is unique (c<client>-<seq> for a create,
# u<client>-<seq> for an update), so a state read names its write.
use strict;
use warnings;

use Digest::MD5 qw(md5_hex);
use Getopt::Long qw(GetOptions);
use JSON::PP;
use LWP::UserAgent;
use POSIX ();
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC);

my %o = (clients => 4, writers => 0, timeout => 5, seconds => 20,
         seed => $$, final => 30);
GetOptions(\%o, 'urls=s', 'token=s', 'out=s', 'seconds=f', 'clients=i',
           'writers=i', 'timeout=f', 'seed=i', 'final=f', 'until=s',
           'writes-on=i')
    or die "usage: clients.pl --urls U1,U2 --token T --out FILE --seconds S\n";
defined $o{$_} or die "clients.pl: --$_ is required\n" for qw(urls token out);
my @urls = split /,/, $o{urls};
die "clients.pl: --writes-on $o{'writes-on'}: no such server\n"
    if defined $o{'writes-on'}
       && ($o{'writes-on'} < 0 || $o{'writes-on'} > $#urls);
my $js = JSON::PP->new->canonical;
my $ELEMENT = qr/\{(?:[^{}"]++|"(?:[^"\\]++|\\.)*+")*+\}/s;

sub now { clock_gettime(CLOCK_MONOTONIC) }

# One lesson object's text: its state string.
sub lesson_state {
    my ($text) = @_;
    my ($id) = $text =~ /"id":(\d+)/;
    my ($lv) = $text =~ /"levelId":(\d+)/;
    my ($ti) = $text =~ /"title":"((?:[^"\\]++|\\.)*+)"/;
    return undef unless defined $id && defined $lv && defined $ti;
    return join "\t", $id, $ti, $lv, substr(md5_hex($text), 0, 10);
}

sub list_state {
    my ($text) = @_;
    return undef unless defined $text && $text =~ /\A\s*\[/;
    return [map { lesson_state($_) // '?' } $text =~ /$ELEMENT/g];
}

sub agent {
    return LWP::UserAgent->new(timeout => $o{timeout}, keep_alive => 4,
                               agent => 'lessons-history');
}

# One request: (record, response).  The record has st 0 and err when no
# answer came (timeout, refused, reset): for a write, an unknown outcome.
sub call {
    my ($ua, $s, $method, $path, $hdr, $body) = @_;
    my $req = HTTP::Request->new($method, $urls[$s] . $path,
        ['Authorization' => "Bearer $o{token}", @{$hdr || []}]);
    if (defined $body) {
        $req->header('Content-Type' => 'application/json');
        $req->content($body);
    }
    my $t0 = now();
    my $res = $ua->request($req);
    my $t1 = now();
    my %r = (s => $s, t0 => $t0, t1 => $t1, u => $path);
    if (($res->header('Client-Warning') // '') eq 'Internal response') {
        $r{st} = 0;
        ($r{err} = $res->message // 'error') =~ s/\s+/ /g;
    } else {
        $r{st} = $res->code + 0;
        my $e = $res->header('ETag');
        $r{e} = $e if defined $e;
    }
    return (\%r, $res);
}

# --- the state before the history ------------------------------------------
sub init {
    my ($fh) = @_;
    my $ua = agent();
    my ($r, $res) = call($ua, 0, 'GET', '');
    $r->{st} == 200 or die "clients.pl: GET the list: $r->{st} "
        . ($r->{err} // $res->status_line) . "\n";
    my @ids;
    for my $el (@{list_state($res->decoded_content)}) {
        push @ids, (split /\t/, $el)[0];
    }
    for my $id (@ids) {
        ($r, $res) = call($ua, 0, 'GET', "/$id");
        $r->{st} == 200 or die "clients.pl: GET /$id: $r->{st}\n";
        $r->{op} = 'init';
        $r->{c} = 0;
        $r->{id} = $id + 0;
        $r->{b} = lesson_state($res->decoded_content);
        print $fh $js->encode($r), "\n";
    }
    return @ids;
}

# --- one client --------------------------------------------------------------
# What the client knows: the lessons it has seen (id => the last ETag
# seen, or '' when it must read it first) and, for revalidations, each
# path's last tag.
my (%known, %tag, $seq, $cid, $writer, $out, $ua);

my %MIX = (
    mixed  => [create => 6, update => 18, delete => 4, get => 22,
               list => 10, level => 12, reval => 28],
    writer => [create => 25, update => 50, delete => 15, get => 6,
               reval => 4],
);

sub pick {
    my ($w) = @_;
    my $sum = 0;
    $sum += $w->[2 * $_ + 1] for 0 .. @$w / 2 - 1;
    my $x = rand $sum;
    for (my $i = 0; $i < @$w; $i += 2) {
        return $w->[$i] if ($x -= $w->[$i + 1]) < 0;
    }
    return $w->[0];
}

sub record {
    my ($r, %f) = @_;
    @$r{keys %f} = values %f;
    $r->{c} = $cid;
    print $out $js->encode($r), "\n";
}

sub learn_lesson {
    my ($r, $res) = @_;
    my $st = lesson_state($res->decoded_content);
    $r->{b} = $st if defined $st;
    if (defined $st && defined $r->{e}) {
        my $id = (split /\t/, $st)[0];
        $known{$id} = $r->{e};
        $tag{"/$id"} = $r->{e};
    }
}

sub learn_list {
    my ($r, $res, $all) = @_;
    my $st = list_state($res->decoded_content);
    return unless $st;
    $r->{b} = $st;
    $tag{$r->{u}} = $r->{e} if defined $r->{e};
    my %seen;
    for my $el (@$st) {
        my $id = (split /\t/, $el)[0];
        $seen{$id} = 1;
        $known{$id} //= '';
    }
    if ($all) {
        exists $seen{$_} or delete $known{$_} for keys %known;
    }
}

# The server a write goes to.
sub write_server {
    return defined $o{'writes-on'} ? $o{'writes-on'} : int rand @urls;
}

sub some_id {
    my @ids = keys %known;
    return @ids ? $ids[int rand @ids] : undef;
}

sub op_get {
    my ($id) = @_;
    $id //= some_id() // return;
    my ($r, $res) = call($ua, int rand @urls, 'GET', "/$id");
    if ($r->{st} == 200) {
        learn_lesson($r, $res);
    } elsif ($r->{st} == 404) {
        delete $known{$id};
        delete $tag{"/$id"};
    }
    record($r, op => 'get', id => $id + 0);
}

sub op_create {
    my $lv = 1 + int rand 6;
    my $title = "c$cid-" . ++$seq;
    my $body = qq({"levelId":$lv,"title":"$title","order":$seq,"topic":"h$cid"});
    my ($r, $res) = call($ua, write_server(), 'POST', '', [], $body);
    learn_lesson($r, $res) if $r->{st} == 201;
    my %f = (op => 'create', ti => $title, lv => $lv);
    $f{id} = (split /\t/, $r->{b})[0] + 0 if defined $r->{b};
    record($r, %f);
}

# Updates and deletes name the version they were made on (If-Match): a
# lesson whose tag is unknown is read first.
sub op_write {
    my ($kind) = @_;
    my $id = some_id() // return op_create();
    return op_get($id) unless $known{$id};
    my $im = $known{$id};
    my ($r, $res, %f);
    if ($kind eq 'update') {
        my $title = "u$cid-" . ++$seq;
        my $lv = rand() < 0.3 ? 1 + int rand 6 : undef;
        my $body = defined $lv ? qq({"title":"$title","levelId":$lv})
                               : qq({"title":"$title"});
        ($r, $res) = call($ua, write_server(), 'PUT', "/$id",
                          ['If-Match' => $im], $body);
        %f = (ti => $title);
        $f{lv} = $lv if defined $lv;
        learn_lesson($r, $res) if $r->{st} == 200;
    } else {
        ($r, $res) = call($ua, write_server(), 'DELETE', "/$id",
                          ['If-Match' => $im]);
        if ($r->{st} == 204) {
            delete $known{$id};
            delete $tag{"/$id"};
        }
    }
    # 412 or no answer: read it again before the next write.
    $known{$id} = '' if exists $known{$id} && $r->{st} != 200;
    delete $known{$id} if $r->{st} == 404;
    record($r, op => $kind, id => $id + 0, im => $im, %f);
}

sub op_list {
    my ($level) = @_;
    my $path = defined $level ? "/level/$level" : '';
    my ($r, $res) = call($ua, int rand @urls, 'GET', $path);
    learn_list($r, $res, !defined $level) if $r->{st} == 200;
    record($r, op => defined $level ? 'level' : 'list');
}

# A revalidation: GET with If-None-Match, the last tag seen for a path.
sub op_reval {
    my @paths = keys %tag;
    return op_list() unless @paths;
    my $path = $paths[int rand @paths];
    my $inm = $tag{$path};
    my ($r, $res) = call($ua, int rand @urls, 'GET', $path,
                         ['If-None-Match' => $inm]);
    if ($r->{st} == 200) {
        $path =~ m{\A/\d+\z} ? learn_lesson($r, $res)
                             : learn_list($r, $res, $path eq '');
    } elsif ($r->{st} == 404) {
        delete $known{substr $path, 1};
        delete $tag{$path};
    }
    my %f = (op => 'reval', inm => $inm);
    $f{id} = substr($path, 1) + 0 if $path =~ m{\A/\d+\z};
    record($r, %f);
}

# Whether a client goes on: before --seconds, always; after it, until
# the --until file exists, up to the hard end.
sub going_on {
    my ($deadline, $end) = @_;
    my $t = now();
    return 1 if $t < $deadline;
    return $t < $end && defined $o{until} && !-e $o{until};
}

sub client {
    my ($ids, $deadline, $end) = @_;
    srand($o{seed} + 7919 * $cid);
    open $out, '>', "$o{out}.$cid" or die "clients.pl: $o{out}.$cid: $!\n";
    $ua = agent();
    %known = map { $_ => '' } @$ids;
    $seq = 0;
    my $mix = $MIX{$writer ? 'writer' : 'mixed'};
    while (going_on($deadline, $end)) {
        my $op = pick($mix);
        # Keep the catalogue between 12 and 60 lessons.
        $op = 'create' if $op eq 'delete' && keys %known < 12;
        $op = 'delete' if $op eq 'create' && keys %known > 60;
        if    ($op eq 'create') { op_create() }
        elsif ($op eq 'update' || $op eq 'delete') { op_write($op) }
        elsif ($op eq 'get')    { op_get() }
        elsif ($op eq 'list')   { op_list() }
        elsif ($op eq 'level')  { op_list(1 + int rand 6) }
        else                    { op_reval() }
    }
    close $out or die "clients.pl: $o{out}.$cid: $!\n";
    POSIX::_exit(0);
}

# --- the final state ------------------------------------------------------------
# Once every client is done (and the fault with them), the list from
# every server and each lesson listed, as client 0: reads that begin
# after every write completed, so the checker sees whether the final
# state holds each lesson's last answered write or a later one (a write
# lost in a failover shows up here, if no read during the load saw it).
# A server still without a database is asked again, for up to
# --final seconds.
sub final_reads {
    my ($fh) = @_;
    my $ua = agent();
    $cid = 0;
    $out = $fh;
    my %ids;
    for my $s (0 .. $#urls) {
        my $until = now() + $o{final};
        my ($r, $res);
        while (1) {
            ($r, $res) = call($ua, $s, 'GET', '');
            last if $r->{st} == 200 || now() > $until;
            sleep 1;
        }
        my $st = $r->{st} == 200 ? list_state($res->decoded_content) : undef;
        $r->{b} = $st if $st;
        record($r, op => 'list');
        $ids{(split /\t/, $_)[0]} = 1 for @{$st || []};
    }
    for my $id (sort { $a <=> $b } keys %ids) {
        my ($r, $res) = call($ua, int rand @urls, 'GET', "/$id");
        learn_lesson($r, $res) if $r->{st} == 200;
        record($r, op => 'get', id => $id + 0);
    }
}

open my $fh, '>', $o{out} or die "clients.pl: $o{out}: $!\n";
my @ids = init($fh);
close $fh;
my $deadline = now() + $o{seconds};
my $end = now() + 4 * $o{seconds};
my @kids;
my $n = $o{clients} + $o{writers};
for my $i (1 .. $n) {
    my $pid = fork // die "clients.pl: fork: $!\n";
    if (!$pid) {
        $cid = $i;
        $writer = $i > $o{clients};
        client(\@ids, $deadline, $end);
    }
    push @kids, $pid;
}
my $bad = 0;
for my $pid (@kids) {
    waitpid $pid, 0;
    $bad++ if $?;
}
open $fh, '>>', $o{out} or die "clients.pl: $o{out}: $!\n";
for my $i (1 .. $n) {
    open my $in, '<', "$o{out}.$i" or next;
    print $fh $_ while <$in>;
    close $in;
    unlink "$o{out}.$i";
}
final_reads($fh);
close $fh or die "clients.pl: $o{out}: $!\n";
exit($bad ? 1 : 0);
