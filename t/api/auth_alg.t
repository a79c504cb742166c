# Algorithm pinning: each location accepts its configured algorithm only.
# alg none (any case), another HMAC size, lower-case names, algorithm
# confusion (HS256 keyed with the RSA public key), and signature strings
# a lenient base64 decoder would otherwise accept.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use LessonsTest;

my ($id) = seed({ level_id => 4, title => 'Signiert', sort_order => 1 });
my $secret = hs_secret();

sub bad_ok {
    my ($path, $token, $name) = @_;
    is_unauthorized(call(GET => $path, token => $token), $name, 'invalid_token');
}

# ---- HS256 location
is call(GET => '/api/lessons', token => token(alg => 'HS256'))->code, 200,
    'HS256 on the HS256 location: 200';
for my $none ('none', 'None', 'NONE', 'nOnE') {
    bad_ok('/api/lessons', token(alg => $none, sign_alg => 'none'),
           "alg $none, empty signature");
    bad_ok('/api/lessons', token(alg => $none, sign_alg => 'HS256'),
           "alg $none with an HS256 signature");
}
bad_ok('/api/lessons', token(alg => 'HS384'), 'HS384 token (same secret)');
bad_ok('/api/lessons', token(alg => 'HS512'), 'HS512 token (same secret)');
bad_ok('/api/lessons', token(alg => 'hs256', sign_alg => 'HS256'),
       'alg hs256 (lower case)');
bad_ok('/api/lessons', token(alg => 'Hs256', sign_alg => 'HS256'),
       'alg Hs256 (mixed case)');
bad_ok('/api/lessons', token(alg => 'HS256 ', sign_alg => 'HS256'),
       'alg with a trailing space');
bad_ok('/api/lessons', token(header => { alg => ['HS256'] }, sign_alg => 'HS256'),
       'alg an array');
bad_ok('/api/lessons', token(alg => 'RS256'), 'RS256 token on the HS256 location');
bad_ok('/api/lessons', token(alg => 'HS384', sign_alg => 'HS256'),
       'header says HS384, signed HS256');
bad_ok('/api/lessons', token(alg => 'HS256', sign_alg => 'HS384'),
       'header says HS256, signed HS384');

# ---- RS256 location
my $rs = token(alg => 'RS256', claims => { sub => 'rsa-user' });
{
    my $res = call(GET => '/rs/api/lessons', token => $rs);
    is $res->code, 200, 'valid RS256 token on /rs: 200';
    is scalar @{ json_of($res) || [] }, 1, '/rs lists the same lessons';
    is call(GET => "/rs/api/lessons/$id", token => $rs)->code, 200,
        '/rs item route';
}
# Algorithm confusion: an HS256 token whose HMAC key is the server's RSA
# public key PEM.  A verifier that takes the PEM as an HMAC secret would
# accept it.
my $pem = rsa_public_pem();
for my $variant ([ 'PEM as is', $pem ], [ 'PEM without final newline', $pem =~ s/\n\z//r ]) {
    bad_ok('/rs/api/lessons', token(alg => 'HS256', key => $variant->[1]),
           "algorithm confusion: HS256 keyed with the RSA public key ($variant->[0])");
}
bad_ok('/rs/api/lessons', token(alg => 'HS256'), 'HS256 token on /rs');
bad_ok('/rs/api/lessons', token(alg => 'none', sign_alg => 'none'), 'alg none on /rs');
bad_ok('/rs/api/lessons', token(alg => 'rs256', sign_alg => 'RS256'),
       'alg rs256 (lower case) on /rs');
bad_ok('/rs/api/lessons', token(alg => 'RS384', sign_alg => 'RS384'),
       'RS384 token on the RS256 location');
bad_ok('/rs/api/lessons', token(alg => 'PS256', sign_alg => 'RS256'),
       'alg PS256 on /rs');
bad_ok('/rs/api/lessons', token(alg => 'RS256', claims => { exp => time - 3600 }),
       'expired RS256 token');
{
    # Signed by another RSA key.
    my $dir = File::Temp->newdir;
    my $other = "$dir/other.key";
    system("openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048"
           . " -out '$other' 2>/dev/null") == 0
        or die "openssl genpkey failed";
    bad_ok('/rs/api/lessons', token(alg => 'RS256', key => $other),
           'RS256 token signed by another key');
}
# Same signature written differently: a lenient base64 decoder (libjwt's
# was one) skips characters outside its alphabet and ignores padding.
{
    my ($h, $p, $s) = split /\./, $rs;
    bad_ok('/rs/api/lessons', "$h.$p.$s==", 'RS256 signature with == padding');
    bad_ok('/rs/api/lessons', "$h.$p.$s=", 'RS256 signature with = padding');
    bad_ok('/rs/api/lessons', "$h.$p." . substr($s, 0, 20) . '~' . substr($s, 20),
           'RS256 signature with ~ inside');
    bad_ok('/rs/api/lessons', "$h.$p." . ($s =~ tr/-_/+\//r),
           'RS256 signature in standard base64') if $s =~ /[-_]/;
    bad_ok('/rs/api/lessons', "$h.$p." . substr($s, 0, -4),
           'RS256 signature truncated');
    bad_ok('/rs/api/lessons', "$h.$p", 'RS256 token without signature');
}

# ---- ES256 location
{
    my $es = token(alg => 'ES256');
    is call(GET => '/es/api/lessons', token => $es)->code, 200,
        'valid ES256 token on /es: 200';
    my ($h, $p, $s) = split /\./, $es;
    bad_ok('/es/api/lessons', "$h.$p.$s==", 'ES256 signature with == padding');
    bad_ok('/es/api/lessons', "$h.$p." . substr($s, 0, 30) . '~' . substr($s, 30),
           'ES256 signature with ~ inside');
    bad_ok('/es/api/lessons', token(alg => 'ES384', sign_alg => 'ES256'),
           'header ES384 on the ES256 location');
    bad_ok('/es/api/lessons', token(alg => 'HS256', key => slurp($ENV{LESSONS_TEST_EC_PUB})),
           'algorithm confusion: HS256 keyed with the EC public key');
    bad_ok('/es/api/lessons', token(alg => 'RS256'), 'RS256 token on /es');
}

sub slurp {
    open my $fh, '<:raw', $_[0] or die "$_[0]: $!";
    local $/;
    return scalar <$fh>;
}

done_testing;
