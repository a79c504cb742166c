# Several issuers in one section (issue 20 §2): <LessonsJWTIssuer> blocks,
# each one issuer's keys, algorithms and audience.  A token is checked
# with the keys of the issuer its iss names and nothing else, so a key of
# one issuer never verifies a token that names another, whatever its
# kid; a token naming no configured issuer is refused with a reason.
# Then every merge httpd can make of it: an <If> with a list of its own
# or a plain key, a later <LocationMatch> with an audience for all (500:
# fail closed), Require jwt-claim iss per route, the verified-token cache
# between two sections that share an issuer, Satisfy Any with Allow from
# all, a <Directory> and a virtual host.
#
# Issuer A verifies RS256 with the suite's RSA key (audience lessons-a),
# B HS256 with the shared secret (no audience), C ES256 with the EC key
# in a JWKS under kid "c1".  A server of the test's own, on the suite's
# database.
use strict;
use warnings FATAL => 'all';
use utf8;

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Path qw(make_path);
use File::Temp ();
use JSON::PP ();
use LessonsTest;

my $mods = $ENV{LESSONS_TEST_HTTPD_MODULES} || '/usr/lib/apache2/modules';
my $dir  = File::Temp->newdir(CLEANUP => !$ENV{LESSONS_TEST_KEEP});
chmod 0755, "$dir";
my ($A, $B, $C) = ('https://a.example.org', 'https://sso.example.org/realms/b',
                   'https://c.example.org');
my $RSA = $ENV{LESSONS_TEST_RSA_PUB};
my $HS  = $ENV{LESSONS_TEST_HS_KEY};

# C's key as a JWKS with a kid, from the EC public key's point.
my ($point) = `openssl ec -pubin -in '$ENV{LESSONS_TEST_EC_PUB}' -noout -text 2>/dev/null`
    =~ /pub:\s*((?:[0-9a-f]{2}:?\s*)+)/;
(my $hex = $point // '') =~ s/[^0-9a-f]//g;
is length $hex, 130, 'the EC key\'s point (04, x, y)';
my $ec_jwks = "$dir/c.jwks";
{
    open my $fh, '>', $ec_jwks or die "$ec_jwks: $!";
    print $fh JSON::PP->new->canonical->encode({ keys => [ {
        kty => 'EC', crv => 'P-256', kid => 'c1', alg => 'ES256',
        x => b64url(pack 'H*', substr($hex, 2, 64)),
        y => b64url(pack 'H*', substr($hex, 66, 64)) } ] });
    close $fh or die $!;
}
make_path("$dir/static");
{
    open my $fh, '>', "$dir/static/file.txt" or die $!;
    print $fh "STATIC-CONTENT\n";
    close $fh or die $!;
}

my %block = (
    A => "    <LessonsJWTIssuer $A>\n        LessonsJWTKey RS256 \"$RSA\"\n"
       . "        LessonsJWTAudience lessons-a\n    </LessonsJWTIssuer>\n",
    B => "    <LessonsJWTIssuer $B>\n        LessonsJWTKey HS256 \"$HS\"\n"
       . "    </LessonsJWTIssuer>\n",
    C => "    <LessonsJWTIssuer $C>\n        LessonsJWTAlgorithm ES256\n"
       . "        LessonsJWTKeyFile \"$ec_jwks\"\n    </LessonsJWTIssuer>\n",
);
sub blocks { join '', @block{qw(A B C)} }
my $only_b = "<LessonsJWTIssuer $B>\n    LessonsJWTKey HS256 \"$HS\"\n</LessonsJWTIssuer>";

my $port  = free_port();
my $vport = free_port();
my $conf = httpd_conf($dir, $port, <<"EOF");
LogLevel info
LoadModule authz_host_module    "$mods/mod_authz_host.so"
LoadModule access_compat_module "$mods/mod_access_compat.so"
LoadModule alias_module         "$mods/mod_alias.so"
LoadModule mime_module          "$mods/mod_mime.so"
TypesConfig /etc/mime.types
Listen 127.0.0.1:$vport
<Location "/multi/api/lessons">
    SetHandler lessons
@{[ blocks() ]}
    # A list of its own: only B, whatever the section says.
    <If "-n req('X-Only-B')">
        $only_b
    </If>
    # A plain key replaces the blocks.
    <If "-n req('X-Plain-Key')">
        LessonsJWTKey HS256 "$HS"
    </If>
</Location>
# An audience for all of them, merged after the blocks: which issuer's?
<LocationMatch "^/multi/api/lessons/level/">
    LessonsJWTAudience everyone
</LocationMatch>
# Who may read one lesson: tokens of A only.
<LocationMatch "^/multi/api/lessons/[0-9]+\$">
    Require jwt-claim iss $A
</LocationMatch>
# Issuer A again, same key, another audience.
<Location "/multi2/api/lessons">
    SetHandler lessons
    <LessonsJWTIssuer $A>
        LessonsJWTKey RS256 "$RSA"
        LessonsJWTAudience lessons-a2
    </LessonsJWTIssuer>
</Location>
# httpd's access rules beside the blocks never open the gate.
<Location "/multi-any/api/lessons">
    SetHandler lessons
    Satisfy Any
    Order allow,deny
    Allow from all
    $only_b
</Location>
# A provider with tenants that share one key: each tenant's audience.
<Location "/tenants/api/lessons">
    SetHandler lessons
    <LessonsJWTIssuer https://idp.example.org/t1>
        LessonsJWTKey HS256 "$HS"
        LessonsJWTAudience app-t1
    </LessonsJWTIssuer>
    <LessonsJWTIssuer https://idp.example.org/t2>
        LessonsJWTKey HS256 "$HS"
        LessonsJWTAudience app-t2
    </LessonsJWTIssuer>
</Location>
# Who the user is (issue 40): two issuers' "alice" are two users.
LoadModule authz_user_module    "$mods/mod_authz_user.so"
LogFormat "%u|%U" userfmt
CustomLog "$dir/user.log" userfmt
<Location "/who/api/lessons">
    SetHandler lessons
$block{A}$block{B}</Location>
<LocationMatch "^/who/api/lessons/level/1\$">
    Require user alice\@$A
</LocationMatch>
# Issuers with an "@": every name of ops\@batch ends with "\@batch" too.
<Location "/at/api/lessons">
    SetHandler lessons
    <LessonsJWTIssuer batch>
        LessonsJWTKey HS256 "$HS"
    </LessonsJWTIssuer>
    <LessonsJWTIssuer ops\@batch>
        LessonsJWTKey HS256 "$HS"
    </LessonsJWTIssuer>
</Location>
# One issuer, no blocks: the user as the token names it.
<Location "/one/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$HS"
    LessonsJWTIssuer $B
</Location>
Alias "/static" "$dir/static"
<Directory "$dir/static">
@{[ blocks() ]}
</Directory>
<VirtualHost 127.0.0.1:$vport>
    ServerName vhost.example
@{[ blocks() ]}
    <Location "/api/lessons">
        SetHandler lessons
    </Location>
</VirtualHost>
EOF
my $out = `'@{[ LessonsTest::httpd_bin() ]}' -t -f '$conf' 2>&1`;
like $out, qr/Syntax OK/, 'configtest passes with issuer blocks in every kind of section'
    or diag $out;
start_httpd($conf, $port);
my $S = "http://127.0.0.1:$port";
my $V = "http://127.0.0.1:$vport";
my ($id) = seed({ level_id => 2, title => 'Ausgestellt', sort_order => 1 });

sub error_log { do { local (@ARGV, $/) = ("$dir/error_log"); <> } }
sub get {
    my ($path, $token, @headers) = @_;
    return call(GET => $path, base => $S, token => $token, headers => \@headers);
}
sub refused {
    my ($res, $name, $why) = @_;
    is_unauthorized($res, $name, 'invalid_token');
    like $res->header('WWW-Authenticate') // '', qr/error_description="\Q$why\E/,
        "$name: $why" if $why;
}

# Tokens of each issuer, and what each key can sign in another's name.
my %good = (
    A => token(alg => 'RS256', claims => { iss => $A, aud => 'lessons-a', sub => 'a-user' }),
    B => token(alg => 'HS256', claims => { iss => $B, sub => 'b-user' }),
    C => token(alg => 'ES256', header => { kid => 'c1' }, claims => { iss => $C, sub => 'c-user' }),
);
my $NO_ISSUER = 'The access token names no issuer accepted here';

# ---- each issuer's own tokens ---------------------------------------
for my $who (sort keys %good) {
    my $res = get('/multi/api/lessons', $good{$who});
    is $res->code, 200, "issuer ${who}'s token: 200"
        or diag $res->header('WWW-Authenticate') // '';
}
is get('/multi/api/lessons', $good{A})->code, 200, 'A again (a cache hit)';
# Audiences are each issuer's: B takes any, A only its own.
is get('/multi/api/lessons', token(alg => 'HS256', claims => { iss => $B, aud => 'x' }))->code, 200,
    'B has no audience: a token for another audience passes';
refused(get('/multi/api/lessons', token(alg => 'RS256', claims => { iss => $A, aud => 'lessons-b' })),
        'A\'s key, A\'s name, another audience', 'The access token audience is not accepted');

# ---- a key of one issuer never verifies a token naming another --------
my $pem = rsa_public_pem();
my @forged = (
    [ 'RS256 by A\'s key, naming B',   token(alg => 'RS256', claims => { iss => $B }) ],
    [ 'RS256 by A\'s key, naming C, kid c1', token(alg => 'RS256', header => { kid => 'c1' }, claims => { iss => $C }) ],
    [ 'HS256 by B\'s secret, naming A', token(alg => 'HS256', claims => { iss => $A, aud => 'lessons-a' }) ],
    [ 'HS256 by B\'s secret, naming C, kid c1', token(alg => 'HS256', header => { kid => 'c1' }, claims => { iss => $C }) ],
    [ 'ES256 by C\'s key, kid c1, naming A', token(alg => 'ES256', header => { kid => 'c1' }, claims => { iss => $A, aud => 'lessons-a' }) ],
    [ 'ES256 by C\'s key, kid c1, naming B', token(alg => 'ES256', header => { kid => 'c1' }, claims => { iss => $B }) ],
    [ 'HS256 keyed with A\'s public PEM, naming A', token(alg => 'HS256', key => $pem, claims => { iss => $A, aud => 'lessons-a' }) ],
    [ 'HS256 keyed with A\'s public PEM, naming B', token(alg => 'HS256', key => $pem, claims => { iss => $B }) ],
    [ 'HS256 keyed with A\'s public PEM, naming C', token(alg => 'HS256', key => $pem, header => { kid => 'c1' }, claims => { iss => $C }) ],
);
for my $f (@forged) {
    refused(get('/multi/api/lessons', $f->[1]), $f->[0]);
}
{
    my $before = db_lessons();
    refused(call(POST => '/multi/api/lessons', base => $S, token => $forged[2][1],
                 json => { levelId => 1, title => 'Gefälscht', order => 1 }),
            'POST with B\'s secret in A\'s name');
    is_deeply db_lessons(), $before, '... stored nothing';
}

# ---- no issuer, or none of these: refused with a reason ----------------
my $logpos = length error_log();
for my $case ([ 'no iss',            { iss => undef } ],
              [ 'an unknown iss',    { iss => 'https://evil.example.org' } ],
              [ 'A\'s iss with a trailing slash', { iss => "$A/" } ],
              [ 'iss an array',      { iss => [$B] } ],
              [ 'iss a number',      { iss => 7 } ]) {
    refused(get('/multi/api/lessons', token(alg => 'HS256', claims => $case->[1])),
            $case->[0], $NO_ISSUER);
}
like substr(error_log(), $logpos),
    qr/\[lessons:info\].*LESSONS00222: GET \/multi\/api\/lessons refused \(401\): the token names none of the 3 issuers of the section at \S+:\d+/,
    'logged at info (LESSONS00222), naming the section';
unlike substr(error_log(), $logpos), qr/evil\.example\.org/, '... never the iss itself';
refused(get('/multi/api/lessons', token(alg => 'HS256',
            payload_raw => qq({"iss":"$B","iss":"$A","exp":@{[ time + 600 ]}}))),
        'iss twice (B\'s, then A\'s)', 'The access token is malformed');

# ---- an <If> with a list of its own; an <If> with a plain key ----------
is get('/multi/api/lessons', $good{B}, 'X-Only-B' => 1)->code, 200,
    '<If> with B\'s block alone: B\'s token 200';
refused(get('/multi/api/lessons', $good{A}, 'X-Only-B' => 1),
        '<If> with B\'s block alone: A is not inherited', $NO_ISSUER);
is get('/multi/api/lessons', token(alg => 'HS256'), 'X-Plain-Key' => 1)->code, 200,
    '<If> with a plain key: it replaces the blocks (no iss needed)';
refused(get('/multi/api/lessons', $good{A}, 'X-Plain-Key' => 1),
        '<If> with a plain key: A\'s RS256 token');

# ---- an audience for all, merged after the blocks: fail closed ---------
{
    $logpos = length error_log();
    my $res = get('/multi/api/lessons/level/2', $good{B});
    is_problem($res, 500, 'a later <LocationMatch> sets an audience for every issuer');
    like substr(error_log(), $logpos),
        qr/LESSONS00201: the section at \S+ gives each of its issuers a block, but a section merged after it sets LessonsJWTAudience for all of them; refusing to serve/,
        '... and the log says why';
}

# ---- Require jwt-claim, per issuer --------------------------------------
is get("/multi/api/lessons/$id", $good{A})->code, 200, 'Require jwt-claim iss A: A\'s token 200';
is_problem(get("/multi/api/lessons/$id", $good{B}), 403, 'Require jwt-claim iss A: B\'s token');

# ---- the verified-token cache, per issuer's policy ----------------------
refused(call(GET => '/multi2/api/lessons', base => $S, token => $good{A}),
        'A\'s token, verified and cached at /multi, where A wants another audience',
        'The access token audience is not accepted');
is get('/multi/api/lessons', $good{A})->code, 200, '... and still 200 at /multi';

# ---- tenants sharing one key: the issuer still decides -----------------
{
    my $t = sub { token(alg => 'HS256', claims => { iss => "https://idp.example.org/$_[0]", aud => $_[1] }) };
    is get('/tenants/api/lessons', $t->('t1', 'app-t1'))->code, 200, 'tenant 1\'s token for tenant 1\'s app: 200';
    is get('/tenants/api/lessons', $t->('t2', 'app-t2'))->code, 200, 'tenant 2\'s for its own: 200';
    refused(get('/tenants/api/lessons', $t->('t2', 'app-t1')),
            'tenant 2\'s token (the shared key) for tenant 1\'s app',
            'The access token audience is not accepted');
    refused(get('/tenants/api/lessons', $t->('t3', 'app-t1')),
            'a tenant of the provider not configured here', $NO_ISSUER);
}

# ---- Satisfy Any and Allow from all beside the blocks -------------------
is_unauthorized(get('/multi-any/api/lessons', undef), 'Satisfy Any: no token');
refused(get('/multi-any/api/lessons', $good{A}), 'Satisfy Any: a token of no issuer here', $NO_ISSUER);
refused(get('/multi-any/api/lessons', $forged[0][1]), 'Satisfy Any: A\'s key in B\'s name');
is get('/multi-any/api/lessons', $good{B})->code, 200, 'Satisfy Any: B\'s token 200';

# ---- who the user is: qualified with the issuer (issue 40) -------------
# Where a section takes several issuers, r->user (%u, REMOTE_USER,
# Require user) is the user claim, "@" and the issuer as its block names
# it: issuer A's alice and issuer B's alice are two users.  A section of
# one issuer keeps the bare user.
sub user_line {
    my ($path) = @_;
    for (1 .. 50) {             # httpd logs after answering
        if (open my $fh, '<', "$dir/user.log") {
            my @l = grep { /\|\Q$path\E\n\z/ } <$fh>;
            return $l[-1] if @l;
        }
        select undef, undef, undef, 0.1;
    }
    return '';
}
{
    my $alice_a = token(alg => 'RS256', claims => { iss => $A, aud => 'lessons-a', sub => 'alice' });
    my $alice_b = token(alg => 'HS256', claims => { iss => $B, sub => 'alice' });
    is get('/who/api/lessons/level/2', $alice_a)->code, 200, 'A\'s alice: 200';
    is user_line('/who/api/lessons/level/2'), "alice\@$A|/who/api/lessons/level/2\n",
        '... logged as alice@ and A\'s issuer';
    is get('/who/api/lessons/level/3', $alice_b)->code, 200, 'B\'s alice: 200';
    is user_line('/who/api/lessons/level/3'), "alice\@$B|/who/api/lessons/level/3\n",
        '... logged as alice@ and B\'s issuer: another user';
    is get('/who/api/lessons/level/1', $alice_a)->code, 200, "Require user alice\@$A: A's alice 200";
    is_problem(get('/who/api/lessons/level/1', $alice_b), 403, "Require user alice\@$A: B's alice");
    is get('/one/api/lessons/level/2', $alice_b)->code, 200, 'one issuer, no blocks: 200';
    is user_line('/one/api/lessons/level/2'), "alice|/one/api/lessons/level/2\n",
        '... and the bare user';
}
# Issuers "batch" and "ops@batch": "x@ops" of batch and "x" of
# ops@batch would both be "x@ops@batch".  The name is the longer
# issuer's; batch's "x@ops" is refused (401), never made someone else.
{
    my $of = sub { token(alg => 'HS256', claims => { iss => $_[0], sub => $_[1] }) };
    is get('/at/api/lessons/level/2', $of->('ops@batch', 'x'))->code, 200, 'x of ops@batch: 200';
    is user_line('/at/api/lessons/level/2'), "x\@ops\@batch|/at/api/lessons/level/2\n",
        '... x@ops@batch';
    is get('/at/api/lessons/level/3', $of->('batch', 'x'))->code, 200, 'x of batch: 200';
    is user_line('/at/api/lessons/level/3'), "x\@batch|/at/api/lessons/level/3\n", '... x@batch';
    my $logpos = length error_log();
    my $res = get('/at/api/lessons/level/4', $of->('batch', 'x@ops'));
    refused($res, 'x@ops of batch, which would read as x of ops@batch',
            'The access token\'s user claim cannot be used as a user name.');
    like substr(error_log(), $logpos),
        qr/\[lessons:info\].*LESSONS00217: GET \/at\/api\/lessons\/level\/4 refused \(401\): the user claim sub reads, qualified with its issuer, as a user of another issuer of the section \(issuer names with "\@" in the section at \S+:\d+\)/,
        '... logged at info (LESSONS00217), saying why';
}

# ---- a <Directory>, and a virtual host's blocks ------------------------
is_unauthorized(get('/static/file.txt', undef), '<Directory> with blocks: no token');
{
    my $res = get('/static/file.txt', $good{C});
    is $res->code, 200, '<Directory> with blocks: C\'s token 200';
    like $res->content, qr/STATIC-CONTENT/, '... and the file';
}
refused(get('/static/file.txt', $forged[4][1]), '<Directory>: C\'s key in A\'s name');
is call(GET => '/api/lessons', base => $V, token => $good{B})->code, 200,
    'virtual host blocks, inherited by its <Location>: B 200';
refused(call(GET => '/api/lessons', base => $V, token => $forged[1][1]),
        'virtual host: A\'s key in C\'s name');

done_testing;
