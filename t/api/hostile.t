# Hostile HTTP (issue 18): duplicate and conflicting headers, a body
# shorter than its Content-Length, very long paths and header values,
# percent-encoded and dot-segment paths, and a flood of invalid tokens.
# Each gets a clear 4xx (or is served correctly), nothing reaches the API
# without a valid token, the log grows by exactly one line per refusal
# and never holds a token, and the database does not change.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use IO::Socket::INET ();
use LessonsTest;

my @ids = seed(
    { level_id => 1, title => 'Das Alphabet', sort_order => 1 },
    { level_id => 2, title => 'Die Uhrzeit', sort_order => 2 },
);
my $id = $ids[0];
my $before = db_lessons();
my $error_log = Apache::Test::vars('t_logs') . '/error_log';

# The error_log's lines written since it was $size bytes long, up to a
# fence: a refusal of a path of its own, whose line comes after every
# line before it (the fence's own line left out).
sub log_lines_since {
    my ($size) = @_;
    my $fence = "/api/lessons/fence" . $$ . int(rand 1e9);
    call(GET => $fence, token => undef);
    my @lines;
    for (1 .. 100) {
        open my $fh, '<:raw', $error_log or die "$error_log: $!";
        seek $fh, $size, 0;
        @lines = <$fh>;
        last if grep { index($_, $fence) >= 0 } @lines;
        select undef, undef, undef, 0.1;
    }
    return grep { index($_, $fence) < 0 } @lines;
}
my $lesson_json = { levelId => 1, title => 'Feindlich', order => 9 };

sub clean_4xx {
    my ($res, $what) = @_;
    my $code = $res->code;
    ok $code >= 400 && $code < 500, "$what: a 4xx ($code)";
}

# ---- duplicate and conflicting headers ----------------------------------
{
    # httpd joins repeated request headers with ", ": two Content-Types
    # are no JSON type.
    my $res = call(POST => '/api/lessons', json => $lesson_json,
                   type => undef,
                   headers => [ 'Content-Type' => 'application/json',
                                'Content-Type' => 'text/plain' ]);
    clean_4xx($res, 'two Content-Types');
    is_problem($res, $res->code, 'two Content-Types') if $res->code >= 400;

    # Two If-Match fields are one list: none matches, nothing is written.
    $res = call(PUT => "/api/lessons/$id", json => $lesson_json,
                headers => [ 'If-Match' => '"nope"', 'If-Match' => '"nope2"' ]);
    is $res->code, 412, 'two If-Match fields, neither current: 412';

    # Two Authorization headers are not one token.
    $res = call(GET => '/api/lessons',
                auth => [ 'Bearer ' . good_token(), 'Bearer ' . good_token() ]);
    clean_4xx($res, 'two Authorization headers');
}

# ---- a slow body: eight pieces, a quarter second apart --------------------
{
    (my $hp = base_url()) =~ s{\Ahttp://}{};
    my $sock = IO::Socket::INET->new(PeerAddr => $hp, Timeout => 30)
        or die "connect $hp: $!";
    $sock->autoflush(1);
    my $body = '{"levelId":2,"title":"Langsam geschickt","order":7}';
    print $sock "POST /api/lessons HTTP/1.1\r\nHost: $hp\r\n"
        . 'Authorization: Bearer ' . good_token() . "\r\n"
        . "Content-Type: application/json\r\nContent-Length: "
        . length($body) . "\r\nConnection: close\r\n\r\n";
    my $piece = int(length($body) / 8) + 1;
    for my $part (unpack "(a$piece)*", $body) {
        select undef, undef, undef, 0.25;
        print $sock $part;
    }
    local $/;
    my $answer = <$sock> // '';
    my ($code) = $answer =~ m{\AHTTP/1\.\d (\d{3})};
    is $code, 201, 'a body sent slowly in eight pieces: 201';
    my $rows = db_rows("SELECT id FROM lessons WHERE title = 'Langsam geschickt'");
    is scalar @$rows, 1, 'a body sent slowly: stored once';
    db_do("DELETE FROM lessons WHERE title = 'Langsam geschickt'");
}

# ---- a body shorter than its Content-Length ------------------------------
{
    (my $hp = base_url()) =~ s{\Ahttp://}{};
    my $sock = IO::Socket::INET->new(PeerAddr => $hp, Timeout => 30)
        or die "connect $hp: $!";
    my $token = good_token();
    print $sock "POST /api/lessons HTTP/1.1\r\nHost: $hp\r\n"
        . "Authorization: Bearer $token\r\nContent-Type: application/json\r\n"
        . "Content-Length: 500\r\nConnection: close\r\n\r\n"
        . '{"levelId":1,"title":"Halb","order":1}';
    shutdown $sock, 1;              # no more bytes: the body ends early
    local $/;
    my $answer = <$sock> // '';
    my ($code) = $answer =~ m{\AHTTP/1\.\d (\d{3})};
    ok !defined $code || ($code >= 400 && $code < 500),
        'a body shorter than its Content-Length: a 4xx or no answer ('
        . ($code // 'closed') . ')';
}

# ---- very long paths and header values -----------------------------------
{
    my $size = -s $error_log;
    my $res = call(GET => '/api/lessons/' . ('1' x 9000));
    clean_4xx($res, 'a 9000-character id');
    $res = call(GET => '/api/lessons/' . ('a/' x 3000));
    clean_4xx($res, 'a 6000-character path');
    # Under the suite's LimitRequestFieldSize (16384) it is an ordinary
    # tag that matches nothing: the list, in full.
    $res = call(GET => '/api/lessons',
                headers => [ 'If-None-Match' => '"' . ('x' x 9000) . '"' ]);
    ok $res->code == 200 && ref json_of($res) eq 'ARRAY'
        || ($res->code >= 400 && $res->code < 500),
        'a 9000-byte If-None-Match: the list, or a 4xx (' . $res->code . ')';
    $res = call(GET => '/api/lessons', token => 'a' x 9000);
    is $res->code, 401, 'a 9000-byte token: 401';
    # The API maps to no file: httpd's core never tries (and fails) to
    # map a long API path to one (its AH00127 error line).
    my @core = grep { /AH00127/ } log_lines_since($size);
    is scalar @core, 0, 'no "Cannot map ... to file" line for long API paths'
        or diag @core;
}

# ---- percent-encoded and dot-segment paths --------------------------------
{
    my @paths = ("/api/lessons/%3${\ substr($id, 0, 1)}" . substr($id, 1),
                 '/api/%6cessons', "/api/lessons/../lessons/$id",
                 "/api/./lessons/$id", "/api/lessons/%2e%2e/lessons/$id",
                 '/api//lessons', "/api/lessons/$id%00", "/api/lessons/$id%2f",
                 '/API/lessons', "/api/lessons/level/%31");
    for my $path (@paths) {
        my $res = call(GET => $path, token => undef);
        ok $res->code == 401 || ($res->code >= 400 && $res->code < 500
                                 && $res->code != 401),
            "$path without a token: " . $res->code;
        isnt $res->code, 200, "$path without a token is never served";
        $res = call(GET => $path);
        ok $res->code == 200 || ($res->code >= 400 && $res->code < 500),
            "$path with a token: 200 or a 4xx (" . $res->code . ')';
    }
}

# ---- a flood of invalid tokens ---------------------------------------------
{
    my $size = -s $error_log;
    my $valid = good_token();
    my ($h, $c, $s) = split /\./, $valid;
    my @bad = ('garbage', "$h.$c.", "$h.$c.AAAA", "$h..$s", 'a.b.c',
               good_token(claims => { exp => time - 3600 }),
               $h . '.' . b64url('{"sub":"mallory","exp":' . (time + 3600) . '}')
                   . ".$s", "$h.$c.$s.$s",
               'x' x 5000, "$h.$c." . ('A' x 342));
    my %codes;
    my $n = 0;
    for my $round (1 .. 30) {
        for my $t (@bad) {
            my $res = call(GET => "/api/lessons/$id", token => $t);
            $codes{ $res->code }++;
            $n++;
        }
    }
    is_deeply [ sort keys %codes ], [ grep { $codes{$_} } qw(400 401) ],
        "$n invalid tokens: every one 400 or 401" or diag explain \%codes;
    my @lines = log_lines_since($size);
    # Lines of ours from the children; the parent's once-a-minute sum
    # of refusals (LESSONS00602, refusals.t) may fall in the window on
    # a slow machine, and tells no single request.
    my @ours = grep { /LESSONS00\d+/ && !/LESSONS00602:/ } @lines;
    is scalar @ours, $n, "exactly one line of ours per refusal ("
        . scalar(@ours) . " for $n)";
    my $leaked = grep { index($_, $s) >= 0 || index($_, $c) >= 0 } @lines;
    is $leaked, 0, 'no log line holds a token\'s claims or signature';
}

is_deeply db_lessons(), $before, 'nothing in the database changed';

done_testing;
