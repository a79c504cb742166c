# DPoP nonces (RFC 9449 8 and 9, issue 44 part 2): with LessonsJWTDPoPNonce
# On, a proof must carry a nonce the server gave.
#
#   - a proof without a nonce: 401, WWW-Authenticate: DPoP ...
#     error="use_dpop_nonce" and a DPoP-Nonce header, one info line
#     (LESSONS00700) (that such a proof is not taken in the replay
#     table is t/unit/test_decide.c's, test_dpop_nonce);
#   - a new proof with that nonce: 200, and the 200 (and a create's 201,
#     a delete's 204) carries the current DPoP-Nonce;
#   - a nonce of another secret, of an older slot, or garbage: 401
#     use_dpop_nonce with a fresh DPoP-Nonce; a proof wrong otherwise
#     keeps its own error (invalid_dpop_proof), with DPoP-Nonce too; a
#     replay with a good nonce is still a replay;
#   - the nonce is what docs/directives.md says, base64url(slot || HMAC-
#     SHA256(secret, label || slot)) with the secret file's bytes: one
#     made here, apart from the module, is taken;
#   - a second server with the same LessonsJWTDPoPNonceSecretFile takes
#     the first one's nonces; a third without it (a random secret)
#     refuses them, says so at start-up (LESSONS00702), and takes its own;
#   - nonces off (the default): proofs without one are taken as before,
#     and no DPoP-Nonce is sent; a bearer token where DPoP is optional
#     gets none either;
#   - CORS: DPoP-Nonce is among the headers a script may read;
#   - openid-client (the OpenID Certified client, t/oidcp, with a token
#     of oidc-provider bound to its key) answers use_dpop_nonce by
#     itself: its first request gets 401 use_dpop_nonce, its own retry,
#     with the nonce, 200 -- two requests in the server's access log, and
#     two in what openid-client sent.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use Digest::SHA qw(sha256 hmac_sha256);
use File::Temp ();
use JSON::PP ();
use Time::HiRes qw(time);
use LessonsTest;
use LessonsTest::JWT qw(jwt b64url json_text);
use LessonsTest::OIDCP qw(start_oidcp oidc_token oidc_request);

my $dir  = File::Temp->newdir;
my $JSON = JSON::PP->new->utf8->canonical;
my $API  = 'https://api.lessons.test/';     # the module's audience

# ---- the secrets: the servers' file, and another one
my $secret = join '', map { ('A' .. 'Z', 'a' .. 'z', 0 .. 9)[int rand 62] } 1 .. 48;
my $other  = join '', map { ('A' .. 'Z', 'a' .. 'z', 0 .. 9)[int rand 62] } 1 .. 48;
open my $sf, '>', "$dir/nonce.secret" or die "$dir/nonce.secret: $!";
print $sf "$secret\n";
close $sf;

# A nonce as docs/directives.md describes it, made here: the 20 s slot of
# $t, eight bytes big-endian, and the HMAC-SHA256 of the label and them.
sub nonce_of {
    my ($key, $t) = @_;
    my $slot = pack 'Q>', int($t / 20);
    return b64url($slot . hmac_sha256("mod_lessons DPoP nonce v1$slot", $key));
}

# ---- keys and proofs (as t/api/dpop.t makes them)
sub ec_key {
    my ($name) = @_;
    system("openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256"
           . " -out $dir/$name.key 2>/dev/null") == 0 or die "openssl genpkey\n";
    my $der = `openssl pkey -in $dir/$name.key -pubout -outform DER 2>/dev/null`;
    my $xy = substr($der, -64);
    my %jwk = (kty => 'EC', crv => 'P-256', x => b64url(substr($xy, 0, 32)),
               y => b64url(substr($xy, 32, 32)));
    my $canon = '{"crv":"P-256","kty":"EC","x":"' . $jwk{x} . '","y":"' . $jwk{y} . '"}';
    return { file => "$dir/$name.key", jwk => \%jwk, jkt => b64url(sha256($canon)) };
}
my $client = ec_key('client');

my $n = 0;
# A proof for method, URI and token; nonce => the nonce claim (none when
# not given), skew => seconds added to iat (a client's clock off).
sub proof {
    my ($method, $uri, $token, %o) = @_;
    my %c = (jti => 'n-' . $$ . '-' . ++$n . '-' . int(rand(1e9)), htm => $method,
             htu => $uri, iat => int(time), ath => b64url(sha256($token)));
    $c{nonce} = $o{nonce} if defined $o{nonce};
    $c{iat} += $o{skew} if $o{skew};
    return jwt(alg => 'ES256', key => $client->{file},
               header => { typ => 'dpop+jwt', jwk => $client->{jwk} },
               payload_raw => json_text(\%c));
}
my $token = good_token(claims => { cnf => { jkt => $client->{jkt} } });

# ---- the provider, for openid-client's part
my $op = start_oidcp("$dir", resources => [ $API ]);

# ---- server A: nonces on, the secret file
my $port = free_port();
my $A = "http://127.0.0.1:$port";
my $conf = httpd_conf("$dir", $port, <<"EOF");
ServerName 127.0.0.1:$port
LogLevel info
LogFormat "%>s %m %U" brief
CustomLog "$dir/access_log" brief
LessonsJWTDPoPNonceSecretFile "$dir/nonce.secret"
<Location "/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"
    LessonsJWTDPoP required
    LessonsJWTDPoPNonce On
    LessonsCORSOrigins https://app.example.org
</Location>
<Location "/optional/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"
    LessonsJWTDPoP optional
    LessonsJWTDPoPNonce On
</Location>
<Location "/off/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"
    LessonsJWTDPoP required
</Location>
<Location "/oidc/api/lessons">
    SetHandler lessons
    LessonsJWTIssuer $op->{iss}
    LessonsJWTAudience $API
    LessonsJWTTokenType at+jwt
    LessonsJWTKeysCA "$op->{ca}"
    LessonsJWTDPoP required
    LessonsJWTDPoPNonce On
</Location>
EOF
my $out = `'@{[ LessonsTest::httpd_bin() ]}' -t -f '$conf' 2>&1`;
like $out, qr/Syntax OK/, 'LessonsJWTDPoPNonce and LessonsJWTDPoPNonceSecretFile: configtest passes'
    or diag $out;
start_httpd($conf, $port);
sub error_log { do { local (@ARGV, $/) = ("$_[0]/error_log"); <> } // '' }

sub dpop_call {
    my ($base, $method, $path, $proof, %o) = @_;
    return call($method => $path, base => $base, auth => "DPoP $token",
                headers => [ DPoP => $proof, @{ $o{headers} || [] } ],
                exists $o{json} ? (json => $o{json}) : ());
}

my $NONCE = qr/\A[A-Za-z0-9_-]{54}\z/;

# A 401 for the nonce: DPoP's challenge with use_dpop_nonce, a fresh
# nonce in DPoP-Nonce, a problem body.  The nonce, for the next proof.
sub is_nonce_refusal {
    my ($res, $desc, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    is $res->code, 401, "$name: 401";
    my $h = join ' | ', $res->header('WWW-Authenticate');
    like $h, qr/\ADPoP realm="lessons", algs="ES256 [^"]*", error="use_dpop_nonce", error_description="[^"]*\Q$desc\E/,
        "$name: WWW-Authenticate: DPoP, error=use_dpop_nonce" or diag $h;
    is $res->header('Content-Type'), 'application/problem+json', "$name: problem+json";
    my $nonce = $res->header('DPoP-Nonce') // '';
    like $nonce, $NONCE, "$name: a DPoP-Nonce to use";
    return $nonce;
}

my $uri = "$A/api/lessons";

# ---- no nonce: 401 use_dpop_nonce, and the nonce to use
my $before = int time;
my $res = dpop_call($A, GET => '/api/lessons', proof(GET => $uri, $token));
my $after = int time;
my $nonce = is_nonce_refusal($res, 'must carry the nonce', 'a proof without a nonce');
ok((grep { nonce_of($secret, $_) eq $nonce } $before .. $after),
   '... the nonce of the secret file, for this slot, as docs/directives.md makes it');
like error_log("$dir"), qr/LESSONS00700: GET \/api\/lessons refused \(401\): the DPoP proof has no nonce/,
    '... and one info line (LESSONS00700)';
unlike error_log("$dir"), qr/\Q$nonce\E/, '... which does not hold the nonce';

# ---- with it: 200, and the current nonce again
$res = dpop_call($A, GET => '/api/lessons', proof(GET => $uri, $token, nonce => $nonce));
is $res->code, 200, 'a proof with the nonce given: 200' or diag $res->content;

# ---- a client whose clock is 90 s off (issue 57): the nonce judges
# freshness, so its first proof gets use_dpop_nonce (after
# invalid_dpop_proof, clients give up), and the next, with the nonce, 200.
for my $skew (-90, 90) {
    my $r = dpop_call($A, GET => '/api/lessons', proof(GET => $uri, $token, skew => $skew));
    my $given = is_nonce_refusal($r, 'must carry the nonce', "a clock $skew s off, no nonce");
    $r = dpop_call($A, GET => '/api/lessons', proof(GET => $uri, $token, skew => $skew,
                                                    nonce => $given));
    is $r->code, 200, "a clock $skew s off, with the nonce: 200" or diag $r->content;
}
like $res->header('DPoP-Nonce') // '', $NONCE, '... and the 200 carries DPoP-Nonce';

# A create and its delete: 201 and 204 carry it too.
$res = dpop_call($A, POST => '/api/lessons', proof(POST => $uri, $token, nonce => $nonce),
                 json => { levelId => 1, title => 'Mit Nonce', order => 1 });
is $res->code, 201, 'a create with the nonce: 201' or diag $res->content;
like $res->header('DPoP-Nonce') // '', $NONCE, '... with DPoP-Nonce';
my $made = (json_of($res) // {})->{id} // 0;
$res = dpop_call($A, DELETE => "/api/lessons/$made",
                 proof(DELETE => "$uri/$made", $token, nonce => $nonce));
is $res->code, 204, '... and its delete: 204';
like $res->header('DPoP-Nonce') // '', $NONCE, '... with DPoP-Nonce';

# ---- a nonce made here with the file's secret: taken
my $mine = proof(GET => $uri, $token, nonce => nonce_of($secret, time));
is dpop_call($A, GET => '/api/lessons', $mine)->code, 200,
    'a nonce made apart from the module, with the secret file: 200';
# ... and a replay is still a replay.
$res = dpop_call($A, GET => '/api/lessons', $mine);
is $res->code, 401, 'that proof again: 401';
like join(' | ', $res->header('WWW-Authenticate')), qr/error="invalid_dpop_proof", error_description="The DPoP proof has been used before"/,
    '... as used before';
like $res->header('DPoP-Nonce') // '', $NONCE, '... with DPoP-Nonce';

# ---- nonces that are not this server's current ones
is_nonce_refusal(dpop_call($A, GET => '/api/lessons',
                           proof(GET => $uri, $token, nonce => nonce_of($other, time))),
                 'not one this server gave', 'a nonce of another secret (forged)');
is_nonce_refusal(dpop_call($A, GET => '/api/lessons',
                           proof(GET => $uri, $token, nonce => nonce_of($secret, time - 40))),
                 'no longer current', 'a nonce of the secret, two slots old');
is_nonce_refusal(dpop_call($A, GET => '/api/lessons', proof(GET => $uri, $token, nonce => 'garbage')),
                 'not one this server gave', 'a nonce that is garbage');
is_nonce_refusal(dpop_call($A, GET => '/api/lessons',
                           proof(GET => $uri, $token, nonce => substr($nonce, 0, 40))),
                 'not one this server gave', 'a nonce cut short');
like error_log("$dir"), qr/LESSONS00700: GET \/api\/lessons refused \(401\): the DPoP proof's nonce is not this server's/,
    '... logged as not this server\'s';

# ---- a proof wrong otherwise: its own error, and the nonce
$res = dpop_call($A, GET => '/api/lessons', proof(GET => "$A/off/api/lessons", $token, nonce => $nonce));
is $res->code, 401, 'a proof for another URI, with the nonce: 401';
like join(' | ', $res->header('WWW-Authenticate')), qr/error="invalid_dpop_proof", error_description="The DPoP proof is for another URI"/,
    '... invalid_dpop_proof, for the URI';
like $res->header('DPoP-Nonce') // '', $NONCE, '... with DPoP-Nonce';

# ---- CORS: a script may read DPoP-Nonce
$res = dpop_call($A, GET => '/api/lessons', proof(GET => $uri, $token, nonce => $nonce),
                 headers => [ Origin => 'https://app.example.org' ]);
is $res->code, 200, 'a listed origin, with the nonce: 200';
like $res->header('Access-Control-Expose-Headers') // '', qr/(?:\A|, )DPoP-Nonce(?:,|\z)/,
    '... DPoP-Nonce is among the exposed headers';
# The freshest of A's nonces, for the other servers below.
$nonce = $res->header('DPoP-Nonce') // $nonce;

# ---- nonces off: as before
$res = dpop_call($A, GET => '/off/api/lessons', proof(GET => "$A/off/api/lessons", $token));
is $res->code, 200, 'nonces off: a proof without a nonce: 200';
ok !defined $res->header('DPoP-Nonce'), '... and no DPoP-Nonce';
$res = call(GET => '/optional/api/lessons', base => $A, token => good_token());
is $res->code, 200, 'nonces on, DPoP optional: a bearer token: 200';
ok !defined $res->header('DPoP-Nonce'), '... and no DPoP-Nonce';

# ---- servers B and C: one section, nonces on; $secret_line at the top
sub nonce_server {
    my ($sdir, $sport, $secret_line) = @_;
    start_httpd(httpd_conf("$sdir", $sport, <<"EOF"), $sport);
ServerName 127.0.0.1:$sport
LogLevel info
$secret_line
<Location "/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"
    LessonsJWTDPoP required
    LessonsJWTDPoPNonce On
</Location>
EOF
    return "http://127.0.0.1:$sport";
}

# ---- server B: the same secret file takes A's nonces
my $bdir = File::Temp->newdir;
my $B = nonce_server($bdir, free_port(), qq{LessonsJWTDPoPNonceSecretFile "$dir/nonce.secret"});
is dpop_call($B, GET => '/api/lessons', proof(GET => "$B/api/lessons", $token, nonce => $nonce))->code,
    200, 'another server with the same secret file: A\'s nonce, 200';
unlike error_log("$bdir"), qr/LESSONS00702/, '... and no word of a random secret';

# ---- server C: no secret file, a random secret of its own
my $cdir = File::Temp->newdir;
my $C = nonce_server($cdir, free_port(), '');
like error_log("$cdir"), qr/LESSONS00702: DPoP nonces are made with a random secret/,
    'a server without the secret file says it makes a random one (LESSONS00702)';
my $cnonce = is_nonce_refusal(dpop_call($C, GET => '/api/lessons',
                                        proof(GET => "$C/api/lessons", $token, nonce => $nonce)),
                              'not one this server gave', 'there, A\'s nonce');
isnt $cnonce, $nonce, '... it gives a nonce of its own';
is dpop_call($C, GET => '/api/lessons', proof(GET => "$C/api/lessons", $token, nonce => $cnonce))->code,
    200, '... which it takes: 200';
is_nonce_refusal(dpop_call($A, GET => '/api/lessons', proof(GET => $uri, $token, nonce => $cnonce)),
                 'not one this server gave', 'its nonce at A');

# ---- openid-client answers use_dpop_nonce by itself
my $key = "$dir/dpop-openid-client.jwk";
my $bound = oidc_token($op, alg => 'PS256', resource => $API, dpop_key => $key);
is lc $bound->{token_type}, 'dpop', 'oidc-provider\'s token bound to openid-client\'s key';
sub access_lines { grep { m{ /oidc/api/lessons$} } do { local @ARGV = ("$dir/access_log"); <> } }
my $lines = () = access_lines();
my $r = oidc_request($op, token => $bound->{access_token}, method => 'GET',
                     url => "$A/oidc/api/lessons", dpop_key => $key);
is $r->{status}, 200, 'openid-client, one call, nonces on: 200 in the end' or diag explain $r;
my @x = @{ $r->{exchanges} || [] };
is scalar(@x), 2, '... in two requests it sent' or diag explain \@x;
sub proof_claims { $JSON->decode(b64url_decode((split /\./, $_[0] // '')[1] // '') || '{}') }
is $x[0]{status}, 401, '... the first: 401';
like $x[0]{www_authenticate} // '', qr/\ADPoP realm="lessons", algs="[^"]*", error="use_dpop_nonce"/,
    '... use_dpop_nonce';
like $x[0]{dpop_nonce} // '', $NONCE, '... with DPoP-Nonce';
ok !exists proof_claims($x[0]{dpop})->{nonce}, '... its proof had no nonce';
is proof_claims($x[1]{dpop})->{nonce}, $x[0]{dpop_nonce},
    '... the retry\'s proof carries the nonce given';
isnt proof_claims($x[1]{dpop})->{jti}, proof_claims($x[0]{dpop})->{jti}, '... in a new proof';
is $x[1]{status}, 200, '... the retry: 200';
like $x[1]{dpop_nonce} // '', $NONCE, '... with DPoP-Nonce';
# The server saw the same: two requests, 401 then 200.  Logged once
# answered, so it may take a moment to be written.
my @seen;
for (1 .. 50) {
    @seen = access_lines();
    last if @seen >= $lines + 2;
    select undef, undef, undef, 0.1;
}
is join(' | ', map { (split ' ')[0] } @seen[$lines .. $#seen]), '401 | 200',
    'the server\'s access log: 401, then 200, for openid-client\'s call';

done_testing();
