# A gate no nesting can open (issue 40, item 1): once a section needs a
# token (a key, a keys URL, an issuer whose keys are discovered, an
# issuer block), no section merged after it -- a <LocationMatch>, an
# <If> the client steers with Host or by leaving out its token, a
# <FilesMatch> over a CGI -- can make the token not needed.  Where what
# the merge leaves cannot verify a token, every request fails closed
# (500, LESSONS00201) and reaches no file, CGI or handler; configtest
# refuses each such layout it can see, naming the file and line.  Paths
# that no gating section matches still serve.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use LessonsTest;

my $mods = $ENV{LESSONS_TEST_HTTPD_MODULES} || '/usr/lib/apache2/modules';
my $dir  = File::Temp->newdir;
chmod 0755, "$dir";
my $key  = LessonsTest::env('LESSONS_TEST_HS_KEY');
# An https issuer whose keys would be discovered; nothing listens there,
# so its keys never arrive (a token gets 503), but it needs a token.
my $idp  = 'https://127.0.0.1:1/realms/school';

sub write_file {
    my ($path, $text, $mode) = @_;
    open my $fh, '>', $path or die "$path: $!";
    print $fh $text;
    close $fh or die "$path: $!";
    chmod $mode, $path if $mode;
}

# Files behind each layout, and a CGI that leaves a mark when it runs.
mkdir "$dir/$_" for qw(files cgi free marks);
chmod 0777, "$dir/marks";
write_file("$dir/files/f.txt", "secret\n");
mkdir "$dir/files/open";
write_file("$dir/files/open/f.txt", "secret too\n");
write_file("$dir/free/f.txt", "free\n");
write_file("$dir/cgi/run.cgi",
           "#!/bin/sh\ntouch $dir/marks/ran\nprintf 'Content-Type: text/plain\\n\\nran\\n'\n",
           0755);

my $port = free_port();
my $conf = httpd_conf($dir, $port, <<"EOF");
LoadModule alias_module "$mods/mod_alias.so"
LoadModule mime_module  "$mods/mod_mime.so"
LoadModule cgid_module  "$mods/mod_cgid.so"
ScriptSock "$dir/cgid.sock"
TypesConfig /etc/mime.types
LogLevel info
<Directory />
    Require all granted
</Directory>
Alias /free "$dir/free"
Alias /a "$dir/files"
Alias /b "$dir/files"
Alias /c "$dir/files"
Alias /e "$dir/files"
Alias /d "$dir/cgi"
<Directory "$dir/cgi">
    Options +ExecCGI
    AddHandler cgi-script .cgi
    LessonsJWTIssuer $idp
</Directory>

# A: a regex section below a discovering one names an issuer whose keys
# cannot be discovered.
<Location "/a">
    LessonsJWTIssuer $idp
</Location>
<LocationMatch "^/a/open">
    LessonsJWTIssuer urn:example:open
</LocationMatch>

# B and C: the client steers an <If>, with its Host or by sending no
# token at all.
<Location "/b">
    LessonsJWTIssuer $idp
</Location>
<If "%{HTTP_HOST} == 'staging.example'">
    LessonsJWTIssuer http://staging-idp
</If>
<Location "/c">
    LessonsJWTIssuer $idp
</Location>
<If "-z %{HTTP:Authorization} && %{REQUEST_URI} =~ m#^/c/#">
    LessonsJWTIssuer urn:example:x
</If>

# D: a <FilesMatch> over the CGI of a discovering <Directory>.
<FilesMatch "\\.cgi\$">
    LessonsJWTIssuer urn:example:cgi
</FilesMatch>

# E: an inner issuer where a key stays in force is a narrower gate, as
# it always was.
<Location "/e">
    LessonsJWTKey HS256 "$key"
</Location>
<LocationMatch "^/e/open">
    LessonsJWTIssuer urn:example:e
</LocationMatch>
EOF
start_httpd($conf, $port);
my $base = "http://127.0.0.1:$port";

sub get {
    my ($path, %o) = @_;
    return call(GET => $path, base => $base, token => $o{token},
                headers => $o{headers} || []);
}

sub closed_ok {
    my ($res, $want, $name) = @_;
    is $res->code, $want, "$name: $want";
    unlike $res->content, qr/secret/, "$name: not the file";
}

my $bad = jwt(alg => 'HS256', key => 'x' x 32, claims => { iss => $idp });

# A
closed_ok(get('/a/f.txt'), 401, 'A: the discovering section, no token');
closed_ok(get('/a/open/f.txt'), 500,
          'A: below it, a regex section with an urn issuer, no token');
closed_ok(get('/a/open/f.txt', token => $bad), 500,
          'A: ... with a forged token');

# B
closed_ok(get('/b/f.txt'), 401, 'B: no token');
closed_ok(get('/b/f.txt', headers => [Host => 'staging.example']), 500,
          'B: no token, Host chosen to switch the issuer');
my $free = get('/free/f.txt', headers => [Host => 'staging.example']);
is $free->code, 200, 'B: a path no gate covers still serves under that Host';
like $free->content, qr/free/, '... its file';

# C
closed_ok(get('/c/f.txt'), 500, 'C: leaving the token out no longer opens it');
my $c = get('/c/f.txt', token => $bad);
ok $c->code >= 400, 'C: a forged token is refused (' . $c->code . ')';
unlike $c->content, qr/secret/, '... not the file';

# D
unlink "$dir/marks/ran";
my $d = get('/d/run.cgi');
is $d->code, 500, 'D: the CGI under a <FilesMatch> with an urn issuer: 500';
ok !-e "$dir/marks/ran", '... and it did not run';

# E
closed_ok(get('/e/open/f.txt'), 401, 'E: no token');
closed_ok(get('/e/open/f.txt', token => token(claims => { iss => 'urn:other' })),
          401, 'E: a token of another issuer');
my $e = get('/e/open/f.txt', token => token(claims => { iss => 'urn:example:e' }));
is $e->code, 200, 'E: a token of the inner issuer, with the key in force';
like $e->content, qr/secret too/, '... its file';

# One error line per refusal, naming what the merge left.
my $log = do { local (@ARGV, $/) = ("$dir/error_log"); <> } // '';
like $log, qr/LESSONS00201: a token is needed here \(from \Q$conf\E:\d+ on\), but a section merged after it leaves no key in effect/,
     'the 500s are logged as LESSONS00201, naming where the token became needed';

# ---- configtest: the layouts it can see
sub configtest { conf_test($dir, @_) }

sub refused_ok {
    my ($body, $line, $name) = @_;
    my ($rc, $out, $c) = configtest($body);
    isnt $rc, 0, "configtest refuses $name";
    like $out, qr/LESSONS00112: \Q$c\E:$line: a token is needed here/,
         "... naming its section ($line)" or diag $out;
}

# The issue's own layout: the file's line 15 is the body's first.
refused_ok(<<"EOF", 21, 'an urn issuer in a <Location> below a discovering one');
<Location /api>
    LessonsJWTIssuer $idp
</Location>
<Location /api/lessons>
    SetHandler lessons
</Location>
<Location /api/reports>
    LessonsJWTIssuer urn:example:reports
</Location>
Alias /api/reports "$dir/files"
EOF
refused_ok(<<"EOF", 17, 'an <If> inside a discovering <Location>');
<Location /api>
    LessonsJWTIssuer $idp
    <If "%{HTTP_HOST} == 'staging.example'">
        LessonsJWTIssuer http://staging-idp
    </If>
</Location>
<Location /api/lessons>
    SetHandler lessons
</Location>
EOF
refused_ok(<<"EOF", 17, 'a <Files> in a discovering virtual host');
<VirtualHost 127.0.0.1:$port>
    LessonsJWTIssuer $idp
    <Files "*.cgi">
        LessonsJWTIssuer urn:example:cgi
    </Files>
</VirtualHost>
<Location /api/lessons>
    SetHandler lessons
    LessonsJWTKey HS256 "$key"
</Location>
EOF
refused_ok(<<"EOF", 17, 'a <Location> of a virtual host under a discovering server');
LessonsJWTIssuer $idp
<VirtualHost 127.0.0.1:$port>
    <Location /x>
        LessonsJWTIssuer https://127.0.0.1:1/q?realm=x
    </Location>
</VirtualHost>
<Location /api/lessons>
    SetHandler lessons
</Location>
EOF
my ($rc, $out) = configtest(<<"EOF");
<Location /api>
    LessonsJWTKey HS256 "$key"
</Location>
<Location /api/lessons>
    SetHandler lessons
    LessonsJWTIssuer urn:example:api
</Location>
EOF
is $rc, 0, 'configtest takes an inner issuer where a key stays in force'
    or diag $out;

done_testing();
