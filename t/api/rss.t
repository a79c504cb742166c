# Memory stays flat (issue 18): one Apache child (the event MPM with one
# process) answers 200,000 requests after a warm-up, of every kind in
# turn (t/api/rss.lua): reads of each route, 304 revalidations, 412s,
# writes, refusals (no token, a bad token, a bad body, a missing
# lesson), CORS preflights and CORS reads, and tokens with a kid the key
# set lacks, each of which may make the module ask its keys URL again
# (here one that never answers: the key file beside it serves).  Then
# 200,000 more: the child's resident size grows by less than 2% over
# them.  A leak grows with each run alike; what a child takes once
# (malloc's arenas filling, its threads' first stacks, the cache) comes
# in the first run and not in the second, which Debian 13's glibc once
# took past 2% (+2.08%).  No answer is a 5xx.  Skipped under the sanitizers
# (AddressSanitizer keeps freed memory in quarantine on purpose).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp qw(tempdir);
use Time::HiRes qw(sleep);
use LessonsTest;

plan skip_all => 'under the sanitizers: their quarantine keeps freed memory'
    if $ENV{LESSONS_TEST_SANITIZE};
plan skip_all => 'wrk not installed (t/tools/deps.sh test installs it)'
    unless grep { -x "$_/wrk" } split /:/, $ENV{PATH};

my $WARM  = $ENV{LESSONS_RSS_WARM} || 20_000;
my $COUNT = $ENV{LESSONS_RSS_COUNT} || 200_000;

my ($id, $wid) = seed(
    { level_id => 3, title => 'Gelesen', sort_order => 1 },
    { level_id => 1, title => 'Geschrieben', sort_order => 2 },
);
my $dir = tempdir(DIR => $ENV{LESSONS_TEST_TMPDIR} || '/tmp', CLEANUP => 1);
my $port = free_port();
my $conf = httpd_conf($dir, $port, <<"EOF");
StartServers 1
ServerLimit 1
ThreadsPerChild 16
ThreadLimit 16
MaxRequestWorkers 16
MinSpareThreads 1
MaxSpareThreads 32
MaxConnectionsPerChild 0
KeepAlive On
MaxKeepAliveRequests 0
LogLevel crit
<Location "/api/lessons">
    SetHandler lessons
    LessonsJWTAlgorithm RS256
    LessonsJWTKeyFile "$ENV{LESSONS_TEST_RSA_PUB}"
    LessonsJWTKeysURL https://127.0.0.1:1/jwks
    LessonsJWTKeysMinRefresh 1
    LessonsCORSOrigins https://app.example.org
</Location>
EOF
my $ppid = start_httpd($conf, $port);

my @kids = child_pids($ppid);
is scalar @kids, 1, 'one child process';
my $child = $kids[0];

sub rss_kb {
    open my $fh, '<', "/proc/$child/status" or return 0;
    while (<$fh>) { return $1 if /^VmRSS:\s+(\d+)/ }
    return 0;
}

my $rs  = token(alg => 'RS256');
my $kid = token(alg => 'RS256', header => { kid => 'rotated-away' });
my $res = call(GET => "/api/lessons/$id");
my $etag = $res->header('ETag') // '';

# wrk for about $secs seconds; the requests it made and the 5xx among them.
sub drive {
    my ($secs) = @_;
    local $ENV{RSS_TOKEN} = $rs;
    local $ENV{RSS_KID_TOKEN} = $kid;
    local $ENV{RSS_ID} = $id;
    local $ENV{RSS_TAG} = $etag;
    local $ENV{RSS_WID} = $wid;
    my $out = `wrk -t2 -c8 -d${secs}s -s '$FindBin::Bin/rss.lua' http://127.0.0.1:$port/ 2>&1`;
    my ($n) = $out =~ /(\d+) requests in/;
    my ($e) = $out =~ /^5xx (\d+)/m;
    die "wrk failed:\n$out" unless defined $n && defined $e;
    return ($n, $e);
}

my ($n, $errors) = (0, 0);
while ($n < $WARM) {
    my ($k, $e) = drive(3);
    $n += $k;
    $errors += $e;
}
my $warm = rss_kb();
# $COUNT requests or more; the resident size after them.
sub run_count {
    my $total = 0;
    while ($total < $COUNT) {
        my ($k, $e) = drive(5);
        $total += $k;
        $errors += $e;
    }
    return ($total, rss_kb());
}
my ($first, $mid) = run_count();
my ($second, $end) = run_count();
ok kill(0, $child), 'the same child answered throughout';
my $growth = $mid ? 100 * ($end - $mid) / $mid : 100;
diag sprintf '%s: child %d: %d KiB after %d warm-up requests, %d KiB after %d more (%+.2f%%), %d KiB after %d more: %+.2f%%',
    LessonsTest::db_driver(), $child, $warm, $n, $mid, $first,
    $warm ? 100 * ($mid - $warm) / $warm : 100, $end, $second, $growth;
cmp_ok $first, '>=', $COUNT, "$COUNT requests after the warm-up";
cmp_ok $second, '>=', $COUNT, "$COUNT requests more";
cmp_ok $growth, '<', 2, 'resident size grew by less than 2% over the second run';
is $errors, 0, 'no answer was a 5xx';
is db_rows('SELECT title FROM lessons WHERE id = ' . ($id + 0))->[0]{title}, 'Gelesen',
    'the lesson only read is unchanged';

done_testing;
