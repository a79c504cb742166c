# Start-up checks: `apache2 -t` on small configs.  A bad algorithm, an
# unusable key, or a key that does not fit the algorithm stops the server
# with a message naming the problem; it never runs open.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use JSON::PP ();
use MIME::Base64 ();
use LessonsTest;

my $httpd   = LessonsTest::httpd_bin();
my $mods    = $ENV{LESSONS_TEST_HTTPD_MODULES} || '/usr/lib/apache2/modules';
my $module  = LessonsTest::module_path();
my $dir     = File::Temp->newdir;

sub write_file {
    my ($name, $content) = @_;
    my $path = "$dir/$name";
    open my $fh, '>:raw', $path or die "$path: $!";
    print $fh $content;
    close $fh;
    return $path;
}

sub openssl {
    my ($cmd) = @_;
    system("$cmd 2>/dev/null") == 0 or die "failed: $cmd";
}

# ---- keys
my $hs_good  = $ENV{LESSONS_TEST_HS_KEY};
my $hs_nl    = write_file('hs-newline.key', ('ab' x 32) . "\n");
my $hs_short = write_file('hs-short.key', 'x' x 16);
my $empty    = write_file('empty.key', '');
my $rsa_pub  = $ENV{LESSONS_TEST_RSA_PUB};
my $ec_pub   = $ENV{LESSONS_TEST_EC_PUB};
openssl("openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:1024 -out $dir/rsa1024.key");
openssl("openssl pkey -in $dir/rsa1024.key -pubout -out $dir/rsa1024.pub");
my $rsa_1024 = "$dir/rsa1024.pub";
my $missing  = "$dir/no-such-file.key";
my $unreadable = write_file('unreadable.key', 'y' x 64);
chmod 0000, $unreadable;
openssl("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
        . "-keyout $dir/ca.key -out $dir/ca.crt -subj /CN=configtest-ca -days 2");
my $ca_good = "$dir/ca.crt";
my $ca_unreadable = write_file('unreadable-ca.crt', do { local (@ARGV, $/) = ($ca_good); <> });
chmod 0000, $ca_unreadable;

my $n = 0;
# configtest($inside, $after, %o): $inside goes into <Location
# "/api/lessons"> (which holds SetHandler lessons), $after follows that
# section; $o{dbparams} replaces the SQLite DBDParams, $o{user} adds
# User and Group lines at the end (the lines that messages name stay
# where they were).
sub configtest {
    my ($directives, $after, %o) = @_;
    $after = '' unless defined $after;
    my $params = $o{dbparams} // "$dir/lessons.db";
    my $user = $o{user} ? "User $o{user}\nGroup nogroup" : '';
    $n++;
    my $conf = write_file("httpd-$n.conf", <<"EOF");
ServerRoot "$dir"
ServerName localhost
Listen 127.0.0.1:9
PidFile "$dir/httpd.pid"
ErrorLog "$dir/error_log"
DefaultRuntimeDir "$dir"
LoadModule mpm_event_module  "$mods/mod_mpm_event.so"
LoadModule authz_core_module "$mods/mod_authz_core.so"
LoadModule dbd_module        "$mods/mod_dbd.so"
LoadModule lessons_module    "$module"
DBDriver sqlite3
DBDParams "$params"
<Location "/api/lessons">
    SetHandler lessons
$directives
</Location>
$after
$user
EOF
    my $out = `'$httpd' -t -f '$conf' 2>&1`;
    return ($? >> 8, $out);
}

sub bad_ok {
    my ($directives, $message, $name, $after) = @_;
    my ($rc, $out) = configtest($directives, $after);
    isnt $rc, 0, "$name: configtest fails";
    unlike $out, qr/Syntax OK/, "$name: no Syntax OK";
    like $out, $message, "$name: message names the problem"
        or diag "configtest output:\n$out";
}

sub good_ok {
    my ($directives, $name, $after) = @_;
    my ($rc, $out) = configtest($directives, $after);
    is $rc, 0, "$name: configtest passes" or diag "configtest output:\n$out";
    like $out, qr/Syntax OK/, "$name: Syntax OK";
}

# ---- good configurations
good_ok("LessonsJWTAlgorithm HS256\nLessonsJWTKeyFile $hs_good", 'HS256');
good_ok("LessonsJWTAlgorithm HS512\nLessonsJWTKeyFile $hs_nl",
        'HS512, secret with a trailing newline');
good_ok("LessonsJWTAlgorithm RS256\nLessonsJWTKeyFile $rsa_pub", 'RS256');
good_ok("LessonsJWTAlgorithm ES256\nLessonsJWTKeyFile $ec_pub", 'ES256');
good_ok("LessonsJWTAlgorithm HS256\nLessonsJWTKeyFile $hs_good\n"
        . "LessonsJWTIssuer https://auth.example.org\n"
        . "LessonsJWTAudience lessons-api\nLessonsJWTLeeway 30\n"
        . "LessonsMaxBodySize 1024\nLessonsBasePath /api/lessons",
        'every directive');

# ---- algorithms
bad_ok("LessonsJWTAlgorithm none\nLessonsJWTKeyFile $hs_good",
       qr/algorithm/i, 'algorithm none');
bad_ok("LessonsJWTAlgorithm HS257\nLessonsJWTKeyFile $hs_good",
       qr/HS257|algorithm/i, 'algorithm HS257');
bad_ok("LessonsJWTAlgorithm hs256\nLessonsJWTKeyFile $hs_good",
       qr/algorithm/i, 'algorithm in lower case');
# PS*: taken with an RSA key on every release (t/api/pss.t).
for my $alg (qw(PS256 PS384 PS512)) {
    good_ok("LessonsJWTAlgorithm $alg\nLessonsJWTKeyFile $rsa_pub", "$alg with an RSA key");
}
bad_ok("LessonsJWTAlgorithm PS384\nLessonsJWTKeyFile $ec_pub",
       qr/PS384/, 'PS384 with an EC key');

# ---- key files
bad_ok("LessonsJWTAlgorithm HS256\nLessonsJWTKeyFile $missing",
       qr/no-such-file|No such file|not found|cannot|unable/i, 'missing key file');
bad_ok("LessonsJWTAlgorithm HS256\nLessonsJWTKeyFile $empty",
       qr/empty|short|bytes/i, 'empty key file');
SKIP: {
    skip 'root reads any file', 3 if $> == 0;
    bad_ok("LessonsJWTAlgorithm HS256\nLessonsJWTKeyFile $unreadable",
           qr/unreadable|Permission denied|cannot|unable/i, 'unreadable key file');
}
bad_ok("LessonsJWTAlgorithm HS256", qr/LessonsJWTKeyFile|key/i,
       'algorithm without a key file');
bad_ok("", qr/LessonsJWT|key|algorithm/i,
       'a lessons location with no token configuration at all');

# ---- keys that do not fit the algorithm
bad_ok("LessonsJWTAlgorithm HS256\nLessonsJWTKeyFile $hs_short",
       qr/32|short|bytes/i, 'HS256 with a 16-byte secret');
bad_ok("LessonsJWTAlgorithm HS256\nLessonsJWTKeyFile $rsa_pub",
       qr/PEM|public key/i, 'HS256 with a PEM public key as the secret');
# Public keys in other forms are no secret either: whoever has the key
# would sign HS256 tokens.  Refused at start-up naming the file.
openssl("openssl pkey -pubin -in $rsa_pub -outform DER -out $dir/rsa-pub.der");
openssl("openssl x509 -in $ca_good -outform DER -out $dir/ca.der");
openssl("ssh-keygen -q -t ed25519 -N '' -C test -f $dir/ssh-key");
for my $case (['rsa-pub.der', qr/DER public key/, 'a DER public key'],
              ['ca.der', qr/DER certificate/, 'a DER certificate'],
              ['ssh-key.pub', qr/SSH key/, 'an ssh-ed25519 line'],
              ['ssh-key', qr/OpenSSH private key/, 'an OpenSSH private key']) {
    my ($file, $what, $name) = @$case;
    bad_ok("LessonsJWTKey HS256 $dir/$file",
           qr/LessonsJWTKey \Q$dir\E\/\Q$file\E: .*$what/,
           "HS256 with $name as the secret");
}
bad_ok("LessonsJWTAlgorithm RS256\nLessonsJWTKeyFile $dir/rsa-pub.der",
       qr/DER public key.*openssl pkey -pubin -inform DER/,
       'RS256 with a DER public key: told how to make PEM of it');
bad_ok("LessonsJWTAlgorithm RS256\nLessonsJWTKeyFile $ec_pub",
       qr/RSA/i, 'RS256 with an EC key');
bad_ok("LessonsJWTAlgorithm ES256\nLessonsJWTKeyFile $rsa_pub",
       qr/\bEC\b|ECDSA|elliptic|curve|P-256/i, 'ES256 with an RSA key');
bad_ok("LessonsJWTAlgorithm ES384\nLessonsJWTKeyFile $ec_pub",
       qr/curve|P-384|P-256/i, 'ES384 with a P-256 key');
bad_ok("LessonsJWTAlgorithm RS256\nLessonsJWTKeyFile $rsa_1024",
       qr/2048|1024|bits/i, 'RS256 with a 1024-bit RSA key');
bad_ok("LessonsJWTAlgorithm RS256\nLessonsJWTKeyFile $hs_good",
       qr/PEM|RSA|public key/i, 'RS256 with a shared secret');

# ---- other directive values
bad_ok("LessonsJWTAlgorithm HS256\nLessonsJWTKeyFile $hs_good\nLessonsJWTLeeway abc",
       qr/LessonsJWTLeeway|leeway/i, 'leeway not a number');
# The numeric directives share one parser; each keeps its bounds and
# its context.
for my $case ([ "LessonsDBTimeout 0", qr/LessonsDBTimeout takes a whole number of seconds from 1 to 300, not '0'/ ],
              [ "LessonsDBTimeout 301", qr/from 1 to 300/ ],
              [ "LessonsCacheSize 5G", qr/LessonsCacheSize takes a size in bytes \(K, M or G may follow\) from 0 to 4294967296 \(0: no cache\), not '5G'/ ],
              [ "LessonsCacheSize 16Q", qr/not '16Q'/ ],
              [ "LessonsCacheSize -1", qr/not '-1'/ ],
              [ "LessonsDBShareWindow -1", qr/LessonsDBShareWindow takes a whole number of microseconds from 0 to 100000, not '-1'/ ],
              [ "LessonsDBShareWindow 100001", qr/from 0 to 100000, not '100001'/ ],
              [ "LessonsDBShareWindow 2ms", qr/not '2ms'/ ],
              [ "LessonsIdempotencyLifetime 0", qr/LessonsIdempotencyLifetime takes a whole number of seconds from 1 to 2592000, not '0'/ ],
              [ "LessonsIdempotencyLifetime 2592001", qr/from 1 to 2592000, not '2592001'/ ],
              [ "LessonsIdempotencyLifetime 1d", qr/not '1d'/ ]) {
    bad_ok("LessonsJWTKey HS256 $hs_good", $case->[1], "$case->[0] at server level",
           $case->[0]);
}
good_ok("LessonsJWTKey HS256 $hs_good", 'LessonsCacheSize 16M and LessonsDBTimeout 300',
        "LessonsCacheSize 16M\nLessonsDBTimeout 300");
good_ok("LessonsJWTKey HS256 $hs_good", 'LessonsDBShareWindow 0 and 100000',
        "LessonsDBShareWindow 0\n<VirtualHost *:80>\nLessonsDBShareWindow 100000\n</VirtualHost>");
bad_ok("LessonsJWTKey HS256 $hs_good\nLessonsDBShareWindow 500", qr/LessonsDBShareWindow not allowed in <Location> context/,
       'LessonsDBShareWindow inside a section');
good_ok("LessonsJWTKey HS256 $hs_good", 'LessonsIdempotencyLifetime 1 and 2592000',
        "LessonsIdempotencyLifetime 1\n<VirtualHost *:80>\nLessonsIdempotencyLifetime 2592000\n</VirtualHost>");
bad_ok("LessonsJWTKey HS256 $hs_good\nLessonsIdempotencyLifetime 60", qr/LessonsIdempotencyLifetime not allowed in <Location> context/,
       'LessonsIdempotencyLifetime inside a section');
bad_ok("LessonsJWTKey HS256 $hs_good\nLessonsCacheSize 1M", qr/LessonsCacheSize not allowed in <Location> context/,
       'LessonsCacheSize inside a section');
bad_ok("LessonsJWTKey HS256 $hs_good\nLessonsJWTLeeway 3601", qr/LessonsJWTLeeway takes a whole number of seconds from 0 to 3600/,
       'a leeway over an hour');
bad_ok("LessonsJWTAlgorithm HS256\nLessonsJWTKeyFile $hs_good\nLessonsMaxBodySize abc",
       qr/LessonsMaxBodySize|size/i, 'body size not a number');
bad_ok("LessonsJWTAlgorithm HS256\nLessonsJWTKeyFile $hs_good\nLessonsBasePath api",
       qr/LessonsBasePath/i, 'base path not starting with /');

bad_ok("LessonsJWTKey HS256 $hs_good\nLessonsBasePath /",
       qr/LessonsBasePath cannot be \//, 'base path /');
good_ok("LessonsJWTKey HS256 $hs_good\nLessonsBasePath /api/lessons/",
        'base path with a trailing slash');

# ---- algorithm and key are one setting (issue 11: forged tokens through
# the configuration merge).  With RS256 and the public PEM on the API's
# own Location, a later section that sets only the algorithm used to make
# the module check HS256 tokens keyed with the PEM's bytes.
my $rs_api = "LessonsJWTAlgorithm RS256\nLessonsJWTKeyFile $rsa_pub";
my $half = qr/sets LessonsJWTAlgorithm but not LessonsJWTKeyFile/;
bad_ok($rs_api, qr/httpd-\d+\.conf:\d+: this section $half/,
       'a later <Location /api> with only LessonsJWTAlgorithm HS256',
       qq{<Location "/api">\n    LessonsJWTAlgorithm HS256\n</Location>});
bad_ok($rs_api, $half,
       'a <LocationMatch> with only LessonsJWTAlgorithm HS256',
       qq{<LocationMatch "^/api/">\n    LessonsJWTAlgorithm HS256\n</LocationMatch>});
bad_ok("$rs_api\n<If \"true\">\n    LessonsJWTAlgorithm HS256\n</If>", $half,
       'an <If> inside the API Location with only LessonsJWTAlgorithm');
bad_ok($rs_api, $half, 'server-wide LessonsJWTAlgorithm alone',
       "LessonsJWTAlgorithm HS256");
bad_ok("LessonsJWTKey HS256 $hs_good",
       qr/sets LessonsJWTKeyFile but not LessonsJWTAlgorithm/,
       'a <Directory> with only LessonsJWTKeyFile',
       qq{<Directory "/">\n    LessonsJWTKeyFile $rsa_pub\n</Directory>});
bad_ok("LessonsJWTKey RS256 $rsa_pub\nLessonsJWTAlgorithm HS256",
       qr/already sets the algorithm/, 'one section, two algorithms');
bad_ok("LessonsJWTKey HS256 $hs_good\nLessonsJWTKeyFile $rsa_pub",
       qr/already sets the key/, 'one section, two keys');
# Each section complete in itself is fine, whatever the order and kind.
good_ok($rs_api, 'a later <Location /api> with its own HS256 key pair',
        qq{<Location "/api">\n    LessonsJWTKey HS256 $hs_good\n</Location>});
good_ok("LessonsJWTKey ES256 $ec_pub\n<If \"true\">\n    LessonsJWTKey HS256 $hs_good\n</If>",
        'an <If> with its own key pair');

# ---- the key decides which algorithms may use it
bad_ok("LessonsJWTKey HS256 $rsa_pub", qr/shared secret.*PEM public key/,
       'LessonsJWTKey HS256 with a PEM public key');
bad_ok("LessonsJWTKey HS512 $ec_pub", qr/shared secret.*PEM public key/,
       'LessonsJWTKey HS512 with an EC public key');
bad_ok("LessonsJWTKey RS256 $dir/rsa1024.key", qr/private key/,
       'a private key file');
my $jwk = write_file('key.jwk', '{"kty":"oct","k":"' . ('A' x 64) . '"}');
bad_ok("LessonsJWTKey HS256 $jwk", qr/JSON/, 'a JWK as the secret');
my $cert = write_file('cert.pem', "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
bad_ok("LessonsJWTKey RS256 $cert", qr/certificate/, 'a certificate file');
good_ok("LessonsJWTKey RS256 $rsa_pub", 'LessonsJWTKey RS256');
good_ok("LessonsJWTKey ES256 $ec_pub", 'LessonsJWTKey ES256');

# ---- what start-up can see exactly, it refuses; what only a merge can
# decide, it leaves to the request-time check (no imitation of the merge)
good_ok('', 'SetHandler here, key pair in a <LocationMatch> for it',
        qq{<LocationMatch "^/api/lessons">\n    LessonsJWTKey HS256 $hs_good\n</LocationMatch>});
bad_ok('', qr/SetHandler lessons, but no LessonsJWTKey is configured/,
       'SetHandler lessons and no key anywhere',
       qq{<Location "/other">\n    LessonsJWTLeeway 5\n</Location>});

# ---- Require jwt-claim (issue 9)
good_ok("LessonsJWTKey HS256 $hs_good\n<LimitExcept GET HEAD OPTIONS>\n"
        . "    Require jwt-claim role editor admin\n</LimitExcept>",
        'Require jwt-claim with values');
good_ok("LessonsJWTKey HS256 $hs_good\nRequire jwt-claim realm_access.roles \"lessons admin\"",
        'Require jwt-claim, a dotted name and a quoted value');
bad_ok("LessonsJWTKey HS256 $hs_good\nRequire jwt-claim role",
       qr/Require jwt-claim role: no value given/,
       'Require jwt-claim with a name and no value');
bad_ok("LessonsJWTKey HS256 $hs_good\nRequire jwt-claim",
       qr/Require jwt-claim needs a claim name and at least one value/,
       'Require jwt-claim with nothing');

# ---- key sets and keys URLs (issue 8)
my $rsa_n = `openssl rsa -pubin -in $rsa_pub -noout -modulus 2>/dev/null`;
$rsa_n =~ s/\AModulus=//; chomp $rsa_n;
my $n_b64 = MIME::Base64::encode_base64url(pack('H*', $rsa_n));
my $rsa_jwk = sub { my %m = @_; JSON::PP->new->canonical->encode(
    { kty => 'RSA', n => $n_b64, e => 'AQAB', %m }) };
my $jwks = write_file('keys.json', '{"keys":[' . $rsa_jwk->(kid => 'a', alg => 'RS256')
                      . ',' . $rsa_jwk->(kid => 'b') . ']}');
good_ok("LessonsJWTKey RS256 $jwks", 'a JWKS file with two RSA keys');
good_ok("LessonsJWTAlgorithm RS256 ES256\nLessonsJWTKeyFile $jwks",
        'two algorithms and a JWKS');
good_ok("LessonsJWTKey RS256 RS512 $rsa_pub", 'two RS algorithms and one PEM');
bad_ok("LessonsJWTKey RS256 ES256 $rsa_pub", qr/algorithm ES256: .*EC/,
       'an algorithm the one PEM key cannot serve');
bad_ok("LessonsJWTKey ES256 $jwks", qr/kid "a" is for RS256 only .*not among ES256/,
       'a JWKS whose keys fit none of the algorithms');
my $dup = write_file('dup.json', '{"keys":[' . $rsa_jwk->(kid => 'a') . ','
                     . $rsa_jwk->(kid => 'a') . ']}');
bad_ok("LessonsJWTKey RS256 $dup", qr/kid/, 'a JWKS with a duplicate kid');
my $priv = write_file('priv.json', '{"keys":[' . $rsa_jwk->(kid => 'a', d => 'AQAB') . ']}');
bad_ok("LessonsJWTKey RS256 $priv", qr/private/, 'a JWKS with private key material');
my $none = write_file('none.json', '{"keys":[' . $rsa_jwk->(kid => 'a', use => 'enc') . ']}');
bad_ok("LessonsJWTKey RS256 $none", qr/holds no key we can verify with .*"use" is "enc"/, 'a JWKS with no usable key');
good_ok("LessonsJWTKey RS256 https://idp.example.org/realms/x/protocol/openid-connect/certs",
        'LessonsJWTKey with a keys URL');
good_ok("LessonsJWTAlgorithm RS256\nLessonsJWTKeysURL https://idp.example.org/certs\n"
        . "LessonsJWTKeysCA $ca_good\nLessonsJWTKeysRefresh 600\nLessonsJWTKeysMinRefresh 30",
        'a keys URL with its CA and intervals');
# The CA file is read with the configuration: what cannot be, fails here.
bad_ok("LessonsJWTKey RS256 https://idp.example.org/certs\nLessonsJWTKeysCA $missing",
       qr/LessonsJWTKeysCA: cannot open CA file \Q$missing\E: No such file/,
       'a CA file that does not exist');
bad_ok("LessonsJWTKey RS256 https://idp.example.org/certs\nLessonsJWTKeysCA $ca_unreadable",
       qr/LessonsJWTKeysCA: cannot open CA file \Q$ca_unreadable\E: Permission denied/,
       'a CA file that cannot be read')
    if $> != 0;
bad_ok("LessonsJWTKey RS256 https://idp.example.org/certs\nLessonsJWTKeysCA $rsa_pub",
       qr/LessonsJWTKeysCA: CA file \Q$rsa_pub\E: it holds no certificate/,
       'a CA file that holds a public key, not a certificate');
bad_ok("LessonsJWTKey RS256 https://idp.example.org/certs\nLessonsJWTKeysCA $empty",
       qr/LessonsJWTKeysCA: CA file \Q$empty\E is empty/, 'an empty CA file');
bad_ok("LessonsJWTKey HS256 https://idp.example.org/certs",
       qr/LESSONS00108: .*a keys URL gives public keys only \(RSA, EC\): HS256 can verify no token/,
       'HS256 alone from a keys URL');
bad_ok("LessonsJWTAlgorithm HS256 HS512\nLessonsJWTKeyFile $hs_good\n"
       . "LessonsJWTKeysURL https://idp.example.org/certs",
       qr/a keys URL gives public keys only/,
       'HS* alone with a keys URL, even beside a key file');
good_ok("LessonsJWTKey RS256 HS256 https://idp.example.org/certs",
        'HS256 beside RS256 from a keys URL (its oct keys are skipped)');
bad_ok("LessonsJWTAlgorithm RS256\nLessonsJWTKeysURL http://idp.example.org/certs",
       qr/https/, 'a keys URL over plain http');
bad_ok("LessonsJWTKeysURL https://idp.example.org/certs",
       qr/sets LessonsJWTKeysURL but not LessonsJWTAlgorithm/, 'a keys URL without an algorithm');
# Named by file and line (the section's first LessonsJWTKeys* setting),
# also in a section that sets nothing else (the layouts suite found
# "a section:" there).  The <Location>'s directives start at line 15.
bad_ok("LessonsJWTKey HS256 $hs_good\nLessonsJWTKeysRefresh 60",
       qr/httpd-\d+\.conf:16: LessonsJWTKeysCA, LessonsJWTKeysProxy, LessonsJWTKeysRefresh and LessonsJWTKeysMinRefresh need LessonsJWTKeysURL in the same section/,
       'LessonsJWTKeysRefresh without a URL');
bad_ok("LessonsJWTKeysMinRefresh 30\nLessonsJWTKeysRefresh 60",
       qr/httpd-\d+\.conf:15: LessonsJWTKeysCA, LessonsJWTKeysProxy, LessonsJWTKeysRefresh and LessonsJWTKeysMinRefresh need LessonsJWTKeysURL/,
       'keys URL settings alone in a section');
bad_ok("LessonsJWTAlgorithm RS256\nLessonsJWTKeysURL https://idp.example.org/certs\n"
       . "LessonsJWTKeysMinRefresh 0", qr/from 1 to 3600/, 'LessonsJWTKeysMinRefresh 0');

# ---- an issuer's discovered keys (issue 20 §1): configtest checks the
# issuer's form and fetches nothing (the children do, as for keys URLs)
my $iss = 'https://sso.example.org/realms/school';
good_ok("LessonsJWTIssuer $iss", 'an https issuer and no key: its keys are discovered');
good_ok("LessonsJWTIssuer $iss\nLessonsJWTAlgorithm RS256 ES256\nLessonsJWTKeysCA $ca_good\n"
        . "LessonsJWTKeysRefresh 600\nLessonsJWTKeysMinRefresh 30",
        'a discovered issuer with its algorithms, CA and intervals');
good_ok("LessonsJWTIssuer $iss/", 'an issuer with a trailing slash');
good_ok('', 'an issuer alone at server level',
        "LessonsJWTIssuer https://sso.example.org");
bad_ok("LessonsJWTIssuer http://sso.example.org/realms/school",
       qr/SetHandler lessons, but no LessonsJWTKey is configured anywhere \(nor an https:\/\/ LessonsJWTIssuer/,
       'an http issuer cannot be discovered');
bad_ok("LessonsJWTIssuer $iss?tenant=a",
       qr/no LessonsJWTKey is configured anywhere/, 'an issuer with a query cannot be discovered');
bad_ok("LessonsJWTIssuer $iss\nLessonsJWTAlgorithm HS256",
       qr/httpd-\d+\.conf:\d+: a keys URL gives public keys only \(RSA, EC\): HS256 can verify no token with it \(nor with the keys discovered from the issuer\)/,
       'HS256 alone from a discovered issuer');
bad_ok("LessonsJWTIssuer lessons-dev\nLessonsJWTAlgorithm RS256",
       qr/httpd-\d+\.conf:\d+: this section sets LessonsJWTAlgorithm but not LessonsJWTKeyFile, LessonsJWTKeysURL or an https:\/\/ LessonsJWTIssuer to discover/,
       'an algorithm beside an issuer that cannot be discovered');
bad_ok("LessonsJWTIssuer lessons-dev\nLessonsJWTKeysCA $ca_good",
       qr/httpd-\d+\.conf:16: LessonsJWTKeysCA, .*need LessonsJWTKeysURL in the same section \(or an https:\/\/ LessonsJWTIssuer whose keys are discovered\)/,
       'a CA beside an issuer that cannot be discovered');
# Beside a key, the issuer is the iss to check, as it always was.
good_ok("LessonsJWTKey HS256 $hs_good\nLessonsJWTIssuer $iss", 'an https issuer beside a key file');
good_ok("LessonsJWTKey HS256 $hs_good", 'an https issuer in a section of its own beside a keyed one',
        qq{<LocationMatch "^/api/lessons/level/">\n    LessonsJWTIssuer $iss\n</LocationMatch>});
openssl("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
        . "-keyout $dir/ca2.key -out $dir/ca2.crt -subj /CN=configtest-ca2 -days 2");
good_ok("LessonsJWTIssuer $iss\nLessonsJWTKeysCA $ca_good",
       'two CA files for one discovered issuer: two sources, each its section\'s',
       qq{<Location "/other">\n    LessonsJWTIssuer $iss\n    LessonsJWTKeysCA $dir/ca2.crt\n</Location>});

# ---- several issuers in one section (issue 20 §2): each block one
# issuer's keys, algorithms and audience; half-set blocks and lines that
# would leave it unclear which issuer they are for are refused, naming
# the file and line
my $teachers = 'https://sso.example.org/realms/teachers';
sub block { my ($iss, @lines) = @_; join "\n", "<LessonsJWTIssuer $iss>", (map { "    $_" } @lines),
                                     '</LessonsJWTIssuer>' }
my $two = block($iss, 'LessonsJWTAudience lessons-api') . "\n"
        . block($teachers, "LessonsJWTKey RS256 $rsa_pub", 'LessonsJWTAudience lessons-api');
good_ok($two, 'two issuer blocks: one discovered, one with a key file');
good_ok(block($iss, 'LessonsJWTAlgorithm RS256', "LessonsJWTKeysCA $ca_good",
              'LessonsJWTKeysRefresh 600', 'LessonsJWTKeysMinRefresh 30') . "\n"
        . block('lessons-dev', "LessonsJWTKey HS256 $hs_good") . "\n"
        . block($teachers, 'LessonsJWTKey RS256 https://sso.example.org/realms/teachers/certs',
                "LessonsJWTKeysCA $ca_good") . "\nLessonsJWTLeeway 30\nLessonsJWTUserClaim preferred_username",
        'blocks with discovered keys and named algorithms, a secret, a keys URL; section-wide settings beside');
good_ok('', 'issuer blocks at server level', $two);
good_ok("$two\n<If \"-n req('X-Other')\">\n    LessonsJWTKey HS256 $hs_good\n</If>",
        'an <If> with its own key inside a section with blocks');
my $line = qr/Syntax error on line (\d+) of \S*httpd-\d+\.conf/;
bad_ok(block('lessons-dev', 'LessonsJWTAudience lessons-api'),
       qr/on line 15 of \S*httpd-\d+\.conf:\s+<LessonsJWTIssuer lessons-dev> names no key, and its keys cannot be discovered \(an issuer whose metadata can be fetched is an https:\/\/ URL/,
       'a block with an audience, no key, and an issuer that cannot be discovered');
bad_ok(block('http://sso.example.org', 'LessonsJWTAudience lessons-api'),
       qr/on line 15 .*names no key, and its keys cannot be discovered .*https/s, 'a block for an http issuer, no key');
bad_ok("$two\n" . block($iss, "LessonsJWTKey HS256 $hs_good"),
       qr/on line 22 of \S*httpd-\d+\.conf:\s+<LessonsJWTIssuer \Q$iss\E>: this section has a block for that issuer already, at \S*httpd-\d+\.conf:15/,
       'two blocks for one issuer');
bad_ok("LessonsJWTKey HS256 $hs_good\n$two",
       qr/on line 16 .*<LessonsJWTIssuer \Q$iss\E>: this section also sets the key or algorithm outside the blocks/s,
       'a block after a section-level key');
bad_ok("$two\nLessonsJWTKey HS256 $hs_good",
       qr/on line 22 .*LessonsJWTKey: this section has <LessonsJWTIssuer> blocks \(the first at \S*httpd-\d+\.conf:15\); each issuer's keys, algorithms and audience go inside its own block/s,
       'a section-level key after the blocks');
bad_ok("$two\nLessonsJWTIssuer $iss", qr/on line 22 .*LessonsJWTIssuer: this section has <LessonsJWTIssuer> blocks/s,
       'a section-level issuer after the blocks');
bad_ok("LessonsJWTIssuer $iss\n$two", qr/on line 16 .*this section also sets LessonsJWTIssuer outside the blocks/s,
       'a section-level issuer before the blocks');
bad_ok("LessonsJWTAudience lessons-api\n$two", qr/on line 16 .*this section also sets LessonsJWTAudience outside the blocks/s,
       'a section-level audience before the blocks');
bad_ok("$two\nLessonsJWTAudience x", qr/on line 22 .*LessonsJWTAudience: this section has <LessonsJWTIssuer> blocks/s,
       'a section-level audience after the blocks');
for my $inner ("LessonsJWTIssuer $teachers", 'LessonsJWTLeeway 30', 'Require jwt-claim role admin',
               'LessonsJWTTokenType any', 'LessonsJWTDPoP off',
               block($teachers, "LessonsJWTKey HS256 $hs_good")) {
    my ($name) = $inner =~ /\A(\S+)/;
    bad_ok(block($iss, 'LessonsJWTAudience a', $inner),
           qr/on line 15 of \S*httpd-(\d+)\.conf:\s+\S*httpd-\1\.conf:17: \Q$name\E cannot be inside <LessonsJWTIssuer>/,
           "$name inside a block");
}
bad_ok(block($iss, "LessonsJWTKeyFile $rsa_pub"),
       qr/on line 15 .*<LessonsJWTIssuer \Q$iss\E> sets LessonsJWTKeyFile but not LessonsJWTAlgorithm/s,
       'a block with a key file and no algorithm');
bad_ok(block($iss, 'LessonsJWTAlgorithm HS256'),
       qr/on line 15 .*<LessonsJWTIssuer \Q$iss\E>: keys from a URL or from the issuer's metadata are public keys only \(RSA, EC\): HS256/s,
       'a block with HS256 alone and discovered keys');
bad_ok(block($iss, "LessonsJWTKey HS256 $hs_good", "LessonsJWTKeysCA $ca_good"),
       qr/on line 15 .*LessonsJWTKeysCA, LessonsJWTKeysProxy, LessonsJWTKeysRefresh and LessonsJWTKeysMinRefresh are for keys fetched/s,
       'a block with a key file and a CA');
bad_ok(block($iss, "LessonsJWTKey RS256 $hs_good"),
       qr/on line 16 .*PEM|RSA|public key/s, 'a block whose key does not fit (named at its own line)');
bad_ok("$two\nLessonsJWTKeysCA $ca_good",
       qr/LESSONS00111: \S*httpd-\d+\.conf:22: LessonsJWTKeysCA, LessonsJWTKeysProxy, LessonsJWTKeysRefresh and LessonsJWTKeysMinRefresh beside <LessonsJWTIssuer> blocks/,
       'a section-level CA beside blocks');
bad_ok("<LessonsJWTIssuer>\n</LessonsJWTIssuer>", qr/on line 15 .*<LessonsJWTIssuer> takes one issuer/s,
       'a block with no issuer');
bad_ok("<LessonsJWTIssuer $iss $teachers>\n</LessonsJWTIssuer>", qr/takes one issuer/,
       'a block with two issuers');
good_ok(block($iss, "LessonsJWTKeysCA $ca_good"),
       'two CA files for one discovered issuer in two sections\' blocks: two sources',
       qq{<Location "/other">\n} . block($iss, "LessonsJWTKeysCA $dir/ca2.crt") . "\n</Location>");

# ---- LessonsJWTKeysProxy: an outgoing proxy for keys and discovery
# fetches, http://host:port only, beside the URL or issuer it is for
my $kurl = 'LessonsJWTKey RS256 https://idp.example.org/certs';
good_ok("$kurl\nLessonsJWTKeysProxy http://proxy.example.org:3128\nLessonsJWTKeysCA $ca_good",
        'a keys URL through a proxy');
good_ok("LessonsJWTIssuer $iss\nLessonsJWTKeysProxy http://10.0.0.1:8080/",
        'a discovered issuer through a proxy');
good_ok(block($iss, 'LessonsJWTKeysProxy http://proxy.example.org:3128'),
        'a proxy inside an issuer block');
for my $case ([ 'none', 'the proxy must be given as http://host:port', 'none' ],
              [ 'https://proxy.example.org:3128', 'the proxy must be given as http://host:port', 'an https proxy' ],
              [ 'socks5://proxy.example.org:1080', 'the proxy must be given as http://host:port', 'a SOCKS proxy' ],
              [ 'proxy.example.org:3128', 'the proxy must be given as http://host:port', 'no scheme' ],
              [ 'http://proxy.example.org', 'the proxy URL must name its port', 'no port' ],
              [ 'http://proxy.example.org:3128/proxy', 'the proxy URL must be http://host:port, without a path, query or fragment', 'a path' ],
              [ 'http://proxy.example.org:3128/?x=1', 'the proxy URL must be http://host:port, without a path, query or fragment', 'a query' ],
              [ 'http://user:secret@proxy.example.org:3128', 'the proxy URL must not hold a user name or password', 'a password',
                'http://...@proxy.example.org:3128' ]) {
    my ($value, $why, $name, $shown) = @$case;
    $shown //= $value;
    bad_ok("$kurl\nLessonsJWTKeysProxy $value",
           qr/on line 16 of \S*httpd-\d+\.conf:\s+LessonsJWTKeysProxy \Q$shown\E \(in <Location "?\/api\/lessons"?>\): \Q$why\E/s,
           "LessonsJWTKeysProxy: $name");
}
my (undef, $pwout) = configtest("$kurl\nLessonsJWTKeysProxy http://user:secret\@proxy.example.org:3128");
unlike $pwout, qr/secret/, 'a refused proxy\'s password is not repeated';
bad_ok('', qr/on line \d+ of \S*httpd-\d+\.conf:\s+LessonsJWTKeysProxy http:\/\/p \(in the server's main level\): .*port/s,
       'a bad proxy at the main level', 'LessonsJWTKeysProxy http://p');
bad_ok("LessonsJWTKey HS256 $hs_good\nLessonsJWTKeysProxy http://proxy.example.org:3128",
       qr/httpd-\d+\.conf:16: LessonsJWTKeysCA, LessonsJWTKeysProxy, LessonsJWTKeysRefresh and LessonsJWTKeysMinRefresh need LessonsJWTKeysURL in the same section/,
       'a proxy beside a key file');
bad_ok(block($iss, "LessonsJWTKey HS256 $hs_good", 'LessonsJWTKeysProxy http://proxy.example.org:3128'),
       qr/on line 15 .*LessonsJWTKeysCA, LessonsJWTKeysProxy, LessonsJWTKeysRefresh and LessonsJWTKeysMinRefresh are for keys fetched/s,
       'a block with a key file and a proxy');
bad_ok("$two\nLessonsJWTKeysProxy http://proxy.example.org:3128",
       qr/LESSONS00111: \S*httpd-\d+\.conf:22: LessonsJWTKeysCA, LessonsJWTKeysProxy, .* beside <LessonsJWTIssuer> blocks/,
       'a section-level proxy beside blocks');
good_ok("$kurl\nLessonsJWTKeysProxy http://proxy-a.example.org:3128",
       'two proxies for one keys URL: two sources, each through its own',
       qq{<Location "/other">\n    $kurl\n    LessonsJWTKeysProxy http://proxy-b.example.org:3128\n</Location>});
good_ok("LessonsJWTIssuer $iss\nLessonsJWTKeysProxy http://proxy-a.example.org:3128",
       'two proxies for one discovered issuer: two sources',
       qq{<Location "/other">\n    LessonsJWTIssuer $iss\n    LessonsJWTKeysProxy http://proxy-b.example.org:3128\n</Location>});
good_ok("$kurl\nLessonsJWTKeysProxy http://proxy.example.org:3128",
        'one proxy for a keys URL named by two sections, one of them silent on it',
        qq{<Location "/other">\n    $kurl\n</Location>});

# ---- LessonsJWTExportClaims: two names, one variable
bad_ok("LessonsJWTKey HS256 $hs_good\nLessonsJWTExportClaims tenant a.b a_b",
       qr/claims a\.b and a_b would both be exported as JWT_CLAIM_a_b/,
       'two claims that make one environment variable');
bad_ok("LessonsJWTKey HS256 $hs_good\nLessonsJWTExportClaims tenant tenant",
       qr/claims tenant and tenant would both be exported/, 'a claim named twice');
good_ok("LessonsJWTKey HS256 $hs_good\nLessonsJWTExportClaims tenant realm_access.roles",
        'distinct claims');

# ---- LessonsCORSOrigins (issue 9)
good_ok("LessonsJWTKey HS256 $hs_good\nLessonsCORSOrigins https://app.example.org http://localhost:3000",
        'LessonsCORSOrigins with two origins');
bad_ok("LessonsJWTKey HS256 $hs_good\nLessonsCORSOrigins https://app.example.org/",
       qr/LessonsCORSOrigins: origin 'https:\/\/app.example.org\/' must be scheme:\/\/host/,
       'LessonsCORSOrigins with a path');
bad_ok("LessonsJWTKey HS256 $hs_good\nLessonsCORSOrigins app.example.org",
       qr/must start with https:\/\//, 'LessonsCORSOrigins without a scheme');
bad_ok("LessonsJWTKey HS256 $hs_good\nLessonsCORSOrigins none https://a.example",
       qr/'none' stands alone/, 'LessonsCORSOrigins none with an origin');

# ---- LessonsJWTDPoP (RFC 9449): its words.
good_ok("LessonsJWTKey HS256 $hs_good\nLessonsJWTDPoP off", 'LessonsJWTDPoP off');
bad_ok("LessonsJWTKey HS256 $hs_good\nLessonsJWTDPoP sometimes",
       qr/on line \d+ .*LessonsJWTDPoP takes off, optional or required, not "sometimes"/s,
       'LessonsJWTDPoP with another word');
for my $mode (qw(optional required)) {
    good_ok("LessonsJWTKey HS256 $hs_good\nLessonsJWTDPoP $mode", "LessonsJWTDPoP $mode");
}

# ---- the SQLite database DBDParams names (issue 57, section 2) -----------
# A mistyped path, or a file or directory the serving user cannot write,
# used to show only at the first request (mod_dbd's "unable to open
# database file", or 503 for every write).  configtest names them now,
# and passes: a warning, since the database may be made afterwards.
sub configtest_db {
    my ($params) = @_;
    return configtest("LessonsJWTKey HS256 $hs_good", '', dbparams => $params,
                      user => 'nobody');
}
{
    my ($rc, $out) = configtest_db("file:$dir/no-such-dir/lessons.db?mode=rw");
    is $rc, 0, 'SQLite: a database that does not exist: configtest passes (a warning)';
    like $out, qr{LESSONS00109: DBDParams names the SQLite database \Q$dir\E/no-such-dir/lessons\.db, which cannot be found},
        '... and names the path' or diag $out;

    mkdir "$dir/sqlite-ro" or die $!;
    write_file('sqlite-ro/lessons.db', '');
    chmod 0644, "$dir/sqlite-ro/lessons.db";
    chmod 0755, "$dir/sqlite-ro";
    ($rc, $out) = configtest_db("$dir/sqlite-ro/lessons.db");
    is $rc, 0, 'SQLite: a database User cannot write: configtest passes (a warning)';
    like $out, qr{LESSONS00110: the SQLite database \Q$dir\E/sqlite-ro/lessons\.db is not writable by User nobody},
        '... names the file and the user' or diag $out;
    like $out, qr{LESSONS00110: the directory \Q$dir\E/sqlite-ro/ of the SQLite database .* not writable by User nobody},
        '... and its directory' or diag $out;
    unlike $out, qr/LESSONS00109/, '... which exists';

    chmod 0666, "$dir/sqlite-ro/lessons.db";
    chmod 0777, "$dir/sqlite-ro";
    ($rc, $out) = configtest_db("file://$dir/sqlite-ro/lessons.db?mode=rw");
    is $rc, 0, 'SQLite: a database User can write: configtest passes';
    unlike $out, qr/LESSONS0011[0-9]|LESSONS00109/, '... with no warning' or diag $out;
}

done_testing;
