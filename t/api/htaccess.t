# Lessons directives in .htaccess (issue 55 item 6).  A .htaccess is read
# by a request's thread, after start-up: there a directive would skip
# every start-up check, push onto server-wide arrays from request
# threads and make key sources no process ever fetches.  So every Lessons
# directive refuses to run from one, whatever AllowOverride and
# AllowOverrideList say: httpd answers the request 500 (its .htaccess
# error) and the error log names the directive and where it belongs.
#
# The directives come from the module itself (httpd -L), so a directive
# added later is tried too; %ARGS gives each the arguments its form
# takes (anything else gets one word, and a directive that needs more
# fails here until it is listed).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Path qw(make_path);
use File::Temp ();
use LessonsTest;

my $dir  = File::Temp->newdir;
my $port = free_port();
my $docs = "$dir/htdocs";
my $hs   = $ENV{LESSONS_TEST_HS_KEY};
my $httpd = LessonsTest::httpd_bin();

sub spew {
    my ($path, $text) = @_;
    open my $fh, '>', $path or die "$path: $!";
    print $fh $text;
    close $fh or die "$path: $!";
}

# Every directive the module has, as httpd lists them.
my $listed = httpd_conf("$dir", $port, '');
my @names = map { /^(<?Lessons\w+) \(mod_lessons\.c\)$/ ? $1 : () }
            split /\n/, scalar `'$httpd' -f '$listed' -L 2>&1`;
cmp_ok scalar(@names), '>=', 30, 'httpd -L lists the Lessons directives'
    or diag "listed: @names";

my %ARGS = (
    LessonsJWTKey                 => "HS256 $hs",
    LessonsJWTAlgorithm           => 'HS256',
    LessonsJWTKeyFile             => $hs,
    LessonsJWTKeysURL             => 'https://idp.example/jwks.json',
    LessonsJWTKeysCA              => $hs,
    LessonsJWTKeysProxy           => 'http://127.0.0.1:3128',
    LessonsJWTIssuer              => 'https://idp.example',
    LessonsJWTKeysRefresh         => 60,
    LessonsJWTKeysMinRefresh      => 60,
    LessonsJWTDPoP                => 'required',
    LessonsJWTDPoPNonce           => 'On',
    LessonsJWTDPoPNonceSecretFile => $hs,
    LessonsJWTTokenType           => 'at+jwt',
    LessonsJWTCertBound           => 'required',
    LessonsJWTIntrospect          => 'https://idp.example/introspect',
    LessonsJWTIntrospectClient    => "client $hs",
    LessonsJWTIntrospectCacheMax  => 60,
    LessonsJWTIntrospectShared    => 0,
    LessonsJWTIntrospectJWT       => 'On',
    LessonsJWTLeeway              => 5,
    LessonsBasePath               => '/elsewhere',
    LessonsDBTimeout              => 5,
    LessonsDBShareWindow          => 0,
    LessonsIdempotencyLifetime    => 60,
    LessonsMaxBodySize            => 100,
    LessonsJWTUserClaim           => 'sub',
    LessonsJWTExportClaims        => 'roles',
    LessonsCORSOrigins            => 'https://app.example',
    LessonsCacheSize              => 0,
);

# One directory per directive, its .htaccess holding that directive;
# "open" holds none, "all" a key under AllowOverride All.
my @dirs;
for my $name (@names) {
    (my $sub = $name) =~ s/^</section-/;
    my $line = $name =~ /^</
        ? "$name https://idp.example>\n    LessonsJWTKey HS256 $hs\n</"
          . substr($name, 1) . ">\n"
        : "$name " . ($ARGS{$name} // 'x') . "\n";
    make_path("$docs/list/$sub");
    spew("$docs/list/$sub/.htaccess", $line);
    spew("$docs/list/$sub/file.txt", "OPEN\n");
    push @dirs, [ $name, "/list/$sub/file.txt" ];
}
make_path("$docs/list/open", "$docs/all");
spew("$docs/list/open/.htaccess", "# nothing of ours\n");
spew("$docs/list/open/file.txt", "OPEN\n");
spew("$docs/all/.htaccess", "LessonsJWTKey HS256 $hs\n");
spew("$docs/all/file.txt", "OPEN\n");

my $conf = httpd_conf("$dir", $port, <<"EOF");
@{[ one_process_conf() ]}
LogLevel info
DocumentRoot "$docs"
<Directory "$docs/list">
    AllowOverride None
    AllowOverrideList @{[ join ' ', @names ]}
</Directory>
<Directory "$docs/all">
    AllowOverride All
</Directory>
EOF
start_httpd($conf, $port);
my $base = "http://127.0.0.1:$port";

my $res = call(GET => '/list/open/file.txt', base => $base, token => undef);
is $res->code, 200, 'a .htaccess with no Lessons directive: the file is served';

sub error_log { local (@ARGV, $/) = ("$dir/error_log"); return <> // '' }

for my $d (@dirs) {
    my ($name, $path) = @$d;
    my $shown = $name =~ /^</ ? "$name>" : $name;
    my $res = call(GET => $path, base => $base, token => undef);
    is $res->code, 500, "$shown in .htaccess under AllowOverrideList: 500";
    unlike $res->content, qr/OPEN/, "$shown in .htaccess: the file is not served";
    # Directives of the main server's or a virtual host's own context
    # httpd refuses itself, AllowOverrideList or not.
    like error_log(),
        qr{/list/\Q@{[ $name =~ s/^</section-/r ]}\E/\.htaccess: \Q$shown\E (?:is not allowed in \.htaccess files, whatever AllowOverride and AllowOverrideList say: Lessons directives belong in the server configuration|not allowed here)},
        "$shown in .htaccess: the log line names the file and the directive"
        or note join "", grep { /\Q$shown\E/ } split /^/, error_log();
}

like error_log(),
    qr{/list/LessonsJWTKey/\.htaccess: LessonsJWTKey is not allowed in \.htaccess files},
    'LessonsJWTKey under AllowOverrideList: refused by the module, not taken';

# Under AllowOverride All a Lessons directive was never taken (its
# context is the server configuration's): httpd's own refusal, still 500.
$res = call(GET => '/all/file.txt', base => $base, token => undef);
is $res->code, 500, 'LessonsJWTKey in .htaccess under AllowOverride All: 500';
like error_log(), qr{/all/\.htaccess: LessonsJWTKey not allowed here},
    'AllowOverride All: httpd says not allowed here';

done_testing;
