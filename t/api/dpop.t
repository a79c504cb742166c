# DPoP (RFC 9449, issue 20 §3): a token bound to a key (cnf.jkt) is taken
# only with a proof made with that key for this very request, once.
#
#   - a good proof: 200, where the section requires DPoP and where it is
#     optional;
#   - the same proof again: refused (replay), also when another process
#     of the server gets it (prefork, clients at once);
#   - a proof for another URI, another method, another token, made with
#     another key, too old, more than a few seconds ahead, two proofs or
#     none: refused; a couple of seconds ahead: taken;
#   - a request-target in absolute-form (GET http://elsewhere/path) is
#     compared by this server's own name, never the one it names: a
#     proof made for another resource server is refused however the
#     request names it (issue 40);
#   - a bound token sent as a bearer token: refused where DPoP is
#     optional or required (taken where it is off: DPoP is not looked at
#     there); a bearer token where DPoP is required: refused; where
#     optional, taken;
#   - behind a proxy: htu names the public URI (ServerName with a scheme,
#     UseCanonicalName On), not the one the proxy asked;
#   - every refusal is 401 with RFC 9449's WWW-Authenticate: DPoP
#     challenge (invalid_dpop_proof for the proof, invalid_token for the
#     token), and counted in the metrics.
#
# A client flooding the table of proofs seen: t/api/dpop_share.t.
#
# DPoP proofs are typ dpop+jwt: served on Debian 12 and 13 alike (issue
# 41), so all of this runs on both.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use Digest::SHA qw(sha256);
use File::Temp ();
use HTTP::Response ();
use IO::Socket::INET ();
use JSON::PP ();
use POSIX ();
use Time::HiRes qw(time sleep);
use LessonsTest;
use LessonsTest::DPoP ();
use LessonsTest::JWT qw(jwt b64url json_text);

my $dir  = File::Temp->newdir;
my $mods = $ENV{LESSONS_TEST_HTTPD_MODULES} || '/usr/lib/apache2/modules';

sub sections {
    return <<"EOF";
<Location "/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"
    LessonsJWTDPoP optional
</Location>
<Location "/dpop/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"
    LessonsJWTDPoP required
</Location>
<Location "/plain/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"
</Location>
<Location "/metrics">
    SetHandler lessons-metrics
</Location>
EOF
}

# ---- LessonsJWTDPoP optional and required pass configtest everywhere
{
    mkdir "$dir/configtest" or die "$dir/configtest: $!";
    my $conf = httpd_conf("$dir/configtest", free_port(), sections());
    my $out = `'@{[ LessonsTest::httpd_bin() ]}' -t -f '$conf' 2>&1`;
    is $? >> 8, 0, 'LessonsJWTDPoP optional and required: configtest passes' or diag $out;
    like $out, qr/Syntax OK/, '... Syntax OK';
}

# ---- keys: the client's and a thief's
sub ec_key { LessonsTest::DPoP::ec_key($dir, $_[0]) }
my $client = ec_key('client');
my $thief  = ec_key('thief');

my $n = 0;
# A proof: signed with $o{key} (default the client's), naming $o{jwk}
# (default the signer's), for method, URI and token.
sub proof {
    my ($method, $uri, $token, %o) = @_;
    my $k = $o{key} || $client;
    my %c = (jti => 'p-' . $$ . '-' . ++$n . '-' . int(rand(1e9)), htm => $method,
             htu => $uri, iat => int(time), ath => b64url(sha256($token)));
    $c{$_} = $o{claims}{$_} for keys %{ $o{claims} || {} };
    delete $c{$_} for grep { !defined $c{$_} } keys %c;
    return jwt(alg => 'ES256', key => $k->{file},
               header => { typ => 'dpop+jwt', jwk => $o{jwk} || $k->{jwk} },
               payload_raw => json_text(\%c));
}
sub bound_token { good_token(claims => { cnf => { jkt => $_[0]{jkt} } }) }

my $port = free_port();
my $base = "http://127.0.0.1:$port";
# The server's own name and port: a Host naming another is the client's.
start_httpd(httpd_conf("$dir", $port, "ServerName 127.0.0.1:$port\nLogLevel info\n"
                       . sections()), $port);

# DPoP requests: Authorization: DPoP, and the proofs given.
sub dpop_call {
    my ($method, $path, $token, @proofs) = @_;
    return call($method => $path, base => $base, auth => "DPoP $token",
                headers => [ map { (DPoP => $_) } @proofs ]);
}

sub is_dpop_refusal {
    my ($res, $error, $desc, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    is $res->code, 401, "$name: 401";
    my $h = join ' | ', $res->header('WWW-Authenticate');
    like $h, qr/\ADPoP realm="lessons", algs="ES256 [^"]*RS256[^"]*", error="$error", error_description="[^"]*$desc/,
        "$name: WWW-Authenticate: DPoP, error=$error" or diag $h;
    is $res->header('Content-Type'), 'application/problem+json', "$name: problem+json";
}

my $token = bound_token($client);
my $uri   = "$base/dpop/api/lessons";

# ---- a good proof
my $p = proof(GET => $uri, $token);
my $res = dpop_call(GET => '/dpop/api/lessons', $token, $p);
is $res->code, 200, 'required: a bound token with a good proof: 200' or diag $res->content;
$res = dpop_call(GET => '/api/lessons', $token, proof(GET => "$base/api/lessons", $token));
is $res->code, 200, 'optional: the same: 200';
$res = dpop_call(GET => '/dpop/api/lessons?x=1', $token, proof(GET => "$uri", $token));
is $res->code, 200, 'the query is not part of htu';
$res = dpop_call(GET => '/dpop/api/lessons', $token,
                 proof(GET => "HTTP://127.0.0.1:$port/dpop/api/./lessons", $token));
is $res->code, 200, 'htu compared normalised (case of the scheme, dot segments)';

# ---- replay
is_dpop_refusal(dpop_call(GET => '/dpop/api/lessons', $token, $p),
                'invalid_dpop_proof', 'used before', 'the same proof again');

# ---- a proof for something else
is_dpop_refusal(dpop_call(GET => '/dpop/api/lessons', $token, proof(GET => "$base/api/lessons", $token)),
                'invalid_dpop_proof', 'another URI', 'a proof for another path');
is_dpop_refusal(dpop_call(GET => '/dpop/api/lessons', $token,
                          proof(GET => "http://localhost:$port/dpop/api/lessons", $token)),
                'invalid_dpop_proof', 'another URI', 'a proof for another host');
is_dpop_refusal(dpop_call(GET => '/dpop/api/lessons', $token, proof(POST => $uri, $token)),
                'invalid_dpop_proof', 'another method', 'a proof for another method');
is_dpop_refusal(dpop_call(GET => '/dpop/api/lessons', $token, proof(GET => $uri, 'another-token')),
                'invalid_dpop_proof', 'another access token', 'a proof for another token');
is_dpop_refusal(dpop_call(GET => '/dpop/api/lessons', $token,
                          proof(GET => $uri, $token, claims => { iat => int(time) - 3600 })),
                'invalid_dpop_proof', 'too old', 'a stale proof');
is_dpop_refusal(dpop_call(GET => '/dpop/api/lessons', $token,
                          proof(GET => $uri, $token, claims => { iat => int(time) + 3600 })),
                'invalid_dpop_proof', 'too old or too new', 'a proof from the future');
# A few seconds ahead at most (each second ahead is a second more that a
# proof holds its slot in the table of proofs seen).
is_dpop_refusal(dpop_call(GET => '/dpop/api/lessons', $token,
                          proof(GET => $uri, $token, claims => { iat => int(time) + 30 })),
                'invalid_dpop_proof', 'too old or too new', 'a proof 30 s ahead');
$res = dpop_call(GET => '/dpop/api/lessons', $token,
                 proof(GET => $uri, $token, claims => { iat => int(time) + 2 }));
is $res->code, 200, 'a proof 2 s ahead (a client clock a little fast): 200';

# ---- one clock per request (issue 55 §3): what the gate decides about
# time is judged at one instant, the one the replay table keeps proofs
# by, not when the request line came.  A client that sends its request
# line, then its headers slowly (a header line a second, as
# mod_reqtimeout lets it), gains nothing.
sub slow_request {
    my ($path, $auth, $prf, $secs) = @_;
    my $sock = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port", Timeout => 60)
        or die "connect 127.0.0.1:$port: $!\n";
    $sock->autoflush(1);
    print $sock "GET $path HTTP/1.1\r\n";
    my $end = time + $secs;
    for (my $i = 0; time < $end; $i++) {
        sleep 1;
        print $sock "X-Slow-$i: 1\r\n";
    }
    print $sock "Host: 127.0.0.1:$port\r\nAuthorization: $auth\r\n"
        . (defined $prf ? "DPoP: $prf\r\n" : '') . "Connection: close\r\n\r\n";
    local $/;
    my $text = <$sock> // '';
    $text =~ s/\r\n/\n/g;
    return HTTP::Response->parse($text);
}
{
    my $exp = int(time) + 2;
    my $short = good_token(claims => { exp => $exp });
    $res = slow_request('/plain/api/lessons', "Bearer $short", undef,
                        $exp + 2 - time);
    is $res->code, 401, 'a token that expired while its headers came: 401'
        or diag $res->as_string;
    # A proof near the end of its window: the table keeps it until
    # iat + 61 s; a replay whose headers end after that is judged then.
    my $old = proof(GET => $uri, $token, claims => { iat => int(time) - 57 });
    is dpop_call(GET => '/dpop/api/lessons', $token, $old)->code, 200,
        'a proof 57 s old: 200';
    $res = slow_request('/dpop/api/lessons', "DPoP $token", $old, 6);
    is $res->code, 401, '... replayed, its headers trickled past its window: 401'
        or diag $res->as_string;
}

# ---- absolute-form: the request-target's path, this server's name
# One request as sent, its request-target as given.
sub raw_dpop {
    my ($p, $target, $tok, $prf, $host) = @_;
    $host //= "127.0.0.1:$p";
    my $sock = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$p", Timeout => 60)
        or die "connect 127.0.0.1:$p: $!\n";
    print $sock "GET $target HTTP/1.1\r\nHost: $host\r\n"
        . "Authorization: DPoP $tok\r\nDPoP: $prf\r\nConnection: close\r\n\r\n";
    local $/;
    my $text = <$sock> // '';
    $text =~ s/\r\n/\n/g;
    return HTTP::Response->parse($text);
}
for my $elsewhere ("http://rs.other.example:8443/dpop/api/lessons",
                   "https://rs.other.example:8443/dpop/api/lessons") {
    is_dpop_refusal(raw_dpop($port, $elsewhere, $token, proof(GET => $elsewhere, $token)),
                    'invalid_dpop_proof', 'another URI',
                    "absolute-form $elsewhere, a proof for it");
}

# A Host naming another server, or this one on another port, is the
# client's word: htu is this server's URI all the same.
for my $host ('rs.other.example:8443', '127.0.0.1:1') {
    my $there = "http://$host/dpop/api/lessons";
    is_dpop_refusal(raw_dpop($port, '/dpop/api/lessons', $token, proof(GET => $there, $token), $host),
                    'invalid_dpop_proof', 'another URI',
                    "Host: $host, a proof for $there");
    is raw_dpop($port, '/dpop/api/lessons', $token, proof(GET => $uri, $token), $host)->code,
       200, "Host: $host, a proof for this server's own URI: 200";
}

# ---- another key: the thief has the token, not the key
is_dpop_refusal(dpop_call(GET => '/dpop/api/lessons', $token, proof(GET => $uri, $token, key => $thief)),
                'invalid_dpop_proof', 'another key', "a proof with the thief's key");
is_dpop_refusal(dpop_call(GET => '/dpop/api/lessons', $token,
                          proof(GET => $uri, $token, key => $thief, jwk => $client->{jwk})),
                'invalid_dpop_proof', 'signature', "the thief's signature, the client's jwk");
my $private = { %{ $client->{jwk} }, d => 'AAAA' };
is_dpop_refusal(dpop_call(GET => '/dpop/api/lessons', $token, proof(GET => $uri, $token, jwk => $private)),
                'invalid_dpop_proof', 'key', 'a jwk with private material');

# ---- the proof header itself
is_dpop_refusal(dpop_call(GET => '/dpop/api/lessons', $token),
                'invalid_dpop_proof', 'Exactly one', 'no DPoP header');
is_dpop_refusal(dpop_call(GET => '/dpop/api/lessons', $token, proof(GET => $uri, $token),
                          proof(GET => $uri, $token)),
                'invalid_dpop_proof', 'Exactly one', 'two DPoP headers');
is_dpop_refusal(dpop_call(GET => '/dpop/api/lessons', $token, 'not-a-proof'),
                'invalid_dpop_proof', 'malformed', 'a proof that is no JWS');
my $typed = jwt(alg => 'ES256', key => $client->{file},
                header => { typ => 'JWT', jwk => $client->{jwk} },
                payload_raw => json_text({ jti => 'x', htm => 'GET', htu => $uri,
                                           iat => int(time), ath => b64url(sha256($token)) }));
is_dpop_refusal(dpop_call(GET => '/dpop/api/lessons', $token, $typed),
                'invalid_dpop_proof', 'dpop\+jwt', 'a proof typed JWT');

# ---- bearer and DPoP schemes against bound and unbound tokens
is_dpop_refusal(call(GET => '/dpop/api/lessons', base => $base, token => $token),
                'invalid_token', 'bound to a DPoP key', 'required: a bound token as a bearer token');
is_dpop_refusal(call(GET => '/api/lessons', base => $base, token => $token),
                'invalid_token', 'bound to a DPoP key', 'optional: a bound token as a bearer token');
is call(GET => '/plain/api/lessons', base => $base, token => $token)->code, 200,
    'off: DPoP is not looked at, a bound token is a bearer token (RFC 9449 7.2)';
my $plain = good_token();
is_dpop_refusal(call(GET => '/dpop/api/lessons', base => $base, token => $plain),
                'invalid_token', 'DPoP-bound access tokens only', 'required: a bearer token');
is call(GET => '/api/lessons', base => $base, token => $plain)->code, 200,
    'optional: a bearer token: 200';
is call(GET => '/plain/api/lessons', base => $base, token => $plain)->code, 200,
    'off: a bearer token: 200';
is_dpop_refusal(dpop_call(GET => '/dpop/api/lessons', $plain, proof(GET => $uri, $plain)),
                'invalid_token', 'not bound', 'DPoP scheme, an unbound token');
$res = call(GET => '/plain/api/lessons', base => $base, auth => "DPoP $token",
            headers => [ DPoP => proof(GET => "$base/plain/api/lessons", $token) ]);
is $res->code, 401, 'off: the DPoP scheme is no bearer token: 401';
$res = call(GET => '/dpop/api/lessons', base => $base, token => undef);
is $res->code, 401, 'required, no token: 401';
like join(' | ', $res->header('WWW-Authenticate')), qr/\ADPoP realm="lessons", algs="/,
    '... challenged with DPoP';
$res = call(GET => '/api/lessons', base => $base, token => undef);
my @ch = $res->header('WWW-Authenticate');
ok((grep { /\ABearer realm="lessons"\z/ } @ch) && (grep { /\ADPoP realm="lessons", algs=/ } @ch),
   'optional, no token: challenged with Bearer and DPoP') or diag join ' | ', @ch;
# A write with DPoP: its own method in the proof.
$res = call(POST => '/dpop/api/lessons', base => $base, auth => "DPoP $token",
            headers => [ DPoP => proof(POST => $uri, $token) ],
            json => { levelId => 1, title => 'Gebunden', order => 1 });
is $res->code, 201, 'a create with DPoP: 201';
my $made = (json_of($res) // {})->{id};
$res = call(DELETE => "/dpop/api/lessons/$made", base => $base, auth => "DPoP $token",
            headers => [ DPoP => proof(DELETE => "$uri/$made", $token) ]);
is $res->code, 204, 'and its delete: 204';

# ---- the metrics count the refusals
my $m = call(GET => '/metrics', base => $base, token => undef)->content;
my ($dpop) = $m =~ /^lessons_token_refusals_total\{reason="dpop"\} (\d+)$/m;
cmp_ok $dpop // 0, '>=', 18, 'metrics: the DPoP refusals counted (' . ($dpop // 0) . ')';

# ---- behind a proxy: the public URI, as httpd is told it
my $pport = free_port();
my $pbase = "http://127.0.0.1:$pport";
my $pdir = File::Temp->newdir;
start_httpd(httpd_conf("$pdir", $pport, <<"EOF"), $pport);
ServerName https://api.example.org:443
UseCanonicalName On
<Location "/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"
    LessonsJWTDPoP required
</Location>
EOF
$res = call(GET => '/api/lessons', base => $pbase, auth => "DPoP $token",
            headers => [ DPoP => proof(GET => 'https://api.example.org/api/lessons', $token) ]);
is $res->code, 200, 'behind a proxy: a proof for the public URI: 200';
is_dpop_refusal(call(GET => '/api/lessons', base => $pbase, auth => "DPoP $token",
                     headers => [ DPoP => proof(GET => "$pbase/api/lessons", $token) ]),
                'invalid_dpop_proof', 'another URI', 'behind a proxy: a proof for the inner URI');
# absolute-form naming another host: the public URI all the same.
$res = raw_dpop($pport, 'http://evil.example/api/lessons', $token,
                proof(GET => 'https://api.example.org/api/lessons', $token));
is $res->code, 200, 'absolute-form naming another host: a proof for the public URI: 200';
is_dpop_refusal(raw_dpop($pport, 'http://evil.example/api/lessons', $token,
                         proof(GET => 'http://evil.example/api/lessons', $token)),
                'invalid_dpop_proof', 'another URI',
                'absolute-form naming another host: a proof for that host');

# ---- a virtual host bound to an address, with no ServerName (issue 57)
# httpd names it by reverse DNS ("localhost" for 127.0.0.1); clients that
# reach it by its address make their proofs for that address, which is
# its own: taken.  Another address, as before: refused.
{
    my $vport = free_port();
    my $vdir = File::Temp->newdir;
    start_httpd(httpd_conf("$vdir", $vport, <<"EOF"), $vport);
<VirtualHost 127.0.0.1:$vport>
<Location "/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"
    LessonsJWTDPoP required
</Location>
</VirtualHost>
EOF
    my $vbase = "http://127.0.0.1:$vport";
    my $vtoken = bound_token($client);
    $res = call(GET => '/api/lessons', base => $vbase, auth => "DPoP $vtoken",
                headers => [ DPoP => proof(GET => "$vbase/api/lessons", $vtoken) ]);
    is $res->code, 200, 'a virtual host on 127.0.0.1 without ServerName: a proof for its address: 200'
        or diag join ' | ', $res->header('WWW-Authenticate');
    is_dpop_refusal(call(GET => '/api/lessons', base => $vbase, auth => "DPoP $vtoken",
                         headers => [ DPoP => proof(GET => "http://127.0.0.2:$vport/api/lessons", $vtoken) ]),
                    'invalid_dpop_proof', 'another URI',
                    'a virtual host without ServerName: a proof for another address');
}

# ---- one proof, three processes, sent at once: taken once
my $rdir = File::Temp->newdir;
my $rport = free_port();
my $rbase = "http://127.0.0.1:$rport";
start_httpd(httpd_conf("$rdir", $rport, <<"EOF", mpm => 'prefork'), $rport);
ServerName 127.0.0.1:$rport
StartServers 3
MinSpareServers 3
MaxSpareServers 3
ServerLimit 3
MaxRequestWorkers 3
LogFormat "%P %>s" pidfmt
CustomLog "$rdir/access_log" pidfmt
<Location "/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"
    LessonsJWTDPoP required
</Location>
EOF
my $ok = 0;
for my $round (1 .. 5) {
    my $shared = proof(GET => "$rbase/api/lessons", $token);
    pipe(my $go_r, my $go_w) or die "pipe: $!";
    my @kids;
    for (1 .. 6) {
        pipe(my $r, my $w) or die "pipe: $!";
        my $kid = fork // die "fork: $!";
        if (!$kid) {
            close $go_w;
            close $r;
            <$go_r>;                    # all at once
            my $code = call(GET => '/api/lessons', base => $rbase, auth => "DPoP $token",
                            headers => [ DPoP => $shared ])->code;
            print $w "$code\n";
            close $w;                   # _exit flushes nothing
            POSIX::_exit(0);
        }
        close $w;
        push @kids, [ $kid, $r ];
    }
    close $go_r;
    close $go_w;
    my %codes;
    for (@kids) {
        my $fh = $_->[1];
        chomp(my $code = <$fh> // '');
        $codes{$code}++;
        waitpid $_->[0], 0;
    }
    is $codes{200}, 1, "round $round: one of six took the proof"
        or diag explain \%codes;
    is $codes{401}, 5, "round $round: five were refused";
    $ok++ if ($codes{200} // 0) == 1;
}
my %pids;
if (open my $fh, '<', "$rdir/access_log") {
    while (<$fh>) { $pids{$1}++ if /\A(\d+) / }
}
cmp_ok scalar(keys %pids), '>=', 2, 'the proofs reached ' . scalar(keys %pids) . ' processes';

done_testing();
