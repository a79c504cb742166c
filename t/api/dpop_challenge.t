# The challenges where DPoP is optional (issue 40 §6): such a section
# takes both schemes, so every refusal names both (RFC 9449 7.2), and
# the error goes with the scheme the request used (RFC 6750 3.1: a
# scheme the request did not try gets no error code):
#
#   - no token: Bearer and DPoP, both bare;
#   - a bearer token that fails, or a malformed Bearer header: Bearer
#     with the error and its description, DPoP bare (realm and algs);
#   - a DPoP token that fails: DPoP with the error, nothing else.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use LessonsTest;

my $dir  = File::Temp->newdir;
my $port = free_port();
start_httpd(httpd_conf("$dir", $port, <<"EOF"), $port);
LogLevel info
<Location "/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"
    LessonsJWTDPoP optional
</Location>
EOF
my $base = "http://127.0.0.1:$port";
my $DPOP = qr/\ADPoP realm="lessons", algs="[A-Z0-9 ]+"\z/;

# The WWW-Authenticate values of an answer, in order.
sub challenges { [ $_[0]->header('WWW-Authenticate') ] }

my $expired = good_token(claims => { exp => time - 3600, sub => 'tester' });

my $res = call(GET => '/api/lessons', base => $base, token => undef);
is_problem($res, 401, 'no token');
my $c = challenges($res);
is scalar @$c, 2, 'no token: two challenges';
is $c->[0], 'Bearer realm="lessons"', '... Bearer, bare';
like $c->[1] // '', $DPOP, '... DPoP, bare';

$res = call(GET => '/api/lessons', base => $base, token => $expired);
is_problem($res, 401, 'an expired bearer token');
$c = challenges($res);
is scalar @$c, 2, 'an expired bearer token: two challenges';
is $c->[0], 'Bearer realm="lessons", error="invalid_token", '
          . 'error_description="The access token has expired"',
    '... the error in Bearer\'s, the scheme it came in';
like $c->[1] // '', $DPOP, '... DPoP\'s bare: no DPoP token failed';
unlike join("\n", @$c), qr/tester/, '... and no claim text in either';

$res = call(GET => '/api/lessons', base => $base,
            auth => 'Bearer ' . good_token() . ' ' . good_token());
is_problem($res, 400, 'a Bearer header with two tokens');
$c = challenges($res);
is scalar @$c, 2, 'two tokens: two challenges';
like $c->[0], qr/\ABearer realm="lessons", error="invalid_request", error_description="[^"]+"\z/,
    '... invalid_request in Bearer\'s';
like $c->[1] // '', $DPOP, '... DPoP\'s bare';

$res = call(GET => '/api/lessons', base => $base, auth => "DPoP $expired");
is_problem($res, 401, 'an expired token in the DPoP scheme');
$c = challenges($res);
is scalar @$c, 1, 'an expired DPoP token: one challenge';
like $c->[0], qr/\ADPoP realm="lessons", algs="[A-Z0-9 ]+", error="invalid_token", error_description="The access token has expired"\z/,
    '... DPoP\'s, with the error';

done_testing;
