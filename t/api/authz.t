# Require jwt-claim (issue 9): an authz provider, composed by httpd's own
# <RequireAll>/<RequireAny>/<LimitExcept>.  A valid token without the
# claim gets 403 problem+json with the insufficient_scope challenge and
# changes nothing; a missing or bad token is still 401.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use LessonsTest;

my $NEW = { levelId => 1, title => 'Authz probe', order => 1,
            topic => 'authz', description => 'made by authz.t' };

sub is_forbidden {
    my ($res, $name, $no_claim) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my $p = is_problem($res, 403, $name);
    if ($no_claim) {
        ok !defined $res->header('WWW-Authenticate'),
            "$name: no challenge (no claim refused)";
    }
    else {
        like $res->header('WWW-Authenticate') || '',
            qr/\ABearer realm="lessons", error="insufficient_scope", error_description="[^"]+"\z/,
            "$name: insufficient_scope challenge";
    }
    is $res->header('Cache-Control'), 'no-store', "$name: no-store";
    unlike $res->content, qr/<html/i, "$name: not httpd's HTML page";
}

my $editor  = good_token(claims => { sub => 'e-1', role => 'editor' });
my $admins  = good_token(claims => { sub => 'a-1', role => [ 'viewer', 'admin' ] });
my $reader  = good_token(claims => { sub => 'r-1', role => 'reader' });
my $noclaim = good_token(claims => { sub => 'n-1' });
my $cased   = good_token(claims => { sub => 'c-1', role => 'Editor' });
my $number  = good_token(claims => { sub => 'x-1', role => 42 });
my $object  = good_token(claims => { sub => 'o-1', role => { editor => 1 } });

# This file's lines of the shared error_log: those after this point
# (files run before it log refusals of tokens of their own, such as
# openapi.t's of sub "reader", when the suite runs in shares).
my $log = Apache::Test::vars('t_logs') . '/error_log';
my $log_from = -s $log || 0;

# --- the read-only-client recipe --------------------------------------
my $base = '/authz/api/lessons';
my $before = db_lessons();
for my $t ([ reader => $reader ], [ 'no role claim' => $noclaim ]) {
    my $res = call(GET => $base, token => $t->[1]);
    is $res->code, 200, "$t->[0]: GET is open to any valid token";
    is_forbidden(call(POST => $base, token => $t->[1], json => $NEW),
                 "$t->[0]: POST");
}
for my $t ([ 'role Editor (case differs)' => $cased ],
           [ 'role 42' => $number ], [ 'role is an object' => $object ]) {
    is_forbidden(call(POST => $base, token => $t->[1], json => $NEW),
                 "$t->[0]: POST");
}
is_deeply db_lessons(), $before, 'refused writes changed nothing';

my ($id) = seed({ level_id => 1, title => 'Kept', sort_order => 1 });
$before = db_lessons();
is_forbidden(call(PUT => "$base/$id", token => $reader,
                  json => { title => 'Changed' }), 'reader: PUT');
is_forbidden(call(DELETE => "$base/$id", token => $reader), 'reader: DELETE');
my $head = call(HEAD => "$base/$id", token => $reader);
is $head->code, 200, 'reader: HEAD is a read';
is_deeply db_lessons(), $before, 'the lesson is untouched';

# still 401, not 403, without a valid token
is_unauthorized(call(POST => $base, token => undef, json => $NEW),
                'no token: POST');
is_unauthorized(call(POST => $base, token => "$editor.x", json => $NEW),
                'bad token: POST', 'invalid_token');
is_unauthorized(call(POST => $base, token => good_token(
                     claims => { role => 'editor', exp => time - 60 }), json => $NEW),
                'expired editor token: POST', 'invalid_token');

# granted by a string claim, and by an array member
my $res = call(POST => $base, token => $editor, json => $NEW);
is $res->code, 201, 'editor (string claim): POST 201';
ok !defined $res->header('WWW-Authenticate'), '... no challenge';
$res = call(POST => $base, token => $admins, json => $NEW);
is $res->code, 201, 'admin in an array claim: POST 201';
is db_count(), 3, 'both creates stored';
$res = call(DELETE => "$base/$id", token => $admins);
is $res->code, 204, 'admin: DELETE 204';
ok !lesson_row($id), '... and it is gone';
for (1, 2) {        # the second is a verified-token cache hit
    is call(PUT => "$base/$id", token => $reader, json => { title => 'x' })->code,
        403, "reader, try $_: 403";
}

# --- nested claims and RequireAll ----------------------------------------
my $kc = good_token(claims => { sub => 'k-1', tenant => 'Schule Nord',
                                realm_access => { roles => [ 'x', 'lessons-admin' ] } });
is call(GET => '/authz-all/api/lessons', token => $kc)->code, 200,
    'RequireAll: nested realm_access.roles and a quoted value with a space';
is_forbidden(call(GET => '/authz-all/api/lessons', token => good_token(
    claims => { tenant => 'Schule Nord', realm_access => { roles => [ 'lessons-user' ] } })),
    'RequireAll: one claim missing');
is_forbidden(call(GET => '/authz-all/api/lessons', token => good_token(
    claims => { tenant => 'Schule Nord', 'realm_access.roles' => 'nope',
                realm_access => 'lessons-admin' })),
    'RequireAll: a flat "realm_access" string is not the nested array');

# --- RequireAny: another provider grants ---------------------------------
$res = call(GET => '/authz-any/api/lessons', token => $reader);
is $res->code, 200, 'RequireAny: Require ip grants a token without the claim';
ok !defined $res->header('WWW-Authenticate'), '... with no challenge';
is_unauthorized(call(GET => '/authz-any/api/lessons', token => undef),
                'RequireAny: still no way in without a token');

# --- RequireAll with "not ip": the claim alone is not enough; the API's
# 403 is still problem+json, without a challenge no token can answer
is_forbidden(call(GET => '/authz-not/api/lessons', token => $admins),
             'RequireAll with Require not ip', 1);
is_forbidden(call(GET => '/authz-not/api/lessons', token => $reader),
             'RequireAll: claim and ip both refuse');

# --- valid-user: the token is the authentication -------------------------
is call(GET => '/authz-user/api/lessons', token => $reader)->code, 200,
    'Require valid-user: a token with sub';
is call(GET => '/authz-user/api/lessons',
        token => good_token(claims => { sub => undef }))->code, 200,
    'Require valid-user: a token without sub is still authenticated';
is_unauthorized(call(GET => '/authz-user/api/lessons', token => undef),
                'Require valid-user without a token');

# --- scope: a space-separated string, one word matches ----------------
is call(GET => '/authz-scope/api/lessons',
        token => good_token(claims => { scope => 'openid lessons:write profile' }))->code,
    200, 'scope "openid lessons:write profile" has lessons:write';
is_forbidden(call(GET => '/authz-scope/api/lessons',
                  token => good_token(claims => { scope => 'openid lessons:write-all' })),
             'scope with a longer word only');
is_forbidden(call(GET => '/authz-scope/api/lessons',
                  token => good_token(claims => { scope => 'lessons:read' })),
             'scope without the word');

# --- one info line per refusal, naming the claim, never its value -------
open my $fh, '<', $log or die "$log: $!";
seek $fh, $log_from, 0 or die "$log: $!";
my @lines = grep { /LESSONS00206/ } <$fh>;
ok scalar(@lines) >= 10, 'each 403 logged with LESSONS00206';
ok !(grep { !/\[lessons:info\]/ } @lines), '... at info';
# After the request line: a path may hold a lesson id of 42.
ok !(grep { /LESSONS00206: \S+ \S+ (.*)/ && $1 =~ /\b(?:Editor|reader|42|viewer)\b/ } @lines),
    '... never a claim value';
ok((grep { /claim role\b/ } @lines), '... naming the claim');

done_testing();
