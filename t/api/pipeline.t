# Pipelined requests (issue 19): the module flushes its short answers in
# the handler instead of leaving them to httpd's write completion.  Eight
# requests sent in one write on one keep-alive connection -- a GET, a
# HEAD, a 304 revalidation, the list, a create, a miss, a delete and a
# last GET -- each get their own answer, in order, framed by their own
# Content-Length (none for HEAD, 304 and 204), and the database holds
# exactly what the writes among them did.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use IO::Socket::INET ();
use JSON::PP ();
use LessonsTest;

my @ids = seed(
    { level_id => 1, title => 'Das Alphabet', sort_order => 1 },
    { level_id => 2, title => 'Die Uhrzeit', sort_order => 2 },
);
my ($keep, $gone) = @ids;

my $first = call(GET => "/api/lessons/$keep");
is $first->code, 200, 'the lesson, before the pipeline';
my $etag = $first->header('ETag');
ok defined $etag, 'it has an ETag';
my $body_len = length $first->content;

(my $hp = base_url()) =~ s{\Ahttp://}{};
my $token = good_token();
my $create = '{"levelId":2,"title":"Hintereinander gesendet","order":5}';
my @requests = (
    [ GET    => "/api/lessons/$keep" ],
    [ HEAD   => "/api/lessons/$keep" ],
    [ GET    => "/api/lessons/$keep", "If-None-Match: $etag\r\n" ],
    [ GET    => '/api/lessons' ],
    [ POST   => '/api/lessons', "Content-Type: application/json\r\n"
                . 'Content-Length: ' . length($create) . "\r\n", $create ],
    [ GET    => '/api/lessons/999999999' ],
    [ DELETE => "/api/lessons/$gone" ],
    [ GET    => "/api/lessons/$keep", "Connection: close\r\n" ],
);
my $wire = join '', map {
    my ($method, $path, $headers, $body) = @$_;
    "$method $path HTTP/1.1\r\nHost: $hp\r\nAuthorization: Bearer $token\r\n"
        . ($headers // '') . "\r\n" . ($body // '')
} @requests;

my $sock = IO::Socket::INET->new(PeerAddr => $hp, Timeout => 30)
    or die "connect $hp: $!";
$sock->autoflush(1);
print $sock $wire;                      # all eight in one write
my $all = '';
while (1) {
    my $n = sysread $sock, my $buf, 65536;
    last unless $n;
    $all .= $buf;
}
close $sock;

# The answers as they came: status, headers (lower-cased names), body by
# Content-Length; HEAD, 304 and 204 have none.
my @answers;
for my $i (0 .. $#requests) {
    my ($head, $rest) = split /\r\n\r\n/, $all, 2;
    last unless defined $rest;
    my ($status) = $head =~ m{\AHTTP/1\.1 (\d{3})};
    my %h;
    for my $line (split /\r\n/, $head) {
        $h{lc $1} = $2 if $line =~ /\A([^:]+):\s*(.*)\z/;
    }
    my $len = $h{'content-length'} // 0;
    $len = 0 if $requests[$i][0] eq 'HEAD' || ($status // 0) == 304
                || ($status // 0) == 204;
    push @answers, { status => $status // 0, h => \%h,
                     body => substr($rest, 0, $len) };
    $all = substr $rest, $len;
}
is scalar @answers, scalar @requests, 'an answer for each request';
is $all, '', 'nothing after the last answer';

my @want = (200, 200, 304, 200, 201, 404, 204, 200);
is_deeply [ map { $_->{status} } @answers ], \@want,
    'the answers in order: 200 200 304 200 201 404 204 200';

my $json = JSON::PP->new;
my $lesson = eval { $json->decode($answers[0]{body}) } || {};
is $lesson->{id}, $keep, 'the first GET: the lesson';
is $answers[0]{body}, $first->content, 'the same bytes as before the pipeline';
is $answers[1]{h}{'content-length'}, $body_len,
    "HEAD: the GET's Content-Length, no body";
is $answers[2]{h}{etag}, $etag, '304: the same ETag';
my $list = eval { $json->decode($answers[3]{body}) } || [];
is scalar @$list, 2, 'the list: both lessons';
my $created = eval { $json->decode($answers[4]{body}) } || {};
is $created->{title}, 'Hintereinander gesendet', '201: the lesson stored';
like $answers[4]{h}{location} // '', qr{/api/lessons/\Q$created->{id}\E\z},
    '201: its Location';
is $answers[5]{h}{'content-length'}, 0, 'a missing lesson: 404, empty body';
is $answers[7]{body}, $first->content, 'the last GET: the lesson again';
is $answers[7]{h}{connection}, 'close', 'the last answer closes';

my $rows = db_rows('SELECT id, title FROM lessons ORDER BY id');
is_deeply [ map { $_->{title} } @$rows ],
    [ 'Das Alphabet', 'Hintereinander gesendet' ],
    'the database: the created lesson in, the deleted one out';

done_testing;
