# Authentication on /api/lessons (HS256): the Authorization header
# (RFC 6750 answers), exp/nbf/sub claims, and that auth runs before
# routing, so 404/405 paths and writes are refused without a token.
use strict;
use warnings FATAL => 'all';
use utf8;

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use LessonsTest;

my ($id) = seed({ level_id => 1, title => 'Geschützt', sort_order => 1 });
my $now = time;

# Every route and method, including 404 and 405 answers: no token, 401.
my @requests = (
    [ GET     => '/api/lessons' ],
    [ HEAD    => '/api/lessons' ],
    [ OPTIONS => '/api/lessons' ],
    [ GET     => "/api/lessons/$id" ],
    [ GET     => '/api/lessons/beginner' ],
    [ GET     => '/api/lessons/advanced' ],
    [ GET     => '/api/lessons/level/1' ],
    [ POST    => '/api/lessons', json => { levelId => 1, title => 'x', order => 1 } ],
    [ PUT     => "/api/lessons/$id", json => { title => 'Überschrieben' } ],
    [ DELETE  => "/api/lessons/$id" ],
    [ GET     => '/api/lessons/does-not-exist' ],
    [ GET     => '/api/lessons/99999999999' ],
    [ GET     => '/api/lessons/' . ($id + 1000) ],
    [ PATCH   => '/api/lessons' ],
    [ DELETE  => '/api/lessons' ],
    [ POST    => '/api/lessons/beginner', json => {} ],
);

my $before = db_lessons();
for my $r (@requests) {
    my ($m, $path, @rest) = @$r;
    my $res = call($m => $path, token => undef, @rest);
    is $res->code, 401, "$m $path without a token: 401";
    is $res->header('WWW-Authenticate'), 'Bearer realm="lessons"',
        "$m $path: challenge without error";
    if ($m ne 'HEAD') {
        is_problem($res, 401, "$m $path without a token");
    }
    ok !defined $res->header('Allow'), "$m $path: no Allow (auth runs first)"
        if $m eq 'PATCH';
}
is_deeply db_lessons(), $before, 'no write happened without a token';

# ---- other schemes: 401 without error
for my $auth ('Basic ' . b64url('user:pass'), 'Digest username="x"',
              'Token ' . good_token(), 'Bearer' . good_token(),
              'Negotiate abc') {
    my $res = call(GET => '/api/lessons', auth => $auth);
    is_unauthorized($res, "scheme " . substr($auth, 0, 12));
}

# ---- the DPoP scheme where LessonsJWTDPoP is off (the default): a
# token did come, in a scheme not taken here, and the answer says so
# (issue 40): 401, Bearer's bare challenge (RFC 6750 3.1), never the
# token, counted as a DPoP refusal and logged once at info.
for my $case ([ 'a token' => 'DPoP ' . good_token() ],
              [ 'lower case' => 'dpop ' . good_token(claims => { sub => 'tester' }) ],
              [ 'no token' => 'DPoP' ],
              [ 'two tokens' => 'DPoP ' . good_token() . ' ' . good_token() ]) {
    my ($what, $auth) = @$case;
    my $name = "scheme DPoP where it is off, $what";
    my $from = suite_log_size();
    my $res = call(GET => '/api/lessons', auth => $auth);
    is_unauthorized($res, $name);
    my $p = json_of($res) || {};
    is $p->{detail}, 'DPoP is not accepted here: send the access token with the Bearer scheme.',
        "$name: the problem says DPoP is not accepted here";
    my ($payload) = $auth =~ /\.([^.\s]+)\./;
    ok !grep({ defined $payload && index($_, $payload) >= 0 || /tester/ }
             $res->content, $res->header('WWW-Authenticate') // ''),
        "$name: the answer never echoes the token";
    my $log = suite_log_since($from);
    like $log, qr/\[lessons:info\].*LESSONS00223: GET \/api\/lessons refused \(401\): the DPoP scheme, which this section does not take \(LessonsJWTDPoP off\)/,
        "$name: logged at info (LESSONS00223)";
    unlike $log, qr/LESSONS00202/, "$name: not as \"no bearer token\"";
}
is call(GET => '/api/lessons', auth => 'DPoPx ' . good_token())->code, 401,
    'a scheme that only starts with DPoP: 401';
is((json_of(call(GET => '/api/lessons', auth => 'DPoPx ' . good_token())) || {})->{detail},
   'A bearer token is required.', '... as another scheme');

# ---- malformed Bearer: 400 invalid_request
for my $case (
    [ 'Bearer with no token',      'Bearer' ],
    [ 'Bearer and spaces only',    'Bearer    ' ],
    [ 'two tokens',                'Bearer ' . good_token() . ' ' . good_token() ],
    [ 'two Authorization headers', [ 'Bearer ' . good_token(), 'Bearer ' . good_token() ] ],
    [ 'token with a comma',        'Bearer ' . good_token() . ',' ],
    [ 'token with a quote',        'Bearer "' . good_token() . '"' ],
) {
    my ($name, $auth) = @$case;
    my $res = call(GET => '/api/lessons', auth => $auth);
    is_problem($res, 400, $name);
    like $res->header('WWW-Authenticate') // '',
        qr/\ABearer realm="lessons", error="invalid_request"/,
        "$name: invalid_request challenge";
}
{
    my $before = db_lessons();
    my $res = call(DELETE => "/api/lessons/$id",
                   auth => [ 'Bearer ' . good_token(), 'Bearer ' . good_token() ]);
    is $res->code, 400, 'DELETE with two Authorization headers: 400';
    is_deeply db_lessons(), $before, '... and nothing deleted';
}

# ---- accepted forms
is call(GET => '/api/lessons', auth => 'Bearer ' . good_token())->code, 200,
    'valid token: 200';
is call(GET => '/api/lessons', auth => 'bearer ' . good_token())->code, 200,
    'scheme is case-insensitive';
is call(GET => '/api/lessons', auth => 'Bearer   ' . good_token())->code, 200,
    'several spaces before the token';
is call(GET => '/api/lessons', token => good_token(claims => { sub => undef }))->code,
    200, 'no sub claim: fine';
is call(GET => '/api/lessons',
        token => good_token(header => { typ => undef }))->code,
    200, 'no typ header: fine';
is call(GET => '/api/lessons',
        token => good_token(claims => { nbf => $now - 60 }))->code,
    200, 'nbf in the past: fine';
is call(GET => '/api/lessons',
        token => good_token(claims => { exp => $now + 86400 * 365 }))->code,
    200, 'exp far in the future: fine';
is call(GET => '/api/lessons',
        token => good_token(claims => { iss => 'anyone', aud => 'anything' }))->code,
    200, 'iss and aud are not checked unless configured';

# ---- bad tokens: 401 invalid_token
my $secret = hs_secret();
my $good = good_token();
my ($h, $p, $s) = split /\./, $good;
my $big = 'x' x 9000;

my @bad = (
    [ 'wrong secret',        good_token(key => 'another secret of enough length, 32+ bytes') ],
    [ 'signature flipped',   "$h.$p." . flip($s) ],
    [ 'signature missing',   "$h.$p." ],
    [ 'signature of another token',
                             "$h.$p." . (split /\./, good_token(claims => { sub => 'other' }))[2] ],
    [ 'payload tampered',    "$h." . b64url(json_text({ sub => 'admin', exp => $now + 3600 })) . ".$s" ],
    [ 'expired',             good_token(claims => { exp => $now - 3600 }) ],
    [ 'exp missing',         good_token(claims => { exp => undef }) ],
    [ 'exp a string',        good_token(claims => { exp => '' . ($now + 3600) }) ],
    [ 'exp null',            good_token(payload_raw => '{"sub":"t","exp":null}') ],
    [ 'exp a boolean',       good_token(payload_raw => '{"sub":"t","exp":true}') ],
    [ 'nbf in the future',   good_token(claims => { nbf => $now + 3600 }) ],
    [ 'nbf a string',        good_token(claims => { nbf => '' . ($now - 60) }) ],
    [ 'sub a number',        good_token(claims => { sub => 42 }) ],
    [ 'sub an object',       good_token(claims => { sub => { id => 1 } }) ],
    [ 'payload an array',    good_token(payload_raw => '[{"sub":"t","exp":' . ($now + 3600) . '}]') ],
    [ 'payload a string',    good_token(payload_raw => '"hello"') ],
    [ 'payload not JSON',    good_token(payload_raw => 'exp=9999999999') ],
    [ 'header not JSON',     good_token(header_raw => 'alg=HS256') ],
    [ 'header an array',     good_token(header_raw => '["HS256"]') ],
    [ 'header without alg',  good_token(alg => undef, sign_alg => 'HS256') ],
    [ 'crit header',         good_token(header => { crit => ['exp'] }) ],
    [ 'crit header (empty)', good_token(header => { crit => [] }) ],
    [ 'typ at+jwt',          good_token(header => { typ => 'at+jwt' }) ],
    [ 'two segments',        "$h.$p" ],
    [ 'four segments',       "$h.$p.$s.$s" ],
    [ 'empty segments',      '..' ],
    [ 'empty header',        ".$p.$s" ],
    [ 'garbage',             'not-a-jwt' ],
    [ 'garbage, 3 parts',    'abc.def.ghi' ],
    [ 'standard base64 chars', ($h =~ tr/-_/+\//r) . ".$p.$s+/" ],
    [ 'padding on the signature', "$h.$p.$s=" ],
    [ 'tilde in the signature',  "$h.$p." . substr($s, 0, 10) . '~' . substr($s, 10) ],
    [ 'longer than 8 KiB',   good_token(claims => { pad => $big }) ],
);
for my $case (@bad) {
    my ($name, $token) = @$case;
    my $res = call(GET => '/api/lessons', token => $token);
    is_unauthorized($res, "bad token: $name", 'invalid_token');
    my $wa = $res->header('WWW-Authenticate') // '';
    like $wa, qr/error_description="[^"]+"/, "bad token: $name: error_description";
    my ($th, $tp) = split /\./, $token;
    ok !grep({ defined && length > 4 && index($wa, $_) >= 0 } $th, $tp)
        && $wa !~ /admin|tester/,
        "bad token: $name: challenge does not echo the token";
}

# ---- a bad token never writes
{
    my $before = db_lessons();
    my $expired = good_token(claims => { exp => $now - 3600 });
    my $forged = "$h." . b64url(json_text({ sub => 'x', exp => $now + 3600 })) . ".$s";
    for my $t ($expired, $forged) {
        is call(POST => '/api/lessons', token => $t,
                json => { levelId => 1, title => 'Eindringling', order => 1 })->code,
            401, 'POST with a bad token: 401';
        is call(PUT => "/api/lessons/$id", token => $t,
                json => { title => 'Eindringling' })->code,
            401, 'PUT with a bad token: 401';
        is call(DELETE => "/api/lessons/$id", token => $t)->code, 401,
            'DELETE with a bad token: 401';
    }
    is_deeply db_lessons(), $before, 'bad tokens wrote nothing';
}

sub flip {
    my ($seg) = @_;
    my $c = substr($seg, 5, 1);
    substr($seg, 5, 1) = $c eq 'A' ? 'B' : 'A';
    return $seg;
}

done_testing;
