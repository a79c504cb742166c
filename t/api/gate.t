# The token gate under every httpd access layout (issue 23, items 1, 3
# and 8).  A server of the test's own loads mod_access_compat (Satisfy,
# Order/Allow), Basic auth, CGI and mod_proxy beside the module, and
# puts a key in front of four kinds of handler (the API, a CGI script,
# a proxied backend, a static file) in <Location>, <Directory> and <If>
# sections, under ten Satisfy/Require/Order/AuthType layouts.
#
# What must hold: no request without a valid token reaches a handler
# (the CGI and the backend count what they see), the refusal is one
# problem+json document written once; a failing Require jwt-claim is
# overridden only by a <RequireAny> the admin wrote; a token's user
# claim reaches REMOTE_USER and headers only when it is a plain name;
# and a Basic-auth directory listing next door costs no more
# authorization runs with the module loaded than without it.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Path qw(make_path);
use File::Temp ();
use LWP::UserAgent ();
use JSON::PP ();
use MIME::Base64 qw(encode_base64);
use LessonsTest;

my $mods = $ENV{LESSONS_TEST_HTTPD_MODULES} || '/usr/lib/apache2/modules';
my $dir  = File::Temp->newdir(CLEANUP => !$ENV{LESSONS_TEST_KEEP});
chmod 0755, "$dir";
my $port = free_port();
my $key  = $ENV{LESSONS_TEST_HS_KEY};
my $hits = "$dir/hits";

# ---- the handlers behind the gate
sub spew {
    my ($path, $text, $mode) = @_;
    open my $fh, '>', $path or die "$path: $!";
    print $fh $text;
    close $fh or die "$path: $!";
    chmod $mode, $path if $mode;
}
my $cgi = <<"EOF";
#!/bin/sh
echo "\$REQUEST_URI" >> "$hits"
printf 'Content-Type: text/plain\\r\\n\\r\\n'
echo "CGI-RAN"
echo "REMOTE_USER=\$REMOTE_USER"
echo "X_REMOTE_USER=\$HTTP_X_REMOTE_USER"
echo "X_ADMIN=\$HTTP_X_ADMIN"
echo "CLAIM_NOTE=\$JWT_CLAIM_note"
EOF
make_path("$dir/cgi", "$dir/static", "$dir/listing");
spew("$dir/cgi/count.cgi", $cgi, 0755);
spew("$dir/static/file.txt", "STATIC-CONTENT\n", 0644);
spew("$dir/listing/$_.txt", "listed $_\n", 0644) for 1 .. 8;
system('htpasswd', '-cbm', "$dir/htpasswd", 'bob', 'secret') == 0
    or BAIL_OUT('htpasswd failed');
spew("$dir/empty.load", '');

# ---- the layouts: Satisfy/Require/Order/AuthType beside the key
my %LAYOUT = (
    any_granted => "Satisfy Any\nRequire all granted",
    any_bare    => "Satisfy Any",
    all_granted => "Satisfy All\nRequire all granted",
    any_ip      => "Satisfy Any\nRequire ip 127.0.0.1",
    any_order   => "Satisfy Any\nOrder allow,deny\nAllow from all",
    any_basic   => "Satisfy Any\nAuthType Basic\nAuthName gate\n"
                   . "AuthUserFile \"$dir/htpasswd\"\nRequire valid-user",
    all_claim   => "Require jwt-claim role admin",
    any_claim   => "Satisfy Any\nRequire jwt-claim role admin",
    any_claim_allow => "Satisfy Any\nOrder deny,allow\nAllow from 127.0.0.1\n"
                   . "Require jwt-claim role admin",
    any_anyof   => "Satisfy Any\n<RequireAny>\nRequire ip 127.0.0.1\n"
                   . "Require jwt-claim role admin\n</RequireAny>",
);
# Layouts where a valid token without role admin is refused (403).
my %CLAIM = map { $_ => 1 } qw(all_claim any_claim any_claim_allow);

my $KEY = "LessonsJWTKey HS256 \"$key\"";
my (@cases, $body);

# One guarded section: <$type "$where"> with the handler's lines, then the
# key and the access lines, directly or inside an <If>.
sub guarded {
    my ($type, $where, $handler, $access, $in_if) = @_;
    my $guard = "$KEY\n$access";
    $guard = "<If \"-n %{REQUEST_URI}\">\n$guard\n</If>" if $in_if;
    return qq{<$type "$where">\n$handler\n$guard\n</$type>\n};
}

my $CGI = "SetHandler cgi-script\nOptions +ExecCGI";
for my $name (sort keys %LAYOUT) {
    my $access = $LAYOUT{$name};
    # The API, in <Location> and in <If>.
    $body .= guarded(Location => "/l/$name", 'SetHandler lessons', $access)
           . guarded(Location => "/li/$name",
                     "SetHandler lessons\nLessonsBasePath \"/li/$name\"",
                     $access, 1);
    push @cases, [ lessons => "/l/$name", $name ], [ lessons => "/li/$name", $name ];
    # A CGI script, in <Location>, <Directory> and <If>.
    make_path("$dir/d/$name");
    spew("$dir/d/$name/count.cgi", $cgi, 0755);
    $body .= qq{Alias "/c/$name" "$dir/cgi/count.cgi"\n}
           . qq{Alias "/d/$name" "$dir/d/$name"\n}
           . qq{Alias "/ci/$name" "$dir/cgi/count.cgi"\n}
           . guarded(Location => "/c/$name", $CGI, $access)
           . guarded(Directory => "$dir/d/$name", $CGI, $access)
           . guarded(Location => "/ci/$name", $CGI, $access, 1);
    push @cases, [ cgi => "/c/$name", $name ], [ cgi => "/d/$name/count.cgi", $name ],
                 [ cgi => "/ci/$name", $name ];
    # mod_proxy to the unguarded backend, in <Location> and <If>.
    for my $p ("p", "pi") {
        $body .= guarded(Location => "/$p/$name",
            qq{ProxyPass "http://127.0.0.1:$port/backend/count.cgi/$p/$name"},
            $access, $p eq 'pi');
        push @cases, [ proxy => "/$p/$name", $name, "/backend/count.cgi/$p/$name" ];
    }
    # A static file, in <Directory>.
    make_path("$dir/s/$name");
    spew("$dir/s/$name/file.txt", "STATIC-CONTENT\n", 0644);
    $body .= qq{Alias "/s/$name" "$dir/s/$name"\n}
           . guarded(Directory => "$dir/s/$name", '', $access);
    push @cases, [ static => "/s/$name/file.txt", $name ];
}

my $common = <<"EOF";
LogLevel info authz_core:debug
LoadModule mime_module          "$mods/mod_mime.so"
TypesConfig /etc/mime.types
LoadModule alias_module         "$mods/mod_alias.so"
LoadModule dir_module           "$mods/mod_dir.so"
LoadModule autoindex_module     "$mods/mod_autoindex.so"
LoadModule authn_core_module    "$mods/mod_authn_core.so"
LoadModule authn_file_module    "$mods/mod_authn_file.so"
LoadModule auth_basic_module    "$mods/mod_auth_basic.so"
LoadModule authz_user_module    "$mods/mod_authz_user.so"
LoadModule authz_host_module    "$mods/mod_authz_host.so"
LoadModule access_compat_module "$mods/mod_access_compat.so"
LoadModule cgid_module          "$mods/mod_cgid.so"
LoadModule proxy_module         "$mods/mod_proxy.so"
LoadModule proxy_http_module    "$mods/mod_proxy_http.so"
LoadModule headers_module       "$mods/mod_headers.so"
ScriptSock "$dir/cgisock.%{PORT}"
DocumentRoot "$dir/static"
ScriptAlias "/backend/" "$dir/cgi/"
# A neighbour of the API: a Basic-auth directory listing, whose
# DirectoryIndex and autoindex make a subrequest per name and per file.
Alias "/listing" "$dir/listing"
<Directory "$dir/listing">
    Options +Indexes
    DirectoryIndex index.html index.cgi index.pl index.php index.xhtml index.htm
    AuthType Basic
    AuthName listing
    AuthUserFile "$dir/htpasswd"
    Require valid-user
</Directory>
EOF
(my $common_port = $common) =~ s/%\{PORT\}/$port/;

# Item 3: the user claim into a proxied header and CGI's REMOTE_USER;
# an exported claim into the environment.
$body .= <<"EOF";
<Location "/hdr">
    ProxyPass "http://127.0.0.1:$port/backend/count.cgi/hdr"
    RequestHeader set X-Remote-User "expr=%{REMOTE_USER}"
    $KEY
</Location>
Alias "/env" "$dir/cgi/count.cgi"
<Location "/env">
    SetHandler cgi-script
    Options +ExecCGI
    $KEY
    LessonsJWTExportClaims note
</Location>
Alias "/email" "$dir/cgi/count.cgi"
<Location "/email">
    SetHandler cgi-script
    Options +ExecCGI
    $KEY
    LessonsJWTUserClaim email
</Location>
EOF

my $conf = httpd_conf($dir, $port, "$common_port\n$body");
start_httpd($conf, $port);
my $base = "http://127.0.0.1:$port";

# ---- the same neighbour on a server without the module
my $port0 = free_port();
(my $common0 = $common) =~ s/%\{PORT\}/$port0/;
make_path("$dir/plain");
my $conf0 = "$dir/plain/httpd.conf";
spew($conf0, <<"EOF");
ServerRoot "$dir/plain"
ServerName localhost
Listen 127.0.0.1:$port0
PidFile "$dir/plain/httpd.pid"
ErrorLog "$dir/plain/error_log"
DefaultRuntimeDir "$dir/plain"
LoadModule mpm_event_module  "$mods/mod_mpm_event.so"
LoadModule authz_core_module "$mods/mod_authz_core.so"
$common0
EOF
start_httpd($conf0, $port0);

# ---- requests
my $ua = LWP::UserAgent->new(keep_alive => 0, max_redirect => 0, timeout => 30);
sub get {
    my ($url, $auth) = @_;
    return $ua->get($url, defined $auth ? (Authorization => $auth) : ());
}
sub hits_of {
    my ($uri) = @_;
    open my $fh, '<', $hits or return 0;
    return scalar grep { $_ eq "$uri\n" } <$fh>;
}
sub bearer { 'Bearer ' . good_token(claims => { @_ }) }
my $viewer = bearer(sub => 'v-1', role => 'viewer');
my $admin  = bearer(sub => 'a-1', role => 'admin');
(my $badsig = bearer(sub => 'a-1', role => 'admin')) =~ s/(.)\z/$1 eq 'A' ? 'B' : 'A'/e;
my $basic  = 'Basic ' . encode_base64('bob:secret', '');

my %seen;                       # the closing note's table
sub served {
    my ($kind, $res) = @_;
    my $c = $res->content;
    return $kind eq 'lessons' ? ($c =~ /\A\[/ ? 1 : 0)
         : $kind eq 'static'  ? ($c =~ /STATIC-CONTENT/ ? 1 : 0)
         :                      ($c =~ /CGI-RAN/ ? 1 : 0);
}

for my $case (@cases) {
    my ($kind, $path, $layout, $backend) = @$case;
    my $counted = $kind eq 'cgi' ? $path : $kind eq 'proxy' ? $backend : undef;
    for my $who ([ none => undef ], [ badsig => $badsig ], [ basic => $basic ],
                 [ viewer => $viewer ], [ admin => $admin ]) {
        my ($as, $auth) = @$who;
        my $name = "$kind $path ($as)";
        my $before = defined $counted ? hits_of($counted) : 0;
        my $res = get("$base$path", $auth);
        my $want = $as =~ /\A(none|badsig|basic)\z/ ? 401
                 : $as eq 'viewer' && $CLAIM{$layout} ? 403
                 : 200;
        $seen{"$layout $kind $path"}{$as} = $res->code;
        if ($want == 200) {
            is $res->code, 200, "$name: 200";
            ok served($kind, $res), "$name: the handler answered";
        }
        else {
            my $p = is_problem($res, $want, $name);
            ok !served($kind, $res), "$name: no handler output";
            unlike $res->content, qr/<html|CGI-RAN|STATIC-CONTENT/i,
                "$name: one problem document, nothing after it";
            is length($res->content), $res->header('Content-Length') // -1,
                "$name: Content-Length is the problem document's";
            if ($want == 401) {
                like $res->header('WWW-Authenticate') // '', qr/\ABearer realm=/,
                    "$name: Bearer challenge";
            }
        }
        if (defined $counted) {
            $seen{"$layout $kind $path"}{hits} += hits_of($counted) - $before;
            is hits_of($counted) - $before, $want == 200 ? 1 : 0,
                "$name: the backend saw " . ($want == 200 ? 'it once' : 'nothing');
        }
    }
}

# ---- item 3: a user claim that cannot be a user name refuses the token
my $hdr = '/backend/count.cgi/hdr';
my $n = hits_of($hdr);
my $res = get("$base/hdr", bearer(sub => "mallory\r\nX-Admin: true"));
is_problem($res, 401, 'sub with CR LF');
like $res->header('WWW-Authenticate') // '', qr/error="invalid_token"/,
    'sub with CR LF: invalid_token';
$res = get("$base/hdr", bearer(sub => 'x' x 5000));
is_problem($res, 401, '5,000-byte sub');
$res = get("$base/hdr", bearer(sub => "eve\x{85}"));
is_problem($res, 401, 'sub with a C1 control (NEL)');
is hits_of($hdr), $n, 'no refused token reached the backend';
$res = get("$base/hdr", bearer(sub => 'alice'));
is $res->code, 200, 'a plain sub: 200';
like $res->content, qr/^X_REMOTE_USER=alice$/m, 'the backend sees X-Remote-User: alice';
like $res->content, qr/^X_ADMIN=$/m, 'and no X-Admin header';
$res = get("$base/hdr", bearer(sub => "Jörg Müller"));
is $res->code, 200, 'a non-ASCII sub: 200';
$res = get("$base/email", bearer(sub => 'ok', email => "a\@b\nX: y"));
is_problem($res, 401, 'LessonsJWTUserClaim email with a line break');
$res = get("$base/email", bearer(sub => 'ok', email => 'carol@example.org'));
like $res->content, qr/^REMOTE_USER=carol\@example\.org$/m,
    'LessonsJWTUserClaim email: REMOTE_USER';
$res = get("$base/env", bearer(sub => 'dave', note => "line1\nline2"));
is $res->code, 200, 'an exported claim with a line break: still 200';
like $res->content, qr/^CLAIM_NOTE=$/m, '... and not exported (not cleaned)';
$res = get("$base/env", bearer(sub => 'dave', note => 'plain'));
like $res->content, qr/^CLAIM_NOTE=plain$/m, 'a plain exported claim';
$res = get("$base/env", bearer(sub => 'dave', note => 'n' x 2000));
like $res->content, qr/^CLAIM_NOTE=$/m, 'an exported claim over 1,024 bytes: not exported (not cut)';

# ---- item 8: the neighbour's authorization runs, with and without us
sub authz_runs {
    my ($b, $log) = @_;
    my $before = -s $log // 0;
    my $r = get("$b/listing/", $basic);
    is $r->code, 200, "listing on $b: 200";
    like $r->content, qr/8\.txt/, "listing on $b: lists the files";
    select undef, undef, undef, 0.3;        # the log line lands
    open my $fh, '<', $log or die "$log: $!";
    seek $fh, $before, 0;
    return scalar grep { /AH01626/ } <$fh>;
}
my $with    = authz_runs($base, "$dir/error_log");
my $without = authz_runs("http://127.0.0.1:$port0", "$dir/plain/error_log");
ok $without > 0, "the listing runs authorization ($without lines without the module)";
is $with, $without, "a Basic-auth listing runs authorization as often with the module ($with) as without";

# The table for the closing note (LESSONS_GATE_TABLE=1; in suite.log).
if ($ENV{LESSONS_GATE_TABLE}) {
    for my $k (sort keys %seen) {
        my $s = $seen{$k};
        diag sprintf "%-40s none %s badsig %s basic %s viewer %s admin %s backend %s",
            $k, map({ $s->{$_} } qw(none badsig basic viewer admin)),
            $s->{hits} // '-';
    }
}

done_testing();
