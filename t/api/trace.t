# TRACE, which httpd answers itself (mod_http, in map_to_storage) before
# any access control, echoing the request, Authorization header
# included, while TraceEnable is on (its default).
#
# On the API (issue 6 item 4) it is an unknown method like any other: the
# token is checked first (401 without one), then 405 with Allow,
# problem+json, and nothing of the request is echoed.
#
# Elsewhere (issue 40 item 6): where a key is in force, in a <Location>
# or a <Directory> over static files (t/conf/extra.conf.in; the files are
# made here), TRACE meets the gate like any other method (401 without a
# token) and the Require lines (403), and past them gets httpd's own
# TRACE, as TraceEnable says (the echo; 405 where it is off, in a server
# of the test's own).  Where no key is in force, httpd answers as
# it does without the module: the same status and bytes as an httpd
# without it.  The health check and the metrics mounted by <Files>
# (which translate_name cannot see) answer every method but GET and HEAD
# with 405, TRACE included, as their <Location> mounts do.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Path qw(make_path);
use File::Temp ();
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

# ---- the files behind t/conf/extra.conf.in's /trace-static
my $mods   = $ENV{LESSONS_TEST_HTTPD_MODULES} || '/usr/lib/apache2/modules';
my $static = Apache::Test::vars('serverroot') . '/trace-static';
sub spew {
    my ($path, $text) = @_;
    open my $fh, '>', $path or die "$path: $!";
    print $fh $text;
    close $fh or die "$path: $!";
}
make_path("$static/located", "$static/keyed", "$static/claimed", "$static/mounted");
spew("$static/open.txt", "OPEN\n");
spew("$static/located/file.txt", "LOCATED\n");
spew("$static/keyed/file.txt", "KEYED\n");
spew("$static/claimed/file.txt", "CLAIMED\n");
spew("$static/mounted/$_", '') for qw(health metrics);

my $MARK = 'trace-marker-4711';
my @marked = ('X-Trace-Marker' => $MARK);

# httpd's echo of the request to $path.
sub is_echo {
    my ($res, $path, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    is $res->code, 200, "$name: 200";
    is $res->header('Content-Type') // '', 'message/http', "$name: message/http";
    like $res->content, qr{\ATRACE \Q$path\E HTTP/1\.1\r\n.*^X-Trace-Marker: \Q$MARK\E\r$}ms,
        "$name: the request echoed";
}
sub not_echoed {
    my ($res, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    unlike $res->content, qr/\Q$MARK\E|secret-looking/, "$name: nothing of the request echoed";
    unlike $res->header('Content-Type') // '', qr{message/http}, "$name: not httpd's echo";
}

# ---- no key in force: as an httpd without the module answers
my $bdir  = File::Temp->newdir;
my $bport = free_port();
start_httpd(httpd_conf("$bdir", $bport, <<"EOF", module => 0), $bport);
LoadModule alias_module "$mods/mod_alias.so"
Alias "/trace-static" "$static"
EOF
my $bare = "http://127.0.0.1:$bport";
my @same = (token => undef, headers => [ Host => 'trace.test', @marked ]);
for my $path ('/trace-static/open.txt', '/trace-static/absent.txt', '/trace-static/') {
    my $ours = call(TRACE => $path, @same);
    my $theirs = call(TRACE => $path, @same, base => $bare);
    is_echo($ours, $path, "TRACE $path (no key)");
    is $ours->code, $theirs->code, "TRACE $path (no key): httpd's status";
    is $ours->header('Content-Type') // '', $theirs->header('Content-Type') // '',
        "TRACE $path (no key): httpd's Content-Type";
    is $ours->content, $theirs->content, "TRACE $path (no key): httpd's bytes";
}
{
    my $path = '/trace-static/open.txt';
    my $ours = call(TRACE => $path, @same, body => 'a body', type => 'text/plain');
    my $theirs = call(TRACE => $path, @same, body => 'a body', type => 'text/plain',
                      base => $bare);
    is $ours->code, 413, 'TRACE with a body (no key): 413';
    is $ours->code, $theirs->code, "TRACE with a body (no key): httpd's status";
}

# ---- a key in a <Location>, and in a <Directory>
for my $path ('/trace-static/located/file.txt', '/trace-static/keyed/file.txt') {
    is call(GET => $path, token => $token)->code, 200, "GET $path with a token: 200";
    is_unauthorized(call(GET => $path, token => undef), "GET $path without a token");
    my $res = call(TRACE => $path, token => undef, headers => [@marked]);
    is_unauthorized($res, "TRACE $path without a token");
    not_echoed($res, "TRACE $path without a token");
    if ($path =~ /located/) {
        is join('|', $res->header('X-Trace-Location'), $res->header('X-Trace-If')),
            'once|once', "TRACE $path: its <Location> and <If> merged once each";
    }
    $res = call(TRACE => $path, token => 'not-a-token', headers => [@marked]);
    is_unauthorized($res, "TRACE $path with a bad token", 'invalid_token');
    not_echoed($res, "TRACE $path with a bad token");
    is_echo(call(TRACE => $path, token => $token, headers => [@marked]), $path,
            "TRACE $path with a token: httpd's TRACE, past the gate");
}

# ... and past the gate, the Require lines: a token they refuse gets
# their 403, not the echo.
{
    my $path = '/trace-static/claimed/file.txt';
    my $res = call(TRACE => $path, token => $token, headers => [@marked]);
    is_problem($res, 403, "TRACE $path, a token without the claim");
    not_echoed($res, "TRACE $path, a token without the claim");
    is_unauthorized(call(TRACE => $path, token => undef, headers => [@marked]),
                    "TRACE $path without a token");
    is_echo(call(TRACE => $path, headers => [@marked],
                 token => good_token(claims => { role => 'admin' })),
            $path, "TRACE $path, a token with the claim: httpd's TRACE");
}

# ---- the health check and the metrics mounted by <Files>
for my $path ('/trace-static/mounted/health', '/trace-static/mounted/metrics') {
    is call(GET => $path, token => undef)->code, 200, "GET $path: 200";
    for my $m (qw(TRACE POST PUT DELETE PATCH OPTIONS FOO)) {
        my $res = call($m => $path, auth => 'Bearer secret-looking', headers => [@marked]);
        is_problem($res, 405, "$m $path");
        is $res->header('Allow'), 'GET, HEAD', "$m $path: Allow: GET, HEAD";
        not_echoed($res, "$m $path");
    }
}

# ---- TraceEnable Off (a server of its own): 405 for TRACE everywhere,
# past the gate where a key is in force.
my $dir  = File::Temp->newdir;
my $port = free_port();
my $conf = httpd_conf("$dir", $port, <<"EOF");
TraceEnable Off
LoadModule alias_module "$mods/mod_alias.so"
Alias "/trace-static" "$static"
<Location "/trace-static/located">
    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"
</Location>
<Directory "$static/keyed">
    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"
</Directory>
EOF
start_httpd($conf, $port);
my $off = "http://127.0.0.1:$port";
{
    my $res = call(TRACE => '/trace-static/open.txt', token => undef, base => $off,
                   headers => [@marked]);
    is $res->code, 405, 'TraceEnable Off, no key: 405';
    not_echoed($res, 'TraceEnable Off, no key');
}
for my $path ('/trace-static/located/file.txt', '/trace-static/keyed/file.txt') {
    my $res = call(TRACE => $path, token => undef, base => $off, headers => [@marked]);
    is_unauthorized($res, "TraceEnable Off, TRACE $path without a token");
    $res = call(TRACE => $path, token => $token, base => $off, headers => [@marked]);
    is $res->code, 405, "TraceEnable Off, TRACE $path with a token: 405";
    not_echoed($res, "TraceEnable Off, TRACE $path with a token");
}

done_testing;
