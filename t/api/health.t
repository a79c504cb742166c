# The lessons-health handler (issues 9 and 23): no token, 200 "pass"
# while the database answers, 503 "fail" when it does not (down, or no
# schema), within the time bound.  It answers the status and nothing
# more: no catalog version, which would let anyone watch writes.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use JSON::PP ();
use Time::HiRes qw(time);
use LessonsTest;

my $JSON = JSON::PP->new->utf8;

my $res = call(GET => '/health', token => undef);
is $res->code, 200, 'healthy: 200 without a token';
is $res->header('Content-Type'), 'application/health+json', 'application/health+json';
is $res->header('Cache-Control'), 'no-store', 'no-store';
my $doc = eval { $JSON->decode($res->content) } || {};
is $doc->{status}, 'pass', 'status pass';
is_deeply [ sort keys %$doc ], ['status'], 'the status and nothing more'
    or diag $res->content;
unlike $res->content, qr/observedValue/,
    'no catalog version in the answer';
ok !defined $res->header('ETag'), 'no ETag';

# A write changes nothing the health check says: it cannot be used to
# watch the catalogue.
my $before = $res->content;
is call(POST => '/api/lessons', json => { levelId => 1, title => 'Gesund', order => 1 })->code,
    201, 'a create';
$res = call(GET => '/health', token => undef);
is $res->content, $before, 'after a write: the same bytes';

is call(HEAD => '/health', token => undef)->code, 200, 'HEAD: 200';
$res = call(POST => '/health', token => undef, json => {});
is $res->code, 405, 'POST: 405';
is $res->header('Allow'), 'GET, HEAD', '... with Allow';
# TRACE would echo the request (Authorization included) with TraceEnable on
$res = call(TRACE => '/health', token => undef,
            headers => [ Authorization => 'Bearer secret-looking' ]);
is $res->code, 405, 'TRACE: 405, not httpd\'s echo';
unlike $res->content, qr/secret-looking/, '... nothing echoed';

for my $vhost (qw(lessons_down lessons_noschema)) {
    my $t0 = time;
    $res = call(GET => '/health', vhost => $vhost, token => undef);
    my $took = time - $t0;
    is $res->code, 503, "$vhost: 503";
    ok defined $res->header('Retry-After'), "$vhost: Retry-After";
    $doc = eval { $JSON->decode($res->content) } || {};
    is $doc->{status}, 'fail', "$vhost: status fail";
    is_deeply [ sort keys %$doc ], ['status'], "$vhost: the status and nothing more";
    unlike $res->content, qr/sqlite|pgsql|such table|connect|\//i,
        "$vhost: no driver text or path in the answer";
    cmp_ok $took, '<', 50, "$vhost: answered within the bound (${took}s)";
}

# A database that reads but cannot be written (issue 57, section 3):
# warn, 200 (GETs are served; every write is 503), logged; pass again
# once it can be written.
SKIP: {
    skip 'the read-only file case is SQLite\'s', 5
        unless LessonsTest::db_driver() eq 'sqlite3';
    my $db = LessonsTest::db_name();
    my $mode = (stat $db)[2] & 07777;
    my $size = LessonsTest::suite_log_size();
    chmod 0444, $db or die "chmod $db: $!";
    $res = call(GET => '/health', token => undef);
    my $log = LessonsTest::suite_log_since($size);
    chmod $mode, $db;
    is $res->code, 200, 'a database that cannot be written: 200';
    $doc = eval { $JSON->decode($res->content) } || {};
    is $doc->{status}, 'warn', '... status warn' or diag $res->content;
    like $log, qr/LESSONS00512: SQLite database \S+ reads but cannot be written \(the server's user lacks read and write permission/,
        '... logged with why';
    $res = call(GET => '/health', token => undef);
    is $res->code, 200, 'writable again: 200';
    $doc = eval { $JSON->decode($res->content) } || {};
    is $doc->{status}, 'pass', '... status pass';
}

done_testing();
