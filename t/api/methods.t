# Routing: which methods each route allows (405 + Allow), OPTIONS,
# unknown paths and non-integer ids (404 problem), trailing slashes; and
# the methods of the health check and the metrics (GET and HEAD).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use LessonsTest;

my @ids = seed(
    { level_id => 1, title => 'Das Alphabet', sort_order => 1 },
    { level_id => 4, title => 'Konnektoren', sort_order => 1 },
);
my $id = $ids[0];
my $before = db_lessons();

my $COLLECTION = 'GET, HEAD, POST, OPTIONS';
my $ITEM       = 'GET, HEAD, PUT, DELETE, OPTIONS';
my $LIST       = 'GET, HEAD, OPTIONS';

my %routes = (
    '/api/lessons'             => $COLLECTION,
    '/api/lessons/'            => $COLLECTION,
    "/api/lessons/$id"         => $ITEM,
    "/api/lessons/$id/"        => $ITEM,
    '/api/lessons/beginner'    => $LIST,
    '/api/lessons/advanced'    => $LIST,
    '/api/lessons/level/1'     => $LIST,
    '/api/lessons/level/1/'    => $LIST,
);

my $valid = { levelId => 1, title => 'Nicht erlaubt', order => 9 };

sub allow_set { join ',', sort map { s/^\s+|\s+$//gr } split /,/, $_[0] // '' }

for my $path (sort keys %routes) {
    my $allow = $routes{$path};
    my %allowed = map { $_ => 1 } split /, /, $allow;

    # OPTIONS: 204, Allow, no body.
    my $res = call(OPTIONS => $path);
    is $res->code, 204, "OPTIONS $path: 204";
    is allow_set($res->header('Allow')), allow_set($allow),
        "OPTIONS $path: Allow $allow";
    is $res->content, '', "OPTIONS $path: no body";

    # Every method the route does not allow: 405, Allow, problem body.
    for my $m (qw(GET HEAD POST PUT DELETE PATCH PROPFIND)) {
        next if $allowed{$m};
        my $r = call($m => $path, json => $valid);
        if ($m eq 'HEAD') {
            is $r->code, 405, "HEAD $path: 405";
        }
        else {
            is_problem($r, 405, "$m $path");
        }
        is allow_set($r->header('Allow')), allow_set($allow),
            "$m $path: Allow $allow";
    }
}

# Every method on every route without a token: the gate answers first
# (401 with its challenge), whatever the method, known to httpd or not;
# with a token, TRACE (httpd would echo the request, Authorization
# included) and an unknown method get the route's 405.
for my $path (sort keys %routes) {
    my $allow = $routes{$path};
    for my $m (qw(GET HEAD POST PUT DELETE PATCH OPTIONS TRACE PROPFIND FOO)) {
        my $r = call($m => $path, token => undef,
                     $m =~ /^(POST|PUT|PATCH)$/ ? (json => $valid) : ());
        if ($m eq 'HEAD') {
            is $r->code, 401, "HEAD $path without a token: 401";
        }
        else {
            is_unauthorized($r, "$m $path without a token");
        }
    }
    for my $m (qw(TRACE FOO)) {
        my $r = call($m => $path);
        is_problem($r, 405, "$m $path");
        is allow_set($r->header('Allow')), allow_set($allow),
            "$m $path: Allow $allow";
        unlike $r->content, qr/Authorization|Bearer/i,
            "$m $path: the request is not echoed";
    }
}
is_deeply db_lessons(), $before, 'no method without a token changed anything';

# The exact header value, as the contract spells it.
is call(PATCH => '/api/lessons')->header('Allow'), $COLLECTION,
    'collection Allow value';
is call(PATCH => "/api/lessons/$id")->header('Allow'), $ITEM,
    'item Allow value';
is call(POST => '/api/lessons/beginner', json => $valid)->header('Allow'),
    $LIST, 'list Allow value';

# A 405 changes nothing, and needs no body to be judged.
is_deeply db_lessons(), $before, '405s left the table unchanged';
is_problem(call(DELETE => '/api/lessons'), 405, 'DELETE on the collection');
is_problem(call(PUT => '/api/lessons', json => $valid), 405,
           'PUT on the collection');
is_problem(call(POST => "/api/lessons/$id", json => $valid), 405,
           'POST on an item');
is_deeply db_lessons(), $before, 'still unchanged';

# ---- unknown paths and ids that are not integers: 404 problem+json
for my $path ('/api/lessons/foo', '/api/lessons/level/x',
              '/api/lessons/level', '/api/lessons/level/',
              '/api/lessons/level/1.5', '/api/lessons/level/1/2',
              '/api/lessons/1.5', '/api/lessons/1e3', '/api/lessons/0x10',
              '/api/lessons/+1', '/api/lessons/1a', '/api/lessons/%201',
              '/api/lessons/9223372036854775808',
              '/api/lessons/-9223372036854775809',
              '/api/lessons/18446744073709551617',
              '/api/lessons/level/99999999999',
              '/api/lessons/level/2147483648',
              "/api/lessons/$id/extra",
              '/api/lessons/beginner/x', '/api/lessons/Beginner',
              '/api/lessons/advanced/1') {
    is_problem(call(GET => $path), 404, "GET $path");
}
# ... whatever the method.
is_problem(call(DELETE => '/api/lessons/foo'), 404, 'DELETE unknown path');
is_problem(call(PUT => '/api/lessons/1.5', json => $valid), 404,
           'PUT non-integer id');
is_problem(call(POST => '/api/lessons/9223372036854775808', json => $valid), 404,
           'POST overflowing id');
is_deeply db_lessons(), $before, '404s left the table unchanged';

# ---- the mount point itself is the collection with one slash, not two
is call(GET => '/api/lessons/')->code, 200, 'one trailing slash: collection';

# ---- the health check and the metrics: GET and HEAD, without a token;
# every other method is 405 with Allow: GET, HEAD and a problem body, as
# on the API's routes, whatever token comes with it (OPTIONS too: they
# have no other method to list, and no browser preflights them; TRACE
# too, with nothing echoed).
for my $path ('/health', '/metrics') {
    is call($_ => $path, token => undef)->code, 200, "$_ $path: 200" for qw(GET HEAD);
    for my $m (qw(POST PUT DELETE PATCH OPTIONS TRACE PROPFIND FOO)) {
        for my $t ([ 'no token', token => undef ], [ 'a token' ],
                   [ 'a bad token', auth => 'Bearer secret-looking' ]) {
            my ($how, @o) = @$t;
            my $r = call($m => $path, @o,
                         $m =~ /^(POST|PUT|PATCH)$/ ? (json => $valid) : ());
            is_problem($r, 405, "$m $path with $how");
            is $r->header('Allow'), 'GET, HEAD', "$m $path with $how: Allow: GET, HEAD";
            unlike $r->content, qr/Authorization|Bearer|secret-looking/i,
                "$m $path with $how: the request is not echoed";
        }
    }
}
is_deeply db_lessons(), $before, 'nothing changed there';

# ---- another mount point: routes are relative to its LessonsBasePath
{
    my $r = call(GET => "/small/api/lessons/$id");
    is $r->code, 200, 'GET item under another base path';
    is json_of($r)->{id}, $id, 'same lesson under another base path';
}

done_testing;
