# /strict/api/lessons: LessonsJWTIssuer https://auth.example.org,
# LessonsJWTAudience lessons-api, LessonsJWTLeeway 30.
# The clock offsets (10 s inside, 60+ s outside the leeway) leave ample
# room for a slow machine.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use LessonsTest;

seed({ level_id => 2, title => 'Streng', sort_order => 1 });

my $ISS = 'https://auth.example.org';
my $AUD = 'lessons-api';
my $PATH = '/strict/api/lessons';

sub strict_token {
    my (%claims) = @_;
    return token(claims => { iss => $ISS, aud => $AUD, %claims });
}

sub good_ok {
    my ($token, $name) = @_;
    my $res = call(GET => $PATH, token => $token);
    is $res->code, 200, "$name: 200";
}

sub bad_ok {
    my ($token, $name) = @_;
    is_unauthorized(call(GET => $PATH, token => $token), $name, 'invalid_token');
}

my $now = time;

good_ok(strict_token(), 'iss and aud right');
good_ok(strict_token(aud => [ 'other-api', $AUD ]), 'aud array containing ours');
good_ok(strict_token(aud => [ $AUD ]), 'aud array of one');

bad_ok(strict_token(iss => 'https://evil.example.org'), 'wrong iss');
bad_ok(strict_token(iss => 'https://auth.example.org/'), 'iss with a trailing slash');
bad_ok(strict_token(iss => 'HTTPS://AUTH.EXAMPLE.ORG'), 'iss in another case');
bad_ok(strict_token(iss => undef), 'iss missing');
bad_ok(strict_token(iss => [ $ISS ]), 'iss an array');
bad_ok(strict_token(aud => 'other-api'), 'wrong aud');
bad_ok(strict_token(aud => 'lessons-api2'), 'aud with a suffix');
bad_ok(strict_token(aud => undef), 'aud missing');
bad_ok(strict_token(aud => [ 'other-api', 'more-api' ]), 'aud array without ours');
bad_ok(strict_token(aud => []), 'aud empty array');
bad_ok(strict_token(aud => 42), 'aud a number');
bad_ok(strict_token(aud => [ 42, { a => $AUD } ]), 'aud array of non-strings');

# Leeway: 30 seconds either way.
good_ok(strict_token(exp => $now - 10), 'exp 10 s ago (inside the leeway)');
bad_ok(strict_token(exp => $now - 60), 'exp 60 s ago (outside the leeway)');
bad_ok(strict_token(exp => $now - 3600), 'exp an hour ago');
good_ok(strict_token(nbf => $now + 10), 'nbf in 10 s (inside the leeway)');
bad_ok(strict_token(nbf => $now + 120), 'nbf in 2 minutes (outside the leeway)');
bad_ok(strict_token(exp => undef), 'exp missing');

# The main location has no iss/aud requirement; /strict does.
is call(GET => '/api/lessons', token => token())->code, 200,
    'plain token on /api/lessons: 200';
bad_ok(token(), 'plain token (no iss/aud) on /strict');

done_testing;
