# Token edges (issue 6 item 4; README, Authentication): typ absent or
# "JWT" (any case) goes on; any other typ, at+jwt included, and any
# non-string typ get 401 invalid_token "unsupported token type".  iat, if present, must
# be a number and not in the future (beyond the leeway).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use JSON::PP ();
use LessonsTest;

seed({ level_id => 1, title => 'Kante', sort_order => 1 });

is call(GET => '/api/lessons', token => token(header => { typ => undef }))->code,
    200, 'typ absent: 200';
is call(GET => '/api/lessons', token => token(header => { typ => 'jwt' }))->code,
    200, 'typ "jwt": 200';

for my $typ ('at+jwt', 'application/at+jwt', 'AT+JWT', 'JOSE', '', 123, 0,
             JSON::PP::true(), [], {}) {
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

my $now = time;
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
