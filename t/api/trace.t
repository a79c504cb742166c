# TRACE on the API (issue 6 item 4): it used to reach httpd's own TRACE
# handler, which answered 200 and echoed the request, Authorization
# header included.  Now it is an unknown method like any other: the token
# is checked first (401 without one), then 405 with Allow, problem+json,
# and nothing of the request is echoed.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use LessonsTest;

my ($id) = seed({ level_id => 2, title => 'Spur', sort_order => 1 });
my $token = good_token();

for my $path ('/api/lessons', "/api/lessons/$id", '/api/lessons/beginner') {
    my $res = call(TRACE => $path, token => $token);
    is_problem($res, 405, "TRACE $path");
    like $res->header('Allow') // '', qr/\AGET, HEAD/, "TRACE $path: Allow";
    unlike $res->content, qr/\Q$token\E|Authorization|message\/http/i,
        "TRACE $path: nothing of the request echoed";
    unlike $res->header('Content-Type') // '', qr{message/http},
        "TRACE $path: not httpd's TRACE answer";
}
is_unauthorized(call(TRACE => '/api/lessons', token => undef), 'TRACE without a token');
# Outside the API httpd's TRACE is untouched (TraceEnable is the admin's).
isnt call(TRACE => '/not-the-api', token => undef)->code, 405,
    'TRACE outside the API is not ours';

done_testing;
