# Proof against what no one here wrote (issue 41): the module behind the
# OpenID Certified oidc-provider (npm, pinned in t/oidcp) as its identity
# provider, with the certified openid-client getting the tokens and
# making the DPoP proofs (t/oidcp/provider.mjs, t/oidcp/client.mjs): no
# token or proof below is made by code of this project.
#
#   - discovery: LessonsJWTIssuer https://127.0.0.1:P with no key: the
#     provider's metadata and its jwks_uri, over TLS with a test CA
#     (LessonsJWTKeysCA);
#   - client credentials with a resource indicator (RFC 8707): RFC 9068
#     access tokens (typ at+jwt) for the module's audience, signed RS256,
#     PS256 and ES256 (a client each), under LessonsJWTTokenType at+jwt:
#     200, and 201/204 for a create and its delete; a section of one
#     algorithm refuses the others';
#   - DPoP-bound tokens (RFC 9449), proofs made by openid-client with an
#     ES256 and a PS256 key: 200, 201, 204; a replayed proof, a proof for
#     another URL or another method, the bound token sent as a bearer
#     token: 401 with docs/directives.md's reasons;
#   - a token for another resource (audience), a token of another issuer
#     (the provider's second issuer): 401 with their reasons;
#   - a key rotation at the provider: a new key signs, the module reads
#     the metadata and the keys again once (an unknown kid) and takes it;
#     the old key removed: its tokens are refused once the module has
#     read the keys again, even one it took before.
#
# The same expectations on Debian 12 and 13: cjose verifies at+jwt, DPoP
# and PS* on both.  Server B is started here: one process, so that the
# provider's counts of fetches are exact, on the suite's database.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use JSON::PP ();
use Time::HiRes qw(time sleep);
use LessonsTest;
use LessonsTest::OIDCP qw(start_oidcp oidcp_control oidc_token oidc_request);

my $dir  = File::Temp->newdir;
my $JSON = JSON::PP->new->utf8->canonical;
my $API       = 'https://api.lessons.test/';    # the module's audience
my $ELSEWHERE = 'https://reports.lessons.test/';  # another resource server
my $MIN = 2;            # LessonsJWTKeysMinRefresh

my $op = start_oidcp("$dir", resources => [ $API, $ELSEWHERE ]);
my ($ISS, $OTHER) = ($op->{iss}, $op->{other});
sub state_of { oidcp_control($op, GET => '/state' . ($_[0] ? "?issuer=$_[0]" : '')) }
sub part { $JSON->decode(b64url_decode((split /\./, $_[0])[$_[1]])) }
sub header_of { part($_[0], 0) }
sub claims_of { part($_[0], 1) }
sub token_of { oidc_token($op, resource => $API, @_)->{access_token} }
# The module's fetches of the issuer's metadata and keys so far, "M K"
# (openid-client reads the metadata too, before each token).
sub fetches {
    my $m = state_of($_[0])->{requests_by_agent}{mod_lessons} // {};
    return join ' ', map { $_ // 0 } @$m{qw(discovery jwks)};
}

# ---- server B ------------------------------------------------------------
my $port = free_port();
my $B = "http://127.0.0.1:$port";
my $common = <<"EOF";
    SetHandler lessons
    LessonsJWTAudience $API
    LessonsJWTTokenType at+jwt
    LessonsJWTKeysCA "$op->{ca}"
    LessonsJWTKeysMinRefresh $MIN
EOF
my $sections = '';
for my $alg (qw(RS256 PS256 ES256)) {
    $sections .= qq{<Location "/\L$alg\E/api/lessons">\n    LessonsJWTIssuer $ISS\n}
               . qq{    LessonsJWTAlgorithm $alg\n$common</Location>\n};
}
my $conf = httpd_conf("$dir", $port, <<"EOF");
ServerName 127.0.0.1:$port
LogLevel info
@{[ one_process_conf() ]}<Location "/api/lessons">
    LessonsJWTIssuer $ISS
    LessonsJWTDPoP optional
$common</Location>
<Location "/dpop/api/lessons">
    LessonsJWTIssuer $ISS
    LessonsJWTDPoP required
$common</Location>
# The provider's other issuer, where it is the one named: its tokens are
# good ones, refused elsewhere for their issuer alone.
<Location "/other/api/lessons">
    LessonsJWTIssuer $OTHER
$common</Location>
$sections
EOF
my $out = `'@{[ LessonsTest::httpd_bin() ]}' -t -f '$conf' 2>&1`;
like $out, qr/Syntax OK/, 'configtest passes with the provider\'s issuers' or diag $out;
is fetches(), '0 0', '... and fetched nothing';
start_httpd($conf, $port);

sub error_log { do { local (@ARGV, $/) = ("$dir/error_log"); <> } }
sub get { call(GET => $_[0], base => $B, token => $_[1]) }
# A 401 whose challenge (of either scheme) carries error and a
# description containing $desc, with a problem body.
sub refused {
    my ($res, $error, $desc, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    is_problem($res, 401, $name);
    my @ch = $res->header('WWW-Authenticate');
    ok((grep { /\A(?:Bearer|DPoP) realm="lessons".*\berror="\Q$error\E", error_description="[^"]*\Q$desc\E/ } @ch),
       "$name: error=\"$error\", \"$desc\"") or diag join ' | ', @ch;
}

# ---- RFC 9068 access tokens, one client per algorithm -------------------
my %tok;
for my $alg (qw(RS256 PS256 ES256)) {
    my $res = oidc_token($op, alg => $alg, resource => $API);
    my $t = $tok{$alg} = $res->{access_token};
    my ($h, $c) = (header_of($t), claims_of($t));
    is "$h->{typ} $h->{alg} $h->{kid}", "at+jwt $alg \L$alg\E-1",
        "$alg client: the provider's token is at+jwt, $alg, its key's kid";
    is_deeply [ @$c{qw(iss aud client_id sub)} ],
              [ $ISS, $API, $op->{clients}{$alg}{client_id}, $op->{clients}{$alg}{client_id} ],
        '... for the module\'s audience (the resource indicator), iss, client_id, sub';
    ok $c->{jti} && $c->{iat} && $c->{exp} > $c->{iat}, '... jti, iat and exp (RFC 9068 2.2)';
    is lc $res->{token_type}, 'bearer', '... a bearer token';
}
my $res = get('/api/lessons', $tok{RS256});
is $res->code, 200, 'discovery: the RS256 token, keys from the issuer\'s jwks_uri: 200'
    or diag $res->header('WWW-Authenticate') // '', "\n", error_log();
# Each algorithm's section is a source of its own (issue 55: sections that
# differ in algorithms never share a fetch or a set), fetched at start;
# the issuer's sections with no algorithm share one, fetched now.
my $until = time + 10;
sleep 0.2 while fetches() ne '4 4' && time < $until;
is fetches(), '4 4', '... one metadata and one keys fetch for each of the four sources';
like error_log(), qr/LESSONS00213: issuer \Q$ISS\E: 3 key\(s\) in use \(rs256-1, ps256-1, es256-1\), 0 skipped, from \Q$ISS\E\/jwks/,
    '... the provider\'s three keys in use, from the jwks_uri its metadata names';
for my $alg (qw(RS256 PS256 ES256)) {
    is get('/api/lessons', $tok{$alg})->code, 200, "$alg token: 200";
    is get("/\L$alg\E/api/lessons", $tok{$alg})->code, 200, "... and where $alg alone is taken";
    for my $not (grep { $_ ne $alg } qw(RS256 PS256 ES256)) {
        refused(get("/\L$not\E/api/lessons", $tok{$alg}), 'invalid_token',
                'The access token is signed with an algorithm that is not accepted',
                "$alg token where $not alone is taken");
    }
}
$res = call(POST => '/api/lessons', base => $B, token => $tok{PS256},
            json => { levelId => 1, title => 'Vom Anbieter', order => 1 });
is $res->code, 201, 'a create with the PS256 token: 201' or diag $res->content;
my $id = (json_of($res) // {})->{id} // 0;
is call(DELETE => "/api/lessons/$id", base => $B, token => $tok{ES256})->code, 204,
    '... and its delete with the ES256 token: 204';
is fetches(), '4 4', 'no fetch since: every key was known';

# ---- another audience, another issuer ----------------------------------
refused(get('/api/lessons', token_of(resource => $ELSEWHERE)), 'invalid_token',
        'The access token audience is not accepted', 'a token for another resource server');
my $theirs = token_of(issuer => 'other');
is claims_of($theirs)->{iss}, $OTHER, 'the other issuer\'s token names it';
is get('/other/api/lessons', $theirs)->code, 200, '... and is taken where that issuer is named';
is fetches('other'), '1 1', '... whose keys the module found by discovery there';
refused(get('/api/lessons', $theirs), 'invalid_token',
        'The access token issuer is not accepted here', '... and refused here');
is fetches(), '4 4', '... which fetched nothing (its kid is one of ours, its iss not)';

# ---- DPoP: tokens bound to a key of openid-client's ----------------------
my %bound;
for my $kalg (qw(ES256 PS256)) {
    my $key = "$dir/dpop-$kalg.jwk";
    my $r = oidc_token($op, alg => 'PS256', resource => $API, dpop_key => $key, dpop_alg => $kalg);
    my $t = $r->{access_token};
    $bound{$kalg} = { token => $t, dpop_key => $key };
    is lc $r->{token_type}, 'dpop', "a token bound to an $kalg key: token_type DPoP";
    ok claims_of($t)->{cnf}{jkt}, '... with cnf.jkt';
    $r = oidc_request($op, token => $t, method => 'GET', url => "$B/dpop/api/lessons", dpop_key => $key);
    is $r->{status}, 200, "... GET with openid-client's proof, DPoP required: 200"
        or diag explain $r;
    my $ph = header_of($r->{dpop} // '');
    is "$ph->{typ} $ph->{alg}", "dpop+jwt $kalg", "... its proof: dpop+jwt, $kalg";
    like $r->{authorization} // '', qr/\ADPoP /, '... sent with Authorization: DPoP';
    is oidc_request($op, token => $t, method => 'GET', url => "$B/api/lessons", dpop_key => $key)->{status},
        200, '... and where DPoP is optional: 200';
}
{
    my %b = %{ $bound{ES256} };
    my $r = oidc_request($op, %b, method => 'POST', url => "$B/dpop/api/lessons",
                         body => $JSON->encode({ levelId => 1, title => 'Gebunden', order => 1 }));
    is $r->{status}, 201, 'a create with openid-client\'s proof: 201' or diag explain $r;
    my $made = eval { $JSON->decode($r->{body})->{id} } // 0;
    is oidc_request($op, %b, method => 'DELETE', url => "$B/dpop/api/lessons/$made")->{status}, 204,
        '... and its delete: 204';
}

# Proofs made by openid-client for a request it does not send: sent here,
# as they are, once or where they do not belong.
sub proof {
    my ($b, $method, $url) = @_;
    return oidc_request($op, %$b, method => $method, url => $url, send => 0)->{dpop};
}
sub dpop_get {
    my ($path, $b, $proof) = @_;
    return call(GET => $path, base => $B, auth => "DPoP $b->{token}", headers => [ DPoP => $proof ]);
}
for my $kalg (qw(ES256 PS256)) {
    my $b = $bound{$kalg};
    my $p = proof($b, GET => "$B/dpop/api/lessons");
    is dpop_get('/dpop/api/lessons', $b, $p)->code, 200, "$kalg: a proof made for GET $B/dpop/api/lessons: 200";
    refused(dpop_get('/dpop/api/lessons', $b, $p), 'invalid_dpop_proof',
            'The DPoP proof has been used before', "$kalg: the same proof again");
    refused(dpop_get('/dpop/api/lessons', $b, proof($b, GET => "$B/api/lessons")), 'invalid_dpop_proof',
            'The DPoP proof is for another URI', "$kalg: a proof for another URL");
    refused(dpop_get('/dpop/api/lessons', $b, proof($b, POST => "$B/dpop/api/lessons")), 'invalid_dpop_proof',
            'The DPoP proof is for another method', "$kalg: a proof for another method");
    for my $where ('/dpop/api/lessons', '/api/lessons') {
        refused(get($where, $b->{token}), 'invalid_token', 'The access token is bound to a DPoP key',
                "$kalg: the bound token as a bearer token at $where");
    }
}
my $r = oidc_request($op, %{ $bound{ES256} }, method => 'GET', url => "$B/dpop/api/lessons", dpop_key => $bound{PS256}{dpop_key});
is $r->{status}, 401, 'a proof made with another key than the token\'s: 401';
like $r->{www_authenticate} // '', qr/error="invalid_dpop_proof", error_description="The DPoP proof is made with another key/,
    '... with the reason';

# ---- rotation at the provider --------------------------------------------
# Two tokens of the first RS256 key that no request has shown yet.
my @spare = map { token_of(alg => 'RS256') } 1 .. 2;
is header_of($spare[0])->{kid}, 'rs256-1', 'tokens of the first RS256 key kept for later';
sleep $MIN + 0.2;               # a refetch is allowed by now
my ($m0, $k0) = split ' ', fetches();
my $kid2 = oidcp_control($op, POST => '/keys', { alg => 'RS256' })->{kid};
my $t2 = token_of(alg => 'RS256');
is header_of($t2)->{kid}, $kid2, "a new RS256 key ($kid2) signs at the provider";
my $logpos = length error_log();
is get('/rs256/api/lessons', $t2)->code, 200, '... its token: 200 at once';
my ($m1, $k1) = split ' ', fetches();
is $m1 - $m0, 1, '... after one metadata fetch';
is $k1 - $k0, 1, '... and one keys fetch (an unknown kid)';
like substr(error_log(), $logpos), qr/LESSONS00213: issuer \Q$ISS\E \(as \S+ names it\): 2 key\(s\) in use \(\Q$kid2\E, rs256-1\)/,
    '... both RS256 keys in use (the RS256 section\'s own source)';
is get('/rs256/api/lessons', $spare[0])->code, 200, 'the old key\'s token: 200 while it is published';

sleep $MIN + 0.2;
oidcp_control($op, POST => '/keys/remove', { kid => 'rs256-1' });
my $kid3 = oidcp_control($op, POST => '/keys', { alg => 'RS256' })->{kid};
my $t3 = token_of(alg => 'RS256');
$logpos = length error_log();
is get('/rs256/api/lessons', $t3)->code, 200, "the old key removed, another new one ($kid3): 200";
like substr(error_log(), $logpos), qr/LESSONS00213: issuer \Q$ISS\E \(as \S+ names it\): 2 key\(s\) in use \(\Q$kid3\E, \Q$kid2\E\)/,
    '... the keys read again: rs256-1 is gone';
refused(get('/rs256/api/lessons', $spare[1]), 'invalid_token',
        'The access token names a key the server does not know', 'a token of the removed key');
refused(get('/rs256/api/lessons', $spare[0]), 'invalid_token',
        'The access token names a key the server does not know',
        '... also one that was taken before (its verdict does not outlive the key)');
is get('/api/lessons', $t2)->code, 200, "a token of $kid2, still published: 200";

done_testing();
