# The server's counters (issue 21): the lessons-metrics handler answers
# the Prometheus text format for the whole server, and mod_status's page
# gets the same figures.  Known traffic is driven and exactly those
# numbers are read back: reads and the response and token caches,
# refusals by reason, writes committed, an eviction, a keys URL's fetch
# failure and an unknown-kid refetch, whether a source's set is held;
# the counters go on across a graceful restart; several processes add
# up; promtool accepts the answer, and the rules and the dashboard the
# package ships name only what it has.
#
# Server M is started here with one process (fetches and caches are
# then exactly countable), server P with three (prefork), both on the
# suite's database.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use JSON::PP ();
use POSIX ();
use Time::HiRes qw(time sleep);
use LessonsTest;
use LessonsTest::IdP qw(start_idp idp_control idp_token);

my $dir  = File::Temp->newdir;
my $JSON = JSON::PP->new->utf8->canonical;
my $mods = $ENV{LESSONS_TEST_HTTPD_MODULES} || '/usr/lib/apache2/modules';

my $idp  = start_idp("$dir");
my $JWKS = $idp->{jwks};
my $dead = free_port();         # nothing listens there
my $DEAD = "https://127.0.0.1:$dead/jwks";

# ---- server M
my $port = free_port();
my $base = "http://127.0.0.1:$port";
sub conf_m {
    my ($cache) = @_;
    return httpd_conf($dir, $port, <<"EOF");
LogLevel info
LoadModule status_module "$mods/mod_status.so"
LoadModule authz_host_module "$mods/mod_authz_host.so"
@{[ one_process_conf(8) ]}LessonsCacheSize $cache
@{[ api_location() ]}
<Location "/claim/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"
    Require jwt-claim role teacher
</Location>
# A provider that answers, with one key; and one that never does.  A
# fetch each at the start, then only when a token asks (kid unknown).
<Location "/idp/api/lessons">
    SetHandler lessons
    LessonsJWTKey RS256 ES256 $JWKS
    LessonsJWTKeysCA "$dir/ca.crt"
    LessonsJWTKeysMinRefresh 1
</Location>
<Location "/dead/api/lessons">
    SetHandler lessons
    LessonsJWTKey RS256 $DEAD
    LessonsJWTKeysCA "$dir/ca.crt"
    LessonsJWTKeysMinRefresh 3600
</Location>
<Location "/metrics">
    SetHandler lessons-metrics
    Require ip 127.0.0.1
</Location>
<Location "/server-status">
    SetHandler server-status
    Require ip 127.0.0.1
</Location>
EOF
}
my $conf = conf_m('16M');
my $pid = start_httpd($conf, $port);

# name{labels} => value, from the handler's answer.
sub parse_metrics {
    my ($text) = @_;
    my %m;
    for (split /\n/, $text) {
        next if /\A#/;
        my ($k, $v) = /\A(\S+) (\S+)\z/ or die "not a sample: $_\n";
        $m{$k} = $v;
    }
    return \%m;
}

# API requests sent to each server.  A request is counted as httpd logs
# it, after its answer has gone out: a client can ask for the metrics
# before the request it just got an answer to is counted, so a reading
# waits until every request sent is (the metrics themselves are not).
my %sent;
sub api {
    my ($method, $path, %o) = @_;
    $sent{ $o{base} // '' }++;
    return call($method => $path, %o);
}

my $last_text = '';
sub metrics {
    my ($at) = @_;
    $at ||= $base;
    my ($m, $counted);
    for (1 .. 100) {
        my $res = call(GET => '/metrics', token => undef, base => $at);
        $res->code == 200 or die "GET /metrics: " . $res->status_line . "\n";
        $last_text = $res->content;
        $m = parse_metrics($res->content);
        $counted = 0;
        $counted += $m->{$_} for grep /\Alessons_requests_total/, keys %$m;
        return $m if $counted == ($sent{$at} // 0);
        sleep 0.1;
    }
    diag "$counted requests counted, " . ($sent{$at} // 0) . " sent";
    return $m;
}
sub src { my ($name, $url) = @_; return $name . qq{\{source="$url"\}} }
sub req { my ($op, $class) = @_; qq{lessons_requests_total{operation="$op",status="$class"}} }
sub refused { qq{lessons_token_refusals_total{reason="$_[0]"}} }
sub writes { qq{lessons_writes_total{operation="$_[0]"}} }

# After - before, for each name given: { name => delta }.
sub deltas {
    my ($before, $after, @names) = @_;
    return { map { $_ => ($after->{$_} // 'absent') - ($before->{$_} // 0) } @names };
}

# Every sample that moved between two readings.
sub moved {
    my ($before, $after) = @_;
    my %d;
    for my $k (keys %$after) {
        next if $k =~ /\A(lessons_keys_age_seconds|lessons_response_cache_(bytes|entries))/;
        my $d = $after->{$k} - ($before->{$k} // 0);
        $d{$k} = $d if $d;
    }
    return \%d;
}

sub wait_for {
    my ($what, $cond) = @_;
    my $t0 = time;
    while (time - $t0 < 60) {
        my $m = metrics();
        return $m if $cond->($m);
        sleep 0.2;
    }
    fail("$what within 60 s");
    diag $last_text;
    return metrics();
}

# ---- the start: each keys URL fetched once
my $m0 = wait_for('the first fetches', sub {
    ($_[0]{src('lessons_keys', $JWKS)} // 0) == 1
        && ($_[0]{src('lessons_keys_fetch_failures_total', $DEAD)} // 0) == 1 });
is $m0->{src('lessons_keys', $JWKS)}, 1, 'keys URL: one key in its set';
cmp_ok $m0->{src('lessons_keys_last_fetch_timestamp_seconds', $JWKS)}, '>', time - 120,
    'keys URL: fetched just now';
cmp_ok $m0->{src('lessons_keys_age_seconds', $JWKS)}, '<', 120, 'keys URL: its age';
is $m0->{src('lessons_keys_fetch_failures_total', $JWKS)}, 0, 'keys URL: no failure';
is $m0->{src('lessons_keys_fetch_failures_total', $DEAD)}, 1,
    'dead keys URL: exactly one failed fetch (one process, one start)';
cmp_ok $m0->{src('lessons_keys_last_fetch_timestamp_seconds', $DEAD)}, '==', 0,
    'dead keys URL: never fetched';
ok !exists $m0->{src('lessons_keys_age_seconds', $DEAD)}, 'dead keys URL: no set, no age';
is $m0->{src('lessons_keys_set_held', $JWKS)}, 1, 'keys URL: a set is held';
cmp_ok $m0->{src('lessons_keys_set_installed_timestamp_seconds', $JWKS)}, '>', time - 120,
    'keys URL: installed just now';
cmp_ok $m0->{src('lessons_keys_set_installed_timestamp_seconds', $JWKS)}, '<=',
    $m0->{src('lessons_keys_last_fetch_timestamp_seconds', $JWKS)} + 1,
    'keys URL: installed by its good fetch';
is $m0->{src('lessons_keys_set_held', $DEAD)}, 0, 'dead keys URL: no set held';
cmp_ok $m0->{src('lessons_keys_set_installed_timestamp_seconds', $DEAD)}, '==', 0,
    'dead keys URL: none installed';
is $m0->{lessons_processes}, 1, 'one process counting';
is $m0->{req('get', '2xx')}, 0, 'no API request yet';

# ---- reads
my $tok = good_token();
my $lesson = { levelId => 1, title => 'Metrik', topic => 'Zahlen', description => 'Zählen', order => 1 };
my $res = api(POST => '/api/lessons', token => $tok, base => $base, json => $lesson);
is $res->code, 201, 'a lesson to read';
my $id = (json_of($res) // {})->{id} // 0;
my $m1 = metrics();
for (1 .. 5) {
    is api(GET => "/api/lessons/$id", token => $tok, base => $base)->code, 200, "read $_";
}
my $m2 = metrics();
is_deeply moved($m1, $m2), {
    req('get', '2xx') => 5,
    lessons_response_cache_misses_total => 1,
    lessons_response_cache_hits_total => 4,
    lessons_token_cache_hits_total => 5,
    # One after the other, each read sends its own version read (no
    # LessonsDBLease here).
    'lessons_catalog_versions_total{source="statement"}' => 5,
}, '5 reads of one lesson: 1 built, 4 from the cache; the token from the cache'
    or diag explain moved($m1, $m2);
is $m1->{lessons_token_cache_misses_total}, 1, 'the token verified once, on the first call';
is $m1->{writes('create')}, 1, 'the create counted as a write';
cmp_ok $m2->{lessons_response_cache_bytes}, '>', $m1->{lessons_response_cache_bytes},
    'the cache holds more bytes';
is $m2->{lessons_response_cache_entries}, $m1->{lessons_response_cache_entries} + 1,
    '... one entry more';

# ---- refusals: one of each kind, each counted once
my $expired = good_token(claims => { exp => time - 60 });
my $forged  = token(key => 'x' x 32);
is api(GET => '/api/lessons', token => undef, base => $base)->code, 401, 'no token';
is api(GET => '/api/lessons', token => $expired, base => $base)->code, 401, 'expired';
is api(GET => '/api/lessons', auth => 'Bearer a b', base => $base)->code, 400, 'two tokens';
is api(GET => '/api/lessons', token => $forged, base => $base)->code, 401, 'forged';
is api(GET => '/claim/api/lessons', token => $tok, base => $base)->code, 403,
    'Require jwt-claim refuses';
my $m3 = metrics();
is_deeply moved($m2, $m3), {
    req('list', '4xx') => 5,
    refused('no_token') => 1,
    refused('expired') => 1,
    refused('bad_header') => 1,
    refused('signature') => 1,
    refused('insufficient_scope') => 1,
    lessons_token_cache_misses_total => 2,      # expired, forged
    lessons_token_cache_hits_total => 2,        # the 403's good token, and
                                                # its claims for Require
}, 'refusals by reason'
    or diag explain moved($m2, $m3);

# ---- writes: committed ones count, refused ones do not
$res = api(POST => '/api/lessons', token => $tok, base => $base, json => $lesson);
is $res->code, 201, 'create';
my $new = json_of($res) // {};
is api(PUT => "/api/lessons/$new->{id}", token => $tok, base => $base,
        json => { %$lesson, title => 'Metrik 2' })->code, 200, 'update';
is api(PUT => "/api/lessons/$new->{id}", token => $tok, base => $base,
        json => $lesson, headers => [ 'If-Match' => '"stale"' ])->code, 412,
    'update with a stale If-Match: 412';
is api(POST => '/api/lessons', token => $tok, base => $base, json => { title => '' })->code,
    400, 'create with a bad body: 400';
is api(DELETE => "/api/lessons/$new->{id}", token => $tok, base => $base)->code, 204, 'delete';
is api(GET => '/api/lessons/abc', token => $tok, base => $base)->code, 404, 'no such resource';
my $m4 = metrics();
is_deeply moved($m3, $m4), {
    req('create', '2xx') => 1,
    req('create', '4xx') => 1,
    req('update', '2xx') => 1,
    req('update', '4xx') => 1,
    req('delete', '2xx') => 1,
    req('other', '4xx') => 1,
    writes('create') => 1,
    writes('update') => 1,
    writes('delete') => 1,
    lessons_token_cache_hits_total => 6,
}, 'three writes committed, two refused'
    or diag explain moved($m3, $m4);

# ---- Idempotency-Key: a retry given the first answer wrote nothing
my @key = (headers => [ 'Idempotency-Key' => '"metrics-key-1"' ]);
my $m4k = metrics();
$res = api(POST => '/api/lessons', token => $tok, base => $base, json => $lesson, @key);
is $res->code, 201, 'a create with a key';
my $kept_id = (json_of($res) // {})->{id};
$res = api(POST => '/api/lessons', token => $tok, base => $base, json => $lesson, @key);
is $res->code, 201, 'its retry: 201';
is $res->header('Idempotent-Replayed'), 'true', '... the first answer again';
is api(POST => '/api/lessons', token => $tok, base => $base,
        json => { %$lesson, title => 'Anders' }, @key)->code, 422, 'the key with another body: 422';
is api(POST => '/api/lessons', token => $tok, base => $base, json => $lesson,
        headers => [ 'Idempotency-Key' => 'not quoted' ])->code, 400, 'not a key: 400';
my $m4i = metrics();
is_deeply moved($m4k, $m4i), {
    req('create', '2xx') => 2,
    req('create', '4xx') => 2,
    writes('create') => 1,
    qq{lessons_idempotency_keys_total{outcome="stored"}} => 1,
    qq{lessons_idempotency_keys_total{outcome="replayed"}} => 1,
    qq{lessons_idempotency_keys_total{outcome="reused"}} => 1,
    qq{lessons_idempotency_keys_total{outcome="refused"}} => 1,
    lessons_token_cache_hits_total => 7,    # 4, and the caller's claims
                                            # of the 3 with a good key
}, 'keys by outcome; the replay is no write'
    or diag explain moved($m4k, $m4i);
api(DELETE => "/api/lessons/$kept_id", token => $tok, base => $base);
$m4 = metrics();

# ---- a token naming a kid the provider's set lacks: one refetch
sleep 1.2;                          # LessonsJWTKeysMinRefresh 1
idp_control($idp, POST => '/token-header', { kid => 'not-there' });
my $stranger = idp_token($idp);
idp_control($idp, POST => '/token-header', {});
is api(GET => '/idp/api/lessons', token => $stranger, base => $base)->code, 401,
    'unknown kid: 401 after the refetch';
is api(GET => '/idp/api/lessons', token => idp_token($idp), base => $base)->code, 200,
    'the provider\'s own token: 200';
my $m5 = metrics();
is $m5->{src('lessons_keys_refetches_total', $JWKS)} - $m4->{src('lessons_keys_refetches_total', $JWKS)}, 1,
    'one refetch, for the unknown kid';
is $m5->{refused('unknown_kid')} - $m4->{refused('unknown_kid')}, 1, 'refused as unknown_kid';
is $m5->{src('lessons_keys_fetch_failures_total', $JWKS)}, 0, 'no failure there';
is $m5->{src('lessons_keys_fetch_failures_total', $DEAD)}, 1,
    'the dead URL is not fetched again within its interval';
cmp_ok $m5->{src('lessons_keys_last_fetch_timestamp_seconds', $JWKS)}, '>',
    $m4->{src('lessons_keys_last_fetch_timestamp_seconds', $JWKS)},
    'the refetch is the last good fetch now';
is $m5->{req('list', '2xx')} - $m4->{req('list', '2xx')}, 1, '... and the 200 counted';

# ---- the cache bound: three lessons of one size, room for two
my @ids;
for my $t ('Metrik A', 'Metrik B', 'Metrik C') {
    $res = api(POST => '/api/lessons', token => $tok, base => $base,
                json => { %$lesson, title => $t });
    push @ids, (json_of($res) // {})->{id};
}
my $before = metrics();
api(GET => "/api/lessons/$ids[0]", token => $tok, base => $base);
my $size = metrics()->{lessons_response_cache_bytes} - $before->{lessons_response_cache_bytes};
cmp_ok $size, '>', 100, "one lesson's entry: $size bytes";

# A graceful restart with room for two such entries: the counters go on.
my $started = $before->{lessons_metrics_start_time_seconds};
my $kept = metrics();
conf_m(int(2.5 * $size));            # the same file, rewritten
system(LessonsTest::httpd_bin(), '-f', $conf, '-k', 'graceful') == 0 or die "graceful failed\n";
my $m6 = wait_for('the new generation', sub { !$_[0]{lessons_response_cache_entries}
                                                && $_[0]{lessons_processes} == 1 });
is $m6->{lessons_metrics_start_time_seconds}, $started, 'a graceful restart: counting goes on';
cmp_ok $m6->{req('get', '2xx')}, '>=', $kept->{req('get', '2xx')}, '... the counts kept';
cmp_ok $m6->{lessons_response_cache_hits_total}, '>=', $kept->{lessons_response_cache_hits_total},
    '... the cache counts kept';
is $m6->{lessons_response_cache_bytes}, 0, "the old process's cache is gone from the gauge";
for my $i (@ids) {
    is api(GET => "/api/lessons/$i", token => $tok, base => $base)->code, 200, "read $i";
}
my $m7 = metrics();
is $m7->{lessons_response_cache_evictions_total} - $m6->{lessons_response_cache_evictions_total}, 1,
    'the third lesson evicted the first';
is $m7->{lessons_response_cache_entries}, 2, 'two entries held';
cmp_ok $m7->{lessons_response_cache_bytes}, '<=', int(2.5 * $size), 'within LessonsCacheSize';
is $m7->{lessons_response_cache_misses_total} - $m6->{lessons_response_cache_misses_total}, 3,
    'three built';

# ---- the format, as Prometheus reads it
like $last_text, qr/^# TYPE lessons_requests_total counter$/m, 'TYPE lines';
open my $mfh, '>', "$dir/metrics.txt" or die $!;
print $mfh $last_text;
close $mfh;
SKIP: {
    my $promtool = $ENV{LESSONS_TEST_PROMTOOL};
    skip 'promtool not found: make promtool-deps (make test does)', 1
        unless $promtool && -x $promtool;
    my $out = `'$promtool' check metrics < '$dir/metrics.txt' 2>&1`;
    is $?, 0, 'promtool check metrics: no problem' or diag $out;
}
# The alerting rules, their tests and the dashboard the package ships
# name only series and label values this answer has (the lease's gauges
# are there only with LessonsDBLease).  The key sources' series have a
# sample only once a process has taken the source up, and the age only
# while one holds a set: a CI run scraped the answer just after the
# graceful restart above, before either.  So the answer checked is one
# that has them (make test's monitor step checks them too, against an
# exposition that always has them).
for (1 .. 100) {
    my $res = call(GET => '/metrics', token => undef, base => $base);
    if ($res->code == 200 && $res->content =~ /^lessons_keys_age_seconds\{/m) {
        $last_text = $res->content;
        last;
    }
    sleep 0.2;
}
open my $dfh, '>', "$dir/metrics-drift.txt" or die $!;
print $dfh $last_text;
close $dfh;
my $check = "$FindBin::Bin/../promtool/check.pl";
my $drift = `'$check' --drift --absent lessons_db_lease_ '$dir/metrics-drift.txt' 2>&1`;
is $?, 0, 'the shipped rules and dashboard name only what the server exports'
    or diag $drift;
$res = call(GET => '/metrics', token => undef, base => $base);
is $res->header('Content-Type'), 'text/plain; version=0.0.4; charset=utf-8', 'text format 0.0.4';
is $res->header('Cache-Control'), 'no-store', 'no-store';
$res = call(POST => '/metrics', token => undef, base => $base, json => {});
is $res->code, 405, 'POST: 405';
is $res->header('Allow'), 'GET, HEAD', '... with Allow';

# ---- mod_status: the same figures
my $m8 = metrics();
my $all = 0;
$all += $m8->{$_} for grep /\Alessons_requests_total/, keys %$m8;
$res = call(GET => '/server-status?auto', token => undef, base => $base);
is $res->code, 200, 'server-status?auto';
like $res->content, qr/^LessonsRequests: $all$/m, "?auto: LessonsRequests $all, as the metrics";
like $res->content, qr/^LessonsCacheHits: $m8->{lessons_response_cache_hits_total}$/m, '?auto: cache hits';
like $res->content, qr/^LessonsWrites: @{[ $m8->{writes('create')} + $m8->{writes('update')} + $m8->{writes('delete')} ]}$/m,
    '?auto: writes';
$res = call(GET => '/server-status', token => undef, base => $base);
like $res->content, qr{<h2>mod_lessons</h2>}, 'server-status: a section of ours';
like $res->content, qr{<th align="left">LessonsRequests</th><td>$all</td>}, '... with the figures';

api(DELETE => "/api/lessons/$_", token => $tok, base => $base) for @ids;

# ---- server P: three processes, one sum
my $pdir  = File::Temp->newdir;
my $pport = free_port();
my $pconf = httpd_conf("$pdir", $pport, <<"EOF", mpm => 'prefork');
StartServers 3
MinSpareServers 3
MaxSpareServers 3
ServerLimit 3
MaxRequestWorkers 3
LogFormat "%P %>s" pidfmt
CustomLog "$pdir/access_log" pidfmt
@{[ api_location() ]}
<Location "/metrics">
    SetHandler lessons-metrics
</Location>
EOF
start_httpd($pconf, $pport);
my $pbase = "http://127.0.0.1:$pport";
wait_for_processes($pbase, 3);
my @kids;
for my $c (1 .. 6) {
    my $kid = fork // die "fork: $!";
    if (!$kid) {
        my $ok = 0;
        for (1 .. 5) {
            $ok++ if api(GET => "/api/lessons/$id", token => $tok, base => $pbase)->code == 200;
        }
        POSIX::_exit($ok == 5 ? 0 : 1);
    }
    push @kids, $kid;
}
my $bad = 0;
for (@kids) { waitpid $_, 0; $bad++ if $? }
is $bad, 0, '6 clients, 5 reads each: all 200';
$sent{$pbase} = 30;                     # what the six clients sent
my $mp = metrics($pbase);
is $mp->{req('get', '2xx')}, 30, '30 reads counted, whichever process served them';
is $mp->{lessons_processes}, 3, 'three processes counting';
my %pids;
if (open my $fh, '<', "$pdir/access_log") {
    while (<$fh>) { $pids{$1}++ if /\A(\d+) 200/ }
}
cmp_ok scalar(keys %pids), '>=', 2, 'served by ' . scalar(keys %pids) . ' processes';
is $mp->{lessons_token_cache_hits_total} + $mp->{lessons_token_cache_misses_total}, 30,
    'every request looked its token up once';
cmp_ok $mp->{lessons_token_cache_misses_total}, '<=', 3, 'verified at most once per process';

api(DELETE => "/api/lessons/$id", token => $tok, base => $base);
done_testing();

sub wait_for_processes {
    my ($at, $n) = @_;
    my $t0 = time;
    while (time - $t0 < 60) {
        return if (metrics($at)->{lessons_processes} // 0) == $n;
        sleep 0.2;
    }
    fail("$n processes within 60 s");
}
