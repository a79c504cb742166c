package LessonsTest::Ports;

# Free TCP ports on 127.0.0.1 for the suites' servers, each reserved for
# its suite, not only free when it was looked at.  CI runs the suites of
# both databases, the other release's root, the package test and the
# fuzzers at once, each drawing ports at random from one range: a port
# seen free, closed, and bound by the test's server a second later was
# taken meanwhile by another suite's server (CI: "AH00072: make_sock:
# could not bind to address 127.0.0.1:27915").
#
# The reservation is a Linux abstract socket named for the port: binding
# it is atomic, it belongs to the network namespace (so the release root,
# entered with chroot and a pid namespace only, shares it) and it goes
# away when the last process holding it ends, however it ends.
#
#   port_range()       (first, last) of the ports drawn: 10000 to below
#                      the kernel's ephemeral range, since a port left
#                      free a moment could be taken as the source port of
#                      any connection on the machine (CI: "could not bind
#                      to address 127.0.0.1:42857"); LESSONS_TEST_PORTS=
#                      FIRST-LAST narrows it
#   reserve_port($p)   the socket that holds $p's reservation, or undef
#                      when another process holds it or something
#                      listens on 127.0.0.1:$p
#   reserve_ports($n)  ($first, @sockets): $n ports in a row, drawn at
#                      random, each reserved; dies after 200 draws

use strict;
use warnings;

use Exporter 'import';
use IO::Socket::INET ();
use Socket qw(AF_UNIX SOCK_STREAM pack_sockaddr_un);

our @EXPORT_OK = qw(port_range reserve_port reserve_ports);

sub port_range {
    my $want = $ENV{LESSONS_TEST_PORTS} // '';
    if ($want ne '') {
        my ($first, $last) = $want =~ /\A(\d+)-(\d+)\z/
            or die "LESSONS_TEST_PORTS=$want: FIRST-LAST, as 20000-29999\n";
        $first >= 1024 && $first <= $last && $last <= 65535
            or die "LESSONS_TEST_PORTS=$want: not a range of ports from 1024 to 65535\n";
        return ($first, $last);
    }
    my $top = 32768;
    if (open my $fh, '<', '/proc/sys/net/ipv4/ip_local_port_range') {
        my ($low) = (<$fh> // '') =~ /(\d+)/;
        $top = $low if $low && $low > 12000;
    }
    return (10000, $top - 1);
}

sub reserve_port {
    my ($port) = @_;
    socket(my $hold, AF_UNIX, SOCK_STREAM, 0) or return undef;
    bind($hold, pack_sockaddr_un("\0lessons-test-port-$port")) or return undef;
    my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port,
                                  Listen => 1, ReuseAddr => 1) or return undef;
    close $s;
    return $hold;
}

# Draws come from /dev/urandom, never from rand: the layout suites seed
# Perl's generator and make servers as they go, and a draw of rand here
# would change every layout after it (their seed must say what ran); a
# forked process draws its own, too.
sub draw {
    my ($span) = @_;
    my $bytes = '';
    if (open my $fh, '<:raw', '/dev/urandom') {
        read $fh, $bytes, 4;
    }
    my $n = length $bytes == 4 ? unpack('L', $bytes)
          : ($$ * 2654435761 + int(time * 1000)) % 4294967296;
    return $n % $span;
}

sub reserve_ports {
    my ($n) = @_;
    my ($first, $last) = port_range();
    my $span = $last - $first + 1 - ($n - 1);
    die "free ports: no room for $n in a row in $first-$last\n" if $span < 1;
    for (1 .. 200) {
        my $base = $first + draw($span);
        my @held;
        for my $p ($base .. $base + $n - 1) {
            my $h = reserve_port($p) or last;
            push @held, $h;
        }
        return ($base, @held) if @held == $n;
    }
    die "free ports: none free and unreserved in $first-$last after 200 draws\n";
}

1;
