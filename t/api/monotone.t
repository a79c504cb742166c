# What an outer section requires, an inner one cannot relax (issue 55,
# item 5): LessonsJWTDPoP, LessonsJWTCertBound, LessonsJWTTokenType
# at+jwt and LessonsJWTAudience are monotone along the merge chain, as
# "a token is needed" is (issue 40).  A <Location> requires each of
# them; an <If> the client steers with its Host sets the weaker value.
# Before, a stolen DPoP-bound token sent as Bearer got 401 normally and
# 200 with "Host: relaxed"; the same with a certificate-bound token,
# a plain JWT where at+jwt is required, and a token for another
# audience.  Now:
#   - the <If> beside the <Location> (a merge only a request shows):
#     every request it relaxes fails closed, 500 with one LESSONS00781
#     line naming where the requirement was made, never the file;
#   - the same <If> inside the <Location> (the issue's own layout, which
#     the configuration shows), a <Location> under a server-level
#     requirement, a virtual host relaxing the main server's: configtest
#     refuses each, LESSONS00780 naming the relaxing section's file and
#     line;
#   - an inner section that repeats or tightens a requirement is taken.
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

open my $fh, '>', "$dir/f.txt" or die "$dir/f.txt: $!";
print $fh "secret\n";
close $fh or die $!;

# Each directive on a path of its own; each <If> relaxes its path only.
my %if = map { $_ => qq{<If "%{HTTP_HOST} == 'relaxed' && %{REQUEST_URI} =~ m#^/$_/#">} }
         qw(dpop cert type aud);
my $port = free_port();
my $conf = httpd_conf($dir, $port, <<"EOF");
LoadModule alias_module "$mods/mod_alias.so"
LogLevel info
<Directory />
    Require all granted
</Directory>
Alias /dpop "$dir"
Alias /cert "$dir"
Alias /type "$dir"
Alias /aud "$dir"
<Location "/dpop">
    LessonsJWTKey HS256 "$key"
    LessonsJWTDPoP required
</Location>
<Location "/cert">
    LessonsJWTKey HS256 "$key"
    LessonsJWTCertBound optional
</Location>
<Location "/type">
    LessonsJWTKey HS256 "$key"
    LessonsJWTTokenType at+jwt
</Location>
<Location "/aud">
    LessonsJWTKey HS256 "$key"
    LessonsJWTAudience lessons-api
</Location>
$if{dpop}
    LessonsJWTDPoP off
</If>
$if{cert}
    LessonsJWTCertBound off
</If>
$if{type}
    LessonsJWTTokenType any
</If>
$if{aud}
    LessonsJWTAudience reports
</If>
EOF
start_httpd($conf, $port);
my $base = "http://127.0.0.1:$port";

sub get {
    my ($path, $token, @h) = @_;
    return call(GET => $path, base => $base, token => $token, headers => \@h);
}

sub closed_ok {
    my ($res, $want, $name) = @_;
    is $res->code, $want, "$name: $want";
    unlike $res->content, qr/secret/, "$name: not the file";
}

my $relaxed = [Host => 'relaxed'];
my %stolen = (
    dpop => token(claims => { cnf => { jkt => 'A' x 43 } }),
    cert => token(claims => { cnf => { 'x5t#S256' => 'B' x 43 } }),
    type => token(),                                   # typ JWT
    aud  => token(claims => { aud => 'reports' }),
);
my %what = (
    dpop => 'a DPoP-bound token sent as Bearer',
    cert => 'a certificate-bound token without its certificate',
    type => 'a plain JWT where at+jwt is required',
    aud  => 'a token for another audience',
);
for my $p (qw(dpop cert type aud)) {
    closed_ok(get("/$p/f.txt", $stolen{$p}), 401, "$p: $what{$p}");
    closed_ok(get("/$p/f.txt", $stolen{$p}, @$relaxed), 500,
              "$p: $what{$p}, with Host: relaxed");
}
# Fail closed means every token there, the good ones too.
my $good_aud = token(claims => { aud => 'lessons-api' });
is get('/aud/f.txt', $good_aud)->code, 200, 'aud: a token for lessons-api: 200';
closed_ok(get('/aud/f.txt', $good_aud, @$relaxed), 500,
          'aud: ... with Host: relaxed');
is get('/cert/f.txt', token())->code, 200, 'cert: an unbound token: 200';
closed_ok(get('/cert/f.txt', token(), @$relaxed), 500,
          'cert: ... with Host: relaxed');

my $log = do { local (@ARGV, $/) = ("$dir/error_log"); <> } // '';
for ([dpop => 'LessonsJWTDPoP required', 'LessonsJWTDPoP off'],
     [cert => 'LessonsJWTCertBound optional', 'LessonsJWTCertBound off'],
     [type => 'LessonsJWTTokenType at\+jwt', 'LessonsJWTTokenType any'],
     [aud  => 'LessonsJWTAudience lessons-api', 'LessonsJWTAudience reports']) {
    my ($p, $asked, $here) = @$_;
    like $log, qr/LESSONS00781: $asked at \Q$conf\E:\d+, but a section merged after it .* leaves $here in effect here; .*refusing to serve \/$p\/f\.txt/,
         "$p: one LESSONS00781 line names the requirement and what relaxed it";
}

# ---- configtest: the layouts it can see
sub configtest { conf_test($dir, @_) }

# The line of the conf file that matches $re (the relaxing section's).
sub line_of {
    my ($c, $re) = @_;
    open my $in, '<', $c or die "$c: $!";
    while (<$in>) { return $. if /$re/ }
    die "$c: no line matches $re";
}

sub refused_ok {
    my ($body, $at, $asked, $name) = @_;
    my ($rc, $out, $c) = configtest($body);
    isnt $rc, 0, "configtest refuses $name";
    my $line = line_of($c, $at);
    like $out, qr/LESSONS00780: \Q$c\E:$line: $asked at \Q$c\E:\d+, but/,
         "... naming the relaxing section ($line) and the requirement" or diag $out;
}

my $api = qq{<Location /api/lessons>\n    SetHandler lessons\n</Location>\n};
# The issue's own layouts: the <If> inside the <Location>.
for ([DPoP => 'required', 'off'], [CertBound => 'optional', 'off'],
     [TokenType => 'at+jwt', 'any'], [Audience => 'lessons-api', 'reports']) {
    my ($d, $strong, $weak) = @$_;
    refused_ok(<<"EOF", qr/<If /, "LessonsJWT$d \Q$strong\E", "LessonsJWT$d $weak in an <If> inside $strong");
<Location /api>
    LessonsJWTKey HS256 "$key"
    LessonsJWT$d $strong
    <If "%{HTTP_HOST} == 'relaxed'">
        LessonsJWT$d $weak
    </If>
</Location>
$api
EOF
}
refused_ok(<<"EOF", qr/<Location \/api>/, 'LessonsJWTDPoP optional',
LessonsJWTDPoP optional
<Location /api>
    LessonsJWTKey HS256 "$key"
    LessonsJWTDPoP off
</Location>
$api
EOF
           'a <Location> turning off the server\'s DPoP');
refused_ok(<<"EOF", qr/<Location \/x>/, 'LessonsJWTTokenType at\+jwt',
LessonsJWTTokenType at+jwt
<VirtualHost 127.0.0.1:1>
    <Location /x>
        LessonsJWTKey HS256 "$key"
        LessonsJWTTokenType any
    </Location>
</VirtualHost>
$api
LessonsJWTKey HS256 "$key"
EOF
           'a virtual host\'s <Location> taking any type under the server\'s at+jwt');
refused_ok(<<"EOF", qr/<Location \/api\/lessons>/, 'LessonsJWTAudience lessons-api',
<Location /api>
    LessonsJWTAudience lessons-api
</Location>
<Location /api/lessons>
    SetHandler lessons
    <LessonsJWTIssuer urn:example:north>
        LessonsJWTKey HS256 "$key"
    </LessonsJWTIssuer>
</Location>
EOF
           'issuer blocks without the audience required outside');

# Repeating or tightening is taken.
my ($rc, $out) = configtest(<<"EOF");
LessonsJWTDPoP optional
LessonsJWTAudience lessons-api
<Location /api>
    LessonsJWTKey HS256 "$key"
    LessonsJWTCertBound off
    LessonsJWTTokenType any
    <If "%{HTTP_HOST} == 'strict'">
        LessonsJWTDPoP required
        LessonsJWTTokenType at+jwt
        LessonsJWTAudience lessons-api
    </If>
</Location>
$api
EOF
is $rc, 0, 'configtest takes inner sections that repeat or tighten' or diag $out;

done_testing();
