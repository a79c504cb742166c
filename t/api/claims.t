# Claims for the rest of httpd (issue 9): LessonsJWTUserClaim sets
# r->user (%u), LessonsJWTExportClaims puts claims in the environment as
# JWT_CLAIM_<name>, read back here through mod_headers and a real log
# line; on a cached token too.  A value that breaks the rule (a control
# character, over the cap) is never cleaned or cut: an exported claim is
# left unset, and a user claim refuses the token.
use strict;
use warnings FATAL => 'all';
use utf8;

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use JSON::PP ();
use LessonsTest;

my $log = Apache::Test::vars('t_logs') . '/claims.log';
# The access log's line for this path (httpd writes it after the answer:
# wait for it, 5 s at most), or ''.
sub line_for {
    my ($path) = @_;
    for (1 .. 50) {
        if (open my $fh, '<:raw', $log) {
            my @l = grep { /\|\Q$path\E\n\z/ } <$fh>;
            return $l[-1] if @l;
        }
        select undef, undef, undef, 0.1;
    }
    return '';
}

my $token = good_token(claims => {
    sub => 'u-123', profile => { login => 'anna' }, tenant => "schule nord",
    roles => [ 'editor', 'reader' ], realm_access => { roles => [ 'admin', 7 ] },
});
for my $try (1, 2) {        # the second is a token-cache hit
    my $res = call(GET => "/claims/api/lessons/level/$try", token => $token);
    is $res->code, 200, "try $try: 200";
    is $res->header('X-Tenant'), 'schule nord',
        "try $try: mod_headers reads JWT_CLAIM_tenant";
    is line_for("/claims/api/lessons/level/$try"),
        "anna|schule nord|[\\\"editor\\\",\\\"reader\\\"]|[\\\"admin\\\",7]|/claims/api/lessons/level/$try\n",
        "try $try: the log line names the user claim and the exported claims";
}

# a control character: the claim is not exported at all (not cleaned)
my $ctl = good_token(claims => {
    sub => 'u-124', profile => { login => 'anna' }, tenant => "schule\x{1}nord",
});
my $res = call(GET => '/claims/api/lessons/level/3', token => $ctl);
is $res->code, 200, 'a control character in an exported claim: still 200';
ok !defined $res->header('X-Tenant'), '... and JWT_CLAIM_tenant is unset';

# ... and in the user claim: the token is refused, not someone else's
my $who = good_token(claims => { sub => 'u-125', profile => { login => "anna\nroot" } });
$res = call(GET => '/claims/api/lessons', token => $who);
is_unauthorized($res, 'a line break in the user claim', 'invalid_token');
like $res->header('WWW-Authenticate') // '', qr/error="invalid_token", error_description="The access token's user claim cannot be used as a user name\."/,
    '... invalid_token, saying why';

# a token without those claims: %u falls back to nothing, nothing exported
my $bare = good_token(claims => { sub => 'u-9' });
$res = call(GET => '/claims/api/lessons', token => $bare);
is $res->code, 200, 'a token without the claims: 200';
ok !defined $res->header('X-Tenant'), '... nothing exported';

# ---- lists (issues 40 and 55): an array is exported as its compact JSON
# text, members exactly as the token has them, and only an array or an
# object starts with "[" or "{": ["user","admin"] and "user,admin" never
# read alike.  A string that would read as JSON text is left unset, with
# an info line naming the claim and never its value.
sub roles_of {
    my ($n, $roles, %more) = @_;
    my $t = good_token(claims => {
        sub => "u-13$n", profile => { login => 'anna' }, tenant => 'nord',
        roles => $roles, %more,
    });
    my $res = call(GET => "/claims/api/lessons/level/1$n", token => $t);
    is $res->code, 200, "token $n: 200";
    return (scalar $res->header('X-Roles'), [ split /\|/, line_for("/claims/api/lessons/level/1$n"), -1 ]);
}
{
    my ($array) = roles_of(0, [ 'user', 'admin' ]);
    my ($string) = roles_of(1, 'user,admin');
    is $array, '["user","admin"]', 'an array: its JSON text';
    is $string, 'user,admin', 'a string with a comma: as it is';
    isnt $array, $string, '... so a consumer tells them apart';
    is_deeply(JSON::PP->new->decode($array), [ 'user', 'admin' ],
        '... and the array decodes to its members');
    my ($commas, $f) = roles_of(2, [ 'x,admin', 'user' ],
        realm_access => { roles => [ 'reader', 'a b', ' c', 'd]', '', undef ] });
    is $commas, '["x,admin","user"]', 'a member with a comma stays one member';
    is $f->[3], '[\"reader\",\"a b\",\" c\",\"d]\",\"\",null]',
        'empty members and null too (the log escapes the quotes)';
    my ($empty) = roles_of(3, []);
    is $empty, '[]', '[] is exported as []';

    my $from = suite_log_size();
    my ($fake, $g) = roles_of(4, '["admin"]');
    ok !defined $fake, 'a string that reads as an array is not exported';
    is $g->[2], '-', '... not in the log either';
    my $log = suite_log_since($from);
    like $log, qr/\[lessons:info\].*LESSONS00216: claim roles not exported: it is a string that starts with "\[" or "\{"/,
        '... and an info line names the claim';
    unlike $log, qr/\["admin"\]/, '... never its value';
}

# where no directive asks, sub stays the user and nothing is exported
$res = call(GET => '/api/lessons', token => $token);
is $res->code, 200, 'the plain API';
ok !defined $res->header('X-Tenant'), '... exports nothing';

done_testing();
