# FAPI 2.0 Security Profile, its requirements for resource servers
# (issue 44, part 4): a resource server
# "shall accept access tokens in the HTTP header" and "shall not accept
# access tokens in the query parameters" (RFC 6750 2.1 and 2.3).  The
# module reads the Authorization header alone:
#   - a valid token as ?access_token=, alone: 401 with the bare Bearer
#     challenge (no token was sent), for a read and a write, nothing
#     written;
#   - a valid token in a form body (RFC 6750 2.2), alone: 401, nothing
#     written;
#   - a valid token in the header beside a garbage ?access_token=: the
#     query is not looked at (200);
#   - RFC 6750 3.1's errors: a bad token 401 invalid_token, two
#     Authorization headers 400 invalid_request;
#   - RFC 8725 / the profile's "JWKS URIs": jku and x5u in a token's
#     header are never fetched (a listener they name sees no
#     connection): a token signed with the attacker's key and naming
#     the attacker's keys is 401, the good key's token with them is 200.
# README's FAPI 2.0 table points here.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use IO::Select;
use IO::Socket::INET;
use URI::Escape qw(uri_escape);
use LessonsTest;

my $good = good_token();
my $q = 'access_token=' . uri_escape($good);
my ($id) = seed({ level_id => 1, title => 'FAPI probe', sort_order => 1 });
my $before = db_lessons();

is_unauthorized(call(GET => "/api/lessons?$q", token => undef),
                'GET with the token as ?access_token=');
is_unauthorized(call(GET => "/api/lessons/$id?$q", token => undef),
                'GET by id with the token as ?access_token=');
is_unauthorized(call(DELETE => "/api/lessons/$id?$q", token => undef),
                'DELETE with the token as ?access_token=');
is_unauthorized(call(POST => '/api/lessons', token => undef,
                     type => 'application/x-www-form-urlencoded',
                     body => "$q&levelId=1&title=x&order=1"),
                'POST with the token in a form body');
is_deeply db_lessons(), $before, 'tokens outside the header wrote nothing';

my $res = call(GET => "/api/lessons/$id?access_token=garbage", token => $good);
is $res->code, 200, 'a valid header token beside a garbage ?access_token=: 200';

is_unauthorized(call(GET => '/api/lessons', token => "$good.x"),
                'a token that does not verify', 'invalid_token');
$res = call(GET => '/api/lessons', auth => [ "Bearer $good", "Bearer $good" ]);
is $res->code, 400, 'two Authorization headers: 400';
like $res->header('WWW-Authenticate') || '', qr/error="invalid_request"/,
    'two Authorization headers: invalid_request';

my $trap = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0,
                                 Listen => 8, ReuseAddr => 1)
    or die "listen: $!";
my $at = 'https://127.0.0.1:' . $trap->sockport . '/keys';
my %named = (jku => $at, x5u => "$at.pem");
is_unauthorized(call(GET => '/api/lessons',
                     token => good_token(header => \%named,
                                         key => 'k' x 32)),
                'signed with another key, naming its keys in jku and x5u',
                'invalid_token');
$res = call(GET => '/api/lessons', token => good_token(header => \%named));
is $res->code, 200, 'the good key\'s token naming jku and x5u: 200';
ok !IO::Select->new($trap)->can_read(0.5),
    'nothing connected to the URLs jku and x5u named';

done_testing();
