# Whose Idempotency-Keys a create's key is among (issue 40): the scope
# comes from who verified the token, never from what the token claims.
# A section that verifies with a key file for any issuer (A: the suite's
# RSA key) takes a token naming issuer B and B's user; a section with
# <LessonsJWTIssuer> blocks (B: the suite's HS256 secret) verifies that
# user's real tokens.  The token A's key signed in B's name is not B's
# user: its create with B's user's key and another body is a fresh 201
# (not 422), and on the very path and body where B's user created (an
# <If> that puts A's key in force there) a fresh 201 too, never B's user's
# answer replayed.  Each caller's retries still replay its own answer;
# one key file is one verifier wherever it is in force.  A server of the
# test's own, on the suite's database, which is checked after every call.
use strict;
use warnings FATAL => 'all';
use utf8;

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use LessonsTest;

my $dir = File::Temp->newdir(CLEANUP => !$ENV{LESSONS_TEST_KEEP});
chmod 0755, "$dir";
my $B   = 'https://sso.example.org/realms/b';
my $RSA = $ENV{LESSONS_TEST_RSA_PUB};
my $HS  = $ENV{LESSONS_TEST_HS_KEY};

my $port = free_port();
my $conf = httpd_conf($dir, $port, <<"EOF");
LogLevel info
# A: one key file, any issuer.
<Location "/a/api/lessons">
    SetHandler lessons
    LessonsJWTKey RS256 "$RSA"
</Location>
# B: an issuer block; with X-Key-A, A's key file in force on B's path.
<Location "/b/api/lessons">
    SetHandler lessons
    <LessonsJWTIssuer $B>
        LessonsJWTKey HS256 "$HS"
    </LessonsJWTIssuer>
    <If "-n req('X-Key-A')">
        LessonsJWTKey RS256 "$RSA"
    </If>
</Location>
EOF
start_httpd($conf, $port);
my $S = "http://127.0.0.1:$port";

# B's user, as B's block verifies it; the same claims signed by A's key.
my $real   = token(alg => 'HS256', claims => { iss => $B, sub => 'anna' });
my $forged = token(alg => 'RS256', claims => { iss => $B, sub => 'anna' });

sub post {
    my ($path, $token, $key, $json, @h) = @_;
    return call(POST => $path, base => $S, token => $token, json => $json,
                headers => [ 'Idempotency-Key' => qq{"$key"}, @h ]);
}
sub id_of { (json_of($_[0]) || {})->{id} // 0 }
sub titled {
    return [ map { $_->{id} } @{ db_rows('SELECT id FROM lessons WHERE title = '
                                         . sq($_[0]) . ' ORDER BY id') } ];
}
sub two_callers {
    my ($rows) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my %callers = map { ($_->{caller} // '') => 1 } @$rows;
    is scalar keys %callers, 2, '... of two callers';
}
sub keys_named {
    return db_rows('SELECT caller, lesson_id FROM lessons_idempotency WHERE idem_key = '
                   . sq($_[0]) . ' ORDER BY lesson_id');
}

db_do('DELETE FROM lessons_idempotency');
is call(GET => '/a/api/lessons', base => $S, token => $forged)->code, 200,
    "A's key file takes a token in B's name (any issuer)";
is call(GET => '/b/api/lessons', base => $S, token => $forged)->code, 401,
    "... which B's block does not";

# ---- another body: a fresh 201, not 422 --------------------------------
my $x = { levelId => 1, title => 'Von B', order => 1 };
my $y = { levelId => 1, title => 'Von A', order => 2 };
my $res = post('/b/api/lessons', $real, 'scope-1', $x);
is $res->code, 201, "B's user creates with a key: 201";
my $bid = id_of($res);
$res = post('/a/api/lessons', $forged, 'scope-1', $y);
is $res->code, 201, 'the token A verified, claiming B\'s iss and sub, the same key, '
    . 'another body: 201' or diag $res->as_string;
ok !defined $res->header('Idempotent-Replayed'), '... not a replay';
my $aid = id_of($res);
isnt $aid, $bid, '... a lesson of its own';
is_deeply titled('Von B'), [ $bid ], "... B's user's lesson stored";
is_deeply titled('Von A'), [ $aid ], '... and its own';
my $rows = keys_named('scope-1');
is scalar @$rows, 2, '... two keys named scope-1' or diag explain $rows;
two_callers($rows);
is_deeply [ sort { $a <=> $b } map { $_->{lesson_id} // 0 } @$rows ],
    [ sort { $a <=> $b } $bid, $aid ], '... each with its lesson';

# Each one's retry is its own replay; B's user's key is still B's.
$res = post('/a/api/lessons', $forged, 'scope-1', $y);
is $res->header('Idempotent-Replayed'), 'true', "the A-verified token's retry: a replay";
is id_of($res), $aid, '... of its own lesson';
$res = post('/b/api/lessons', $real, 'scope-1', $x);
is $res->header('Idempotent-Replayed'), 'true', "B's user's retry: a replay";
is id_of($res), $bid, '... of that lesson';
$res = post('/b/api/lessons', $real, 'scope-1', $y);
is $res->code, 422, "B's user's key with A's body: still 422";
is scalar @{ keys_named('scope-1') }, 2, '... no key kept';

# ---- the same path and body: a fresh 201, never B's user's answer -------
my $z = { levelId => 2, title => 'Gleicher Pfad', order => 1 };
$res = post('/b/api/lessons', $real, 'scope-2', $z);
is $res->code, 201, "B's user creates with another key: 201";
$bid = id_of($res);
$res = post('/b/api/lessons', $forged, 'scope-2', $z, 'X-Key-A' => 1);
is $res->code, 201, 'the A-verified token on that path, with that key and body: 201'
    or diag $res->as_string;
ok !defined $res->header('Idempotent-Replayed'), "... not B's user's answer replayed";
$aid = id_of($res);
isnt $aid, $bid, '... a lesson of its own';
is scalar @{ titled('Gleicher Pfad') }, 2, '... both lessons stored';
$rows = keys_named('scope-2');
is scalar @$rows, 2, '... two keys named scope-2';
two_callers($rows);

# ---- one key file, one verifier, wherever it is in force ----------------
# The key A's file verified at /a, sent where the same file verifies it on
# B's path with the same body: the same caller's key with another path.
my $before = db_lessons();
$res = post('/b/api/lessons', $forged, 'scope-1', $y, 'X-Key-A' => 1);
is $res->code, 422, "A's key file in force on B's path: the same caller as at /a (422)";
is_deeply db_lessons(), $before, '... nothing written';

done_testing;
