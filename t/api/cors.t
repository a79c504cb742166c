# LessonsCORSOrigins (issue 9): a preflight from a listed origin is
# answered without a token; every answer to that origin (200, 201, 401,
# 403, 404, 412...) carries Access-Control-Allow-Origin so the script can
# read it; other origins get no CORS headers and their preflight a 403;
# without the directive nothing changes.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use LessonsTest;

my $APP  = 'https://app.example.org';
my $base = '/cors/api/lessons';

sub preflight {
    my ($path, $origin, $method, $headers) = @_;
    my @h = (Origin => $origin, 'Access-Control-Request-Method' => $method);
    push @h, 'Access-Control-Request-Headers' => $headers if defined $headers;
    return call(OPTIONS => $path, token => undef, headers => \@h);
}

sub readable_by {
    my ($res, $origin, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    is $res->header('Access-Control-Allow-Origin'), $origin,
        "$name: Access-Control-Allow-Origin $origin";
    like $res->header('Access-Control-Expose-Headers') || '',
        qr/\bETag\b.*\bLocation\b.*\bWWW-Authenticate\b/,
        "$name: exposes ETag, Location, WWW-Authenticate";
    like join(',', $res->header('Vary')), qr/\bOrigin\b/, "$name: Vary: Origin";
}

sub not_readable {
    my ($res, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    ok !defined $res->header('Access-Control-Allow-Origin'),
        "$name: no Access-Control-Allow-Origin";
}

# --- preflights --------------------------------------------------------
my $res = preflight($base, $APP, 'POST', 'authorization, content-type');
is $res->code, 204, 'preflight for POST from a listed origin: 204 without a token';
is $res->content, '', '... no body';
readable_by($res, $APP, 'preflight');
is $res->header('Access-Control-Allow-Methods'), 'GET, HEAD, POST, OPTIONS',
    '... the collection\'s methods';
is $res->header('Access-Control-Allow-Headers'),
    'Authorization, Content-Type, DPoP, Idempotency-Key, If-Match, If-None-Match',
    '... the headers the API reads';
like $res->header('Access-Control-Max-Age') || '', qr/\A\d+\z/, '... Max-Age';
ok !defined $res->header('WWW-Authenticate'), '... no challenge';

# A browser client sending DPoP proofs (RFC 9449) asks for the header.
$res = preflight($base, $APP, 'GET', 'authorization, dpop');
is $res->code, 204, 'preflight for GET with a DPoP proof: 204';

$res = preflight("$base/7", 'http://localhost:3000', 'DELETE', 'Authorization,If-Match');
is $res->code, 204, 'preflight for DELETE on an item from the second origin';
is $res->header('Access-Control-Allow-Methods'), 'GET, HEAD, PUT, DELETE, OPTIONS',
    '... the item\'s methods';
readable_by($res, 'http://localhost:3000', 'item preflight');

$res = preflight($base, 'https://evil.example', 'POST', 'authorization');
is_problem($res, 403, 'preflight from an unlisted origin');
not_readable($res, 'unlisted preflight');
$res = preflight($base, 'https://app.example.org.evil.example', 'GET');
is $res->code, 403, 'preflight from a look-alike origin: 403';
$res = preflight($base, 'null', 'GET');
is $res->code, 403, 'preflight from the "null" origin: 403';
$res = preflight($base, $APP, 'DELETE');
is_problem($res, 403, 'preflight for DELETE on the collection');
$res = preflight($base, $APP, 'POST', 'authorization, x-evil');
is_problem($res, 403, 'preflight asking for a header the API does not read');

# a plain OPTIONS (no Access-Control-Request-Method) still needs a token
is_unauthorized(call(OPTIONS => $base, token => undef, headers => [ Origin => $APP ]),
                'plain OPTIONS without a token');

# --- answers a browser must be able to read ---------------------------
my @from_app = (headers => [ Origin => $APP ]);
$res = call(GET => $base, @from_app);
is $res->code, 200, 'GET from a listed origin: 200';
readable_by($res, $APP, 'GET 200');
my $etag = $res->header('ETag');
$res = call(GET => $base, headers => [ Origin => $APP, 'If-None-Match' => $etag ]);
is $res->code, 304, 'conditional GET: 304';
readable_by($res, $APP, 'GET 304');

$res = call(GET => $base, token => undef, @from_app);
is_unauthorized($res, 'GET without a token from a listed origin');
readable_by($res, $APP, '401');

my $before = db_lessons();
$res = call(POST => $base, @from_app, token => good_token(claims => { role => 'reader' }),
            json => { levelId => 1, title => 'CORS', order => 1 });
is $res->code, 403, 'POST without the role: 403';
readable_by($res, $APP, '403 (Require jwt-claim)');
is_deeply db_lessons(), $before, '... nothing stored';

$res = call(POST => $base, @from_app, token => good_token(claims => { role => 'editor' }),
            json => { levelId => 1, title => 'CORS', order => 1 });
is $res->code, 201, 'POST with the role: 201';
readable_by($res, $APP, '201');
my ($id) = ($res->header('Location') || '') =~ m{/(\d+)\z};
ok $id && lesson_row($id), '... stored';

$res = call(GET => "$base/999999999", @from_app);
is $res->code, 404, 'GET a missing lesson: 404';
readable_by($res, $APP, '404');
$res = call(POST => $base, @from_app, token => good_token(claims => { role => 'editor' }),
            json => { title => '' });
is $res->code, 400, 'a bad body: 400';
readable_by($res, $APP, '400');

# --- other origins and no origin --------------------------------------
$res = call(GET => $base, headers => [ Origin => 'https://evil.example' ]);
is $res->code, 200, 'GET from an unlisted origin still answers (the token decides)';
not_readable($res, 'unlisted origin');
like join(',', $res->header('Vary')), qr/\bOrigin\b/, '... with Vary: Origin';
$res = call(GET => $base);
not_readable($res, 'no Origin');

# --- "none" in a sub-section, and the API without the directive --------
$res = preflight("$base/level/1", $APP, 'GET');
is_unauthorized($res, 'LessonsCORSOrigins none: a preflight is a plain OPTIONS');
not_readable($res, 'none');
$res = preflight('/api/lessons', $APP, 'GET');
is_unauthorized($res, 'no LessonsCORSOrigins: a preflight needs a token');
not_readable(call(GET => '/api/lessons', @from_app), 'no LessonsCORSOrigins');

done_testing();
