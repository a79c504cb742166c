# Body caps: 64 KiB by default (/api/lessons), LessonsMaxBodySize 1024 on
# /small/api/lessons.  Over the cap: 413, nothing written; with
# Content-Length and with a chunked body.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use LessonsTest;

my ($id) = seed({ level_id => 1, title => 'Groß', sort_order => 1 });

# A valid create body of exactly $n bytes (padded with JSON whitespace).
sub body_of {
    my ($n) = @_;
    my $json = '{"levelId":1,"title":"Polster","order":1}';
    die "too small" if $n < length $json;
    return substr($json, 0, -1) . (' ' x ($n - length $json)) . '}';
}

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

done_testing;
