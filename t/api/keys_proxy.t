# Keys behind a corporate proxy (issue 42): LessonsJWTKeysProxy sends a
# keys URL's and a discovered issuer's fetches through the outgoing
# proxy it names, as a CONNECT tunnel, against the test identity
# provider (t/idp) over TLS with a test CA, and a counting proxy of the
# tests in front of it (t/lib/LessonsTest/Proxy.pm).
#
#   - tokens verify with keys fetched through the proxy; it counted the
#     CONNECTs to the provider and saw nothing else;
#   - the named CA is still the only trust: another CA fails through it;
#   - the proxy down: 503 with Retry-After until a set exists, then 200
#     once it is back; refusing: the last good set keeps serving;
#   - discovery (metadata and jwks_uri) through a proxy;
#   - https_proxy and friends in httpd's environment point at a working
#     proxy, and nothing ever goes through it.
#
# Server B is started here: one process, so that fetches are counted
# exactly, on the suite's database.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use Time::HiRes qw(time sleep);
use LessonsTest;
use LessonsTest::IdP qw(start_idp idp_control test_ca);
use LessonsTest::Proxy qw(start_proxy stop_proxy proxy_counts proxy_total
                          proxy_refuse);

my $dir     = File::Temp->newdir;
my $MIN     = 1;        # LessonsJWTKeysMinRefresh: a failed fetch is
                        # tried again this soon
my $REFRESH = 2;        # LessonsJWTKeysRefresh of /flaky

# ---- the provider, its CA, a CA that did not sign it
my $idp  = start_idp("$dir");
test_ca("$dir", 'other');
my $ISS  = $idp->{iss};
my $JWKS = $idp->{jwks};
my ($TARGET) = $ISS =~ m{\Ahttps://(.*)\z};     # 127.0.0.1:port
sub control { idp_control($idp, @_) }
sub idp_token { LessonsTest::IdP::idp_token($idp, @_) }
control(POST => '/realms', { name => 'school' });
sub fetched { control(GET => '/state')->{jwks_requests_by_query}{$_[0]} // 0 }

# ---- the proxies: the section's, discovery's, one for the flaky
# section that is not up yet, and the one httpd's environment names
my $proxy = start_proxy("$dir", 'corp');
my $disc  = start_proxy("$dir", 'disc');
my $FLAKY = free_port();
my $envp  = start_proxy("$dir", 'env');

# ---- server B
my $port = free_port();
my $CA = qq{LessonsJWTKeysCA "$dir/ca.crt"\n    LessonsJWTKeysMinRefresh $MIN};
my $conf = httpd_conf($dir, $port, <<"EOF");
LogLevel info
@{[ one_process_conf() ]}<Location "/api/lessons">
    SetHandler lessons
    LessonsJWTKey RS256 ES256 $JWKS
    LessonsJWTKeysProxy $proxy->{url}
    $CA
</Location>
# The right provider, a CA that did not sign its certificate.
<Location "/untrusted/api/lessons">
    SetHandler lessons
    LessonsJWTKey RS256 $JWKS?untrusted
    LessonsJWTKeysProxy $proxy->{url}
    LessonsJWTKeysCA "$dir/other.crt"
    LessonsJWTKeysMinRefresh 30
</Location>
# Through a proxy that is down at first.
<Location "/flaky/api/lessons">
    SetHandler lessons
    LessonsJWTKey RS256 ES256 $JWKS?flaky
    LessonsJWTKeysProxy http://127.0.0.1:$FLAKY
    LessonsJWTKeysRefresh $REFRESH
    $CA
</Location>
# An issuer whose keys are discovered, through a proxy of its own.
<Location "/school/api/lessons">
    SetHandler lessons
    LessonsJWTIssuer $ISS/realms/school
    LessonsJWTAudience lessons
    LessonsJWTKeysProxy $disc->{url}
    $CA
</Location>
# No proxy named: straight to the provider, whatever the environment.
<Location "/direct/api/lessons">
    SetHandler lessons
    LessonsJWTKey RS256 ES256 $JWKS?direct
    $CA
</Location>
EOF
my $out = `'@{[ LessonsTest::httpd_bin() ]}' -t -f '$conf' 2>&1`;
like $out, qr/Syntax OK/, 'configtest passes with LessonsJWTKeysProxy' or diag $out;
{
    # Only httpd sees these: the test's own clients go straight.
    local @ENV{qw(http_proxy HTTP_PROXY https_proxy HTTPS_PROXY all_proxy
                  ALL_PROXY)} = ($envp->{url}) x 6;
    local @ENV{qw(no_proxy NO_PROXY)} = ('', '');
    start_httpd($conf, $port);
}
my $B = "http://127.0.0.1:$port";

sub get { call(GET => $_[0], base => $B, token => $_[1]) }
sub error_log { do { local (@ARGV, $/) = ("$dir/error_log"); <> } }
sub eventually {
    my ($status, $path, $token, $limit) = @_;
    my ($res, $end) = (undef, time + $limit);
    do {
        $res = get($path, $token);
        return $res if $res->code == $status;
        sleep 0.25;
    } while (time < $end);
    return $res;
}

# ---- keys through the proxy: 200, and the proxy saw the CONNECTs ------
my $token = idp_token();
my $res = get('/api/lessons', $token);
is $res->code, 200, 'a token verified with keys fetched through the proxy: 200'
    or diag $res->header('WWW-Authenticate') // '', "\n", error_log();
ok fetched('') >= 1, 'the provider served the keys URL (' . fetched('') . ')';
my $counts = proxy_counts($proxy);
ok(($counts->{$TARGET} // 0) >= 1,
   "the proxy counted CONNECT $TARGET (" . ($counts->{$TARGET} // 0) . ')');
is_deeply [ grep { $_ ne $TARGET } keys %$counts ], [],
    '... and nothing but CONNECTs to the provider';
is get('/api/lessons', $token)->code, 200, 'again';

# A new kid: the refetch goes through the proxy too.
sleep $MIN + 0.2;
my $before = proxy_counts($proxy)->{$TARGET} // 0;
control(POST => '/keys', { alg => 'ES256' });
my $ec = idp_token();
is get('/api/lessons', $ec)->code, 200, 'a new ES256 kid, refetched through the proxy: 200';
ok((proxy_counts($proxy)->{$TARGET} // 0) > $before, '... the proxy counted the refetch');

# ---- the named CA is still the only trust -----------------------------
$res = eventually(503, '/untrusted/api/lessons', $token, 5);
is $res->code, 503, 'through the proxy, a provider the named CA did not sign: 503';
like error_log(), qr/\[lessons:error\].*LESSONS00211: keys URL \Q$JWKS\E\?untrusted: .*\(through the proxy \Q$proxy->{url}\E\); no key set yet/,
    '... and the error line names the proxy';
my $log = join '', grep { /untrusted/ } split /^/, error_log();
like $log, qr/certificate|SSL/i, '... and the certificate' or diag $log;

# ---- the proxy down: 503 until a set exists, then 200 ----------------
$res = get('/flaky/api/lessons', $token);
is_problem($res, 503, 'the proxy down before any set');
like $res->header('Retry-After') // '', qr/\A\d+\z/, '... with Retry-After';
ok $res->header('Retry-After') <= 60, '... of at most a minute ('
    . ($res->header('Retry-After') // '') . ')';
like error_log(), qr/LESSONS00211: keys URL \Q$JWKS\E\?flaky: .*\(through the proxy http:\/\/127\.0\.0\.1:$FLAKY\); no key set yet: requests get 503/,
    '... logged, naming the proxy';
is fetched('flaky'), 0, '... and nothing reached the provider';
my $flaky = start_proxy("$dir", 'flaky', port => $FLAKY);
$res = eventually(200, '/flaky/api/lessons', $token, 15);
is $res->code, 200, 'the proxy back: 200'
    or diag join '', grep { /flaky/ } split /^/, error_log();
ok((proxy_counts($flaky)->{$TARGET} // 0) >= 1, '... through it');

# Refusing (403 to CONNECT): the last good set keeps serving.
proxy_refuse($flaky, 1);
my $refused = proxy_total($flaky);
my $end = time + 5 * ($REFRESH + $MIN);
sleep 0.5 while proxy_total($flaky) == $refused && time < $end;
ok proxy_total($flaky) > $refused, 'a refresh met the refusing proxy';
is get('/flaky/api/lessons', $token)->code, 200, '... and the last good set still serves';
ok eval {
    my $until = time + 10;
    sleep 0.25 until error_log() =~ /\[lessons:warn\].*LESSONS00211: keys URL \Q$JWKS\E\?flaky: .*403.*\(through the proxy http:\/\/127\.0\.0\.1:$FLAKY\); the last good key set still serves/
                     || time > $until;
    time <= $until;
}, '... with a warning naming the proxy and its answer';
proxy_refuse($flaky, 0);

# ---- discovery through the proxy --------------------------------------
my $school = idp_token(realm => 'school');
$res = get('/school/api/lessons', $school);
is $res->code, 200, 'a realm token, its keys discovered through a proxy: 200'
    or diag $res->header('WWW-Authenticate') // '';
$counts = proxy_counts($disc);
ok(($counts->{$TARGET} // 0) >= 2,
   'the metadata and the keys went through it (' . ($counts->{$TARGET} // 0)
   . ' CONNECTs)');
is_deeply [ grep { $_ ne $TARGET } keys %$counts ], [], '... and nothing else';

# ---- the environment's proxy: never -----------------------------------
is get('/direct/api/lessons', $token)->code, 200, 'no proxy named: 200';
ok fetched('direct') >= 1, '... fetched straight from the provider';
is proxy_total($envp), 0,
    'nothing went through the proxy https_proxy and all_proxy name in httpd\'s environment';
# That proxy works: it would have counted a fetch sent to it.
my $via = `curl -sS --max-time 20 --cacert $dir/ca.crt --proxy $envp->{url} '$JWKS?sanity' 2>&1`;
like $via, qr/"keys"/, 'the environment\'s proxy relays when asked to';
is proxy_total($envp), 1, '... and counted that one';

done_testing();
