# PS256/384/512 (issue 22), on a server of this test's own: taken where
# the libjwt in use verifies them (the suite's server says so at
# start-up, LESSONS00109), refused at start-up naming why elsewhere.
#
#   where it verifies them: an RSA key (PEM, or a provider's JWK) takes
#     the PS* and RS* a section names, and nothing else (another PS*, an
#     RS256 signature under a PS256 header, HS256 keyed with the public
#     PEM, a PS256 token where only RS256 is named);
#   everywhere: a section naming RS256 only keeps working when its
#     provider publishes a PS256 key beside the RS256 one (the PS256 key
#     is skipped, not taken, and the set is not refused for it).
#
# make test runs this file again in the other Debian release's root and
# against libjwt's GnuTLS build (t/release/flavor.sh), which verifies
# PS* where Debian's OpenSSL build does not.
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

my $caps = jwt_caps();
diag "libjwt: $caps->{line}";
# Run against libjwt's GnuTLS build (t/release/flavor.sh), the suite's
# server must have found PS* verified: else this file proves nothing.
ok $caps->{pss}, "libjwt's GnuTLS build: the server found PS* verified"
    if $ENV{LESSONS_TEST_LIBDIR_SET};
my $dir  = File::Temp->newdir;
my $pub  = $ENV{LESSONS_TEST_RSA_PUB};
my $idp  = start_idp("$dir");
# The provider starts with an RS256 key; a PS256 key beside it that
# signs nothing, and one for tokens only where PS* are verified.
my $ps_kid = idp_control($idp, POST => '/keys', { alg => 'PS256', sign => JSON::PP::false() })->{kid};
my $rs_token = idp_token($idp);

seed({ level_id => 1, title => 'Pss', sort_order => 1 });

my $port = free_port();
my $pss_sections = <<"EOF";
<Location "/pem/api/lessons">
    SetHandler lessons
    LessonsJWTKey PS256 RS256 "$pub"
</Location>
<Location "/idp/api/lessons">
    SetHandler lessons
    LessonsJWTKey PS256 RS256 $idp->{jwks}
    LessonsJWTKeysCA "$idp->{ca}"
</Location>
EOF
my $conf = httpd_conf("$dir", $port, <<"EOF");
LogLevel info
<Location "/rs/api/lessons">
    SetHandler lessons
    LessonsJWTKey RS256 $idp->{jwks}?rs
    LessonsJWTKeysCA "$idp->{ca}"
</Location>
@{[ $caps->{pss} ? $pss_sections : '' ]}
EOF
my $base = "http://127.0.0.1:$port";
start_httpd($conf, $port);

sub code { call(GET => $_[0], base => $base, token => $_[1])->code }

# ---- everywhere: the provider's PS256 key beside an RS256-only section
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

if ($caps->{pss}) {
    # ---- where the libjwt in use verifies PS*
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
    idp_control($idp, POST => '/signing', { kid => $ps_kid });
    my $ps_token = idp_token($idp);
    my $header = JSON::PP->new->decode(b64url_decode((split /\./, $ps_token)[0]));
    is $header->{alg}, 'PS256', 'the provider issued a PS256 token';
    is code('/idp/api/lessons', $ps_token), 200, "provider's PS256 token on the PS256 RS256 section: 200";
    is code('/idp/api/lessons', $rs_token), 200, "provider's RS256 token there: 200";
    is code('/rs/api/lessons', $ps_token), 401, "provider's PS256 token on the RS256-only section: 401";
}
else {
    # ---- where it does not: the section is refused at start-up
    mkdir "$dir/bad" or die "$dir/bad: $!";
    my $bad = httpd_conf("$dir/bad", free_port(), $pss_sections);
    my $out = `'@{[ LessonsTest::httpd_bin() ]}' -t -f '$bad' 2>&1`;
    unlike $out, qr/Syntax OK/, 'LessonsJWTKey PS256 RS256: refused at start-up';
    like $out, qr/PS256: the libjwt in use \(built against [^)]+\) verifies no PS256\/384\/512 token/,
        '... naming the reason' or diag $out;
}

done_testing;
