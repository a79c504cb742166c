# A body that httpd cannot read gets one response, with the status httpd's
# input filter chose: 413 for a chunked body over LimitRequestBody (512 on
# /limit/api/lessons), 400 for a malformed chunk size.  Its body is httpd's
# own error document, the access log shows that status (never "-"), and
# nothing is written.  Our own cap (LessonsMaxBodySize) stays one
# problem+json 413.
#
# Raw sockets: LWP cannot send a broken chunk, and would hide a second
# response on the connection.  Each request is read until the server
# closes the connection and every "HTTP/1.1 " status line is counted.
use strict;
use warnings FATAL => 'all';
use utf8;

use FindBin;
use lib "$FindBin::Bin/../lib";
use IO::Select ();
use IO::Socket::INET ();
use Time::HiRes ();
use Apache::Test qw(-withtestmore);
use Apache::TestRequest ();
use Apache::TestUtil qw(t_catfile);
use LessonsTest;

my $hostport = Apache::TestRequest::hostport(Apache::Test::config());
my $log = t_catfile(Apache::Test::vars('t_logs'), 'lessons_access.log');
# This file's lines of the shared log only (files run before it log
# refused requests of their own, such as a 401 on /api/lessons).
my $log_from = -s $log || 0;
seed({ level_id => 1, title => 'Unberührt', sort_order => 1 });

# A valid create body of exactly $n bytes.
sub body_of { LessonsTest::padded_body(@_) }

# $body as chunks of at most $size bytes, with the last chunk.
sub chunked {
    my ($body, $size) = @_;
    return join('', map { sprintf("%x\r\n%s\r\n", length, $_) }
                    unpack "(a$size)*", $body) . "0\r\n\r\n";
}

# Send $head (request line and headers, without the blank line) and $body
# on a new connection, then read until the server closes it.  Returns the
# bytes read and whether the server closed the connection (rather than
# the 60 s bound on waiting running out).
sub raw {
    my ($head, $body, $sub) = @_;
    my $sock = IO::Socket::INET->new(PeerAddr => $hostport, Proto => 'tcp',
                                     Timeout => 30)
        or die "connect $hostport: $!";
    binmode $sock;
    my $token = token(claims => { sub => $sub });
    my $req = "$head\r\nHost: $hostport\r\nAuthorization: Bearer $token\r\n"
            . "Content-Type: application/json\r\n\r\n$body";
    $sock->syswrite($req) == length $req or die "write: $!";
    my ($data, $closed) = ('', 0);
    my $sel = IO::Select->new($sock);
    my $deadline = Time::HiRes::time() + 60;
    while ((my $left = $deadline - Time::HiRes::time()) > 0) {
        last unless $sel->can_read($left);
        my $n = $sock->sysread(my $buf, 65536);
        if (!$n) {              # EOF (or a reset: nothing more will come)
            $closed = 1;
            last;
        }
        $data .= $buf;
    }
    close $sock;
    return ($data, $closed);
}

# Every status code on the connection, in order.
sub statuses {
    my ($data) = @_;
    my @s;
    while ($data =~ m{HTTP/1\.1 (\d{3})?}g) {
        push @s, defined $1 ? $1 : '?';
    }
    return @s;
}

# The first response's Content-Type.
sub content_type {
    my ($data) = @_;
    my ($head) = split /\r\n\r\n/, $data, 2;
    return $head =~ /^Content-Type:[ \t]*([^\r\n]*)/mi ? $1 : '';
}

# Whether $data is one whole response and nothing after it: a body of
# exactly its Content-Length, or one chunked body up to its last chunk.
sub one_message {
    my ($data) = @_;
    my ($head, $rest) = split /\r\n\r\n/, $data, 2;
    return 0 unless defined $rest;
    if ($head =~ /^Content-Length:[ \t]*(\d+)/mi) {
        return length($rest) == $1;
    }
    if ($head =~ /^Transfer-Encoding:[ \t]*chunked/mi) {
        while ($rest =~ s/\A([0-9a-fA-F]+)[^\r\n]*\r\n//) {
            my $n = hex $1;
            return $rest eq "\r\n" if $n == 0;
            return 0 unless length($rest) >= $n + 2
                && substr($rest, $n, 2) eq "\r\n";
            substr($rest, 0, $n + 2) = '';
        }
        return 0;
    }
    return 1;               # delimited by the close itself
}

sub log_lines {
    open my $fh, '<', $log or return ();
    seek $fh, $log_from, 0 or return ();
    chomp(my @l = <$fh>);
    return @l;
}

# The log line is written after the response is sent: poll for it (a
# bound on waiting, not a timing assumption).  Returns the statuses
# logged for $sub's requests.
sub logged {
    my ($sub, $n) = @_;
    my @got;
    for (1 .. 100) {
        @got = map { (split / /)[3] } grep { /^\Q$sub\E / } log_lines();
        last if @got >= $n;
        select undef, undef, undef, 0.1;
    }
    return @got;
}

my $run = $$ . '-' . time;
my $seq = 0;

# One request that must get exactly one response with $status; $problem:
# whether that response is ours (problem+json) or httpd's error document.
sub one_response {
    my (%t) = @_;
    my $name = $t{name};
    my $sub = 'body-' . $run . '-' . ++$seq;
    my $before = db_lessons();
    my ($data, $closed) = raw($t{head}, $t{body}, $sub);
    my @s = statuses($data);

    is scalar(@s), 1, "$name: exactly one response on the connection"
        or diag "responses: @s\n" . substr($data, 0, 2000);
    is $s[0], $t{status}, "$name: status $t{status}";
    ok $closed, "$name: the server closes the connection";
    ok one_message($data), "$name: one whole response, nothing after it"
        or diag substr($data, 0, 2000);
    if ($t{problem}) {
        like content_type($data), qr{\Aapplication/problem\+json\b}i,
            "$name: problem+json (our cap)";
    }
    else {
        unlike content_type($data), qr{problem\+json}i,
            "$name: httpd's error document, not a problem body";
    }
    is_deeply [logged($sub, 1)], [$t{status}],
        "$name: one access log line with $t{status}";
    is_deeply db_lessons(), $before, "$name: table unchanged";
}

# ---- httpd's LimitRequestBody (512) refuses the body: httpd's 413
one_response(
    name   => 'chunked body over LimitRequestBody',
    head   => "POST /limit/api/lessons HTTP/1.1\r\nTransfer-Encoding: chunked",
    body   => chunked(body_of(1024), 256),
    status => 413);
one_response(
    name   => 'chunked PUT over LimitRequestBody',
    head   => "PUT /limit/api/lessons/1 HTTP/1.1\r\n"
            . "Transfer-Encoding: chunked",
    body   => chunked(body_of(2000), 512),
    status => 413);
one_response(
    name   => 'Content-Length over LimitRequestBody',
    head   => "POST /limit/api/lessons HTTP/1.1\r\nContent-Length: 1024",
    body   => body_of(1024),
    status => 413);

# ---- a malformed chunk size: httpd's 400
one_response(
    name   => 'chunk size zz',
    head   => "POST /api/lessons HTTP/1.1\r\nTransfer-Encoding: chunked",
    body   => "zz\r\n" . body_of(100) . "\r\n0\r\n\r\n",
    status => 400);
one_response(
    name   => 'chunk size zz after a good chunk',
    head   => "POST /api/lessons HTTP/1.1\r\nTransfer-Encoding: chunked",
    body   => "10\r\n" . substr(body_of(100), 0, 16) . "\r\nzz\r\n"
            . substr(body_of(100), 16) . "\r\n0\r\n\r\n",
    status => 400);

# ---- our own cap (LessonsMaxBodySize 1024 on /small): problem+json 413
one_response(
    name    => 'Content-Length over LessonsMaxBodySize',
    head    => "POST /small/api/lessons HTTP/1.1\r\nContent-Length: 2000",
    body    => body_of(2000),
    status  => 413,
    problem => 1);
one_response(
    name    => 'chunked body over LessonsMaxBodySize',
    head    => "POST /small/api/lessons HTTP/1.1\r\n"
             . "Transfer-Encoding: chunked",
    body    => chunked(body_of(2000), 256),
    status  => 413,
    problem => 1);

one_response(
    name    => 'one-byte chunks over LessonsMaxBodySize',
    head    => "POST /small/api/lessons HTTP/1.1\r\n"
             . "Transfer-Encoding: chunked",
    body    => chunked(body_of(1500), 1),
    status  => 413,
    problem => 1);
# A chunk size no body could have (beyond 64 bits): httpd's own 413
# before anything is read into memory.
one_response(
    name   => 'a chunk size of 20 hex digits',
    head   => "POST /api/lessons HTTP/1.1\r\nTransfer-Encoding: chunked",
    body   => "FFFFFFFFFFFFFFFFFFFF\r\n" . body_of(100) . "\r\n0\r\n\r\n",
    status => 413);

# The same connection style still works for a good body.
{
    my $sub = 'body-' . $run . '-ok';
    my $name = 'a chunked body under both limits';
    my ($data) = raw("POST /limit/api/lessons HTTP/1.1\r\n"
                     . "Connection: close\r\nTransfer-Encoding: chunked",
                     chunked(body_of(500), 100), $sub);
    is_deeply [statuses($data)], [201], "$name: 201";
    is_deeply [logged($sub, 1)], [201], "$name: logged";
}

done_testing;
