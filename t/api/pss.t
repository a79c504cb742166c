# PS256/384/512 (issue 22, issue 41), on a server of this test's own, on
# Debian 12 and 13 alike: an RSA key (PEM, or a provider's JWK from a keys
# URL) takes the PS* and RS* a section names, and nothing else (another
# PS*, an RS256 signature under a PS256 header, HS256 keyed with the
# public PEM, a PS256 token where only RS256 is named); a section naming
# RS256 only keeps working when its provider publishes a PS256 key beside
# the RS256 one (the PS256 key is skipped, not taken, and the set is not
# refused for it).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use JSON::PP ();
use LessonsTest;
use LessonsTest::JWT qw(b64url_decode);
use LessonsTest::IdP qw(start_idp idp_control idp_token);

my $dir  = File::Temp->newdir;
my $pub  = $ENV{LESSONS_TEST_RSA_PUB};
my $idp  = start_idp("$dir");
# The provider starts with an RS256 key; a PS256 key beside it signs
# nothing until the PS256 tests below.  A realm of its own, with a
# PS384 and a PS512 key, serves the PS384 PS512 section.
my $ps_kid = idp_control($idp, POST => '/keys', { alg => 'PS256', sign => JSON::PP::false() })->{kid};
my $rs_token = idp_token($idp);
my %realm_kid = (
    PS384 => idp_control($idp, POST => '/realms', { name => 'pss', alg => 'PS384' })->{keys}[0]{kid},
    PS512 => idp_control($idp, POST => '/keys?realm=pss', { alg => 'PS512' })->{kid});

seed({ level_id => 1, title => 'Pss', sort_order => 1 });

my $port = free_port();
my $conf = httpd_conf("$dir", $port, <<"EOF");
LogLevel info
<Location "/rs/api/lessons">
    SetHandler lessons
    LessonsJWTKey RS256 $idp->{jwks}?rs
    LessonsJWTKeysCA "$idp->{ca}"
</Location>
<Location "/pem/api/lessons">
    SetHandler lessons
    LessonsJWTKey PS256 RS256 "$pub"
</Location>
<Location "/pem384/api/lessons">
    SetHandler lessons
    LessonsJWTKey PS384 PS512 "$pub"
</Location>
<Location "/idp/api/lessons">
    SetHandler lessons
    LessonsJWTKey PS256 RS256 $idp->{jwks}
    LessonsJWTKeysCA "$idp->{ca}"
</Location>
<Location "/idp384/api/lessons">
    SetHandler lessons
    LessonsJWTKey PS384 PS512 $idp->{iss}/realms/pss/jwks
    LessonsJWTKeysCA "$idp->{ca}"
</Location>
EOF
my $base = "http://127.0.0.1:$port";
start_httpd($conf, $port);

sub code { call(GET => $_[0], base => $base, token => $_[1])->code }

# ---- the provider's PS256 key beside an RS256-only section
is code('/rs/api/lessons', $rs_token), 200,
    'RS256 section, provider with a PS256 key too: its RS256 token passes';
is code('/rs/api/lessons', token(alg => 'PS256')), 401,
    'RS256 section: a PS256 token gets 401';
{
    open my $fh, '<', "$dir/error_log" or die "$dir/error_log: $!";
    my @in_use = grep { m{keys URL \Q$idp->{jwks}?rs\E: \d+ key\(s\) in use} } <$fh>;
    like $in_use[-1] // '', qr/: 1 key\(s\) in use \([^)]*\), 1 skipped/,
        "RS256 section's keys URL: the RS256 key in use, the PS256 key skipped"
        or diag @in_use;
}

# ---- a PEM key: PS256 RS256 named
is code('/pem/api/lessons', token(alg => 'PS256')), 200, 'PEM key: PS256 token passes';
is code('/pem/api/lessons', token(alg => 'RS256')), 200, 'PEM key: RS256 token passes beside it';
is code('/pem/api/lessons', token(alg => 'PS384')), 401, 'PS384 where PS256 is named: 401';
is code('/pem/api/lessons', token(alg => 'PS256', sign_alg => 'RS256')), 401,
    'an RS256 signature under a PS256 header: 401';
is code('/pem/api/lessons', token(alg => 'HS256', key => LessonsTest::rsa_public_pem())), 401,
    'HS256 keyed with the public PEM on the PS256 section: 401';
my $other = "$dir/other.key";
system("openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out '$other' 2>/dev/null") == 0
    or die 'openssl genpkey failed';
is code('/pem/api/lessons', token(alg => 'PS256', key => $other)), 401,
    'PS256 signed by another RSA key: 401';

# ---- a PEM key: PS384 PS512 named
for my $alg (qw(PS384 PS512)) {
    is code('/pem384/api/lessons', token(alg => $alg)), 200, "PEM key: $alg token passes";
    is code('/pem384/api/lessons', token(alg => $alg, key => $other)), 401,
        "$alg signed by another RSA key: 401";
    is code('/pem/api/lessons', token(alg => $alg)), 401, "$alg on the PS256 RS256 section: 401";
}
is code('/pem384/api/lessons', token(alg => 'PS384', sign_alg => 'PS512')), 401,
    'a PS512 signature under a PS384 header: 401';
is code('/pem384/api/lessons', token(alg => 'PS256')), 401, 'PS256 where PS384 PS512 are named: 401';
is code('/pem384/api/lessons', token(alg => 'RS256')), 401, 'RS256 where PS384 PS512 are named: 401';

# ---- a keys URL: the provider's PS256 key, then the realm's PS384/512
idp_control($idp, POST => '/signing', { kid => $ps_kid });
my $ps_token = idp_token($idp);
my $header = JSON::PP->new->decode(b64url_decode((split /\./, $ps_token)[0]));
is $header->{alg}, 'PS256', 'the provider issued a PS256 token';
is code('/idp/api/lessons', $ps_token), 200, "provider's PS256 token on the PS256 RS256 section: 200";
is code('/idp/api/lessons', $rs_token), 200, "provider's RS256 token there: 200";
is code('/rs/api/lessons', $ps_token), 401, "provider's PS256 token on the RS256-only section: 401";
is code('/idp384/api/lessons', $ps_token), 401, "provider's PS256 token on the PS384 PS512 section: 401";
for my $alg (qw(PS384 PS512)) {
    idp_control($idp, POST => '/signing?realm=pss', { kid => $realm_kid{$alg} });
    my $t = idp_token($idp, realm => 'pss');
    my $h = JSON::PP->new->decode(b64url_decode((split /\./, $t)[0]));
    is $h->{alg}, $alg, "the realm issued a $alg token";
    is code('/idp384/api/lessons', $t), 200, "realm's $alg token on the PS384 PS512 section: 200";
    is code('/idp/api/lessons', $t), 401, "realm's $alg token on the PS256 RS256 section: 401";
}
{
    open my $fh, '<', "$dir/error_log" or die "$dir/error_log: $!";
    my @lines = grep { m{\Q$idp->{iss}/realms/pss/jwks\E} } <$fh>;
    my @in_use = grep { m{: \d+ key\(s\) in use} } @lines;
    like $in_use[-1] // '', qr/: 2 key\(s\) in use \([^)]*\), 0 skipped/,
        "PS384 PS512 section's keys URL: the PS384 and PS512 keys in use"
        or diag @lines;
}

done_testing;
