# Free TCP ports on 127.0.0.1, for scripts that start servers of their
# own (t/tools/integration.sh, t/bench/bench.sh).  Sourced by bash; the
# caller defines die.
#   port_free PORT       0 when nothing listens there
#   pick_port            a free port, reserved for as long as the script
#                        that sourced this runs, against every other
#                        suite's pick_port and free_port: drawn from 10000
#                        to below the kernel's ephemeral range, or from
#                        LESSONS_TEST_PORTS (t/lib/LessonsTest/Ports.pm
#                        says why).  A port is picked here and bound
#                        seconds later, when its server has started, and
#                        a suite beside this one must not take it
#                        meanwhile, nor while its server is stopped for a
#                        fault.  An argument (a port not to pick) is
#                        accepted and needs no check: a port this script
#                        holds is never picked again
#   pick_ports N         the first of N such ports in a row
port_free() {
    perl -MIO::Socket::INET -e \
        'exit(IO::Socket::INET->new(LocalAddr => "127.0.0.1",
              LocalPort => $ARGV[0], Listen => 1, ReuseAddr => 1) ? 0 : 1)' "$1"
}
PORTS_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")/../lib" && pwd)
pick_ports() {
    # The reservations are held by a process of their own that ends
    # within a second of this script's shell ($$ is that shell's, in
    # $(...) too).
    perl -I"$PORTS_LIB" -MLessonsTest::Ports=reserve_ports -mPOSIX -e '
        my ($owner, $n) = @ARGV;
        my ($first, @held) = eval { reserve_ports($n) };
        if (!defined $first) { print STDERR $@; exit 1 }
        defined(my $pid = fork) or die "fork: $!\n";
        if ($pid) { print "$first\n"; exit 0 }
        open STDIN, "<", "/dev/null";
        open STDOUT, ">", "/dev/null";
        open STDERR, ">", "/dev/null";
        # Nor any other of the shell'"'"'s files: a lock or a pipe that
        # the script lets go of stays let go.
        my %keep = map { fileno($_) => 1 } @held;
        POSIX::close($_) for grep { !$keep{$_} } 3 .. 1023;
        $0 = "lessons-test port hold $first+$n";
        sleep 1 while kill 0, $owner;' "$$" "$1" || die "no free TCP port found"
}
pick_port() {
    pick_ports 1
}
