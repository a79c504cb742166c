# Keys from an identity provider (issue 8): LessonsJWTKeysURL against a
# real OpenID provider (npm oauth2-mock-server, t/idp/idp.js) over TLS
# with a test CA.  Tokens come from its client-credentials grant.
#
#   - a token it issues is accepted; RS256 and ES256 keys side by side;
#   - rotation: a token with a new kid is accepted after one refetch;
#   - removal: the old key's tokens fail after the next refresh;
#   - the provider stopped: service goes on with the last good keys;
#   - before any set: 503 with Retry-After, or the key file's keys;
#   - a flood of tokens with random kids: at most one fetch per
#     LessonsJWTKeysMinRefresh (the provider counts its requests);
#   - HS256 signed with the RSA key's public PEM: 401;
#   - typ at+jwt (RFC 9068): 200, on Debian 12 and 13 alike;
#   - keys a section does not take are skipped one by one, logged at
#     info, and the rest serve.
#
# Server B is started here: one process, so that fetches are counted
# exactly, on the suite's database.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use Digest::SHA qw(hmac_sha256);
use File::Temp ();
use JSON::PP ();
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(time sleep);
use LessonsTest;
use LessonsTest::JWT qw(b64url b64url_decode);
use LessonsTest::IdP qw(start_idp idp_control test_ca);

my $httpd  = LessonsTest::httpd_bin();
my $dir    = File::Temp->newdir;
my $JSON   = JSON::PP->new->utf8->canonical;
my $REFRESH = 3;        # LessonsJWTKeysRefresh of /rotate (/api/lessons:
                        # 3600, so only tokens make it fetch)
my $MIN     = 2;        # LessonsJWTKeysMinRefresh of both

# ---- the provider, with its test CA; a CA that did not sign it
my $idp  = start_idp("$dir");
test_ca("$dir", 'other');
my $ISS  = $idp->{iss};
my $JWKS = $idp->{jwks};

sub control { idp_control($idp, @_) }
# Fetches of /api/lessons' keys URL (the others add a query string).
sub fetches { control(GET => '/state')->{jwks_requests_by_query}{''} // 0 }
sub idp_token { LessonsTest::IdP::idp_token($idp) }
chomp(my $node = `sh -c 'command -v node'`);     # start_idp found it
sub header_of { $JSON->decode(b64url_decode((split /\./, $_[0])[0])) }

# ---- server B
my $port = free_port();
my $dead = free_port();         # nothing listens there
my $conf = httpd_conf($dir, $port, <<"EOF");
LogLevel info
@{[ one_process_conf() ]}<Location "/api/lessons">
    SetHandler lessons
    LessonsJWTAlgorithm RS256 ES256
    LessonsJWTKeysURL $JWKS
    LessonsJWTKeysCA "$dir/ca.crt"
    LessonsJWTKeysMinRefresh $MIN
    LessonsJWTIssuer $ISS
</Location>
# The same provider, refreshed every few seconds (its own keys URL).
<Location "/rotate/api/lessons">
    SetHandler lessons
    LessonsJWTKey RS256 ES256 $JWKS?rotate
    LessonsJWTKeysCA "$dir/ca.crt"
    LessonsJWTKeysRefresh $REFRESH
    LessonsJWTKeysMinRefresh $MIN
</Location>
# No set can ever be fetched here: 503 until one is.
<Location "/dead/api/lessons">
    SetHandler lessons
    LessonsJWTKey RS256 https://127.0.0.1:$dead/jwks
    LessonsJWTKeysCA "$dir/ca.crt"
    LessonsJWTKeysMinRefresh 30
</Location>
# The key file serves until the URL's first fetch succeeds.
<Location "/fallback/api/lessons">
    SetHandler lessons
    LessonsJWTAlgorithm RS256
    LessonsJWTKeyFile "$ENV{LESSONS_TEST_RSA_PUB}"
    LessonsJWTKeysURL https://127.0.0.1:$dead/fallback-jwks
    LessonsJWTKeysCA "$dir/ca.crt"
    LessonsJWTKeysMinRefresh 30
</Location>
# A CA file nobody can read once the server runs: it was read at start-up.
<Location "/caperm/api/lessons">
    SetHandler lessons
    LessonsJWTKey RS256 ES256 $JWKS?caperm
    LessonsJWTKeysCA "$dir/ca-copy.crt"
    LessonsJWTKeysMinRefresh 1
</Location>
# HS256 beside RS256 and ES256 from a keys URL: its oct keys never count.
<Location "/octurl/api/lessons">
    SetHandler lessons
    LessonsJWTKey RS256 ES256 HS256 $JWKS?oct
    LessonsJWTKeysCA "$dir/ca.crt"
    LessonsJWTKeysMinRefresh 1
</Location>
# The right host, a CA that did not sign its certificate.
<Location "/untrusted/api/lessons">
    SetHandler lessons
    LessonsJWTKey RS256 $ISS/jwks?untrusted
    LessonsJWTKeysCA "$dir/other.crt"
    LessonsJWTKeysMinRefresh 30
</Location>
EOF
{
    open my $in, '<', "$dir/ca.crt" or die "$dir/ca.crt: $!";
    open my $out, '>', "$dir/ca-copy.crt" or die "$dir/ca-copy.crt: $!";
    print $out do { local $/; <$in> };
    close $out or die $!;
}
my $out = `'$httpd' -t -f '$conf' 2>&1`;
like $out, qr/Syntax OK/, 'configtest passes with keys URLs' or diag $out;
start_httpd($conf, $port);
my $B = "http://127.0.0.1:$port";

sub get {
    my ($path, $token) = @_;
    return call(GET => $path, base => $B, token => $token);
}
# Poll until the answer has this status (bounded), for what waits on a
# refresh; returns the last answer.
sub eventually {
    my ($status, $path, $token, $limit) = @_;
    my $res;
    my $end = time + $limit;
    do {
        $res = get($path, $token);
        return $res if $res->code == $status;
        sleep 0.25;
    } while (time < $end);
    return $res;
}

# ---- accepted: a client-credentials token, RS256 ---------------------
my $first = idp_token();
my $kid1 = header_of($first)->{kid};
ok $kid1, 'the provider signs with a kid';
is header_of($first)->{typ}, 'JWT', '... and typ JWT';
my $res = get('/api/lessons', $first);
is $res->code, 200, 'a client-credentials token from the provider: 200';
my $seen = fetches();
ok $seen >= 1, "the key set was fetched ($seen)";
is get('/api/lessons', $first)->code, 200, 'again (cached token)';

# ---- rotation: a new kid, accepted after one refetch ------------------
sleep $MIN + 0.2;               # past the minimum interval
my $before = fetches();
my $kid2 = control(POST => '/keys', { alg => 'RS256' })->{kid};
my $second = idp_token();
is header_of($second)->{kid}, $kid2, 'the provider signs with the new key';
$res = get('/api/lessons', $second);
is $res->code, 200, 'a token with the new kid: 200 at once (one refetch)';
my $after = fetches();
ok $after - $before >= 1 && $after - $before <= 2,
    'one refetch for it (' . ($after - $before) . ')';
is get('/api/lessons', $first)->code, 200, 'the old key still works while published';

# ---- the CA file unreadable after start-up: its keys URL still fetches -
chmod 0000, "$dir/ca-copy.crt";
ok !open(my $unreadable, '<', "$dir/ca-copy.crt"), 'the CA file cannot be read now';
is eventually(200, '/caperm/api/lessons', $second, 10)->code, 200,
    'a new kid through a keys URL whose CA file is unreadable since start-up: 200';

# ---- RS256 and ES256 in one set ----------------------------------------
sleep $MIN + 0.2;
my $kid3 = control(POST => '/keys', { alg => 'ES256' })->{kid};
my $ec = idp_token();
is header_of($ec)->{alg}, 'ES256', 'an ES256 token from the provider';
is get('/api/lessons', $ec)->code, 200, 'ES256 beside RS256: 200';
control(POST => '/signing', { kid => $kid2 });
is get('/api/lessons', idp_token())->code, 200, 'and RS256 still: 200';

# ---- HS256 keyed with the RSA key's public PEM: refused -----------------
my $jwks = $JSON->decode(scalar `curl -sS --max-time 20 --cacert $dir/ca.crt $JWKS`);
my ($rsa) = grep { $_->{kid} eq $kid2 } @{ $jwks->{keys} };
my $pem = `'$node' -e 'const c=require("crypto");process.stdout.write(c.createPublicKey({key:JSON.parse(process.argv[1]),format:"jwk"}).export({type:"spki",format:"pem"}))' '@{[ $JSON->encode($rsa) ]}'`;
like $pem, qr/BEGIN PUBLIC KEY/, 'the RSA key as PEM';
my $claims = (split /\./, $second)[1];
for my $variant ([ 'with kid' => { alg => 'HS256', typ => 'JWT', kid => $kid2 } ],
                 [ 'without kid' => { alg => 'HS256', typ => 'JWT' } ]) {
    for my $key ($pem, $pem =~ s/\n\z//r) {
        my $input = b64url($JSON->encode($variant->[1])) . ".$claims";
        my $forged = "$input." . b64url(hmac_sha256($input, $key));
        is_unauthorized(get('/api/lessons', $forged),
                        "HS256 with the RSA public PEM, $variant->[0]", 'invalid_token');
    }
}

# ---- typ at+jwt (RFC 9068) from the provider: 200 ----------------------
control(POST => '/token-header', { typ => 'at+jwt' });
control(POST => '/token-claims', { sub => 'svc-1', client_id => 'lessons-app',
                                   jti => 'at-' . time });
my $at = idp_token();
is header_of($at)->{typ}, 'at+jwt', 'the provider stamps typ at+jwt';
$res = get('/api/lessons', $at);
is $res->code, 200, 'an at+jwt token from the provider: 200'
    or diag $res->header('WWW-Authenticate') // '';
control(POST => '/token-claims', {});
control(POST => '/token-header', {});

# ---- an oct key from a keys URL is skipped, never a secret -------------
{
    my $published = 'a-shared-secret-published-at-a-url-0123456789';
    my $real = $JSON->decode(scalar `curl -sS --max-time 20 --cacert $dir/ca.crt '$JWKS'`);
    my $set = { keys => [ @{ $real->{keys} },
                          { kty => 'oct', kid => 'published', alg => 'HS256',
                            k => b64url($published) } ] };
    control(POST => '/jwks-fault', { body => $JSON->encode($set) });
    select undef, undef, undef, 1.2;    # past the section's minimum interval
    my $forged = jwt(alg => 'HS256', key => $published,
                     header => { kid => 'published' });
    is_unauthorized(get('/octurl/api/lessons', $forged),
                    'HS256 signed with an oct key the keys URL published',
                    'invalid_token');
    my $ok = get('/octurl/api/lessons', idp_token());
    is $ok->code, 200, '... while the same set\'s RSA key still verifies'
        or diag $ok->header('WWW-Authenticate') // '', "\n",
                join '', grep { /\?oct/ } split /^/,
                do { local (@ARGV, $/) = ("$dir/error_log"); <> };
    control(POST => '/jwks-fault', {});
    my $octlog = do { local (@ARGV, $/) = ("$dir/error_log"); <> };
    like $octlog, qr/\[lessons:warn\].*LESSONS00219: keys URL \Q$JWKS?oct\E: 1 "oct" key\(s\) skipped/,
        'the skipped oct key is a warning';
}

# ---- no set yet: 503 with Retry-After; the key file meanwhile ----------
$res = get('/dead/api/lessons', $second);
is_problem($res, 503, 'a keys URL that never answered');
like $res->header('Retry-After') || '', qr/\A\d+\z/, '... with Retry-After';
$res = get('/untrusted/api/lessons', $second);
is $res->code, 503, 'a server whose certificate the CA file does not trust: 503';
my $log = do { local (@ARGV, $/) = ("$dir/error_log"); <> };
like $log, qr/\[lessons:error\].*LESSONS00211: keys URL \Q$ISS\E\/jwks\?untrusted: /,
    '... and an error line for it';
is get('/fallback/api/lessons', token(alg => 'RS256'))->code, 200,
    'LessonsJWTKeyFile serves until the URL\'s first fetch succeeds';
is_unauthorized(get('/fallback/api/lessons', $second),
                'an RS256 token of another key there', 'invalid_token');

# ---- a flood of random kids: at most one fetch per minimum interval ----
sleep $MIN + 0.2;
my $payload = (split /\./, $second)[1];
my $sig = (split /\./, $second)[2];
$before = fetches();
my $start = time;
my @pids;
my $FLOOD_SECONDS = 3 * $MIN + 0.5;   # several minimum intervals
pipe my $rd, my $wr or die "pipe: $!";
for my $w (1 .. 4) {
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $rd;
        my ($bad, $sent) = (0, 0);
        while (time < $start + $FLOOD_SECONDS && $sent < 2000) {
            my $h = b64url($JSON->encode({ alg => 'RS256', typ => 'JWT',
                                           kid => "flood-$w-$sent-" . int(rand(1e9)) }));
            my $r = get('/api/lessons', "$h.$payload.$sig");
            $bad++ unless $r->code == 401;
            $sent++;
        }
        print $wr "$sent $bad\n";
        close $wr;
        POSIX::_exit(0);                # no END blocks: they stop the servers
    }
    push @pids, $pid;
}
close $wr;
my ($sent, $bad) = (0, 0);
while (my $line = <$rd>) {
    my ($s, $b) = split ' ', $line;
    $sent += $s;
    $bad += $b;
}
waitpid $_, 0 for @pids;
my $elapsed = time - $start;
$after = fetches();
my $flood = $after - $before;
ok $sent >= 40, "the flood sent $sent tokens with random kids";
is $bad, 0, '... and every one got 401';
my $allowed = int($elapsed / $MIN) + 1;
ok $flood >= 1 && $flood <= $allowed,
    "fetches during the flood: $flood in ${\ sprintf '%.1f', $elapsed} s (at most $allowed)";
diag "kid flood: $sent requests, $flood fetches in " . sprintf('%.1f', $elapsed)
     . " s, LessonsJWTKeysMinRefresh $MIN";
is get('/api/lessons', $second)->code, 200, 'good tokens still pass after the flood';
my $waitlog = do { local (@ARGV, $/) = ("$dir/error_log"); <> };
like $waitlog, qr/\[lessons:info\].*LESSONS00218: keys URL \Q$JWKS\E\S*: the token's kid is not in the key set fetched \d+ s ago; the next fetch may happen in \d+ s \(LessonsJWTKeysMinRefresh\)/,
    'an unknown kid inside the minimum interval says when the next fetch may happen';

# ---- a slow provider under a kid flood: few threads wait -------------
# The fetch takes 4 s; of 20 requests with unknown kids at once, at most
# 6 (a quarter of the 25 threads) wait for it, the others get 401 at once.
# The server counts: each that did not wait logs why (LESSONS00220, or
# LESSONS00218 once the fetch has begun too recently), since a client's
# clock on a loaded machine cannot tell a wait from a slow turn.
control(POST => '/jwks-fault', { delay_ms => 4000 });
sleep $MIN + 0.2;
$before = fetches();
my $logpos = -s "$dir/error_log";
# "At once": each client connects first and says so, then all send when
# the test lets go (one close wakes them all); on a loaded machine,
# forks that each connected in their own time spread past the 4 s fetch
# and met a second one.
pipe my $rd2, my $wr2 or die "pipe: $!";
pipe my $ready_r, my $ready_w or die "pipe: $!";
pipe my $go_r, my $go_w or die "pipe: $!";
@pids = ();
for my $w (1 .. 20) {
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $_ for $rd2, $ready_r, $go_w;
        my $h = b64url($JSON->encode({ alg => 'RS256', typ => 'JWT',
                                       kid => "slow-$w-" . int(rand(1e9)) }));
        my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                         PeerPort => $port, Proto => 'tcp')
            or POSIX::_exit(1);
        syswrite $ready_w, 'r';
        close $ready_w;
        sysread $go_r, my $nothing, 1;     # end of file: go
        my $t = time;
        print {$sock} "GET /api/lessons HTTP/1.1\r\nHost: 127.0.0.1:$port\r\n"
            . "Authorization: Bearer $h.$payload.$sig\r\nConnection: close\r\n\r\n";
        my ($code) = (<$sock> // '') =~ m{^HTTP/1\.1 (\d{3}) };
        printf $wr2 "%d %.3f\n", $code // 0, time - $t;
        close $wr2;
        POSIX::_exit(0);
    }
    push @pids, $pid;
}
close $_ for $wr2, $ready_w, $go_r;
my ($ready, $byte) = (0, '');
$ready++ while $ready < 20 && sysread $ready_r, $byte, 1;
is $ready, 20, 'the 20 clients connected before they send';
close $go_w;
my @answers = map { [ split ' ' ] } <$rd2>;
waitpid $_, 0 for @pids;
is scalar(@answers), 20, '20 answers during a slow fetch';
is scalar(grep { $_->[0] == 401 } @answers), 20, '... all 401';
my $slowlog = do {
    open my $fh, '<', "$dir/error_log" or die "error_log: $!";
    seek $fh, $logpos, 0;
    local $/; <$fh>;
};
my $busy = () = $slowlog =~ /LESSONS00220: keys URL \Q$JWKS\E: /g;
my $soon = () = $slowlog =~ /LESSONS00218: keys URL \Q$JWKS\E: /g;
my $waited = 20 - $busy - $soon;
ok $waited >= 1 && $waited <= 6,
    "at most 6 of them (a quarter of 25 threads) waited for the fetch ($waited did; $busy went on "
    . "at once, $soon came after it began)";
like $slowlog, qr/\[lessons:info\].*LESSONS00220: keys URL \Q$JWKS\E: the token's kid is not in the key set and enough requests wait for the fetch already; this one did not wait/,
    '... those that did not wait say so';
diag sprintf 'slow provider: %d of 20 requests waited for the 4 s fetch '
    . '(%d took 2 s or more at the client)', $waited,
    scalar grep { $_->[1] >= 2 } @answers;
control(POST => '/jwks-fault', {});
sleep 4.5;                      # the slow fetch has ended
is fetches() - $before, 1, '... and they made one fetch';
is get('/api/lessons', $second)->code, 200, 'good tokens pass after it';

# ---- removal: the old key's tokens fail after the next refresh ---------
is get('/rotate/api/lessons', $first)->code, 200, 'the first key, before removal';
control(POST => '/keys/remove', { kid => $kid1 });
my $t0 = time;
$res = eventually(401, '/rotate/api/lessons', $first, 5 * ($REFRESH + $MIN));
is $res->code, 401, 'the removed key\'s token fails after a refresh';
diag sprintf 'removed key refused after %.1f s (refresh %d s)', time - $t0, $REFRESH;
is get('/rotate/api/lessons', $second)->code, 200, 'the remaining key still works';

# ---- a fetched set that fails the checks: refused, the old set kept ----
control(POST => '/jwks-fault', { body => '{"keys":[{"kty":"RSA","kid":"x","n":"AQAB","e":"AQAB"}]}' });
sleep $REFRESH + $MIN + 0.5;    # a refresh has met it by now
is get('/rotate/api/lessons', $second)->code, 200, 'a refused set leaves the old one serving';
my $refused = do { local (@ARGV, $/) = ("$dir/error_log"); <> };
like $refused, qr/LESSONS00211: keys URL \Q$JWKS?rotate\E: the key set was refused: .*RSA modulus/,
    '... and the log says why';
control(POST => '/jwks-fault', {});

# ---- a provider's set is judged key by key (issue 42) ------------------
# Beside its signing keys a provider publishes keys this section does not
# take: one for RS512 only, an encryption key, a short RSA key.  Each is
# skipped with an info line naming its kid and why; the rest serve.
{
    my $real = $JSON->decode(scalar `curl -sS --max-time 20 --cacert $dir/ca.crt '$JWKS?rotate'`);
    my ($rsa) = grep { $_->{kty} eq 'RSA' } @{ $real->{keys} };
    my $set = { keys => [
        { %$rsa, kid => 'rs512-only', alg => 'RS512' },
        { %$rsa, kid => 'for-enc', use => 'enc', alg => 'RSA-OAEP' },
        @{ $real->{keys} },
        { kty => 'RSA', kid => 'short', n => 'AQAB', e => 'AQAB' },
    ] };
    control(POST => '/jwks-fault', { body => $JSON->encode($set) });
    sleep $REFRESH + $MIN + 0.5;    # a refresh has met it by now
    is get('/rotate/api/lessons', $second)->code, 200,
        'a set with keys the section does not take: its RS256 key serves';
    is get('/rotate/api/lessons', $ec)->code, 200, '... and its ES256 key';
    my $log = do { local (@ARGV, $/) = ("$dir/error_log"); <> };
    my $n = @{ $real->{keys} };
    like $log, qr/\[lessons:info\].*LESSONS00213: keys URL \Q$JWKS?rotate\E: $n key\(s\) in use \([^)]*\), 3 skipped/,
        '... the set in use, 3 keys skipped'
        or diag join '', grep { /\?rotate/ && !/ GET / } split /^/, $log;
    for ([ 'rs512-only', qr/is for RS512 only \(its "alg"\), which is not among RS256, ES256/ ],
         [ 'for-enc',    qr/"use" is "enc"/ ],
         [ 'short',      qr/RSA modulus of \d+ bits, at least 2048 needed/ ]) {
        my ($kid, $why) = @$_;
        my @lines = $log =~ /^(.*LESSONS00212: keys URL \Q$JWKS?rotate\E: skipped key \d+ \(kid "\Q$kid\E"\): .*)$/mg;
        ok @lines && $lines[-1] =~ /\[lessons:info\]/ && $lines[-1] =~ $why,
            "kid $kid: one info line says why it was skipped" or diag @lines;
    }
    control(POST => '/jwks-fault', {});
}

# ---- the provider stopped: the last good set serves -------------------
control(POST => '/stop');
sleep $REFRESH + $MIN + 0.5;    # a refresh has failed by now
is get('/rotate/api/lessons', $second)->code, 200, 'provider down: last good keys serve';
is get('/rotate/api/lessons', $ec)->code, 200, '... the ES256 key too';
$log = do { local (@ARGV, $/) = ("$dir/error_log"); <> };
like $log, qr/\[lessons:warn\].*LESSONS00211: keys URL \Q$JWKS?rotate\E: .*the last good key set still serves/,
    'a warning names the URL and the failure';
control(POST => '/start');

done_testing();
