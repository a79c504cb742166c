package LessonsTest::Proxy;

# An outgoing HTTP proxy for the tests, as a corporate one is seen from
# the server: it takes CONNECT host:port, counts it per target, and
# relays bytes both ways (so TLS runs through it untouched); anything
# else it counts as well and answers 405.  It can refuse CONNECT (403)
# and be stopped and started again on its port.
#
#   my $p = start_proxy($dir, 'name');          # { port, url, pid, ... }
#   start_proxy($dir, 'name', port => $port);   # on that port (again)
#   start_proxy($dir, 'evil', to => $hostport);   # every tunnel ends there
#   proxy_counts($p);       # { '127.0.0.1:8443' => 2, 'GET http://...' => 1 }
#   proxy_total($p);        # every request it took
#   proxy_refuse($p, 1);    # CONNECT answered 403 from now on (0: relay)
#   stop_proxy($p);         # nothing listens on its port until started
#
# Each request is one line in "$dir/$name.proxy.log"; a proxy is stopped
# when the process that started it ends.

use strict;
use warnings;

use Exporter 'import';
use Fcntl qw(:flock);
use IO::Select ();
use IO::Socket::INET ();
use POSIX ();
use LessonsTest ();

our @EXPORT_OK = qw(start_proxy stop_proxy proxy_counts proxy_total
                    proxy_refuse);

my @RUNNING;    # [proxy pid, pid of the process that started it]

END {
    for my $p (@RUNNING) {
        next unless $p->[1] == $$ && $p->[0];
        kill 'TERM', -$p->[0];
        waitpid $p->[0], 0;
    }
}

sub log_line {
    my ($log, $line) = @_;
    open my $fh, '>>', $log or return;
    flock $fh, LOCK_EX;
    print $fh "$line\n";
    close $fh;
}

# The request head, at most 8 KiB, within 10 s.
sub read_head {
    my ($c) = @_;
    my ($head, $sel) = ('', IO::Select->new($c));
    while ($head !~ /\r\n\r\n/ && length $head < 8192) {
        return undef unless $sel->can_read(10);
        my $n = sysread $c, $head, 8192 - length $head, length $head;
        return undef unless $n;
    }
    return $head;
}

sub relay {
    my ($a, $b) = @_;
    my $sel = IO::Select->new($a, $b);
    while (my @ready = $sel->can_read(30)) {
        for my $from (@ready) {
            my $n = sysread $from, my $buf, 16384;
            return unless $n;
            my $to = $from == $a ? $b : $a;
            my $off = 0;
            while ($off < $n) {
                my $w = syswrite $to, $buf, $n - $off, $off;
                return unless $w;
                $off += $w;
            }
        }
    }
}

sub serve {
    my ($c, $self) = @_;
    my $head = read_head($c) // return;
    my ($method, $target) = $head =~ /\A(\S+) (\S+) HTTP\/1\.[01]\r\n/
        or return;
    if ($method ne 'CONNECT') {
        log_line($self->{log}, "$method $target");
        print {$c} "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n"
                 . "Connection: close\r\n\r\n";
        return;
    }
    log_line($self->{log}, $target);
    if (-e "$self->{log}.refuse") {
        print {$c} "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n"
                 . "Connection: close\r\n\r\n";
        return;
    }
    # An attacker's proxy (to => HOST:PORT) ends every tunnel elsewhere.
    my $up = IO::Socket::INET->new(PeerAddr => $self->{to} // $target,
                                   Timeout => 5);
    if (!$up) {
        print {$c} "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n"
                 . "Connection: close\r\n\r\n";
        return;
    }
    syswrite $c, "HTTP/1.1 200 Connection established\r\n\r\n";
    relay($c, $up);
}

sub start_proxy {
    my ($dir, $name, %opt) = @_;
    my $self = { name => $name, log => "$dir/$name.proxy.log", to => $opt{to},
                 port => $opt{port} || LessonsTest::free_port() };
    $self->{url} = "http://127.0.0.1:$self->{port}";
    my $listen;
    for (1 .. 50) {         # the port of a proxy just stopped frees soon
        $listen = IO::Socket::INET->new(LocalAddr => '127.0.0.1',
                                        LocalPort => $self->{port},
                                        Listen => 64, ReuseAddr => 1)
            and last;
        select undef, undef, undef, 0.1;
    }
    $listen or die "proxy $name: cannot listen on $self->{port}: $!\n";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        # A group of its own: stop_proxy ends the tunnels too.
        POSIX::setpgid(0, 0);
        $SIG{CHLD} = 'IGNORE';
        $SIG{TERM} = sub { POSIX::_exit(0) };
        while (1) {
            my $c = $listen->accept or next;
            my $kid = fork;
            if (defined $kid && !$kid) {
                close $listen;
                serve($c, $self);
                POSIX::_exit(0);
            }
            close $c;
        }
    }
    POSIX::setpgid($pid, $pid);        # (both sides: whoever runs first)
    close $listen;
    $self->{pid} = $pid;
    push @RUNNING, [ $pid, $$ ];
    return $self;
}

sub stop_proxy {
    my ($self) = @_;
    return unless $self->{pid};
    kill 'TERM', -$self->{pid};
    waitpid $self->{pid}, 0;
    $_->[0] = 0 for grep { $_->[0] == $self->{pid} } @RUNNING;
    $self->{pid} = 0;
}

sub proxy_counts {
    my ($self) = @_;
    my %n;
    if (open my $fh, '<', $self->{log}) {
        flock $fh, LOCK_SH;
        while (my $line = <$fh>) {
            chomp $line;
            $n{$line}++;
        }
    }
    return \%n;
}

sub proxy_total {
    my ($self) = @_;
    my $n = 0;
    $n += $_ for values %{ proxy_counts($self) };
    return $n;
}

sub proxy_refuse {
    my ($self, $on) = @_;
    if ($on) {
        open my $fh, '>', "$self->{log}.refuse" or die "$self->{log}.refuse: $!";
        close $fh;
    }
    else {
        unlink "$self->{log}.refuse";
    }
}

1;
