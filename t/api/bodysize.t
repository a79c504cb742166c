# Body caps: 64 KiB by default (/api/lessons), LessonsMaxBodySize 1024 on
# /small/api/lessons, 16 MiB on /big/api/lessons.  Over the cap: 413,
# nothing written; with Content-Length and with a chunked body.  The
# buffer grows as bytes arrive: a declared Content-Length reserves
# nothing.
use strict;
use warnings FATAL => 'all';
use utf8;

use FindBin;
use lib "$FindBin::Bin/../lib";
use IO::Socket::INET ();
use Time::HiRes ();
use Apache::Test qw(-withtestmore);
use Apache::TestRequest ();
use Apache::TestUtil qw(t_catfile);
use LessonsTest;

my ($id) = seed({ level_id => 1, title => 'Groß', sort_order => 1 });

# A valid create body of exactly $n bytes.
sub body_of { LessonsTest::padded_body(@_) }

sub too_large {
    my ($method, $path, $body, $name, %o) = @_;
    my $before = db_lessons();
    my $res = call($method => $path, body => $body, %o);
    is_problem($res, 413, $name);
    is_deeply db_lessons(), $before, "$name: table unchanged";
}

# ---- /small: 1024 bytes
is call(POST => '/small/api/lessons', body => body_of(1024))->code, 201,
    '/small: 1024 bytes is accepted';
too_large(POST => '/small/api/lessons', body_of(1025), '/small: 1025 bytes');
too_large(POST => '/small/api/lessons', body_of(4000), '/small: 4000 bytes');
too_large(POST => '/small/api/lessons', body_of(1025), '/small: 1025 bytes chunked',
          chunked => 1);
too_large(POST => '/small/api/lessons', body_of(3000), '/small: 3000 bytes chunked',
          chunked => 1);
is call(POST => '/small/api/lessons', body => body_of(1000), chunked => 1)->code,
    201, '/small: 1000 bytes chunked is accepted';
too_large(PUT => "/small/api/lessons/$id", body_of(2000), '/small: PUT 2000 bytes');
too_large(PUT => "/small/api/lessons/$id", body_of(2000),
          '/small: PUT 2000 bytes chunked', chunked => 1);
# The cap holds even when the JSON itself is not valid.
too_large(POST => '/small/api/lessons', 'x' x 5000, '/small: 5000 bytes of garbage');

# ---- default: 64 KiB
is call(POST => '/api/lessons', body => body_of(65536))->code, 201,
    'default: 64 KiB is accepted';
too_large(POST => '/api/lessons', body_of(65537), 'default: 64 KiB + 1');
too_large(POST => '/api/lessons', body_of(65537), 'default: 64 KiB + 1 chunked',
          chunked => 1);
too_large(POST => '/api/lessons', body_of(300_000), 'default: 300 KB');
is call(POST => '/api/lessons', body => body_of(60_000), chunked => 1)->code,
    201, 'default: 60000 bytes chunked is accepted';

# ---- a declared Content-Length reserves no memory (/big: 16 MiB)
#
# Requests declare the whole cap and send 100 bytes.  Once httpd has
# taken those bytes off the socket, the module's handler is inside its
# read loop (nothing else reads a body), so its buffer exists: the
# serving children's address space (VmData) must not have grown by the
# declared sizes.  Linux /proc tells which child holds each connection
# and what is left in its receive queue.  This runs before any 16 MiB
# body is read: a freed buffer could be reused without growing VmData.
# Busy workers make the MPM start a child; a request that lands there
# has nothing to compare with, so that attempt is made again.
my $big = 16 * 1024 * 1024;
SKIP: {
    skip 'needs Linux /proc', 4
        unless -r '/proc/net/tcp' && -r "/proc/$$/status";
    my $held = 4;
    my $hostport = Apache::TestRequest::hostport(Apache::Test::config());
    my ($sport) = $hostport =~ /:(\d+)\z/;
    my $pidfile = t_catfile(Apache::Test::vars('t_logs'), 'httpd.pid');
    my $before = db_lessons();
    my ($in_read, $measured, $grown, @pids);

    for my $attempt (1 .. 3) {
        my %base = map { my $pid = $_; ($pid => vm_data($pid)) }
                   httpd_children($pidfile);
        # All connections at once, headers only: the 100 body bytes must
        # be left for the handler to read.
        my @socks = map { held_request($hostport, $big) } 1 .. $held;
        my @holders = map {
            my $sock = $_;
            [ wait_for(sub {
                my ($ino, $rx) = server_socket($sport, $sock->sockport);
                return unless defined $ino && $rx == 0;
                my $p = holder($ino, $pidfile);
                return $p ? ($ino, $p) : ();
            }) ];
        } @socks;
        send_all($_, substr(body_of($big), 0, 100)) for @socks;
        my $read = grep {
            my $sock = $_;
            wait_for(sub {
                my ($ino, $rx) = server_socket($sport, $sock->sockport);
                return defined $ino && $rx == 0 ? 1 : ();
            });
        } @socks;
        my %serving = map { $_->[1] ? ($_->[1] => 1) : () } @holders;
        @pids = sort keys %serving;
        $in_read = $read == $held && !grep { !$_->[1] } @holders;
        $measured = !grep { !exists $base{$_} } @pids;
        $grown = 0;
        for my $pid (@pids) {
            $grown += vm_data($pid) - ($base{$pid} // 0);
        }
        close $_ for @socks;
        last if $measured || !$in_read;
        diag "attempt $attempt: a request landed in a new child "
            . "(before: @{[sort keys %base]}; serving: @pids)";
    }
    note "serving children @pids: VmData grew by $grown kB while $held "
        . "requests declared $big bytes each";
    ok $in_read, "$held held requests: each in the handler's read loop";
    ok $measured, 'the serving children were measured before the requests';
    ok $measured && $grown < $held * $big / 1024 / 2,
        "$held requests declaring 16 MiB and sending 100 bytes hold far "
        . "less than 16 MiB each (grew $grown kB)";
    is_deeply db_lessons(), $before, 'abandoned bodies: table unchanged';
}

# ---- /big: 16 MiB, reached by doubling the buffer from 8 KiB
is call(POST => '/big/api/lessons', body => body_of($big))->code, 201,
    '/big: 16 MiB is accepted';
is call(POST => '/big/api/lessons', body => body_of($big), chunked => 1)->code,
    201, '/big: 16 MiB chunked is accepted';
is call(POST => '/big/api/lessons', body => body_of(12_345),
        chunked => 1)->code, 201, '/big: 12345 bytes chunked is accepted';
too_large(POST => '/big/api/lessons', body_of($big + 1), '/big: 16 MiB + 1');
too_large(POST => '/big/api/lessons', body_of($big + 1),
          '/big: 16 MiB + 1 chunked', chunked => 1);

# A connection that has sent the headers of a create declaring $length
# bytes, and no body yet.
sub held_request {
    my ($hostport, $length) = @_;
    my $sock = IO::Socket::INET->new(PeerAddr => $hostport, Proto => 'tcp',
                                     Timeout => 30)
        or die "connect $hostport: $!";
    binmode $sock;
    my $t = good_token();
    send_all($sock, "POST /big/api/lessons HTTP/1.1\r\nHost: $hostport\r\n"
             . "Authorization: Bearer $t\r\n"
             . "Content-Type: application/json\r\n"
             . "Content-Length: $length\r\n\r\n");
    return $sock;
}

sub send_all {
    my ($sock, $data) = @_;
    $sock->syswrite($data) == length $data or die "write: $!";
}

# Poll $code until it returns something (at most 10 s); its result.
sub wait_for {
    my ($code) = @_;
    for (1 .. 200) {
        my @r = $code->();
        return wantarray ? @r : $r[0] if @r;
        Time::HiRes::sleep(0.05);
    }
    return;
}

# The server's end of our connection from $cport: its inode and the
# bytes waiting in its receive queue.
sub server_socket {
    my ($sport, $cport) = @_;
    for my $file ('/proc/net/tcp', '/proc/net/tcp6') {
        open my $fh, '<', $file or next;
        while (my $line = <$fh>) {
            my @f = split ' ', $line;
            next unless @f > 9 && $f[1] =~ /:([0-9A-F]{4})\z/;
            next unless hex($1) == $sport;
            next unless $f[2] =~ /:([0-9A-F]{4})\z/ && hex($1) == $cport;
            my (undef, $rx) = split /:/, $f[4];
            return ($f[9], hex $rx);
        }
    }
    return;
}

sub httpd_children {
    my ($pidfile) = @_;
    open my $fh, '<', $pidfile or die "$pidfile: $!";
    chomp(my $parent = <$fh>);
    my @kids;
    for my $stat (glob '/proc/[0-9]*/stat') {
        open my $s, '<', $stat or next;
        my $line = <$s> // next;
        push @kids, $1 if $line =~ /\A(\d+) .*\) \S+ (\d+) / && $2 == $parent;
    }
    return @kids;
}

# The httpd child that holds socket $inode.
sub holder {
    my ($inode, $pidfile) = @_;
    for my $pid (httpd_children($pidfile)) {
        opendir my $d, "/proc/$pid/fd" or next;
        for my $fd (readdir $d) {
            my $l = readlink "/proc/$pid/fd/$fd" // next;
            return $pid if $l eq "socket:[$inode]";
        }
    }
    return;
}

sub vm_data {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/status" or return 0;
    while (my $line = <$fh>) {
        return $1 if $line =~ /^VmData:\s+(\d+) kB/;
    }
    return 0;
}

done_testing;
