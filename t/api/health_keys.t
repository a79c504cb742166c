# The health check and the key sets (issue 42, "Health tells the
# truth"; issue 57, "from the first second"): where a section surely
# takes its keys from a keys URL or an issuer whose fetches have not
# given a usable set, every request it gates waits or gets 503, and the
# health check, which a load balancer reads, fails from the start.
# Against the test provider (t/idp/idp.js) over TLS with a test CA:
#
#   - the first fetch still in flight (the provider slow): the health
#     check answers at once, 503: no set serves yet;
#   - an issuer alone in its section, whose keys are discovered: fetched
#     at the start, before any request needs them; its set refused,
#     the check fails naming it;
#   - the provider's set has nothing to verify with (every key marked
#     "use": "enc"): 503 {"status":"fail"} with Retry-After, nothing
#     more in the body, one log line for it however many health
#     requests and failed fetches follow; the metrics say no set is held;
#   - the provider fixed (both): 200 after the next fetch, one log line
#     each, and the metrics say a set is held, since when;
#   - an issuer beside another section's key (it only names the iss to
#     check), on a port where nothing listens, is never asked and never
#     fails the check; nor does a keys URL there with a key file beside
#     it (the file's keys serve its requests meanwhile).
#
# Server B is started here: one process, so that what it logs is its
# one process's, on the suite's database.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use JSON::PP ();
use Time::HiRes qw(time sleep);
use LessonsTest;
use LessonsTest::IdP qw(start_idp idp_control);

my $dir  = File::Temp->newdir;
my $JSON = JSON::PP->new->utf8->canonical;
my $DELAY_MS = 6000;    # the first fetch's answer waits this long (the
                        # fetch's own limit is 10 s)

# ---- the provider; its set as it is, and with every key for encryption
my $idp  = start_idp("$dir");
my $JWKS = $idp->{jwks};
my $ALONE = "$idp->{iss}/realms/alone";
sub control { idp_control($idp, @_) }
control(POST => '/realms', { name => 'alone' });
sub idp_token { LessonsTest::IdP::idp_token($idp) }
my $real = $JSON->decode(scalar `curl -sS --max-time 20 --cacert $dir/ca.crt $JWKS`);
ok @{ $real->{keys} || [] } >= 1, 'the provider publishes a key';
my $enc = $JSON->encode({ keys => [ map { { %$_, use => 'enc' } } @{ $real->{keys} } ] });
control(POST => '/jwks-fault', { body => $enc, delay_ms => $DELAY_MS });
# The same for the realm "alone": its keys are discovered from its issuer.
my $alone = $JSON->decode(scalar `curl -sS --max-time 20 --cacert $dir/ca.crt $ALONE/jwks`);
control(POST => '/jwks-fault?realm=alone',
        { body => $JSON->encode({ keys => [ map { { %$_, use => 'enc' } } @{ $alone->{keys} } ] }) });
control(POST => '/reset-count?realm=alone');       # the curl above

# ---- server B
my $port = free_port();
my $dead = free_port();         # nothing listens there
my $conf = httpd_conf($dir, $port, <<"EOF");
LogLevel info
@{[ one_process_conf() ]}<Location "/api/lessons">
    SetHandler lessons
    LessonsJWTKey RS256 $JWKS
    LessonsJWTKeysCA "$dir/ca.crt"
    LessonsJWTKeysMinRefresh 1
</Location>
# An issuer that only names the iss to check beside this key: its keys
# are fetched when a token needs them, which none does here.
<Location "/lazy/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"
</Location>
<LocationMatch "^/lazy/api/lessons/level/">
    LessonsJWTIssuer https://127.0.0.1:$dead
    LessonsJWTKeysCA "$dir/ca.crt"
</LocationMatch>
# A keys URL where nothing listens, with a key file beside it that
# serves meanwhile: its requests are answered, so it fails nothing.
<Location "/fallback/api/lessons">
    SetHandler lessons
    LessonsJWTAlgorithm RS256
    LessonsJWTKeyFile "$ENV{LESSONS_TEST_RSA_PUB}"
    LessonsJWTKeysURL https://127.0.0.1:$dead/fallback-jwks
    LessonsJWTKeysCA "$dir/ca.crt"
    LessonsJWTKeysMinRefresh 1
</Location>
# An issuer alone, whose keys are discovered: fetched at the start.
<Location "/alone/api/lessons">
    SetHandler lessons
    LessonsJWTIssuer $ALONE
    LessonsJWTKeysCA "$dir/ca.crt"
    LessonsJWTKeysMinRefresh 1
</Location>
<Location "/health">
    SetHandler lessons-health
</Location>
<Location "/metrics">
    SetHandler lessons-metrics
</Location>
EOF
start_httpd($conf, $port);
my $B = "http://127.0.0.1:$port";

sub get { call(GET => $_[0], base => $B, token => $_[1]) }
sub health { get('/health') }
sub error_log { do { local (@ARGV, $/) = ("$dir/error_log"); <> } }
sub count_of { my ($re) = @_; my @n = error_log() =~ /$re/g; scalar @n }
my $FAILS   = qr/LESSONS00230: the health check fails: keys URL \Q$JWKS\E has no usable key set[^\n]*/;
my $PASSES  = qr/LESSONS00231: the health check no longer fails for keys URL \Q$JWKS\E[^\n]*/;
my $REFUSED = qr/LESSONS00211: keys URL \Q$JWKS\E: [^\n]*/;

# name{labels} => value.
sub metrics {
    my $res = get('/metrics');
    $res->code == 200 or die 'GET /metrics: ' . $res->status_line . "\n";
    my %m;
    for (split /\n/, $res->content) {
        next if /\A#/;
        my ($k, $v) = /\A(\S+) (\S+)\z/ or die "not a sample: $_\n";
        $m{$k} = $v;
    }
    return \%m;
}
sub src { my ($name, $url) = @_; return $name . qq{\{source="$url"\}} }
my $HELD = src('lessons_keys_set_held', $JWKS);
my $SINCE = src('lessons_keys_set_installed_timestamp_seconds', $JWKS);

# Poll until the health check answers this status (bounded); the last
# answer.
sub health_until {
    my ($status, $limit) = @_;
    my $res;
    my $end = time + $limit;
    do {
        $res = health();
        return $res if $res->code == $status;
        sleep 0.2;
    } while (time < $end);
    return $res;
}

sub is_fail {
    my ($res, $what) = @_;
    is $res->code, 503, "$what: 503";
    ok defined $res->header('Retry-After'), "$what: Retry-After";
    is $res->header('Content-Type'), 'application/health+json',
        "$what: application/health+json";
    my $doc = eval { $JSON->decode($res->content) } || {};
    is_deeply $doc, { status => 'fail' }, "$what: {\"status\":\"fail\"} and nothing more"
        or diag $res->content;
    unlike $res->content, qr/127\.0\.0\.1|jwks|enc|key/i,
        "$what: no URL or reason in the body";
}

# ---- the first fetch in flight: answered at once, 503 -----------------
my $t0 = time;
my $res = health();
my $took = time - $t0;
cmp_ok $took, '<', $DELAY_MS / 2000,
    "while the first fetch waits on the provider: answered at once (${took}s)";
# The fetcher logs its refusal before the fetch counts as ended: no line
# yet means the check saw the first fetch in flight.
SKIP: {
    skip 'the first fetch had ended already (a slow start)', 3
        if count_of($REFUSED);
    is_fail($res, 'the first fetch has not ended: no set serves yet');
    is metrics()->{$HELD}, 0, '... and the metrics say no set is held yet';
    is count_of(qr/LESSONS00230: [^\n]*\Q$JWKS\E/), 0,
        '... and nothing logged for it: it is under way';
}

# ---- the issuer alone: fetched at the start, its set refused ----------
my $ALONE_FAILS = qr/LESSONS00230: the health check fails: issuer \Q$ALONE\E has no usable key set[^\n]*verify with/;
$t0 = time;
sleep 0.2 while time - $t0 < 20 && !count_of($ALONE_FAILS) && health();
ok control(GET => '/state?realm=alone')->{jwks_requests} >= 1,
    'an issuer alone: its keys fetched at the start, before any request needs them';
is_fail(health(), 'the issuer alone, its set refused');
is count_of($ALONE_FAILS), 1, 'one log line naming the issuer and why' or diag error_log();
is get('/alone/api/lessons', idp_token())->code, 503,
    'a request that needs the issuer\'s keys: 503 (its set has nothing to verify with)';

# ---- a set with nothing to verify with: 503 ---------------------------
control(POST => '/jwks-fault', { body => $enc });     # no delay now
$t0 = time;
sleep 0.2 while time - $t0 < 30 && !count_of($FAILS) && health();
$res = health_until(503, 30);
is_fail($res, 'every key "use": "enc"');
like error_log(), $REFUSED, 'the fetcher refused the set';
is get('/api/lessons', idp_token())->code, 503, 'the API answers 503 too';

# Many health requests while the fetcher retries (every second) and
# fails again: one line, not one per request or per fetch.
my $refused = count_of($REFUSED);
my ($n, @codes) = (0);
my $end = time + 30;
while (time < $end && count_of($REFUSED) < $refused + 2) {
    push @codes, health()->code;
    sleep 0.1;
}
push @codes, health()->code for 1 .. 20;
cmp_ok count_of($REFUSED), '>=', $refused + 2, 'the fetcher failed again, twice';
is_deeply [ grep { $_ != 503 } @codes ], [], scalar(@codes) . ' more health requests: all 503';
is count_of($FAILS), 1, 'one log line for it' or diag error_log();
like error_log(), qr/$FAILS\(the key set was refused: [^\n]*verify with/,
    '... naming the source and the last error';
like error_log(), qr/\[lessons:error\][^\n]*LESSONS00230/, '... at level error';
is count_of(qr/LESSONS00230/), 2,
    'no line for the issuer beside a key, nor the keys URL with a key file (the two: the issuer alone, the keys URL)'
    or diag join "\n", error_log() =~ /(LESSONS0023\d[^\n]*)/g;
is get('/fallback/api/lessons', token(alg => 'RS256'))->code, 200,
    'the key file serves beside its dead keys URL';
like error_log(), qr/LESSONS00211: keys URL https:\/\/127\.0\.0\.1:$dead\/fallback-jwks: /,
    '... whose fetch failed';
my $m = metrics();
is $m->{$HELD}, 0, 'metrics: no set held';
cmp_ok $m->{$SINCE}, '==', 0, 'metrics: installed never';

# ---- the provider fixed: 200 after the next fetch ----------------------
my $fixed = time;
control(POST => '/jwks-fault', {});
control(POST => '/jwks-fault?realm=alone', {});
$res = health_until(200, 30);
is $res->code, 200, 'the provider fixed: 200'
    or diag join "\n", error_log() =~ /(LESSONS002[0-9]\d[^\n]*)/g;
is_deeply eval { $JSON->decode($res->content) } || {}, { status => 'pass' },
    '... {"status":"pass"}';
is health()->code, 200, '... and again';
is get('/api/lessons', idp_token())->code, 200, 'the API answers 200 too';
is count_of($PASSES), 1, 'one log line: it no longer fails' or diag error_log();
is count_of(qr/LESSONS00231: the health check no longer fails for issuer \Q$ALONE\E/), 1,
    '... and one for the issuer alone';
is get('/alone/api/lessons', LessonsTest::IdP::idp_token($idp, realm => 'alone'))->code, 200,
    'the issuer alone serves its own tokens too';
is count_of($FAILS), 1, '... and no new failure line';
$m = metrics();
is $m->{$HELD}, 1, 'metrics: a set is held';
cmp_ok $m->{$SINCE}, '>=', int($fixed) - 1, 'metrics: installed after the fix';
cmp_ok $m->{$SINCE}, '<=', time + 1, '... not in the future';
ok !defined $m->{src('lessons_keys_set_held', "https://127.0.0.1:$dead")}
    || $m->{src('lessons_keys_set_held', "https://127.0.0.1:$dead")} == 0,
    'the issuer beside a key: no set held, and the check passes all the same';
is $m->{src('lessons_keys_set_held', "https://127.0.0.1:$dead/fallback-jwks")}, 0,
    'the keys URL beside a key file: no set held, and the check passes all the same';

done_testing();
