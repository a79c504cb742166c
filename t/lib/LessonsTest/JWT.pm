package LessonsTest::JWT;

# Compact JWS tokens for the tests and for t/tools/token: any header, any
# claims, signed (or deliberately mis-signed) with HS256/384/512 through
# Digest::SHA, or RS*/ES* through the openssl command.  Core Perl only
# (plus the openssl binary for RS*/ES*), so `make token` needs nothing
# from Apache::Test.

use strict;
use warnings;

use Exporter 'import';
use Digest::SHA ();
use File::Temp ();
use JSON::PP ();
use MIME::Base64 ();

our @EXPORT_OK = qw(jwt jwt_sign b64url b64url_decode json_text read_secret);

my $JSON = JSON::PP->new->utf8->canonical;

sub b64url { MIME::Base64::encode_base64url($_[0]) }
sub b64url_decode { MIME::Base64::decode_base64url($_[0]) }

# JSON text of a Perl value (keys sorted, so tokens are reproducible).
sub json_text { $JSON->encode($_[0]) }

# A key file as the module reads it: trailing CR/LF dropped.
sub read_secret {
    my ($path) = @_;
    open my $fh, '<:raw', $path or die "cannot read $path: $!\n";
    local $/;
    my $s = <$fh>;
    close $fh;
    $s =~ s/[\r\n]+\z//;
    return $s;
}

# jwt(%opt) returns a compact token.
#   alg         header alg, default HS256 (undef: no alg in the header)
#   sign_alg    algorithm actually used to sign, default alg; 'none' (any
#               case) gives an empty signature
#   key         HS*: the secret itself (bytes); RS*/PS*/ES*: a private key PEM
#               file (required)
#   header      hashref merged into {alg, typ => 'JWT'}; a value of undef
#               removes that member
#   header_raw  the header's JSON text, verbatim (overrides alg/header)
#   claims      hashref merged into {sub => 'tester', iat => now,
#               exp => now + 3600}; undef removes a claim
#   payload_raw the payload's JSON text, verbatim (overrides claims)
#   now         the clock, default time()
sub jwt {
    my %o = @_;
    my $alg = exists $o{alg} ? $o{alg} : 'HS256';
    my $now = defined $o{now} ? $o{now} : time;

    my $header_text = $o{header_raw};
    if (!defined $header_text) {
        my %h = (typ => 'JWT');
        $h{alg} = $alg if defined $alg;
        merge(\%h, $o{header});
        $header_text = json_text(\%h);
    }

    my $payload_text = $o{payload_raw};
    if (!defined $payload_text) {
        my %c = (sub => 'tester', iat => $now, exp => $now + 3600);
        merge(\%c, $o{claims});
        $payload_text = json_text(\%c);
    }

    my $input = b64url($header_text) . '.' . b64url($payload_text);
    my $sign_alg = exists $o{sign_alg} ? $o{sign_alg} : $alg;
    my $sig = jwt_sign($sign_alg, $o{key}, $input);
    return "$input." . b64url($sig);
}

sub merge {
    my ($into, $from) = @_;
    return unless $from;
    for my $k (keys %$from) {
        if (defined $from->{$k}) { $into->{$k} = $from->{$k} }
        else                     { delete $into->{$k} }
    }
}

# The raw signature of $input under $alg with $key (see jwt()).
sub jwt_sign {
    my ($alg, $key, $input) = @_;
    die "jwt_sign: no algorithm\n" unless defined $alg;
    return '' if lc $alg eq 'none';
    my ($family, $bits) = $alg =~ /\A([HREP]S)(256|384|512)\z/i
        or die "jwt_sign: unsupported algorithm $alg\n";
    $family = uc $family;
    die "jwt_sign: no key for $alg\n" unless defined $key && length $key;
    if ($family eq 'HS') {
        my $f = Digest::SHA->can("hmac_sha$bits");
        return $f->($input, $key);
    }
    # PS: RSASSA-PSS, MGF1 with the same hash, a salt as long as the hash
    # (RFC 7518 3.5).
    my $der = openssl_sign($bits, $key, $input, $family eq 'PS'
        ? ('-sigopt', 'rsa_padding_mode:pss', '-sigopt', 'rsa_pss_saltlen:digest') : ());
    return $der if $family eq 'RS' || $family eq 'PS';
    # ES: openssl gives DER (SEQUENCE of two INTEGERs); JWS wants R || S,
    # each left-padded to the curve's size.
    my $size = { 256 => 32, 384 => 48, 512 => 66 }->{$bits};
    return join '', map { ("\0" x ($size - length $_)) . $_ } der_ints($der);
}

sub openssl_sign {
    my ($bits, $keyfile, $input, @opts) = @_;
    die "jwt_sign: key file $keyfile not readable\n" unless -r $keyfile;
    my $in = File::Temp->new;
    binmode $in;
    print $in $input;
    close $in;
    my $out = File::Temp->new;
    close $out;
    my @cmd = ('openssl', 'dgst', "-sha$bits", '-sign', $keyfile, @opts,
               '-out', $out->filename, $in->filename);
    system(@cmd) == 0 or die "jwt_sign: @cmd failed\n";
    open my $fh, '<:raw', $out->filename or die "jwt_sign: $!\n";
    local $/;
    my $sig = <$fh>;
    close $fh;
    return $sig;
}

sub der_ints {
    my ($der) = @_;
    my @b = unpack 'C*', $der;
    my $i = 0;
    die "jwt_sign: bad DER signature\n" unless $b[$i++] == 0x30;
    my $len = $b[$i++];
    $i += $len & 0x7f if $len & 0x80;   # long form (ES512)
    my @ints;
    for (1, 2) {
        die "jwt_sign: bad DER signature\n" unless $b[$i++] == 0x02;
        my $n = $b[$i++];
        my $v = pack 'C*', @b[$i .. $i + $n - 1];
        $i += $n;
        $v =~ s/\A\0+//;
        push @ints, $v;
    }
    return @ints;
}

1;
