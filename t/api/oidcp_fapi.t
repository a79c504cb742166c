# Issue 44's proof against the OpenID Certified oidc-provider (t/oidcp,
# the pinned npm version): opaque tokens by introspection (part 3) and
# certificate-bound access tokens (part 1), issued by what no one here
# wrote and got through openid-client.  t/api/introspect.t and
# t/api/cert_bound.t prove the same against the suites' own test IdP and
# tokens; t/api/dpop_nonce.t proves part 2 against oidc-provider.
#
# One httpd with mod_ssl (SSLVerifyClient optional_no_ca, the provider's
# test CA's certificate for 127.0.0.1), one oidc-provider started with
# an opaque resource (features.introspection and features.revocation
# on, the module's own client lessons-introspect) and features.mTLS
# (certificateBoundAccessTokens, a client registered with the
# self-signed certificate A: self_signed_tls_client_auth):
#
#   - an opaque token of oidc-provider: 200, asked of the
#     introspection_endpoint that LessonsJWTIntrospect discover found in
#     the provider's metadata (LESSONS00745), by the module itself;
#   - revoked at the provider (RFC 7009, openid-client's tokenRevocation):
#     401 invalid_token once LessonsJWTIntrospectCacheMax (2 s) has
#     passed, polled for, and not sooner (one process: answers are kept
#     per process);
#   - the provider's listener stopped: 503 with Retry-After for a token
#     not yet asked about; listening again: the same token 200 (the
#     provider keeps its tokens in its process's memory, which the stop
#     of its listener leaves alone: no new token is needed);
#   - Require jwt-claim scope lessons:write on the introspected scope:
#     a token with it 200, one without 403, asked in turns (never the
#     other's answer);
#   - a JWT bound by oidc-provider to certificate A (cnf x5t#S256, the
#     thumbprint openssl gives for A): with LessonsJWTCertBound required,
#     200 with A, 401 invalid_token with another certificate B and with
#     none; an unbound JWT of the same provider: 401;
#   - an opaque token bound to A: the introspection answer's cnf is held
#     to the connection's certificate the same way.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use Digest::SHA qw(sha256);
use File::Temp ();
use HTTP::Request ();
use JSON::PP ();
use LWP::UserAgent ();
use Time::HiRes qw(time sleep);
use LessonsTest;
use LessonsTest::JWT qw(b64url);
use LessonsTest::OIDCP qw(start_oidcp oidcp_control oidc_token oidc_revoke);

my $dir    = File::Temp->newdir;
my $JSON   = JSON::PP->new->utf8->canonical;
my $mods   = $ENV{LESSONS_TEST_HTTPD_MODULES} || '/usr/lib/apache2/modules';
my $API    = 'https://api.lessons.test/';       # JWT access tokens
my $OPAQUE = 'https://opaque.lessons.test/';    # opaque access tokens

# ---- client certificates A and B, self-signed (RFC 8705 2.2)
for my $name (qw(a b)) {
    system("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
           . " -keyout $dir/$name.key -out $dir/$name.pem -days 2 -subj /CN=client-$name"
           . " >/dev/null 2>&1") == 0 or die "openssl req $name\n";
}
# RFC 8705's x5t#S256, from openssl's DER, not from the provider.
my %x5t = map {
    my $der = `openssl x509 -in $dir/$_.pem -outform DER`;
    die "openssl x509 $_\n" if $? || !length $der;
    ($_ => b64url(sha256($der)));
} qw(a b);

# ---- the provider: A registered for the mTLS client
my $op = start_oidcp("$dir", resources => [ $API ], opaque_resources => [ $OPAQUE ],
                     mtls_certs => [ "$dir/a.pem" ]);
my $ISS = $op->{iss};
ok $op->{introspector} && $op->{mtls}, 'oidc-provider with an introspection client and an mTLS client';
sub op_state { oidcp_control($op, GET => '/state') }
my $meta = op_state();
open my $sf, '>', "$dir/introspect.secret" or die "$dir/introspect.secret: $!";
print $sf "$op->{introspector}{client_secret}\n";
close $sf or die "$dir/introspect.secret: $!";

# ---- the server: HTTPS with the provider's certificate for 127.0.0.1
my $CLIENT = qq{LessonsJWTIntrospectClient $op->{introspector}{client_id} "$dir/introspect.secret"};
my $port = free_port();
my $base = "https://127.0.0.1:$port";
my $conf = httpd_conf("$dir", $port, <<"EOF");
ServerName 127.0.0.1:$port
LogLevel info
# One process: introspection answers are kept per process, and the
# cache bound below is timed against that one.
@{[ one_process_conf() ]}LoadModule socache_shmcb_module "$mods/mod_socache_shmcb.so"
LoadModule ssl_module "$mods/mod_ssl.so"
SSLSessionCache "shmcb:$dir/ssl_scache(512000)"
SSLEngine on
SSLCertificateFile "$dir/oidcp.crt"
SSLCertificateKeyFile "$dir/oidcp.key"
SSLVerifyClient optional_no_ca
# Opaque tokens: the endpoint discovered, revocations seen within 2 s.
<Location "/opaque/api/lessons">
    SetHandler lessons
    LessonsJWTIssuer $ISS
    LessonsJWTAudience $OPAQUE
    LessonsJWTIntrospect discover
    $CLIENT
    LessonsJWTIntrospectCacheMax 2
    LessonsJWTKeysCA "$op->{ca}"
</Location>
# The endpoint given; the scope the introspection answer names.
<Location "/scoped/api/lessons">
    SetHandler lessons
    LessonsJWTAudience $OPAQUE
    LessonsJWTIntrospect $ISS/token/introspection
    $CLIENT
    LessonsJWTKeysCA "$op->{ca}"
    Require jwt-claim scope lessons:write
</Location>
# oidc-provider's JWTs, bound to a certificate.
<Location "/mtls/api/lessons">
    SetHandler lessons
    LessonsJWTIssuer $ISS
    LessonsJWTAudience $API
    LessonsJWTTokenType at+jwt
    LessonsJWTKeysCA "$op->{ca}"
    LessonsJWTCertBound required
</Location>
# Its opaque tokens, bound to a certificate: cnf from introspection.
<Location "/mtls-opaque/api/lessons">
    SetHandler lessons
    LessonsJWTIssuer $ISS
    LessonsJWTAudience $OPAQUE
    LessonsJWTIntrospect discover
    $CLIENT
    LessonsJWTKeysCA "$op->{ca}"
    LessonsJWTCertBound required
</Location>
EOF
my $out = `'@{[ LessonsTest::httpd_bin() ]}' -t -f '$conf' 2>&1`;
like $out, qr/Syntax OK/, 'configtest passes' or diag $out;
start_httpd($conf, $port);

# A client with certificate $name (undef: none); a connection per request.
sub ua_with {
    my ($name) = @_;
    my %ssl = (SSL_ca_file => $op->{ca}, verify_hostname => 0);
    if ($name) {
        $ssl{SSL_cert_file} = "$dir/$name.pem";
        $ssl{SSL_key_file}  = "$dir/$name.key";
    }
    return LWP::UserAgent->new(keep_alive => 0, timeout => 60, ssl_opts => \%ssl);
}
my %ua = (a => ua_with('a'), b => ua_with('b'), none => ua_with(undef));

sub get {
    my ($who, $path, $token) = @_;
    my $req = HTTP::Request->new(GET => "$base$path");
    $req->header(Authorization => "Bearer $token");
    return $ua{$who}->request($req);
}
sub error_log { do { local (@ARGV, $/) = ("$dir/error_log"); <> } // '' }
sub token_of { (oidc_token($op, @_) // {})->{access_token} // '' }
sub mod_lessons_count {
    my ($what) = @_;
    return ((op_state()->{requests_by_agent}{mod_lessons} // {})->{$what} // 0);
}
# Asks until $code comes back (at most $limit s); the last answer.
sub eventually {
    my ($who, $path, $token, $code, $limit) = @_;
    my $end = time + $limit;
    my $res;
    while (1) {
        $res = get($who, $path, $token);
        return $res if $res->code == $code || time >= $end;
        sleep 0.25;
    }
}

# ---- part 3: an opaque token of oidc-provider -----------------------------
my $t = token_of(resource => $OPAQUE, scope => 'lessons:read lessons:write');
unlike $t, qr/\A[^.]+\.[^.]+\.[^.]*\z/, 'oidc-provider\'s token for the opaque resource is no JWT';
my $res = get(none => '/opaque/api/lessons', $t);
is $res->code, 200, 'an opaque token of oidc-provider: 200'
    or diag $res->as_string, error_log();
like error_log(), qr/LESSONS00745: issuer \Q$ISS\E: introspection endpoint \Q$ISS\E\/token\/introspection \(from its metadata\)/,
    '... LessonsJWTIntrospect discover found oidc-provider\'s introspection_endpoint';
ok mod_lessons_count('introspection') >= 1, '... which the module asked (User-Agent mod_lessons)';
unlike error_log(), qr/\Q$t\E/, '... and the token is not logged';

# ---- revoked at the provider: 401 once the cache bound has passed --------
{
    my $r = token_of(resource => $OPAQUE);
    my $t0 = time;
    is get(none => '/opaque/api/lessons', $r)->code, 200, 'a token to revoke: 200';
    my $revocations = op_state()->{revocation_requests};
    ok oidc_revoke($op, token => $r)->{revoked}, '... revoked by its client (openid-client, RFC 7009)';
    is op_state()->{revocation_requests}, $revocations + 1, '... at oidc-provider\'s revocation endpoint';
    $res = eventually(none => '/opaque/api/lessons', $r, 401, 20);
    is_unauthorized($res, 'revoked at the provider: 401', 'invalid_token');
    # The answer kept is the 200's, until the second after the next at
    # the earliest (whole seconds): at least 1 s after the first request.
    cmp_ok time - $t0, '>=', 1, '... not before LessonsJWTIntrospectCacheMax (2 s) had passed';
}

# ---- Require jwt-claim scope on the introspected scope ----------------------
{
    my $writer = $t;    # lessons:read lessons:write, as asked above
    my $reader = token_of(resource => $OPAQUE, scope => 'lessons:read');
    for my $round (1 .. 2) {
        is get(none => '/scoped/api/lessons', $writer)->code, 200,
            "round $round: introspected scope lessons:read lessons:write: 200";
        $res = get(none => '/scoped/api/lessons', $reader);
        is_problem($res, 403, "round $round: introspected scope lessons:read, lessons:write required");
    }
}

# ---- the provider down: 503, then 200 again ---------------------------------
{
    my $fresh = token_of(resource => $OPAQUE);
    ok !oidcp_control($op, POST => '/stop')->{listening}, 'oidc-provider stops listening';
    $res = get(none => '/opaque/api/lessons', $fresh);
    is_problem($res, 503, 'the provider down, a token not asked about yet');
    like $res->header('Retry-After') // '', qr/\A[1-9]\d*\z/, '... with Retry-After';
    like error_log(), qr/LESSONS00742: introspection at \Q$ISS\E\/token\/introspection: /,
        '... and the log says the introspection failed';
    ok oidcp_control($op, POST => '/start')->{listening}, 'oidc-provider listens again';
    # The same token: oidc-provider keeps its tokens in its process's
    # memory, which stopping its listener leaves alone.
    $res = eventually(none => '/opaque/api/lessons', $fresh, 200, 20);
    is $res->code, 200, '... the same token: 200' or diag $res->as_string;
}

# ---- part 1: a JWT bound to certificate A -----------------------------------
sub is_cert_refusal {
    my ($res, $desc, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    is $res->code, 401, "$name: 401" or diag $res->as_string;
    my $h = join ' | ', $res->header('WWW-Authenticate');
    like $h, qr/\ABearer realm="lessons", error="invalid_token", error_description="[^"]*$desc/,
        "$name: Bearer invalid_token, $desc" or diag $h;
    unlike $res->as_string, qr/\Q$x5t{$_}\E/, "$name: no thumbprint in the answer ($_)" for qw(a b);
}
{
    my $bound = oidc_token($op, cert => "$dir/a.pem", resource => $API);
    is lc($bound->{token_type} // ''), 'bearer', 'oidc-provider\'s token for the client with certificate A';
    my $claims = $JSON->decode(b64url_decode((split /\./, $bound->{access_token} // '')[1] // '') || '{}');
    is(($claims->{cnf} // {})->{'x5t#S256'}, $x5t{a}, '... a JWT with cnf x5t#S256 of A');
    $res = get(a => '/mtls/api/lessons', $bound->{access_token});
    is $res->code, 200, '... with A: 200' or diag $res->as_string, error_log();
    is_cert_refusal(get(b => '/mtls/api/lessons', $bound->{access_token}),
                    'another client certificate', '... with B');
    is_cert_refusal(get(none => '/mtls/api/lessons', $bound->{access_token}),
                    'presented none', '... without a certificate');
    is_cert_refusal(get(a => '/mtls/api/lessons', token_of(resource => $API)),
                    'sender-constrained', 'an unbound JWT of oidc-provider, with A');
}

# ---- an opaque token bound to A: cnf from the introspection answer ---------
{
    my $bound = token_of(cert => "$dir/a.pem", resource => $OPAQUE);
    unlike $bound, qr/\A[^.]+\.[^.]+\.[^.]*\z/, 'oidc-provider\'s opaque token bound to A';
    $res = get(a => '/mtls-opaque/api/lessons', $bound);
    is $res->code, 200, '... with A: 200' or diag $res->as_string, error_log();
    is_cert_refusal(get(b => '/mtls-opaque/api/lessons', $bound), 'another client certificate',
                    '... with B');
    is_cert_refusal(get(none => '/mtls-opaque/api/lessons', $bound), 'presented none',
                    '... without a certificate');
}
unlike error_log(), qr/\Q$x5t{$_}\E/, "the log holds no thumbprint ($_)" for qw(a b);

done_testing();
