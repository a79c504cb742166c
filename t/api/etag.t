# ETags and conditional requests (issue 7, RFC 9110 section 13), and the
# verified-token cache: a cached token is still judged on every request.
use strict;
use warnings FATAL => 'all';
use utf8;

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use IO::Uncompress::Gunzip qw(gunzip);
use LessonsTest;

my @ids = seed(
    { level_id => 1, title => 'Hallo', sort_order => 1 },
    { level_id => 1, title => 'Tschüss', sort_order => 2 },
    { level_id => 2, title => 'Lang', sort_order => 1, description => 'Wort ' x 600 },
);

# ---- GET: a strong ETag, no-cache, Vary
my $res = call(GET => '/api/lessons');
is $res->code, 200, 'GET all';
my $list_tag = $res->header('ETag');
like $list_tag, qr/\A"[^"]+"\z/, 'a strong ETag on the list';
is $res->header('Cache-Control'), 'no-cache', 'Cache-Control: no-cache (revalidate, never public)';
like $res->header('Vary') || '', qr/Accept-Encoding/, 'Vary: Accept-Encoding';

$res = call(GET => "/api/lessons/$ids[0]");
my $item_tag = $res->header('ETag');
like $item_tag, qr/\A"[^"]+"\z/, 'a strong ETag on a lesson';
isnt $item_tag, $list_tag, 'lesson and list tags differ';

# ---- If-None-Match
for my $case ([ $list_tag, 304, 'the current tag' ],
              [ '*', 304, '*' ],
              [ qq{"x", $list_tag}, 304, 'a list holding the tag' ],
              [ "W/$list_tag", 304, 'the weak form (weak comparison)' ],
              [ '"nope"', 200, 'another tag' ],
              # malformed (RFC 9110: "*" alone or a list of tags): matches
              # nothing, so never a 304
              [ '*2iDyz.pp', 200, 'a value that only begins with *' ],
              [ qq{*, $list_tag}, 200, '* inside a list' ],
              [ qq{$list_tag junk}, 200, 'a tag with junk after it' ]) {
    my ($inm, $code, $name) = @$case;
    $res = call(GET => '/api/lessons', headers => [ 'If-None-Match' => $inm ]);
    is $res->code, $code, "If-None-Match $name: $code";
    if ($code == 304) {
        is $res->content, '', "... no body";
        is $res->header('ETag'), $list_tag, "... the ETag";
        is $res->header('Cache-Control'), 'no-cache', '... Cache-Control';
    }
}
$res = call(HEAD => '/api/lessons', headers => [ 'If-None-Match' => $list_tag ]);
is $res->code, 304, 'HEAD with If-None-Match: 304';
$res = call(GET => '/api/lessons', token => undef,
            headers => [ 'If-None-Match' => $list_tag ]);
is $res->code, 401, 'If-None-Match without a token: 401, not 304';

# ---- gzip: big bodies only, their own tag, compressed once
$res = call(GET => '/api/lessons', headers => [ 'Accept-Encoding' => 'gzip' ]);
is $res->header('Content-Encoding'), 'gzip', 'gzip when asked for';
my $gz_tag = $res->header('ETag');
isnt $gz_tag, $list_tag, 'the gzip form has its own tag';
my ($raw, $plain) = ($res->content);
gunzip(\$raw => \$plain);
is $plain, call(GET => '/api/lessons')->content, 'it inflates to the plain body';
ok length($raw) < length($plain), 'and is smaller';
$res = call(GET => '/api/lessons', headers => [ 'Accept-Encoding' => 'gzip',
                                                'If-None-Match' => $gz_tag ]);
is $res->code, 304, 'gzip tag revalidates the gzip form';
$res = call(GET => '/api/lessons', headers => [ 'If-None-Match' => $gz_tag ]);
is $res->code, 200, 'the gzip tag does not match the plain form';
$res = call(GET => '/api/lessons', headers => [ 'Accept-Encoding' => 'gzip;q=0' ]);
ok !$res->header('Content-Encoding'), 'gzip;q=0: plain';
$res = call(GET => "/api/lessons/$ids[0]", headers => [ 'Accept-Encoding' => 'gzip' ]);
ok !$res->header('Content-Encoding'), 'a small lesson stays plain';
is $res->header('ETag'), $item_tag, '... with its own tag';

# ---- PUT with If-Match
my $before = db_lessons();
$res = call(PUT => "/api/lessons/$ids[0]", json => { title => 'Nein' },
            headers => [ 'If-Match' => '"L1.1.0000"' ]);
is_problem($res, 412, 'If-Match with a foreign tag');
$res = call(PUT => "/api/lessons/$ids[0]", json => { title => 'Nein' },
            headers => [ 'If-Match' => "W/$item_tag" ]);
is_problem($res, 412, 'If-Match with a weak tag (strong comparison)');
for my $bad ('*bogus', qq{*, $item_tag}, qq{$item_tag, *}, 'L1.1.0000') {
    $res = call(PUT => "/api/lessons/$ids[0]", json => { title => 'Nein' },
                headers => [ 'If-Match' => $bad ]);
    is_problem($res, 412, "If-Match: $bad (malformed: matches nothing)");
}
is_deeply db_lessons(), $before, '412s changed nothing';

$res = call(PUT => "/api/lessons/$ids[0]", json => { title => 'Hallo!' },
            headers => [ 'If-Match' => $item_tag ]);
is $res->code, 200, 'If-Match with the current tag: 200';
my $new_tag = $res->header('ETag');
ok $new_tag && $new_tag ne $item_tag, "PUT's 200 carries the new tag";
is call(GET => "/api/lessons/$ids[0]")->header('ETag'), $new_tag,
    'GET gives the same new tag';
is lesson_row($ids[0])->{title}, 'Hallo!', 'the update is stored';

$res = call(PUT => "/api/lessons/$ids[0]", json => { title => 'Überholt' },
            headers => [ 'If-Match' => $item_tag ]);
is_problem($res, 412, 'the old tag no longer matches (lost update refused)');
is lesson_row($ids[0])->{title}, 'Hallo!', '... nothing changed';

$res = call(PUT => "/api/lessons/$ids[0]", json => { title => 'Mit Stern' },
            headers => [ 'If-Match' => '*' ]);
is $res->code, 200, 'If-Match: * on an existing lesson: 200';

$res = call(PUT => "/api/lessons/$ids[1]", json => { levelId => 99 },
            headers => [ 'If-Match' => call(GET => "/api/lessons/$ids[1]")->header('ETag') ]);
is $res->code, 400, 'If-Match holds but the level does not exist: 400';

# another lesson's edit leaves this tag valid
my $tag1 = call(GET => "/api/lessons/$ids[1]")->header('ETag');
call(PUT => "/api/lessons/$ids[2]", json => { title => 'Anders' });
$res = call(PUT => "/api/lessons/$ids[1]", json => { title => 'Tschüss!' },
            headers => [ 'If-Match' => $tag1 ]);
is $res->code, 200, "an edit of another lesson does not fail this one's If-Match";

# ---- a missing lesson
$res = call(PUT => '/api/lessons/999999', json => { title => 'x' },
            headers => [ 'If-Match' => '*' ]);
is_problem($res, 412, 'If-Match: * on a missing lesson: 412');
$res = call(PUT => '/api/lessons/999999', json => { title => 'x' });
is $res->code, 404, 'without If-Match: 404';
$res = call(DELETE => '/api/lessons/999999', headers => [ 'If-Match' => '*' ]);
is_problem($res, 412, 'DELETE If-Match: * on a missing lesson: 412');

# ---- DELETE with If-Match
my $tag2 = call(GET => "/api/lessons/$ids[2]")->header('ETag');
call(PUT => "/api/lessons/$ids[2]", json => { title => 'Noch einmal anders' });
$res = call(DELETE => "/api/lessons/$ids[2]", headers => [ 'If-Match' => $tag2 ]);
is_problem($res, 412, 'DELETE with a stale tag: 412');
ok lesson_row($ids[2]), '... the lesson is still there';
$res = call(DELETE => "/api/lessons/$ids[2]", headers => [ 'If-Match' => '*, "bogus"' ]);
is_problem($res, 412, 'DELETE If-Match: *, "bogus" (malformed): 412');
ok lesson_row($ids[2]), '... the lesson is still there';
$tag2 = call(GET => "/api/lessons/$ids[2]")->header('ETag');
$res = call(DELETE => "/api/lessons/$ids[2]", headers => [ 'If-Match' => $tag2 ]);
is $res->code, 204, 'DELETE with the current tag: 204';
ok !lesson_row($ids[2]), '... gone';

# ---- 201 carries the tag GET then gives
$res = call(POST => '/api/lessons', json => { levelId => 3, title => 'Neu', order => 1 });
is $res->code, 201, 'create';
my ($loc) = ($res->header('Location') || '') =~ m{(/api/lessons/\d+)\z};
is call(GET => $loc)->header('ETag'), $res->header('ETag'), "201's ETag is GET's";

# ---- the token cache judges every request
my $now = time;
my $short = good_token(claims => { exp => $now + 2 });
is call(GET => '/api/lessons', token => $short)->code, 200, 'a token about to expire: 200';
is call(GET => '/api/lessons', token => $short)->code, 200, '... again (cached)';
sleep 3;
is call(GET => '/api/lessons', token => $short)->code, 401, '... expired: 401 though cached';

my $later = good_token(claims => { nbf => time + 2, exp => time + 60 });
is call(GET => '/api/lessons', token => $later)->code, 401, 'nbf in the future: 401';
sleep 3;
is call(GET => '/api/lessons', token => $later)->code, 200, '... once nbf passed: 200';

my $good = good_token();
is call(GET => '/api/lessons', token => $good)->code, 200, 'a good token, cached';
my $forged = $good;
substr($forged, -2, 1) = substr($forged, -2, 1) eq 'A' ? 'B' : 'A';
is call(GET => '/api/lessons', token => $forged)->code, 401,
    'the same token with a changed signature: 401';
is call(GET => '/rs/api/lessons', token => $good)->code, 401,
    'a token cached under the HS256 section does not pass the RS256 one';
is call(GET => '/strict/api/lessons', token => $good)->code, 401,
    '... nor one that also asks for iss and aud';

# a section merged with another that adds an issuer: not the same policy
my $no_iss = good_token();
is call(GET => '/iss/api/lessons', token => $no_iss)->code, 200,
    'no iss where none is asked for (and now cached)';
is call(GET => '/iss/api/lessons/level/1', token => $no_iss)->code, 401,
    '... refused where a merged section asks for iss';
is call(GET => '/iss/api/lessons/level/1',
        token => good_token(claims => { iss => 'https://auth.example.org' }))->code,
    200, '... a token with that iss passes there';
is call(GET => '/iss/api/lessons', token => $no_iss)->code, 200,
    '... and the first token still passes where no iss is asked for';

done_testing();
