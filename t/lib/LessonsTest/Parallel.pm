package LessonsTest::Parallel;

# Many requests at once, for the fault tests: each in a process of its
# own, over a raw HTTP/1.0 socket (LWP and Apache::Test's configuration
# are too heavy to start in dozens of processes at once on a small
# machine, and their start-up would be counted as the server's time).
#
#   my @kids = start([tag, METHOD, vhost, path, json => {...},
#                     headers => [name => value, ...]], ...);
#   my @res  = collect(@kids);   # [{ tag, code, secs, retry, type,
#                                #    location, etag }]
#   my @res  = parallel(@jobs);  # both
#   my ($go, @kids) = start_held(@jobs);  # connected, not yet sent
#   $go->();                     # every request is sent at once

use strict;
use warnings;

use Exporter 'import';
use IO::Socket::INET ();
use Time::HiRes qw(time);
use LessonsTest qw(base_url good_token json_text);

our @EXPORT_OK = qw(start start_held collect parallel raw_request settle
                    renew_suite_server);

my (%hostport, $token);

sub hostport {
    my ($vhost) = @_;
    my $key = defined $vhost ? $vhost : '';
    if (!$hostport{$key}) {
        (my $hp = base_url($vhost)) =~ s{\Ahttp://}{};
        $hostport{$key} = $hp;
    }
    return $hostport{$key};
}

# One exchange; returns "code retry-after content-type location etag".  $ready, when
# given, is called between connecting and sending; $headers (name =>
# value pairs) are sent besides the token's.
sub raw_request {
    my ($m, $vhost, $path, $json, $ready, $headers) = @_;
    my @h = @{ $headers || [] };
    my $extra = '';
    while (my ($k, $v) = splice @h, 0, 2) { $extra .= "$k: $v\r\n" }
    my $hp = hostport($vhost);
    my $body = defined $json ? json_text($json) : '';
    $token ||= good_token(claims => { exp => time + 3600 });
    my $sock = IO::Socket::INET->new(PeerAddr => $hp, Timeout => 120)
        or return "0 - - - -";
    $ready->() if $ready;
    print $sock "$m $path HTTP/1.0\r\nHost: $hp\r\n"
        . "Authorization: Bearer $token\r\n" . $extra
        . (length $body ? "Content-Type: application/json\r\n"
                          . "Content-Length: " . length($body) . "\r\n" : '')
        . "\r\n$body";
    local $/;
    my $res = <$sock> // '';
    my ($code) = $res =~ m{\AHTTP/1\.\d (\d{3})};
    my ($retry) = $res =~ /^Retry-After: *(\S+)/mi;
    my ($type) = $res =~ /^Content-Type: *(\S+)/mi;
    my ($location) = $res =~ /^Location: *(\S+)/mi;
    my ($etag) = $res =~ /^ETag: *(\S+)/mi;
    return join ' ', $code // 0, $retry // '-', $type // '-', $location // '-',
        $etag // '-';
}

sub start { return start_jobs(undef, @_) }

# Fork every job, each connected and waiting on $gate (a pipe's read
# end) before it sends, when $gate is given.
sub start_jobs {
    my ($gate, @jobs) = @_;
    my @kids;
    # Resolve addresses (and the token) once, before forking.
    for my $job (@jobs) { hostport($job->[2]) }
    $token ||= good_token(claims => { exp => time + 3600 });
    for my $job (@jobs) {
        my ($tag, $m, $vhost, $path, %o) = @$job;
        pipe(my $r, my $w) or die "pipe: $!";
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            close $r;
            my $ready = $gate && sub { sysread $gate, my $byte, 1 };
            my $t0 = time;
            my ($code, $retry, $type, $location, $etag) =
                split ' ', raw_request($m, $vhost, $path, $o{json}, $ready,
                                       $o{headers});
            printf $w "%d %.3f %s %s %s %s\n", $code, time - $t0, $retry,
                $type, $location, $etag;
            close $w;
            POSIX::_exit(0);
        }
        close $w;
        push @kids, [ $pid, $r, $tag ];
    }
    return @kids;
}

sub collect {
    my @out;
    for my $k (@_) {
        my ($pid, $r, $tag) = @$k;
        my $line = <$r> // '0 0 - - - -';
        waitpid $pid, 0;
        my ($code, $secs, $retry, $type, $location, $etag) = split ' ', $line;
        push @out, { code => $code, secs => $secs, retry => $retry,
                     type => $type, location => $location, etag => $etag,
                     tag => $tag };
    }
    return @out;
}

# Every job connected first, then sent at once by $go->(): the server
# sees them together, however slowly this machine forks.
sub start_held {
    my @jobs = @_;
    pipe(my $gate, my $open) or die "pipe: $!";
    my @kids = start_jobs($gate, @jobs);
    close $gate;
    my $go = sub {
        syswrite $open, 'x' x scalar @jobs;
        close $open;
    };
    return ($go, @kids);
}

sub parallel { collect(start(@_)) }

# After the database went away and came back: bursts of $n parallel GETs
# of $vhost's list (spread over its processes' pooled connections) until
# one burst answers 200 throughout; the seconds that took, or undef after
# 30 s.  $each, if given, sees every burst's results.
sub settle {
    my ($vhost, $n, $each) = @_;
    my $t0 = Time::HiRes::time();
    while (Time::HiRes::time() - $t0 < 30) {
        my @res = parallel(map { [ 'get', GET => $vhost, '/api/lessons' ] } 1 .. $n);
        $each->(@res) if $each;
        return Time::HiRes::time() - $t0 unless grep { $_->{code} != 200 } @res;
        Time::HiRes::sleep(0.25);
    }
    return;
}

# After a test met the suite's own server with what leaves its pooled
# connections spent (a database restarted, a SQLite file restored): a
# graceful restart gives the next test files fresh children and
# connections.  The seconds until it answers again, or undef.
sub renew_suite_server {
    my $pidfile = Apache::Test::vars('t_logs') . '/httpd.pid';
    my ($pid) = do { open my $fh, '<', $pidfile or die "$pidfile: $!"; <$fh> =~ /(\d+)/ };
    kill('USR1', $pid) or die "cannot signal the suite's server ($pid): $!\n";
    Time::HiRes::sleep(2);
    return settle(undef, 12);
}

use POSIX ();
use Time::HiRes ();

1;
