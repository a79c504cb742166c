# Certificate-bound access tokens (RFC 8705 section 3, issue 44 part 1):
# LessonsJWTCertBound, with the certificate read from mod_ssl.
#
#   - an httpd of the test's own with mod_ssl (SSLVerifyClient optional),
#     a test CA, client certificates A and B made with openssl, and tokens
#     signed with the suite's HS256 key carrying cnf x5t#S256 of A;
#   - optional: a token bound to A: 200 with A, 401 with B, 401 without a
#     certificate (invalid_token, a description that says which, never a
#     thumbprint in the answer or the log); the same token on each new
#     connection (the token cache verified it once) is held to that
#     connection's certificate; an unbound token: 200;
#   - a request header that claims a certificate is no certificate;
#   - over HTTP/2 (mod_http2's connections, curl): the same, from the TLS
#     connection underneath;
#   - required: an unbound token: 401; the bound one with A: 200;
#   - off: cnf x5t#S256 is not looked at (a bearer token, RFC 8705 3);
#   - SSLVerifyClient optional_no_ca: a self-signed certificate (RFC 8705
#     2.2) binds by its thumbprint (mod_ssl's GENEROUS);
#   - the certificate changes under one connection (mod_ssl asks again for
#     a <Location> of its own: a TLS 1.2 renegotiation, from none to A and
#     from A to B; TLS 1.3 post-handshake authentication, from none to A):
#     each token is judged against the certificate the connection has
#     now, which the module hashes again when it changes (LESSONS00729);
#   - start-up: required without mod_ssl, or without SSLEngine on in the
#     section's virtual host, is refused (LESSONS00726); with it, passes.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use Digest::SHA qw(sha256);
use File::Temp ();
use HTTP::Request ();
use IO::Socket::SSL ();
use Net::SSLeay ();
use LWP::UserAgent ();
use LessonsTest;
use LessonsTest::JWT qw(b64url);

my $dir  = File::Temp->newdir;
my $mods = $ENV{LESSONS_TEST_HTTPD_MODULES} || '/usr/lib/apache2/modules';

sub ossl {
    my ($args) = @_;
    system("openssl $args >/dev/null 2>&1") == 0 or die "openssl $args\n";
}

# ---- a CA, the server's certificate, clients A and B (by the CA) and C
# (self-signed)
ossl("req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
     . " -keyout $dir/ca.key -out $dir/ca.pem -days 2 -subj /CN=lessons-test-ca");
sub issued {
    my ($name, $cn, $ext) = @_;
    ossl("req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
         . " -keyout $dir/$name.key -out $dir/$name.csr -subj /CN=$cn");
    open my $fh, '>', "$dir/$name.ext" or die $!;
    print $fh "$ext\n";
    close $fh;
    ossl("x509 -req -in $dir/$name.csr -CA $dir/ca.pem -CAkey $dir/ca.key"
         . " -CAcreateserial -out $dir/$name.pem -days 2 -extfile $dir/$name.ext");
}
issued('server', '127.0.0.1', "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth");
issued('a', 'client-a', 'extendedKeyUsage=clientAuth');
issued('b', 'client-b', 'extendedKeyUsage=clientAuth');
ossl("req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
     . " -keyout $dir/c.key -out $dir/c.pem -days 2 -subj /CN=client-c");

# RFC 8705's x5t#S256, from openssl's DER, not from the module.
sub x5t {
    my ($name) = @_;
    my $der = `openssl x509 -in $dir/$name.pem -outform DER`;
    die "openssl x509 $name\n" if $? || !length $der;
    return b64url(sha256($der));
}
my %x5t = map { $_ => x5t($_) } qw(a b c);

my $tls = <<"EOF";
LoadModule socache_shmcb_module "$mods/mod_socache_shmcb.so"
LoadModule ssl_module "$mods/mod_ssl.so"
SSLSessionCache "shmcb:$dir/ssl_scache(512000)"
SSLEngine on
SSLCertificateFile "$dir/server.pem"
SSLCertificateKeyFile "$dir/server.key"
SSLCACertificateFile "$dir/ca.pem"
SSLVerifyClient optional
SSLVerifyDepth 2
EOF

sub location {
    my ($path, $mode) = @_;
    return qq{<Location "$path">\n    SetHandler lessons\n}
         . qq{    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"\n}
         . ($mode ? "    LessonsJWTCertBound $mode\n" : '')
         . "</Location>\n";
}
my $sections = location('/opt/api/lessons', 'optional')
             . location('/req/api/lessons', 'required')
             . location('/off/api/lessons', 'off')
             . location('/api/lessons', undef);

# ---- start-up
sub configtest {
    my ($name, $body) = @_;
    mkdir "$dir/$name" or die "$dir/$name: $!";
    my $conf = httpd_conf("$dir/$name", free_port(), $body);
    my $out = `'@{[ LessonsTest::httpd_bin() ]}' -t -f '$conf' 2>&1`;
    return ($? >> 8, $out);
}
{
    my ($rc, $out) = configtest('no-ssl', location('/req/api/lessons', 'required'));
    isnt $rc, 0, 'required without mod_ssl: configtest fails';
    like $out, qr/LESSONS00726: .*LessonsJWTCertBound required, but mod_ssl is not loaded/,
        '... saying mod_ssl is not loaded' or diag $out;

    ($rc, $out) = configtest('no-engine', <<"EOF" . location('/opt/api/lessons', 'optional'));
LoadModule socache_shmcb_module "$mods/mod_socache_shmcb.so"
LoadModule ssl_module "$mods/mod_ssl.so"
<VirtualHost 127.0.0.1:*>
    ServerName plain.example
@{[ location('/req/api/lessons', 'required') ]}
</VirtualHost>
EOF
    isnt $rc, 0, 'required in a virtual host without SSLEngine on: configtest fails';
    like $out, qr/LESSONS00726: .*SSLEngine is not on in its <VirtualHost>/,
        '... naming the virtual host' or diag $out;
    unlike $out, qr/LESSONS00726: [^\n]*optional/, '... optional is not refused';

    ($rc, $out) = configtest('engine', $tls . $sections);
    is $rc, 0, 'required with SSLEngine on: configtest passes' or diag $out;

    # A section outside any virtual host serves them all: taken where one
    # of them has TLS, refused where none has.
    my $vhost_tls = <<"EOF" . location('/req/api/lessons', 'required');
LoadModule socache_shmcb_module "$mods/mod_socache_shmcb.so"
LoadModule ssl_module "$mods/mod_ssl.so"
SSLSessionCache "shmcb:$dir/ssl_scache3(512000)"
<IfModule ssl_module>
<VirtualHost 127.0.0.1:*>
    ServerName tls.example
    SSLEngine on
    SSLCertificateFile "$dir/server.pem"
    SSLCertificateKeyFile "$dir/server.key"
</VirtualHost>
</IfModule>
EOF
    ($rc, $out) = configtest('vhost-engine', $vhost_tls);
    is $rc, 0, 'required outside any virtual host, SSLEngine on in one (in <IfModule>): passes'
        or diag $out;
    ($rc, $out) = configtest('main-no-engine', <<"EOF" . location('/req/api/lessons', 'required'));
LoadModule socache_shmcb_module "$mods/mod_socache_shmcb.so"
LoadModule ssl_module "$mods/mod_ssl.so"
<VirtualHost 127.0.0.1:*>
    ServerName plain.example
</VirtualHost>
EOF
    like $out, qr/LESSONS00726: .*SSLEngine is not on in the main server nor in any virtual host/,
        'required outside any virtual host, none with SSLEngine on: refused' or diag $out;

    ($rc, $out) = configtest('bad-word', location('/x/api/lessons', 'sometimes'));
    like $out, qr/LessonsJWTCertBound takes off, optional or required, not "sometimes"/,
        'a word other than off, optional, required: refused' or diag $out;
}

# ---- the server
my $port = free_port();
our $base;
$base = "https://127.0.0.1:$port";
start_httpd(httpd_conf("$dir", $port, "ServerName 127.0.0.1:$port\nLogLevel info\n"
                       . qq{LoadModule http2_module "$mods/mod_http2.so"\n}
                       . "Protocols h2 http/1.1\n" . $tls . $sections), $port);

# A client with certificate $name (undef: none); one connection per request.
sub ua_with {
    my ($name) = @_;
    my %ssl = (SSL_ca_file => "$dir/ca.pem", verify_hostname => 0);
    if ($name) {
        $ssl{SSL_cert_file} = "$dir/$name.pem";
        $ssl{SSL_key_file}  = "$dir/$name.key";
    }
    return LWP::UserAgent->new(keep_alive => 0, timeout => 60, ssl_opts => \%ssl);
}
my %ua = (a => ua_with('a'), b => ua_with('b'), c => ua_with('c'), none => ua_with(undef));

sub get {
    my ($who, $path, $token, @headers) = @_;
    my $req = HTTP::Request->new(GET => "$base$path");
    $req->header(Authorization => "Bearer $token");
    $req->header(@headers) if @headers;
    return $ua{$who}->request($req);
}

sub log_of {
    my ($where) = @_;
    open my $fh, '<', "$where/error_log" or return '';
    local $/;
    return scalar <$fh>;
}
sub log_text { log_of($dir) }

sub is_cert_refusal {
    my ($res, $desc, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    is $res->code, 401, "$name: 401" or diag $res->as_string;
    my $h = join ' | ', $res->header('WWW-Authenticate');
    like $h, qr/\ABearer realm="lessons", error="invalid_token", error_description="[^"]*$desc/,
        "$name: Bearer invalid_token, $desc" or diag $h;
    my $text = $res->as_string;
    unlike $text, qr/\Q$x5t{$_}\E/, "$name: no thumbprint in the answer ($_)" for qw(a b);
}

my $bound_a = good_token(claims => { cnf => { 'x5t#S256' => $x5t{a} } });
my $plain   = good_token();

# ---- optional
my $res = get(a => '/opt/api/lessons', $bound_a);
is $res->code, 200, 'optional: a token bound to A, with A: 200' or diag $res->as_string;
is_cert_refusal(get(b => '/opt/api/lessons', $bound_a), 'another client certificate',
                'optional: bound to A, with B');
is_cert_refusal(get(none => '/opt/api/lessons', $bound_a), 'presented none',
                'optional: bound to A, without a certificate');
# Verified once by the process (the token cache), held to each
# connection's certificate all the same.
$res = get(a => '/opt/api/lessons', $bound_a);
is $res->code, 200, 'optional: A again on a new connection: 200';
is_cert_refusal(get(b => '/opt/api/lessons', $bound_a), 'another client certificate',
                'optional: B again on a new connection');
$res = get(none => '/opt/api/lessons', $plain);
is $res->code, 200, 'optional: an unbound token without a certificate: 200';
$res = get(b => '/opt/api/lessons', $plain);
is $res->code, 200, 'optional: an unbound token with B: 200';

# A header is no certificate: B's connection, A's PEM in the headers a
# TLS-terminating proxy would set.
my $pem_a = do { local (@ARGV, $/) = "$dir/a.pem"; <> };
(my $one_line = $pem_a) =~ s/\n/ /g;
is_cert_refusal(get(b => '/opt/api/lessons', $bound_a, 'SSL-Client-Cert' => $one_line,
                    'X-SSL-Client-Cert' => $one_line, 'SSL_CLIENT_CERT' => $one_line),
                'another client certificate', 'optional: A\'s PEM in request headers, B on the connection');
is_cert_refusal(get(none => '/opt/api/lessons', $bound_a, 'X-SSL-Client-Cert' => $one_line),
                'presented none', 'optional: A\'s PEM in a header, no certificate');

# A cnf copied into another token: its own signature is the suite's
# key, the binding is still A's.
my $copied = good_token(claims => { sub => 'mallory', cnf => { 'x5t#S256' => $x5t{a} } });
is_cert_refusal(get(b => '/opt/api/lessons', $copied), 'another client certificate',
                'optional: a cnf copied into another token, with B');
is_cert_refusal(get(a => '/opt/api/lessons',
                    good_token(claims => { cnf => { 'x5t#S256' => "$x5t{a}=" } })),
                'malformed', 'optional: a padded thumbprint');

# ---- required
is_cert_refusal(get(a => '/req/api/lessons', $plain), 'sender-constrained',
                'required: an unbound token, with A');
$res = get(a => '/req/api/lessons', $bound_a);
is $res->code, 200, 'required: the token bound to A, with A: 200';
is_cert_refusal(get(b => '/req/api/lessons', $bound_a), 'another client certificate',
                'required: bound to A, with B');

# ---- off, and not set: a bearer token
for my $path ('/off/api/lessons', '/api/lessons') {
    $res = get(b => $path, $bound_a);
    is $res->code, 200, "$path: bound to A, with B: 200 (cnf x5t#S256 not looked at)";
    $res = get(none => $path, $bound_a);
    is $res->code, 200, "$path: bound to A, without a certificate: 200";
}

# ---- one connection, several requests: the module keeps the
# connection's thumbprint (keyed by mod_ssl's whole PEM); every token on
# it is still judged against that certificate
{
    my $bound_b = good_token(claims => { cnf => { 'x5t#S256' => $x5t{b} } });
    my %ssl = (SSL_ca_file => "$dir/ca.pem", verify_hostname => 0,
               SSL_cert_file => "$dir/a.pem", SSL_key_file => "$dir/a.key");
    my $ka = LWP::UserAgent->new(keep_alive => 1, timeout => 60, ssl_opts => \%ssl);
    my @got;
    for my $t ($bound_a, $bound_b, $bound_a, $plain, $bound_b) {
        my $req = HTTP::Request->new(GET => "$base/opt/api/lessons");
        $req->header(Authorization => "Bearer $t");
        push @got, $ka->request($req)->code;
    }
    is "@got", '200 401 200 200 401',
        'one connection with A: bound to A 200, to B 401, A 200, unbound 200, B 401';
}

# ---- HTTP/2: the request's connection is mod_http2's own, the
# certificate is its TLS connection's (curl, which speaks h2 over ALPN)
SKIP: {
    skip 'curl not installed', 4 unless grep { -x "$_/curl" } split /:/, $ENV{PATH};
    my $h2 = sub {
        my ($who, $token) = @_;
        my @cert = $who ? ('--cert', "$dir/$who.pem", '--key', "$dir/$who.key") : ();
        open my $p, '-|', 'curl', '-s', '--http2', '--cacert', "$dir/ca.pem", @cert,
            '-H', "Authorization: Bearer $token", '-o', '/dev/null',
            '-w', '%{http_version} %{http_code}', "$base/opt/api/lessons"
            or die "curl: $!";
        local $/;
        return scalar <$p> // '';
    };
    is $h2->('a', $bound_a), '2 200', 'HTTP/2: bound to A, with A: 200';
    is $h2->('b', $bound_a), '2 401', 'HTTP/2: bound to A, with B: 401';
    is $h2->(undef, $bound_a), '2 401', 'HTTP/2: bound to A, without a certificate: 401';
    is $h2->(undef, $plain), '2 200', 'HTTP/2: an unbound token: 200';
}

# ---- the log: the refusals at info, no thumbprint
my $log = log_text();
like $log, qr/LESSONS00722: GET \/opt\/api\/lessons refused \(401\)[^\n]*another client certificate/,
    'the log: LESSONS00722 for another certificate';
like $log, qr/LESSONS00722: [^\n]*without a verified one/, 'the log: LESSONS00722 without a certificate';
like $log, qr/LESSONS00721: [^\n]*LessonsJWTCertBound required/, 'the log: LESSONS00721 for an unbound token';
unlike $log, qr/\Q$x5t{$_}\E/, "the log holds no thumbprint ($_)" for qw(a b);

# ---- optional_no_ca: a self-signed certificate binds by its thumbprint
{
    my $p2 = free_port();
    mkdir "$dir/noca" or die $!;
    (my $noca = $tls) =~ s/SSLVerifyClient optional/SSLVerifyClient optional_no_ca/;
    $noca =~ s/ssl_scache/ssl_scache2/;
    start_httpd(httpd_conf("$dir/noca", $p2, "ServerName 127.0.0.1:$p2\n" . $noca
                           . location('/opt/api/lessons', 'optional')), $p2);
    local $base = "https://127.0.0.1:$p2";
    my $bound_c = good_token(claims => { cnf => { 'x5t#S256' => $x5t{c} } });
    $res = get(c => '/opt/api/lessons', $bound_c);
    is $res->code, 200, 'optional_no_ca: a token bound to self-signed C, with C: 200'
        or diag $res->as_string;
    is_cert_refusal(get(a => '/opt/api/lessons', $bound_c), 'another client certificate',
                    'optional_no_ca: bound to C, with A');
}

# ---- the certificate changes under one connection: mod_ssl asks for it
# again where a <Location> wants more than the handshake asked (TLS 1.2:
# SSLVerifyClient require where the server says optional, a
# renegotiation each time; TLS 1.3: optional where the server says none,
# post-handshake authentication, once a connection), and the client
# answers, on the same connection, with the certificate it holds now.
# mod_ssl asks in its access checker, which runs before the token gate's:
# a bound token on the request that makes it ask is judged against the
# certificate the client answers with (a gate that ran first refused it
# for the certificate the connection had before, on every request, as
# mod_ssl never got to ask).  Each token after it is judged against the
# certificate the connection has now: a module that kept the first
# certificate's thumbprint (or took the memo's for the connection's
# without comparing the certificate itself) lets A's token in on B and
# keeps B's out.
{
    my $bound_b = good_token(claims => { cnf => { 'x5t#S256' => $x5t{b} } });
    my $section = sub {
        my ($path, $directive) = @_;
        return qq{<Location "$path">\n    $directive\n    SetHandler lessons\n}
             . qq{    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"\n}
             . "    LessonsJWTCertBound optional\n</Location>\n";
    };
    my %server;
    for my $name ('tls12', 'tls13') {
        my $port = free_port();
        mkdir "$dir/$name" or die $!;
        (my $conf = $tls) =~ s/ssl_scache/ssl_scache_$name/;
        $conf =~ s/SSLVerifyClient optional/SSLVerifyClient none/ if $name eq 'tls13';
        $conf .= $name eq 'tls12'
            ? location('/opt/api/lessons', 'optional')
              . $section->('/again/api/lessons', 'SSLVerifyClient require')
            : $section->('/opt/api/lessons', 'SSLVerifyClient optional');
        # mod_ssl says it asks after the handshake only at debug.
        my $level = $name eq 'tls12' ? 'info lessons:debug' : 'info ssl:debug';
        start_httpd(httpd_conf("$dir/$name", $port, "ServerName 127.0.0.1:$port\n"
                               . "LogLevel $level\n" . $conf), $port);
        $server{$name} = $port;
    }

    # One connection to server $name, TLS $version, no certificate.
    my $connect = sub {
        my ($name, $version, @more) = @_;
        my $sock = IO::Socket::SSL->new(
            PeerAddr => "127.0.0.1:$server{$name}", SSL_version => $version,
            SSL_ca_file => "$dir/ca.pem", SSL_verifycn_scheme => 'none',
            Timeout => 60, @more)
            or die "TLS connection: $IO::Socket::SSL::SSL_ERROR\n";
        return $sock;
    };
    # One TLS 1.3 connection to server tls13 that answers post-handshake
    # authentication.
    my $connect_pha = sub {
        return $connect->('tls13', 'TLSv1_3', SSL_create_ctx_callback => sub {
            Net::SSLeay::CTX_set_post_handshake_auth($_[0], 1);
        });
    };
    # The client's certificate from now on (what it answers mod_ssl with).
    my $hold = sub {
        my ($sock, $name) = @_;
        my $ssl = $sock->_get_ssl_object;
        Net::SSLeay::use_certificate_file($ssl, "$dir/$name.pem",
                                          Net::SSLeay::FILETYPE_PEM()) == 1
            && Net::SSLeay::use_PrivateKey_file($ssl, "$dir/$name.key",
                                                Net::SSLeay::FILETYPE_PEM()) == 1
            or die "the client's certificate $name\n";
    };
    # A GET on the connection: its status ('closed' if the server ended
    # the connection first).
    my $get = sub {
        my ($sock, $path, $token) = @_;
        print {$sock} "GET $path HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    . "Authorization: Bearer $token\r\n\r\n";
        my $buf = '';
        while ($buf !~ /\r\n\r\n/) {
            my $n = sysread $sock, $buf, 16384, length $buf;
            return 'closed' unless $n;
        }
        my ($head, $body) = split /\r\n\r\n/, $buf, 2;
        my ($len) = $head =~ /^Content-Length:\s*(\d+)/mi;
        die "no Content-Length: $head\n" unless defined $len;
        while (length $body < $len) {
            my $n = sysread $sock, $body, $len - length $body, length $body;
            return 'closed' unless $n;
        }
        return $head =~ m{\AHTTP/1\.1 (\d{3})} ? $1 : 'bad';
    };

    my $sock = $connect->('tls12', 'TLSv1_2');
    my @got = ($get->($sock, '/opt/api/lessons', $bound_a));
    $hold->($sock, 'a');
    push @got, $get->($sock, '/again/api/lessons', $plain),
               $get->($sock, '/opt/api/lessons', $bound_a),
               $get->($sock, '/opt/api/lessons', $bound_b);
    $hold->($sock, 'b');
    push @got, $get->($sock, '/again/api/lessons', $plain),
               $get->($sock, '/opt/api/lessons', $bound_a),
               $get->($sock, '/opt/api/lessons', $bound_b);
    close $sock;
    is "@got", '401 200 200 401 200 401 200',
        'TLS 1.2, one connection: none (A\'s token 401), renegotiated to A'
        . ' (A 200, B 401), renegotiated to B (A 401, B 200)';
    my $log = log_of("$dir/tls12");
    is scalar(() = $log =~ /AH02221: Requesting connection re-negotiation/g), 2,
        '... mod_ssl renegotiated twice (AH02221)' or diag $log;
    my @changed = $log =~ /(LESSONS00729: [^\n]*)/g;
    is scalar @changed, 1, '... the module hashed again once, from A to B (LESSONS00729)'
        or diag $log;
    unlike $log, qr/\Q$x5t{$_}\E/, "... its log holds no thumbprint ($_)" for qw(a b);

    # The first request of a connection carries the bound token itself.
    $sock = $connect->('tls12', 'TLSv1_2');
    $hold->($sock, 'a');
    @got = ($get->($sock, '/again/api/lessons', $bound_a),
            $get->($sock, '/again/api/lessons', $bound_b));
    close $sock;
    is "@got", '200 401',
        'TLS 1.2, a new connection: A\'s token on the request that makes'
        . ' mod_ssl renegotiate, with A: 200 (then B 401)';

    $sock = $connect_pha->();
    $hold->($sock, 'a');
    @got = ($get->($sock, '/opt/api/lessons', $bound_a),
            $get->($sock, '/opt/api/lessons', $plain),
            $get->($sock, '/opt/api/lessons', $bound_a),
            $get->($sock, '/opt/api/lessons', $bound_b));
    close $sock;
    is "@got", '200 200 200 401',
        'TLS 1.3, one connection: A\'s token on the request that makes'
        . ' mod_ssl ask after the handshake, with A: 200 (A 200, B 401)';
    $sock = $connect_pha->();
    @got = ($get->($sock, '/opt/api/lessons', $bound_a),
            $get->($sock, '/opt/api/lessons', $plain));
    close $sock;
    is "@got", '401 200',
        'TLS 1.3, a client that answers with no certificate: A\'s token 401';
    $log = log_of("$dir/tls13");
    like $log, qr/AH10129: verify client post handshake/,
        '... mod_ssl asked for the certificate after the handshake (AH10129)'
        or diag $log;
}

done_testing();
