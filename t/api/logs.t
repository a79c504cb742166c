# Log lines (issue 9; docs/operations.md's table of tags):
# every refusal for the client's fault writes exactly one line of ours at
# info (method, path, the user claim once known, why), every fault one
# line at error with the driver's message, each with its LESSONSnnnnn tag;
# and no log line anywhere holds a token, a signature or the HS secret.
#
# Each request is made with a unique id in its path; its lines are those
# the error_log gained between the request and a fence request after it
# (a 401 of its own unique path), so a second line of ours would count.
use strict;
use warnings FATAL => 'all';
use utf8;

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use LessonsTest;

my $logs = Apache::Test::vars('t_logs');
my $error_log = "$logs/error_log";

sub log_size { -s $error_log || 0 }

sub log_from {
    my ($from) = @_;
    open my $fh, '<:raw', $error_log or die "$error_log: $!";
    seek $fh, $from, 0 or die "seek: $!";
    local $/;
    my $text = <$fh>;
    return defined $text ? $text : '';
}

# Wait (bounded) until the log from $from holds a line matching $re;
# returns the text up to the end of that line's predecessor, or undef.
sub log_until {
    my ($from, $re) = @_;
    for (1 .. 100) {
        my $text = log_from($from);
        if ($text =~ /^(.*?)^[^\n]*$re[^\n]*\n/ms) {
            return $1;
        }
        select undef, undef, undef, 0.1;
    }
    return undef;
}

my $base = 900_000_000 + ($$ % 100_000) * 100;
my $n = 0;
sub next_id { return $base + $n++ }

# Tokens made once, so the leak check at the end knows every one sent.
my $secret  = hs_secret();
my $good    = good_token();
my $forged  = token(key => 'not the server secret, but long enough');
my $expired = good_token(claims => { iat => time - 7200, exp => time - 3600 });
my $reader  = good_token(claims => { sub => 'leser', role => 'reader' });
my @tokens  = ($good, $forged, $expired, $reader);

# Our lines written for one request (made by $send, a code ref returning
# the response), delimited by a fence request.
sub lines_for {
    my ($send) = @_;
    my $from = log_size();
    my $res = $send->();
    my $fence = 'fence' . next_id();
    call(GET => "/api/lessons/$fence", token => undef);
    my $text = log_until($from, qr/LESSONS00202: GET \/api\/lessons\/$fence /);
    Test::More::diag("the fence line $fence never came") unless defined $text;
    return ($res, grep { /\[lessons:/ } split /\n/, $text // '');
}

# One refusal: its status, exactly one line of ours, at info, with the
# tag, the method and the path, and the reason.
sub refusal_ok {
    my ($name, %o) = @_;
    my ($res, @lines) = lines_for($o{send});
    is $res->code, $o{status}, "$name: $o{status}";
    is scalar(@lines), 1, "$name: exactly one line of ours"
        or Test::More::diag(join "\n", @lines);
    my $line = $lines[0] // '';
    like $line, qr/\[lessons:info\]/, "$name: at info";
    my $who = $o{user} ? ", user $o{user}" : '';
    like $line, qr/LESSONS$o{tag}: \Q$o{what}\E refused \($o{status}\)\Q$who\E: /,
        "$name: LESSONS$o{tag}, method, path" . ($who ? ' and user' : '');
    like $line, $o{why}, "$name: says why" if $o{why};
    return $line;
}

my $id;

$id = next_id();
refusal_ok('no token', tag => '00202', status => 401, what => "GET /api/lessons/$id",
           why => qr/no bearer token/,
           send => sub { call(GET => "/api/lessons/$id", token => undef) });

$id = next_id();
refusal_ok('malformed Authorization', tag => '00203', status => 400,
           what => "GET /api/lessons/$id", why => qr/malformed Authorization/,
           send => sub { call(GET => "/api/lessons/$id", auth => "Bearer $good extra") });

$id = next_id();
refusal_ok('bad signature', tag => '00204', status => 401, what => "GET /api/lessons/$id",
           why => qr/signature is invalid/,
           send => sub { call(GET => "/api/lessons/$id", token => $forged) });

$id = next_id();
refusal_ok('expired token', tag => '00204', status => 401, what => "GET /api/lessons/$id",
           why => qr/has expired/,
           send => sub { call(GET => "/api/lessons/$id", token => $expired) });

$id = next_id();
refusal_ok('not JSON', tag => '00401', status => 415, what => "PUT /api/lessons/$id", user => 'tester',
           why => qr/Content-Type text\/plain is not JSON/,
           send => sub { call(PUT => "/api/lessons/$id", token => $good,
                              body => 'title=x', type => 'text/plain') });

$id = next_id();
refusal_ok('bad JSON body', tag => '00404', status => 400,
           what => "PUT /api/lessons/$id", user => 'tester', why => qr/not valid JSON/,
           send => sub { call(PUT => "/api/lessons/$id", token => $good,
                              body => '{"title": ') });

$id = next_id();
my $line = refusal_ok('validation error', tag => '00405', status => 400,
           what => "PUT /api/lessons/$id", user => 'tester',
           why => qr/validation failed on (?=.*\blevelId\b)(?=.*\btitle\b)/,
           send => sub { call(PUT => "/api/lessons/$id", token => $good,
                              json => { levelId => 'geheim-wert', title => '' }) });
unlike $line, qr/geheim-wert/, 'validation error: names fields, never values';

$id = next_id();
refusal_ok('no such lesson', tag => '00504', status => 404,
           what => "GET /api/lessons/$id", user => 'tester', why => qr/no lesson $id\b/,
           send => sub { call(GET => "/api/lessons/$id", token => $good) });

$id = next_id();
refusal_ok('unknown route', tag => '00501', status => 404,
           what => "GET /api/lessons/nope$id", user => 'tester', why => qr/no such resource/,
           send => sub { call(GET => "/api/lessons/nope$id", token => $good) });

$id = next_id();
refusal_ok('wrong method', tag => '00502', status => 405,
           what => "POST /api/lessons/$id", user => 'tester', why => qr/method not allowed/,
           send => sub { call(POST => "/api/lessons/$id", token => $good,
                              json => { levelId => 1, title => 'x', order => 1 }) });

$id = next_id();
refusal_ok('If-Match failure', tag => '00503', status => 412,
           what => "DELETE /api/lessons/$id", user => 'tester', why => qr/If-Match/,
           send => sub { call(DELETE => "/api/lessons/$id", token => $good,
                              headers => [ 'If-Match' => 'W/"L1.1.0000"' ]) });

$id = next_id();
$line = refusal_ok('Require jwt-claim', tag => '00206', status => 403,
           what => "PUT /authz/api/lessons/$id", user => 'leser', why => qr/claim role\b/,
           send => sub { call(PUT => "/authz/api/lessons/$id", token => $reader,
                              json => { title => 'x' }) });
unlike $line, qr/\breader\b/, 'Require jwt-claim: never the claim value';

$id = next_id();
refusal_ok('CORS preflight refused', tag => '00209', status => 403,
           what => "OPTIONS /cors/api/lessons/$id",
           why => qr/origin https:\/\/evil\.example\.org/,
           send => sub { call(OPTIONS => "/cors/api/lessons/$id", token => undef,
                              headers => [ Origin => 'https://evil.example.org',
                                           'Access-Control-Request-Method' => 'GET' ]) });

# LESSONS00210 names what was refused: the header alone when the method
# is fine, the method alone when the headers are.
sub preflight_refused {
    my ($name, $method, $headers, $why, $not) = @_;
    my $id = next_id();
    my $line = refusal_ok("CORS preflight, $name", tag => '00210', status => 403,
           what => "OPTIONS /cors/api/lessons/$id", why => $why,
           send => sub { call(OPTIONS => "/cors/api/lessons/$id", token => undef,
                              headers => [ Origin => 'https://app.example.org',
                                           'Access-Control-Request-Method' => $method,
                                           'Access-Control-Request-Headers' => $headers ]) });
    unlike $line, $not, "CORS preflight, $name: nothing else blamed";
}
preflight_refused('a header refused', PUT => 'Authorization, X-Trace-Id',
                  qr/for header X-Trace-Id, which the API does not read/, qr/\bmethod\b/);
preflight_refused('a method refused', POST => 'Authorization, Content-Type',
                  qr/for method POST, which this resource does not take \(Allow: GET, HEAD, PUT, DELETE, OPTIONS\)/,
                  qr/\bheader\b/);

refusal_ok('health check, wrong method', tag => '00507', status => 405,
           what => 'POST /health', why => qr/GET and HEAD/,
           send => sub { call(POST => '/health', token => undef, body => '{}') });

# A newline in the path stays escaped: one line, not two.
$id = next_id();
refusal_ok('a newline in the path', tag => '00202', status => 401,
           what => "GET /api/lessons/a\\nLESSONS00000: forged $id",
           send => sub { call(GET => "/api/lessons/a%0ALESSONS00000:%20forged%20$id",
                              token => undef) });

# ---- faults: one line at error, with the driver's message
{
    my ($res, @lines) = lines_for(sub {
        call(POST => '/api/lessons', vhost => 'lessons_fault', token => $good,
             json => { levelId => 1, title => 'Neu', order => 3 });
    });
    is $res->code, 500, 'fault: 500';
    is scalar(@lines), 1, 'fault: exactly one line of ours'
        or diag(join "\n", @lines);
    like $lines[0] // '', qr/\[lessons:error\].*LESSONS00302: database error on .*simulated fault/,
        'fault: LESSONS00302 at error, with the driver\'s message';
}
{
    my ($res, @lines) = lines_for(sub {
        call(GET => '/api/lessons', vhost => 'lessons_down', token => $good);
    });
    is $res->code, 503, 'database down: 503';
    is scalar(@lines), 1, 'database down: exactly one line of ours'
        or diag(join "\n", @lines);
    like $lines[0] // '', qr/\[lessons:error\].*LESSONS0030[14]: /,
        'database down: LESSONS00301 or 00304 at error';
}

# ---- httpd's own lines about the API name no file (issue 23): its
# requests map to no file, and mod_authz_core's AH01630 names
# r->filename, which must say what the request is ("lessons:PATH", as
# mod_proxy's "proxy:URL"), not a path under DocumentRoot.  The caller
# is a service: a client-credentials token, without sub.
{
    my $id = next_id();
    my $service = good_token(claims => { sub => undef, azp => 'report-service',
                                         role => 'reader' });
    push @tokens, $service;
    my $from = log_size();
    my $res = call(PUT => "/authz/api/lessons/$id", token => $service,
                   json => { title => 'x' });
    is $res->code, 403, 'refused by Require, no sub: 403';
    my $fence = 'fence' . next_id();
    call(GET => "/api/lessons/$fence", token => undef);
    my $text = log_until($from, qr/LESSONS00202: GET \/api\/lessons\/$fence /) // '';
    my $docroot = Apache::Test::vars('documentroot');
    like $text, qr/AH01630: client denied by server configuration: lessons:\/authz\/api\/lessons\/$id$/m,
        'AH01630 names the request as lessons:PATH';
    unlike $text, qr/\Q$docroot\E/, '... and no file under DocumentRoot'
        or diag $text;
}

# ---- nothing secret in any log
opendir my $dh, $logs or die "$logs: $!";
my @files = grep { -f "$logs/$_" } readdir $dh;
closedir $dh;
ok scalar(grep { $_ eq 'error_log' } @files), 'the error_log is among the logs read';
my @leaks;
for my $file (@files) {
    open my $fh, '<:raw', "$logs/$file" or die "$logs/$file: $!";
    local $/;
    my $text = <$fh> // '';
    for my $t (@tokens) {
        my ($sig) = $t =~ /\.([^.]+)\z/;
        push @leaks, "$file: a token's signature" if index($text, $sig) >= 0;
    }
    push @leaks, "$file: the HS secret" if index($text, $secret) >= 0;
}
is_deeply \@leaks, [], 'no token signature and no secret in any log';

done_testing();
