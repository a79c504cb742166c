# Token edges (issue 6 item 4, issue 22; docs/identity-providers.md): typ
# absent or "JWT" (any case) goes on; RFC 9068's at+jwt goes on, on
# Debian 12 and 13 alike (issue 41), with the claims RFC 9068 2.2 asks
# for; any other typ and any non-string typ get 401 "unsupported token
# type".  iat, if present, must be a number and not in the future
# (beyond the leeway).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use JSON::PP ();
use LessonsTest;

seed({ level_id => 1, title => 'Kante', sort_order => 1 });

is call(GET => '/api/lessons', token => token(header => { typ => undef }))->code,
    200, 'typ absent: 200';
is call(GET => '/api/lessons', token => token(header => { typ => 'jwt' }))->code,
    200, 'typ "jwt": 200';

my @at = ('at+jwt', 'application/at+jwt', 'AT+JWT');
my $now = time;
my %rfc9068 = (iss => 'https://auth.example.org', aud => 'lessons-api', sub => 'tester',
               client_id => 'app', iat => $now - 10, jti => 'j-1', exp => $now + 600);
{
    for my $typ (@at) {
        is call(GET => '/api/lessons', token => token(header => { typ => $typ },
                                                      claims => \%rfc9068))->code,
            200, "typ '$typ' with RFC 9068's claims: 200";
        my $res = call(GET => '/api/lessons', token => token(header => { typ => $typ }));
        is_unauthorized($res, "typ '$typ' without client_id and jti", 'invalid_token');
    }
    for my $claim (qw(iss aud sub client_id iat jti)) {
        my $res = call(GET => '/api/lessons', token => token(
            header => { typ => 'at+jwt' }, claims => { %rfc9068, $claim => undef }));
        like $res->header('WWW-Authenticate') // '',
            qr/error_description="[^"]*client_id, iat, jti\)"/, "at+jwt without $claim: 401, says why";
    }
}

# LessonsJWTTokenType at+jwt, on a server of this test's own: only
# at+jwt passes.
{
    my $dir = File::Temp->newdir;
    my $port = free_port();
    my $conf = httpd_conf("$dir", $port, <<"EOF");
<Location "/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"
    LessonsJWTTokenType at+jwt
</Location>
EOF
    my $out = `'@{[ LessonsTest::httpd_bin() ]}' -t -f '$conf' 2>&1`;
    like $out, qr/Syntax OK/, 'LessonsJWTTokenType at+jwt: configtest passes'
        or diag $out;
    start_httpd($conf, $port);
    my $base = "http://127.0.0.1:$port";
    is call(GET => '/api/lessons', base => $base,
            token => token(header => { typ => 'at+jwt' }, claims => \%rfc9068))->code,
        200, 'LessonsJWTTokenType at+jwt: an at+jwt token passes';
    my $res = call(GET => '/api/lessons', base => $base, token => token(claims => \%rfc9068));
    is_unauthorized($res, 'LessonsJWTTokenType at+jwt: a JWT-typed token', 'invalid_token');
    like $res->header('WWW-Authenticate') // '', qr/error_description="[^"]*must be at\+jwt"/,
        '... says why';
}
for my $typ ('JOSE', '', 'dpop+jwt', 123, 0, JSON::PP::true(), [], {}) {
    my $name = ref $typ ? 'typ ' . (ref $typ) : "typ '$typ'";
    my $res = call(GET => '/api/lessons', token => token(header => { typ => $typ }));
    is_unauthorized($res, $name, 'invalid_token');
    like $res->header('WWW-Authenticate') // '',
        qr/error_description="unsupported token type"/, "$name: says why";
}
{
    my $res = call(GET => '/api/lessons',
                   token => token(header_raw => '{"alg":"HS256","typ":null}'));
    is_unauthorized($res, 'typ null', 'invalid_token');
}

is call(GET => '/api/lessons', token => token(claims => { iat => $now - 60 }))->code,
    200, 'iat in the past: 200';
is call(GET => '/api/lessons', token => token(claims => { iat => undef }))->code,
    200, 'iat absent: 200';
for my $case ([ 'iat an hour ahead', $now + 3600 ], [ 'iat a string', "$now" ],
              [ 'iat an array', [$now] ]) {
    is_unauthorized(call(GET => '/api/lessons', token => token(claims => { iat => $case->[1] })),
                    $case->[0], 'invalid_token');
}
# The strict location allows 30 s of leeway.
is call(GET => '/strict/api/lessons',
        token => token(claims => { iat => $now + 10, iss => 'https://auth.example.org',
                                   aud => 'lessons-api' }))->code,
    200, 'iat 10 s ahead within a 30 s leeway: 200';

done_testing;
