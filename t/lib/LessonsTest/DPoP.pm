package LessonsTest::DPoP;

# DPoP clients for the tests (RFC 9449): P-256 keys made with openssl,
# and many proofs signed at once by a small signer built from C here
# (one openssl command per proof would take minutes on a busy machine).
#
#   my $k = ec_key($dir, 'client');   # { file, jwk, jkt }
#   my $signer = build_signer($dir);  # once per test
#   my @p = proofs_of($signer, $dir, $k, $uri, $token, $n, $iat, $tag);
#       # $n proofs made with $k for GET $uri and $token, all of one
#       # iat, jti "$tag-$$-1" ...

use strict;
use warnings;

use Exporter 'import';
use Digest::SHA qw(sha256);
use LessonsTest::JWT qw(b64url json_text);

our @EXPORT_OK = qw(ec_key build_signer proofs_of);

sub ec_key {
    my ($dir, $name) = @_;
    system("openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256"
           . " -out $dir/$name.key 2>/dev/null") == 0 or die "openssl genpkey\n";
    my $der = `openssl pkey -in $dir/$name.key -pubout -outform DER 2>/dev/null`;
    my $xy = substr($der, -64);             # the point: 0x04 || x || y
    my %jwk = (kty => 'EC', crv => 'P-256', x => b64url(substr($xy, 0, 32)),
               y => b64url(substr($xy, 32, 32)));
    my $canon = '{"crv":"P-256","kty":"EC","x":"' . $jwk{x} . '","y":"' . $jwk{y} . '"}';
    return { file => "$dir/$name.key", jwk => \%jwk, jkt => b64url(sha256($canon)) };
}

# The signer, built in $dir: each line of stdin (a JWS signing input)
# signed with the key in argv[1] (SHA-256), the signature's DER in hex,
# a line each.  Returns its path; dies when it does not build.
sub build_signer {
    my ($dir) = @_;
    my $signer = "$dir/sign";
    open my $src, '>', "$signer.c" or die "$signer.c: $!\n";
    print $src <<'C';
#include <stdio.h>
#include <string.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

int main(int argc, char **argv)
{
    static char line[65536];
    unsigned char sig[512];
    FILE *f = argc > 1 ? fopen(argv[1], "r") : NULL;
    EVP_PKEY *key = f ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;

    if (!key) {
        return 1;
    }
    while (fgets(line, sizeof(line), stdin)) {
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        size_t len = sizeof(sig), i;

        if (!ctx || EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key) != 1
            || EVP_DigestSign(ctx, sig, &len, (unsigned char *)line,
                              strcspn(line, "\n")) != 1) {
            return 1;
        }
        for (i = 0; i < len; i++) {
            printf("%02x", sig[i]);
        }
        printf("\n");
        EVP_MD_CTX_free(ctx);
    }
    return 0;
}
C
    close $src;
    my $cc = $ENV{CC} || 'cc';
    system("$cc -o '$signer' '$signer.c' -lcrypto") == 0
        or die "the proofs' signer does not build\n";
    return $signer;
}

sub proofs_of {
    my ($signer, $dir, $k, $u, $t, $n, $iat, $tag) = @_;
    $tag //= 'flood';
    my $head = b64url(json_text({ typ => 'dpop+jwt', alg => 'ES256', jwk => $k->{jwk} }));
    my @inputs = map {
        "$head." . b64url(json_text({ jti => "$tag-$$-$_", htm => 'GET', htu => $u,
                                      iat => $iat, ath => b64url(sha256($t)) }))
    } 1 .. $n;
    open my $in, '>', "$dir/inputs" or die "$dir/inputs: $!\n";
    print $in map { "$_\n" } @inputs;
    close $in;
    my @sigs = `'$signer' '$k->{file}' < '$dir/inputs'`;
    @sigs == $n or die "the signer signed " . scalar(@sigs) . " of $n\n";
    return map {
        chomp(my $hex = $sigs[$_]);
        my $rs = join '', map { ("\0" x (32 - length $_)) . $_ }
            LessonsTest::JWT::der_ints(pack 'H*', $hex);
        "$inputs[$_]." . b64url($rs);
    } 0 .. $n - 1;
}

1;
