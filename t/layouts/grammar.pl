#!/usr/bin/perl
# Once a section needs a token, nothing inside it can stop needing one
# (issue 40, 1): generated httpd.conf layouts over the module's whole
# directive grammar.
#
#   t/layouts/grammar.pl [--count N] [--seed S] [--keep]
#
# Makes N layouts (default 300) from a seed, and the six of the issue
# written out with four of the same kind no start-up check can see.  Each is a virtual host (one in 15 alone: at the main
# server's level, or in a virtual host under Lessons lines of the main
# server's) with the same backends: the API (SetHandler lessons on
# /api/lessons, the sample lessons in SQLite), static files through
# DocumentRoot and Alias, a CGI through ScriptAlias (it writes the
# request's probe id to a file), ProxyPass to a small HTTP server of
# ours (which does the same), a mod_rewrite [PT] rule into a gated path,
# and a .htaccess (AllowOverride All) that may allow, rewrite, or hold a
# Lessons directive (500).  Around them: <Location>, <LocationMatch>,
# <Directory>, <DirectoryMatch>, <Files>, <FilesMatch> and
# <If>/<ElseIf>/<Else> (on the Host, on whether Authorization is sent, on
# REQUEST_URI, on the query, on the method), nested up to three deep,
# holding any Lessons directive: keys (files, keys URLs,
# <LessonsJWTIssuer> blocks), issuers (https ones whose keys are
# discovered from ports where nothing listens, and http, urn, https with
# a query or fragment), audience, DPoP, CORS, base path, token type, user
# claim, exported claims, leeway, body size, keys URL settings; and
# Require/Satisfy lines that grant.
#
# A section gates (needs a token) when it holds LessonsJWTKey,
# LessonsJWTAlgorithm, LessonsJWTKeyFile, LessonsJWTKeysURL, a
# <LessonsJWTIssuer> block, or a LessonsJWTIssuer whose keys can be
# discovered (https, no query or fragment).  A request is gated when any
# section httpd merges for it gates, whatever the others say and in
# whatever order: so the model here is the set of sections that match a
# request, never their merge order.
#
# What a section requires of a token (LessonsJWTDPoP, LessonsJWTCertBound
# optional or required, LessonsJWTTokenType at+jwt, LessonsJWTAudience)
# holds wherever it is merged, whatever the others say (issue 55): the
# layouts mix weaker and stronger lines, and the issue's own (an <If> on
# the Host relaxing a <Location>'s requirement, inside it and beside it)
# are written out too.
#
# Layouts httpd refuses (configtest, naming the line) are counted and
# left out; every other one is asked for each backend's URL, with the
# Host and query variants its <If>s test, with
#  - no token,
#  - a token with a bad signature (one a key in force there would take,
#    its signature changed),
#  - a token of another issuer: signed by a key the sections in force
#    there do not hold (another section's, or one no layout holds),
#  - where an issuer's block is in force, a token signed by that block's
#    key naming an issuer the block is not (a block's key verifies only
#    its own issuer's tokens; block keys never appear outside blocks),
#  - where a section of the chain requires it, a token signed by a key in
#    force that only a relaxed requirement would take: DPoP-bound sent as
#    Bearer, certificate-bound without a certificate, a plain JWT where
#    at+jwt is asked, a token for another audience,
#  - and CORS preflights.
# Checked: a gated request never gets 2xx or 3xx (a preflight may get an
# empty 204) and its backend sees nothing (OPEN, BACKEND); an ungated URL
# still gets 200 from its backend (UNGATED; the API, and files under a
# .htaccess with a Lessons line, 500: UNGATED-API); a refusal names a
# line of the layout it refuses (REFUSAL).
# Prints the counts and the first violations with their layout.  With
# INTEGRATION_COUNTS=FILE, appends "passed failed" to FILE (make test).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../lib";
use File::Path qw(make_path);
use File::Temp qw(tempdir);
use Getopt::Long;
use IO::Socket::INET;
use LWP::UserAgent;
use HTTP::Request;
use POSIX qw(setsid WNOHANG);
use Storable ();
use Time::HiRes qw(time);
use LessonsTest ();
use LessonsTest::JWT qw(jwt read_secret);

my $ROOT = "$FindBin::Bin/../..";
my ($COUNT, $SEED, $KEEP) = (300, 40, 0);
GetOptions('count=i' => \$COUNT, 'seed=i' => \$SEED, 'keep' => \$KEEP)
    or die "usage: $0 [--count N] [--seed S] [--keep]\n";
my $HTTPD   = $ENV{HTTPD} // '/usr/sbin/apache2';
my $MODDIR  = $ENV{HTTPD_MODULES} // '/usr/lib/apache2/modules';
my $MODULE  = $ENV{MODULE} // "$ROOT/build/mod_lessons.so";
my $BATCH      = 75;            # layouts per httpd
my $MAIN_EVERY = 15;            # every 15th alone (server level, or under server lines)
my $CLIENTS    = 3;             # processes asking at once
my $STARTED = time;

die "grammar: $MODULE not found: run make first\n" unless -f $MODULE;
die "grammar: $HTTPD not found: run t/tools/deps.sh test\n" unless -x $HTTPD;

# ---- the work directory --------------------------------------------------
my $W = tempdir('/tmp/lessons-grammar.XXXXXX', CLEANUP => !$KEEP);
chmod 0755, $W;
make_path(map { "$W/$_" } qw(keys logs run conf hits));
chmod 0777, "$W/hits";
srand($SEED);           # after tempdir: its name stays random
my $ISROOT = $> == 0;
my $USER = $ISROOT ? 'www-data' : scalar getpwuid($>);

sub run_quiet { system("@_ >/dev/null 2>&1") == 0 or die "grammar: failed: @_\n" }

sub write_file {
    my ($path, $text, $mode) = @_;
    open my $fh, '>', $path or die "grammar: $path: $!\n";
    print $fh $text;
    close $fh;
    chmod $mode, $path if defined $mode;
}

# ---- keys ----------------------------------------------------------------
# Plain keys appear in LessonsJWTKey/LessonsJWTKeyFile lines of sections;
# block keys only inside <LessonsJWTIssuer> blocks; rogue keys nowhere.
my %KEY = (
    hsA  => { algs => ['HS256'],          kind => 'plain' },
    rsa1 => { algs => ['RS256'],          kind => 'plain' },
    ec1  => { algs => ['ES256'],          kind => 'plain' },
    hsB  => { algs => ['HS256', 'HS512'], kind => 'block' },
    rsa2 => { algs => ['RS256', 'RS384'], kind => 'block' },
    hsC  => { algs => ['HS384'],          kind => 'block' },
    hsX  => { algs => ['HS256'],          kind => 'rogue' },
    rsaX => { algs => ['RS256'],          kind => 'rogue' },
);
my @PLAIN_KEYS = grep { $KEY{$_}{kind} eq 'plain' } sort keys %KEY;
my @BLOCK_KEYS = grep { $KEY{$_}{kind} eq 'block' } sort keys %KEY;
for my $k (sort keys %KEY) {
    if ($k =~ /^hs/) {
        open my $r, '<:raw', '/dev/urandom' or die "grammar: /dev/urandom: $!\n";
        read $r, my $bytes, 32;
        write_file("$W/keys/$k", unpack 'H*', $bytes);
    }
    elsif ($k =~ /^rsa/) {
        run_quiet("openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out $W/keys/$k.key");
        run_quiet("openssl pkey -in $W/keys/$k.key -pubout -out $W/keys/$k.pub");
    }
    else {
        run_quiet("openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out $W/keys/$k.key");
        run_quiet("openssl pkey -in $W/keys/$k.key -pubout -out $W/keys/$k.pub");
    }
}
sub key_file { my $k = shift; $k =~ /^hs/ ? "$W/keys/$k" : "$W/keys/$k.pub" }
# A CA file for LessonsJWTKeysCA (no server ever shows its certificate).
run_quiet("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
          . " -keyout $W/keys/ca.key -out $W/keys/ca.crt -subj /CN=grammar-ca -days 2");

# Ports where nothing listens: discovered issuers and keys URLs there
# fail, so requests they gate fail closed (401/503).
my @DEAD = map { LessonsTest::free_port() } 1 .. 3;

# ---- the database and the backends --------------------------------------
my $DB = "$W/db/lessons.db";
make_path("$W/db");
system("sqlite3 $DB <$ROOT/sql/schema.sqlite.sql >/dev/null && sqlite3 $DB <$ROOT/sql/sample-lessons.sql >/dev/null") == 0
    or die "grammar: cannot make the database\n";
my $ID = `sqlite3 $DB 'SELECT min(id) FROM lessons'`;
chomp $ID;
die "grammar: no lesson in the sample data\n" unless $ID =~ /^\d+$/;
run_quiet("chown -R $USER: $W/db $W/logs $W/run") if $ISROOT;
write_file("$W/hits/$_", '', 0666) for qw(cgi proxy);

# The proxy's backend: one request per connection, each probe id
# appended to hits/proxy before the answer.
my $BPORT = LessonsTest::free_port();
my $backend_pid;
{
    my $srv = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $BPORT,
                                    Listen => 128, ReuseAddr => 1)
        or die "grammar: backend on $BPORT: $!\n";
    $backend_pid = fork // die "grammar: fork: $!\n";
    if (!$backend_pid) {
        $SIG{TERM} = sub { POSIX::_exit(0) };
        open my $log, '>>', "$W/hits/proxy" or die;
        $log->autoflush(1);
        while (my $c = $srv->accept) {
            my ($probe, $line) = ('-');
            local $SIG{ALRM} = sub { die "timeout\n" };
            eval {
                alarm 5;
                while (defined($line = <$c>)) {
                    last if $line =~ /^\r?$/;
                    $probe = $1 if $line =~ /^X-Probe:\s*(\S+)/i;
                }
                alarm 0;
                print $log "$probe\n";
                my $body = "backend $probe\n";
                print $c "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                    . "Content-Length: " . length($body) . "\r\nConnection: close\r\n\r\n$body";
            };
            alarm 0;
            close $c;
        }
        exit 0;
    }
    close $srv;
}

# ---- the grammar ---------------------------------------------------------
sub pick { $_[int rand @_] }
sub chance { rand() < $_[0] }

my $DISC_RE = qr{^https://(127\.0\.0\.1|localhost):\d+(/[^?#]*)?$};
sub discoverable { $_[0] =~ $DISC_RE }

my @DISC_ISSUERS = (
    "https://127.0.0.1:$DEAD[0]/realms/school",
    "https://127.0.0.1:$DEAD[1]",
    "https://localhost:$DEAD[2]/idp",
);
my @PLAIN_ISSUERS = (
    'urn:example:reports', 'urn:example:cgi', 'lessons-batch',
    "http://127.0.0.1:$DEAD[0]/staging-idp",
    'https://idp.example/realms/school?q=1',
    'https://idp.example/realms/school#f',
);
my @BLOCK_ISSUERS = ('urn:example:north', 'urn:example:south', 'lessons-batch',
                     'https://idp.example/t?tenant=1', @DISC_ISSUERS[0, 1]);
my @AUDS = ('lessons-api', 'reports');
my $FOREIGN = 'urn:example:foreign';        # named by no layout

# <If> conditions: [expression, test on a request].
my @CONDS = (
    ['%{HTTP_HOST} =~ /^staging[.]/',      sub { $_[0]{host} =~ /^staging\./ }, 'host'],
    ['%{HTTP_HOST} !~ /^staging[.]/',      sub { $_[0]{host} !~ /^staging\./ }, 'host'],
    ['-z %{HTTP:Authorization}',           sub { !$_[0]{auth} }],
    ['-n %{HTTP:Authorization}',           sub { $_[0]{auth} }],
    ['%{REQUEST_URI} =~ m#/reports/#',     sub { $_[0]{uri} =~ m#/reports/# }],
    ['%{REQUEST_URI} =~ m#[.]cgi$#',       sub { $_[0]{uri} =~ m#\.cgi$# }],
    ['%{REQUEST_URI} =~ m#^/api/#',        sub { $_[0]{uri} =~ m#^/api/# }],
    ['%{QUERY_STRING} =~ /open/',          sub { ($_[0]{query} // '') =~ /open/ }, 'query'],
    ["%{REQUEST_METHOD} == 'GET'",         sub { $_[0]{method} eq 'GET' }],
);

sub glob_re {
    my ($g) = @_;
    my $re = join '', map { $_ eq '*' ? '[^/]*' : $_ eq '?' ? '[^/]' : quotemeta $_ } split //, $g;
    return qr/^$re$/;
}

# Section kinds at the virtual host's level: [kind, args].  D, F, R, C
# and W stand for the layout's directories.
my %ARGS = (
    loc    => ['/', '/api', '/api/lessons', '/api/reports', '/api/cgi', '/api/px',
               '/static', '/files', '/files/sub', '/cgi-bin', '/px', '/go'],
    locm   => ['^/api/(reports|cgi)/', '[.]txt$', '[.]cgi$', '^/(api/)?px/',
               '^/api/lessons/[0-9]+$', 'secret', '^/files/'],
    dir    => ['D', 'D/static', 'F', 'F/sub', 'R', 'C', 'W'],
    dirm   => ['/reports/l[0-9]+', '/(files|cgi)/l[0-9]+', '/docroot/l[0-9]+'],
    files  => ['*.cgi', 'secret.txt', '*.txt', 'hit.cgi', 'b.txt', '*'],
    filesm => ['[.]txt$', '^(secret|a)[.]', '[.](cgi|txt)$'],
);
my %OPEN = (loc => 'Location', locm => 'LocationMatch', dir => 'Directory',
            dirm => 'DirectoryMatch', files => 'Files', filesm => 'FilesMatch',
            if => 'If', elseif => 'ElseIf', else => 'Else');

# Does a section of kind/arg match a request (its parents matched)?
sub own_match {
    my ($s, $q) = @_;
    my ($k, $a) = ($s->{kind}, $s->{path} // $s->{arg});
    return 1 if $k eq 'top';
    if ($k eq 'loc') {
        return $a eq '/' || $q->{uri} eq $a || index($q->{uri}, "$a/") == 0;
    }
    return $q->{uri} =~ /$a/ if $k eq 'locm';
    return 0 unless defined $q->{file};
    (my $dir = $q->{file}) =~ s#/[^/]*$##;
    (my $base = $q->{file}) =~ s#.*/##;
    return $dir eq $a || index($dir, "$a/") == 0 if $k eq 'dir';
    return $dir =~ /$a/ if $k eq 'dirm';
    return $base =~ glob_re($a) if $k eq 'files';
    return $base =~ /$a/ if $k eq 'filesm';
    die "own_match: $k\n";
}

# An <If>/<ElseIf>/<Else> of a chain: its own condition and none before.
sub cond_match {
    my ($s, $q) = @_;
    for my $c (@{ $s->{before} }) { return 0 if $c->[1]->($q) }
    return $s->{kind} eq 'else' ? 1 : $s->{cond}[1]->($q);
}

# ---- a section's directives ---------------------------------------------
# Fills $s->{lines} and what the model needs: gates, keys [{key, iss,
# aud, block}], issuers, cors.
sub algs_of { my ($k) = @_; join ' ', @{ $KEY{$k}{algs} } }

sub block_text {
    my ($iss, $s) = @_;
    my @in;
    if (discoverable($iss) && chance(0.5)) {
        push @in, 'LessonsJWTAlgorithm RS256 ES256' if chance(0.4);
        push @in, 'LessonsJWTKeysRefresh 300' if chance(0.2);
        push @in, "LessonsJWTKeysCA $W/keys/ca.crt" if chance(0.1);
    }
    else {
        my $key = pick(@BLOCK_KEYS);
        push @in, chance(0.7) ? 'LessonsJWTKey ' . algs_of($key) . ' ' . key_file($key)
                              : ('LessonsJWTAlgorithm ' . algs_of($key), 'LessonsJWTKeyFile ' . key_file($key));
        # A block without key and an issuer that cannot be discovered
        # (refused), now and then.
        @in = () if chance(0.02);
    }
    push @in, 'LessonsJWTAudience ' . pick(@AUDS) if chance(0.3);
    push @in, 'LessonsJWTLeeway 5' if chance(0.005);    # not in a block: refused
    return ["<LessonsJWTIssuer $iss>", (map { "    $_" } @in), '</LessonsJWTIssuer>'];
}

my @GATES = qw(key key algfile url urlkey disc disc disc blocks blocks);
sub fill {
    my ($s, $p_gate, $allow_require, @gates) = @_;
    my @lines;          # each an array of text lines kept together
    my $gate = chance($p_gate) ? pick(@gates ? @gates : @GATES) : '';
    my $blocks = $gate eq 'blocks';
    my $has_issuer = 0;
    if ($gate eq 'key' || $gate eq 'algfile') {
        my $k = pick(@PLAIN_KEYS);
        my $algs = algs_of($k);
        $algs .= ' PS256' if $k =~ /^rsa/ && chance(0.03);
        if ($gate eq 'key') {
            push @lines, ["LessonsJWTKey $algs " . key_file($k)];
        }
        else {
            push @lines, ["LessonsJWTAlgorithm $algs"], ['LessonsJWTKeyFile ' . key_file($k)];
        }
    }
    elsif ($gate eq 'url' || $gate eq 'urlkey') {
        my $url = "https://127.0.0.1:" . pick(@DEAD) . '/jwks.json';
        if ($gate eq 'urlkey') {
            push @lines, ["LessonsJWTKey RS256 $url"];
        }
        else {
            push @lines, ["LessonsJWTKeysURL $url"], ['LessonsJWTAlgorithm RS256 ES256'];
            push @lines, ["LessonsJWTKeysCA $W/keys/ca.crt"] if chance(0.2);
            push @lines, ['LessonsJWTKeysRefresh 600'] if chance(0.2);
            push @lines, ['LessonsJWTKeysMinRefresh 30'] if chance(0.2);
        }
    }
    elsif ($gate eq 'disc') {
        my $iss = pick(@DISC_ISSUERS);
        push @lines, ["LessonsJWTIssuer $iss"];
        $has_issuer = 1;
        push @lines, ['LessonsJWTAlgorithm RS256 ES256'] if chance(0.25);
        push @lines, ['LessonsJWTKeysMinRefresh 30'] if chance(0.1);
    }
    elsif ($blocks) {
        my @iss = @BLOCK_ISSUERS;
        for (1 .. 1 + int rand 2) {
            my $i = splice @iss, int rand @iss, 1;
            push @lines, block_text($i, $s);
        }
    }
    # Directives that do not gate by themselves.  Beside blocks, an
    # issuer, audience or key line is refused: now and then only.
    if ((!$blocks || chance(0.03)) && !$has_issuer && chance(0.35)) {
        my $iss = chance(0.85) ? pick(@PLAIN_ISSUERS) : pick(@DISC_ISSUERS);
        push @lines, ["LessonsJWTIssuer $iss"];
    }
    # Mostly one audience: two along a chain are refused (issue 55), and
    # a refused layout asks nothing.
    push @lines, ['LessonsJWTAudience ' . (chance(0.85) ? $AUDS[0] : $AUDS[1])]
        if (!$blocks || chance(0.03)) && chance(0.2);
    # DPoP, certificate binding and at+jwt change which tokens pass, not
    # whether a request is gated; what one section requires no other
    # relaxes (issue 55), so weaker and stronger lines meet in a chain.
    push @lines, ['LessonsJWTDPoP ' . pick(qw(off off optional required))] if chance(0.08);
    push @lines, ['LessonsJWTCertBound ' . pick(qw(off optional))] if chance(0.05);
    if (chance(0.15)) {
        push @lines, ['LessonsCORSOrigins ' . pick('https://app.example', '*', 'none',
                                                   'https://app.example http://localhost:3000')];
    }
    push @lines, ['LessonsBasePath ' . pick('/api/lessons', '/api')] if chance(0.06);
    push @lines, ['LessonsJWTTokenType ' . pick(qw(any any at+jwt))] if chance(0.06);
    push @lines, ['LessonsJWTUserClaim ' . pick('sub', 'preferred_username', 'profile.login')] if chance(0.1);
    push @lines, ['LessonsJWTExportClaims ' . pick('tenant', 'sub azp', 'realm_access.roles')] if chance(0.08);
    push @lines, ['LessonsJWTLeeway ' . pick(0, 30, 120)] if chance(0.08);
    push @lines, ['LessonsMaxBodySize ' . pick(1024, 65536)] if chance(0.05);
    push @lines, ['LessonsJWTKeysRefresh 60'] if chance(0.003);     # alone: refused
    if ($allow_require && chance(0.12)) {
        push @lines, [pick('Require all granted', 'Require ip 127.0.0.1')];
    }
    if ($allow_require && chance(0.06)) {
        push @lines, ['Order deny,allow', 'Deny from all', 'Allow from 127.0.0.1', 'Satisfy Any'];
    }
    for (my $i = @lines - 1; $i > 0; $i--) {
        my $j = int rand($i + 1);
        @lines[$i, $j] = @lines[$j, $i];
    }
    $s->{lines} = [map { @$_ } @lines];
    return analyse($s);
}

# What the model needs of a section, read from its lines: whether it
# gates, its keys [{key, iss, aud, block}] (key files only: keys URLs
# and discovered issuers are at ports where nothing listens), the
# issuers it names, whether it lets browsers in (CORS).
sub analyse {
    my ($s) = @_;
    my ($block, @keys, @issuers);
    for (@{ $s->{lines} }) {
        if (/^<LessonsJWTIssuer (\S+)>$/) {
            $block = { iss => $1, block => 1 };
            push @issuers, $1;
        }
        elsif (/^<\/LessonsJWTIssuer>$/) {
            $_->{aud} = $block->{aud} for grep { $_->{block} && $_->{iss} eq $block->{iss} } @keys;
            $block = undef;
        }
        elsif (/^\s*LessonsJWT(?:Key .*|KeyFile) \Q$W\E\/keys\/([a-zA-Z0-9]+?)(?:\.pub)?$/) {
            push @keys, { key => $1, ($block ? (iss => $block->{iss}, block => 1) : ()) };
        }
        elsif (/^\s*LessonsJWTAudience (\S+)$/ && $block) {
            $block->{aud} = $1;
        }
        elsif (/^LessonsJWTIssuer (\S+)$/) {
            push @issuers, $1;
        }
    }
    # A key file beside an issuer line: that issuer's tokens, as far as
    # this section says.
    my ($plain_iss) = map { /^LessonsJWTIssuer (\S+)$/ ? $1 : () } @{ $s->{lines} };
    $_->{iss} //= $plain_iss for @keys;
    $s->{keys} = \@keys;
    $s->{issuers} = \@issuers;
    $s->{gates} = grep { /^(LessonsJWT(Key|Algorithm|KeyFile|KeysURL) |<LessonsJWTIssuer )/
                         || (/^LessonsJWTIssuer (\S+)$/ && discoverable($1)) } @{ $s->{lines} };
    $s->{cors} = grep { /^LessonsCORSOrigins (?!none)/ } @{ $s->{lines} };
    # What it requires of every token along the chain (issue 55): a
    # DPoP proof for a DPoP-bound token, the certificate for a
    # certificate-bound one, at+jwt, its audience (a block's goes with
    # its block).
    my %req;
    for (@{ $s->{lines} }) {
        $req{dpop} = 1 if /^LessonsJWTDPoP (optional|required)$/;
        $req{cert} = 1 if /^LessonsJWTCertBound (optional|required)$/;
        $req{type} = 1 if /^LessonsJWTTokenType at\+jwt$/;
        $req{aud}{$1} = 1 if /^LessonsJWTAudience (\S+)$/;
    }
    $s->{req} = \%req;
    return $s;
}

# ---- a layout ------------------------------------------------------------
# An <If> chain: <If>, sometimes <ElseIf>, sometimes <Else>.
sub if_chain {
    my ($L, $depth) = @_;
    my @chain;
    my @before;
    my $n = chance(0.35) ? (chance(0.5) ? 3 : 2) : 1;
    for my $i (1 .. $n) {
        my $kind = $i == 1 ? 'if' : ($i == $n && chance(0.6)) ? 'else' : 'elseif';
        my $c = pick(@CONDS);
        my $s = fill({ kind => $kind, cond => ($kind eq 'else' ? undef : $c),
                       before => [@before] }, 0.25, 1);
        $L->{conds}{$c->[2]} = 1 if $kind ne 'else' && $c->[2];
        push @before, $c unless $kind eq 'else';
        $s->{children} = $depth < 3 && chance(0.25) ? if_chain($L, $depth + 1) : [];
        push @chain, $s;
        last if $kind eq 'else';
    }
    return \@chain;
}

sub section {
    my ($L, $kind, $depth) = @_;
    my $s = fill({ kind => $kind, arg => pick(@{ $ARGS{$kind} }) }, 0.3, 1);
    my @kids;
    if (($kind eq 'dir' || $kind eq 'dirm') && chance(0.35)) {
        push @kids, section($L, pick(qw(files filesm)), $depth + 1);
    }
    push @kids, @{ if_chain($L, $depth + 1) } if chance(0.4);
    $s->{children} = \@kids;
    return $s;
}

sub layout {
    my ($n, $main) = @_;
    $main //= 0;
    my $L = { n => $n, main => $main, conds => {} };
    my $top = fill({ kind => 'top' }, 0.2, 0);
    # A virtual host under a server config of its own: the server's
    # lines merge first, and often gate.
    $L->{server} = fill({ kind => 'server' }, 0.8, 0, qw(disc disc key blocks)) if $main == 2;
    # Groups of sibling sections, in random order (an <If> chain is one).
    my @groups = ([fill({ kind => 'loc', arg => '/api/lessons', handler => 1 }, 0.55, 1)]);
    $groups[0][0]{children} = chance(0.3) ? if_chain($L, 1) : [];
    for (1 .. 1 + int rand 4) {
        push @groups, [section($L, pick(qw(loc loc loc locm dir dir dirm files filesm)), 1)];
    }
    push @groups, if_chain($L, 1) if chance(0.35);
    for (my $i = @groups - 1; $i > 0; $i--) {
        my $j = int rand($i + 1);
        @groups[$i, $j] = @groups[$j, $i];
    }
    $top->{children} = [map { @$_ } @groups];
    $L->{top} = $top;
    # The .htaccess of files/sub (AllowOverride All everywhere).
    $L->{htaccess} = pick('', '', '', "Require all granted\n",
                          "Satisfy Any\nOrder allow,deny\nAllow from all\n",
                          "<Files \"b.txt\">\n    Require all granted\n</Files>\n",
                          "<If \"-z %{HTTP:Authorization}\">\n    Require all granted\n</If>\n",
                          "RewriteEngine On\nRewriteRule ^b[.]txt\$ /static/f.txt [L]\n",
                          "LessonsJWTIssuer urn:example:htaccess\n");
    # Resolve the directory names in section arguments.
    my %dirs = (D => "$W/docroot/l$n", F => "$W/files/l$n", R => "$W/reports/l$n",
                C => "$W/cgi/l$n", W => $W);
    my $walk;
    $walk = sub {
        for my $s (@_) {
            if ($s->{kind} eq 'dir') {
                ($s->{path} = $s->{arg}) =~ s#^([DFRCW])#$dirs{$1}#;
            }
            $walk->(@{ $s->{children} || [] });
        }
    };
    $walk->($top);
    return $L;
}

# The layouts of the issue itself, written out, and the same merges
# where only a request can tell: each a virtual host.
sub issue_layouts {
    my ($n) = @_;
    my %cond = map { $_->[0] => $_ } @CONDS;
    my $node = sub {
        my ($kind, $arg, $lines, @kids) = @_;
        return analyse({ kind => $kind, lines => $lines, children => \@kids,
                         $kind eq 'if' ? (cond => $cond{$arg}, before => []) : (arg => $arg),
                         $kind eq 'loc' && $arg eq '/api/lessons' ? (handler => 1) : () });
    };
    my $api = sub { $node->('loc', '/api/lessons', []) };
    my $disc = "LessonsJWTIssuer $DISC_ISSUERS[0]";
    my @tops = map {
        # Discovered keys on /api; another issuer on /api/reports.
        $node->('top', undef, [], $node->('loc', '/api', [$disc]), $api->(),
                $node->('loc', '/api/reports', ["LessonsJWTIssuer $_"]))
    } ('urn:example:reports', "http://127.0.0.1:$DEAD[0]/staging-idp",
       'https://idp.example/realms/school?q=1');
    # The client chooses: by its Host, by leaving the token out.
    push @tops, $node->('top', undef, [], $api->(),
                        $node->('loc', '/api', [$disc],
                                $node->('if', '%{HTTP_HOST} =~ /^staging[.]/',
                                        ["LessonsJWTIssuer http://127.0.0.1:$DEAD[0]/staging-idp"])));
    push @tops, $node->('top', undef, [], $api->(),
                        $node->('loc', '/api', [$disc],
                                $node->('if', '-z %{HTTP:Authorization}',
                                        ['LessonsJWTIssuer urn:example:x'])));
    # <Files "*.cgi"> under a discovering virtual host.
    push @tops, $node->('top', undef, [$disc], $api->(),
                        $node->('files', '*.cgi', ['LessonsJWTIssuer urn:example:cgi']));
    # The same merges where only a request can tell (regex sections, an
    # <If> beside the section): no start-up check can refuse these.
    push @tops, $node->('top', undef, [], $api->(), $node->('loc', '/api', [$disc]),
                        $node->('locm', '^/api/(reports|cgi|px)/', ['LessonsJWTIssuer urn:example:reports']));
    push @tops, $node->('top', undef, [], $api->(), $node->('loc', '/api', [$disc]),
                        $node->('if', '-z %{HTTP:Authorization}', ['LessonsJWTIssuer urn:example:x']));
    push @tops, $node->('top', undef, [], $api->(),
                        $node->('dirm', '/(reports|cgi)/l[0-9]+', [$disc],
                                $node->('filesm', '[.](txt|cgi)$', ['LessonsJWTIssuer urn:example:x'])));
    push @tops, $node->('top', undef, [], $api->(),
                        $node->('dirm', '/(reports|cgi)/l[0-9]+', [$disc]),
                        $node->('filesm', '^(secret|hit)[.]', ['LessonsJWTIssuer https://idp.example/x?q=1']));
    # Issue 55, 5: an <If> the client steers with its Host relaxes what
    # the <Location> requires, inside it (configtest sees it) and beside
    # it (only a request does); the token each would let in.
    my $hs = 'LessonsJWTKey HS256 ' . key_file('hsA');
    my $staging = '%{HTTP_HOST} =~ /^staging[.]/';
    my @relaxed;
    for (['DPoP', 'required', 'off', ['dpop-bearer', cnf => 'jkt']],
         ['CertBound', 'optional', 'off', ['cert-unbound', cnf => 'x5t#S256']],
         ['TokenType', 'at+jwt', 'any', ['plain-jwt']],
         ['Audience', 'lessons-api', 'reports', ['other-aud', aud => 'reports']]) {
        my ($d, $strong, $weak, $tok) = @$_;
        push @relaxed, [$tok, $node->('top', undef, [], $api->(),
                                      $node->('loc', '/api/reports', [$hs, "LessonsJWT$d $strong"],
                                              $node->('if', $staging, ["LessonsJWT$d $weak"])))];
        push @relaxed, [$tok, $node->('top', undef, [], $api->(),
                                      $node->('loc', '/api/reports', [$hs, "LessonsJWT$d $strong"]),
                                      $node->('if', $staging, ["LessonsJWT$d $weak"]))];
    }
    return ((map { { n => $n++, main => 0, conds => { host => 1 }, top => $_, htaccess => '',
                     issue => 1 } } @tops),
            (map { { n => $n++, main => 0, conds => { host => 1 }, top => $_->[1], htaccess => '',
                     issue => 1, relax => [$_->[0]] } } @relaxed));
}

# ---- writing layouts -----------------------------------------------------
sub render_section {
    my ($s, $indent, $out) = @_;
    my $k = $s->{kind};
    my $inner = $indent;
    if ($k ne 'top') {
        my $arg = $k eq 'dir' ? qq("$s->{path}")
                : $k =~ /^(if|elseif)$/ ? qq("$s->{cond}[0]")
                : $k eq 'else' ? undef
                : qq("$s->{arg}");
        push @$out, "$indent<$OPEN{$k}" . (defined $arg ? " $arg" : '') . '>';
        $inner = "$indent    ";
        push @$out, "${inner}SetHandler lessons" if $s->{handler};
    }
    push @$out, "$inner$_" for @{ $s->{lines} };
    render_section($_, $inner, $out) for @{ $s->{children} || [] };
    push @$out, "$indent</$OPEN{$k}>" if $k ne 'top';
}

# The backends' lines, then the generated sections.
sub render {
    my ($L) = @_;
    my $n = $L->{n};
    my @out = (
        "    DocumentRoot $W/docroot/l$n",
        "    Alias /files $W/files/l$n",
        "    Alias /api/reports $W/reports/l$n",
        "    ScriptAlias /cgi-bin/ $W/cgi/l$n/",
        "    ScriptAlias /api/cgi/ $W/cgi/l$n/",
        "    ProxyPass /px/ http://127.0.0.1:$BPORT/l$n/",
        "    ProxyPass /api/px/ http://127.0.0.1:$BPORT/l$n/",
        "    RewriteEngine On",
        "    RewriteRule ^/go/(.*)\$ /api/reports/\$1 [PT]",
    );
    render_section($L->{top}, '    ', \@out);
    return @out;
}

sub make_dirs {
    my ($L) = @_;
    my $n = $L->{n};
    make_path("$W/docroot/l$n/static", "$W/files/l$n/sub", "$W/reports/l$n", "$W/cgi/l$n");
    write_file("$W/docroot/l$n/static/f.txt", "static $n\n");
    write_file("$W/files/l$n/a.txt", "files $n\n");
    write_file("$W/files/l$n/sub/b.txt", "sub $n\n");
    write_file("$W/files/l$n/sub/.htaccess", $L->{htaccess}) if $L->{htaccess};
    write_file("$W/reports/l$n/secret.txt", "secret $n\n");
    write_file("$W/cgi/l$n/hit.cgi", "#!/bin/sh\necho \"\$HTTP_X_PROBE\" >>$W/hits/cgi\n"
               . "printf 'Content-Type: text/plain\\r\\n\\r\\ncgi %s\\n' \"\$HTTP_X_PROBE\"\n", 0755);
}

sub conf_head {
    my ($port) = @_;
    return <<"EOF";
ServerName 127.0.0.1
Listen 127.0.0.1:$port
PidFile $W/run/httpd.pid
DefaultRuntimeDir $W/run
User $USER
Group $USER
LoadModule mpm_event_module     $MODDIR/mod_mpm_event.so
LoadModule authz_core_module    $MODDIR/mod_authz_core.so
LoadModule authz_host_module    $MODDIR/mod_authz_host.so
LoadModule authz_user_module    $MODDIR/mod_authz_user.so
LoadModule authn_core_module    $MODDIR/mod_authn_core.so
LoadModule access_compat_module $MODDIR/mod_access_compat.so
LoadModule mime_module          $MODDIR/mod_mime.so
LoadModule alias_module         $MODDIR/mod_alias.so
LoadModule cgid_module          $MODDIR/mod_cgid.so
LoadModule proxy_module         $MODDIR/mod_proxy.so
LoadModule proxy_http_module    $MODDIR/mod_proxy_http.so
LoadModule rewrite_module       $MODDIR/mod_rewrite.so
LoadModule dbd_module           $MODDIR/mod_dbd.so
LoadModule lessons_module       $MODULE
StartServers 1
ServerLimit 2
ThreadsPerChild 16
MaxRequestWorkers 32
KeepAlive On
MaxKeepAliveRequests 0
ErrorLog $W/logs/error.log
LogLevel warn
TypesConfig /etc/mime.types
DBDriver sqlite3
DBDParams "$DB"
DBDMin 1
DBDKeep 2
DBDMax 8
<Directory />
    AllowOverride All
    Require all granted
</Directory>
EOF
}

# The config of a batch of layouts (one virtual host each), or of one
# layout at the main server's level.  Records each layout's lines.
sub write_conf {
    my ($file, $port, $main, @layouts) = @_;
    my @lines = split /\n/, conf_head($port);
    for my $L (@layouts) {
        make_dirs($L);
        my @r = render($L);
        if ($main == 2) {
            $L->{first} = @lines + 1;
            push @lines, @{ $L->{server}{lines} }, "<VirtualHost 127.0.0.1:$port>",
                         "    ServerName l$L->{n}.test", "    ServerAlias staging.l$L->{n}.test";
            @r = ((map { "(server) $_" } @{ $L->{server}{lines} }), @r);
            push @lines, (grep { !/^\(server\)/ } @r), '</VirtualHost>';
        }
        elsif ($main) {
            $L->{first} = @lines + 1;
            push @lines, map { s/^    //r } @r;
        }
        else {
            push @lines, "<VirtualHost 127.0.0.1:$port>",
                         "    ServerName l$L->{n}.test",
                         "    ServerAlias staging.l$L->{n}.test";
            $L->{first} = @lines + 1;
            push @lines, @r, '</VirtualHost>';
        }
        $L->{last} = @lines;
        $L->{file} = $file;
        $L->{text} = [@r];
    }
    write_file($file, join("\n", @lines) . "\n");
}

# ---- the model -----------------------------------------------------------
# The sections that match a request, parents before children.
sub matching {
    my ($s, $q, $out) = @_;
    for my $c (@{ $s->{children} || [] }) {
        my $m = $c->{kind} =~ /^(if|elseif|else)$/ ? cond_match($c, $q) : own_match($c, $q);
        next unless $m;
        push @$out, $c;
        matching($c, $q, $out);
    }
    return $out;
}

# The URLs of a layout: [path, kind, file (after mapping), uri seen by
# the sections].
sub targets {
    my ($L) = @_;
    my $n = $L->{n};
    my ($D, $F, $R, $C) = ("$W/docroot/l$n", "$W/files/l$n", "$W/reports/l$n", "$W/cgi/l$n");
    # The API's requests map to no file (mod_lessons_map.c skips the
    # filesystem walk): no <Directory>, <Files> or their Match forms,
    # nor anything inside them, is merged for them.
    return (
        ['/api/lessons',         'api',    undef],
        ["/api/lessons/$ID",     'api',    undef],
        ['/api/reports/secret.txt', 'static', "$R/secret.txt"],
        ['/go/secret.txt',       'static', "$R/secret.txt", '/api/reports/secret.txt'],
        ['/api/cgi/hit.cgi',     'cgi',    "$C/hit.cgi"],
        ['/cgi-bin/hit.cgi',     'cgi',    "$C/hit.cgi"],
        ['/api/px/p.txt',        'proxy',  undef],
        ['/px/p.txt',            'proxy',  undef],
        ['/static/f.txt',        'static', "$D/static/f.txt"],
        ['/files/a.txt',         'static', "$F/a.txt"],
        ['/files/sub/b.txt',     'static', "$F/sub/b.txt"],
    );
}

# Every section of a layout, parents before children.
sub all_sections {
    my ($s, $out) = @_;
    push @$out, $s;
    all_sections($_, $out) for @{ $s->{children} || [] };
    return $out;
}

# What httpd merges for a request (as a set): {sections, gated}.
sub chain {
    my ($L, $t, $q) = @_;
    my @secs = (($L->{server} ? $L->{server} : ()), $L->{top}, @{ matching($L->{top}, $q, []) });
    # files/sub's .htaccess: a rewrite there is an internal redirect,
    # which merges the sections of /static/f.txt as well.
    if ($L->{htaccess} =~ /RewriteRule/ && $t->[0] eq '/files/sub/b.txt') {
        my %q2 = (%$q, uri => '/static/f.txt', file => "$W/docroot/l$L->{n}/static/f.txt");
        push @secs, @{ matching($L->{top}, \%q2, []) };
    }
    my %seen;
    @secs = grep { !$seen{$_}++ } @secs;
    my %req;
    for my $s (@secs) {
        $req{$_} ||= $s->{req}{$_} for qw(dpop cert type);
        $req{aud}{$_} = 1 for keys %{ $s->{req}{aud} || {} };
    }
    return { sections => \@secs, gated => scalar(grep { $_->{gates} } @secs),
             req => \%req };
}

# ---- tokens --------------------------------------------------------------
my %TOKCACHE;
sub token {
    my (%o) = @_;       # key, alg, iss, aud, bad, cnf
    my $ck = join "\0", map { $_ // '' } @o{qw(key alg iss aud cnf)};
    my $tok = $TOKCACHE{$ck} //= do {
        my %claims = (sub => 'grammar-user', scope => 'lessons', tenant => 't1');
        # Bound to a DPoP key or a certificate no request shows.
        $claims{cnf} = { $o{cnf} => 'A' x 43 } if $o{cnf};
        $claims{iss} = $o{iss} if defined $o{iss};
        $claims{aud} = $o{aud} if defined $o{aud};
        my $k = $o{key};
        my %h;
        $h{kid} = 'k1' if $k =~ /X$/;
        jwt(alg => $o{alg}, header => \%h, claims => \%claims,
            key => $k =~ /^hs/ ? read_secret("$W/keys/$k") : "$W/keys/$k.key");
    };
    if ($o{bad}) {
        # Another character in the signature's middle: still base64url,
        # no longer the signature.
        my ($h, $p, $s) = split /\./, $tok;
        my $i = int(length($s) / 2);
        my $c = substr($s, $i, 1);
        substr($s, $i, 1) = $c eq 'A' ? 'B' : 'A';
        $tok = "$h.$p.$s";
    }
    return $tok;
}

# The tokens for a request whose chain (with a token sent) is $ch:
# [class, token].
sub tokens_for {
    my ($L, $ch) = @_;
    my @on = map { @{ $_->{keys} } } @{ $ch->{sections} };
    my %onkey = map { $_->{key} => 1 } @on;
    my @chain_iss = map { @{ $_->{issuers} } } @{ $ch->{sections} };
    my @out;
    # A bad signature: a key in force here, its issuer and audience.
    if (@on) {
        my $k = pick(@on);
        push @out, ['bad-signature', token(key => $k->{key}, alg => $KEY{$k->{key}}{algs}[0],
                                           iss => $k->{iss} // pick(@chain_iss, undef),
                                           aud => $k->{aud}, bad => 1)];
    }
    else {
        push @out, ['bad-signature', token(key => 'rsaX', alg => 'RS256',
                                           iss => pick(@chain_iss, undef), bad => 1)];
    }
    # Another issuer's: a key of the layout no section here holds, or
    # one no layout holds.
    my @off = grep { !$onkey{$_->{key}} }
              map { @{ $_->{keys} } } @{ all_sections($L->{top}, []) };
    if (@off) {
        my $k = pick(@off);
        push @out, ['other-issuer', token(key => $k->{key}, alg => $KEY{$k->{key}}{algs}[0],
                                          iss => $k->{iss}, aud => $k->{aud})];
    }
    else {
        my $k = pick('hsX', 'rsaX');
        push @out, ['other-issuer', token(key => $k, alg => $KEY{$k}{algs}[0],
                                          iss => pick(@chain_iss, $FOREIGN))];
    }
    # Tokens a key in force here signed, its issuer and audience, that
    # only a relaxed requirement would take (issue 55): DPoP-bound sent
    # as Bearer, certificate-bound without the certificate, a plain JWT
    # where at+jwt is asked, another audience where the chain names one
    # (two different ones are refused whatever the token names).
    my $req = $ch->{req};
    my @aud = sort keys %{ $req->{aud} || {} };
    my @relax = (($req->{dpop} ? ['dpop-bearer', cnf => 'jkt'] : ()),
                 ($req->{cert} ? ['cert-unbound', cnf => 'x5t#S256'] : ()),
                 ($req->{type} ? ['plain-jwt'] : ()),
                 (@aud == 1 ? ['other-aud', aud => pick(grep { $_ ne $aud[0] } @AUDS, $FOREIGN)] : ()),
                 @{ $L->{relax} || [] });
    for my $r (@relax) {
        my ($class, %o) = @$r;
        my $k = @on ? pick(@on) : { key => 'hsA', iss => pick(@chain_iss, undef) };
        push @out, [$class, token(key => $k->{key}, alg => $KEY{$k->{key}}{algs}[0],
                                  iss => $k->{iss}, aud => $k->{aud}, %o)];
    }
    # A block's key naming an issuer that block is not.
    my @blk = grep { $_->{block} } @on;
    if (@blk) {
        my $k = pick(@blk);
        my %pairs = map { ("$_->{iss}\0$_->{key}" => 1) } @blk;
        my @iss = grep { !$pairs{"$_\0$k->{key}"} } (@chain_iss, $FOREIGN);
        push @out, ['block-wrong-iss', token(key => $k->{key}, alg => $KEY{$k->{key}}{algs}[0],
                                             iss => pick(@iss), aud => $k->{aud})];
    }
    return @out;
}

# ---- httpd ---------------------------------------------------------------
my $http = LWP::UserAgent->new(timeout => 30, keep_alive => 4, max_redirect => 0);
sub http_req {
    my ($method, $url, $h, $ua) = @_;
    my $r = ($ua // $http)->request(HTTP::Request->new($method, $url, $h));
    my $st = ($r->header('Client-Warning') // '') eq 'Internal response' ? 599 : $r->code;
    return { status => $st, content => $r->content // '' };
}
my $pid;
sub stop_httpd {
    return unless $pid;
    kill 'TERM', $pid;
    for (1 .. 150) { last if waitpid($pid, WNOHANG) == $pid; select undef, undef, undef, 0.1 }
    kill 'KILL', -$pid;
    $pid = undef;
}
END {
    stop_httpd();
    if ($backend_pid) { kill 'TERM', $backend_pid; waitpid $backend_pid, 0 }
}
$SIG{INT} = $SIG{TERM} = sub { stop_httpd(); exit 130 };

sub start_httpd {
    my ($file, $port) = @_;
    $pid = fork // die "grammar: fork: $!\n";
    if (!$pid) {
        setsid();
        open STDIN, '<', '/dev/null';
        open STDOUT, '>>', "$W/logs/httpd.out";
        open STDERR, '>&', \*STDOUT;
        { exec $HTTPD, '-DFOREGROUND', '-d', $W, '-f', $file }
        POSIX::_exit(127);
    }
    for (1 .. 300) {
        my $r = http_req(GET => "http://127.0.0.1:$port/", []);
        return undef if $r->{status} != 599;
        return "httpd exited:\n" . `tail -n 20 $W/logs/error.log $W/logs/httpd.out 2>&1`
            if waitpid($pid, WNOHANG) == $pid;
        select undef, undef, undef, 0.1;
    }
    return 'httpd did not answer in 30 s';
}

# configtest: undef, or [line or undef, the output].
sub configtest {
    my ($file) = @_;
    my $out = `$HTTPD -t -d $W -f $file 2>&1`;
    return undef unless $?;
    my $line;
    $line = $1 if $out =~ /\Q$file\E:(\d+)/ || $out =~ /line (\d+) of \Q$file\E/;
    return [$line, $out];
}

# ---- the runs ------------------------------------------------------------
# Every 15th layout alone: at the server's level, or in a virtual host
# under Lessons lines of the server's, by turns.
my @layouts = map { layout($_, $_ % $MAIN_EVERY ? 0 : ($_ / $MAIN_EVERY) % 2 ? 1 : 2) } 1 .. $COUNT;
my @issue = issue_layouts($COUNT + 1);
push @layouts, @issue;

my ($passed, $failed) = (0, 0);
my (%classes, %by, @violations, %open_layouts, %refused_why, %status, %kinds);
my ($refused, $accepted, $requests) = (0, 0, 0);
# $sort: what tells violations apart in the report (token, backend).
sub violation {
    my ($L, $class, $msg, @sort) = @_;
    $failed++;
    $classes{$class}++;
    $by{$class}{$_}++ for @sort;
    $open_layouts{$L->{n}} = 1 if $class =~ /^(OPEN|BACKEND)/;
    push @violations, [$L, "$class: $msg", join(' ', $class, @sort)] if @violations < 5000;
}

sub refuse {
    my ($L, $out) = @_;
    $refused++;
    $L->{refused} = 1;
    write_file("$W/conf/refused-$L->{n}.txt", $out . join("\n", @{ $L->{text} }) . "\n") if $KEEP;
    my $why = join ' ', grep { /\S/ && !/AH00016|Configuration Failed/ } split /\n/, $out;
    $why =~ s/^.*?(LESSONS\d{5}:?|Syntax error on line \d+ of \S+:?)\s*//;
    $why =~ s#\Q$W\E/conf/[\w.-]+#FILE#g;
    $why =~ s#\Q$W\E#W#g;
    $why =~ s/^FILE:\d+: //;
    $why =~ s/:\d+\b/:N/g;
    $why =~ s/\d{4,}/N/g;
    $refused_why{substr($why, 0, 100)}++;
}

# Finds what configtest refuses in a batch: the layout holding the line
# it names is left out, and the rest tried again; a refusal that names
# no line is looked for layout by layout.
sub accepted_of {
    my ($file, $port, $main, @ls) = @_;
    while (@ls) {
        write_conf($file, $port, $main, @ls);
        my $err = configtest($file) or return @ls;
        my ($line, $out) = @$err;
        my ($L) = defined $line ? grep { $line >= $_->{first} && $line <= $_->{last} } @ls : ();
        if ($L) {
            refuse($L, $out);
            @ls = grep { $_ != $L } @ls;
            next;
        }
        if (@ls == 1) {
            refuse($ls[0], $out);
            violation($ls[0], 'REFUSAL', "configtest refused it without naming a line of it:\n$out");
            return ();
        }
        my @ok;
        for my $one (@ls) {
            push @ok, accepted_of("$file.one", $port, $main, $one);
        }
        return @ok;
    }
    return ();
}

sub read_hits {
    my %h;
    for my $f (qw(cgi proxy)) {
        open my $fh, '<', "$W/hits/$f" or die "grammar: $W/hits/$f: $!\n";
        while (<$fh>) { chomp; $h{$_}++ }
        close $fh;
    }
    return \%h;
}

my $probe_n = 0;
# The requests of one layout: [method, url, headers (X-Probe last),
# target, token class, what the model says of it].
sub requests_of {
    my ($L, $port, $host) = @_;
    my @hosts = ($host, $L->{conds}{host} ? ("staging.$host") : ());
    my @queries = ('', $L->{conds}{query} ? ('open=1') : ());
    my $cors = grep { $_->{cors} } @{ all_sections($L->{top}, [$L->{server} || ()]) };
    my @reqs;
    for my $t (targets($L)) {
        my ($path, $kind, $file, $uri) = @$t;
        for my $h (@hosts) {
            for my $qs (@queries) {
                my %q = (host => $h, uri => $uri // $path, file => $file,
                         query => $qs, method => 'GET');
                my $url = "http://127.0.0.1:$port$path" . ($qs ? "?$qs" : '');
                my $ch0 = chain($L, $t, { %q, auth => 0 });
                push @reqs, [GET => $url, [Host => $h], $t, 'no-token', $ch0];
                my $ch1 = chain($L, $t, { %q, auth => 1 });
                # Where a token opens nothing, one is enough to see that
                # the URL still serves.
                my @tk = tokens_for($L, $ch1);
                @tk = ($tk[0]) unless $ch1->{gated};
                for my $tk (@tk) {
                    push @reqs, [GET => $url, [Host => $h, Authorization => "Bearer $tk->[1]"],
                                 $t, $tk->[0], $ch1];
                }
                if ($cors && $qs eq '') {
                    my $chp = chain($L, $t, { %q, auth => 0, method => 'OPTIONS' });
                    push @reqs, [OPTIONS => $url, [Host => $h, Origin => 'https://app.example',
                                                   'Access-Control-Request-Method' => 'GET'],
                                 $t, 'preflight', $chp];
                }
            }
        }
    }
    $_->[2] = [@{ $_->[2] }, 'X-Probe' => 'p' . ++$probe_n] for @reqs;
    return @reqs;
}

sub judge {
    my ($L, $r, $res, $hits) = @_;
    my ($method, $url, $h, $t, $class, $ch) = @$r;
    my %h = @$h;
    my ($path, $kind) = @$t;
    my $st = $res->{status};
    my $n = $hits->{ $h{'X-Probe'} } // 0;
    $status{$st}++;
    my $what = "$method $path" . ($url =~ /\?(.*)/ ? "?$1" : '') . " Host: $h{Host}, $class";
    my @bad;
    if ($ch->{gated}) {
        $kinds{"gated $kind"}++;
        my $ok_pre = $class eq 'preflight' && $st == 204 && $res->{content} eq '';
        push @bad, ['OPEN', "$what: gated, answered $st"]
            if $st >= 200 && $st < 400 && !$ok_pre;
        push @bad, ['BACKEND', "$what: gated, and the $kind backend saw it $n time(s) (status $st)"]
            if $n;
    }
    elsif ($class ne 'preflight') {
        $kinds{"ungated $kind"}++;
        my $htfail = $path eq '/files/sub/b.txt' && $L->{htaccess} =~ /^Lessons/;
        if ($kind eq 'api' || $htfail) {
            push @bad, ['UNGATED-API', "$what: answered $st (500 expected: "
                               . ($htfail ? 'a Lessons line in .htaccess)' : 'no key in force)')]
                if $st != 500;
        }
        elsif ($st != 200 || ($kind =~ /^(cgi|proxy)$/ && !$n)) {
            push @bad, ['UNGATED', "$what: ungated, answered $st, the $kind backend saw it $n time(s)"];
        }
    }
    if (@bad) {
        violation($L, $_->[0], $_->[1] . "\n      sections in force: "
                  . join(', ', map { $_->{kind} =~ /^(top|server)$/ ? $1 : "$OPEN{$_->{kind}} "
                                     . ($_->{cond} ? $_->{cond}[0] : $_->{path} // $_->{arg} // '') }
                         @{ $ch->{sections} }), $class, $kind) for @bad;
    }
    else {
        $passed++;
    }
}

my @batches;
my @alone = grep { $_->{main} } @layouts;
my @vh    = grep { !$_->{main} } @layouts;
push @batches, [$_->{main}, $_] for @alone;
while (my @b = splice @vh, 0, $BATCH) { push @batches, [0, @b] }

# The requests, by $CLIENTS processes at once (each its own
# connections); the answers come back in request order.
sub ask_all {
    my @todo = @_;
    my @kids;
    for my $c (0 .. $CLIENTS - 1) {
        my $out = "$W/run/answers.$c";
        my $kid = fork // die "grammar: fork: $!\n";
        if (!$kid) {
            my $ua = LWP::UserAgent->new(timeout => 30, keep_alive => 4, max_redirect => 0);
            my @ans;
            for (my $i = $c; $i < @todo; $i += $CLIENTS) {
                my $r = $todo[$i][1];
                push @ans, [$i, http_req($r->[0], $r->[1], $r->[2], $ua)];
            }
            Storable::nstore(\@ans, $out);
            POSIX::_exit(0);
        }
        push @kids, [$kid, $out];
    }
    my @res;
    for my $k (@kids) {
        waitpid $k->[0], 0;
        die "grammar: a client failed\n" if $? || !-f $k->[1];
        $res[ $_->[0] ] = $_->[1] for @{ Storable::retrieve($k->[1]) };
        unlink $k->[1];
    }
    return @res;
}

for my $b (@batches) {
    my ($main, @ls) = @$b;
    my $port = LessonsTest::free_port();
    my $file = "$W/conf/" . ($main ? "main-$ls[0]{n}" : "batch-$ls[0]{n}") . '.conf';
    @ls = accepted_of($file, $port, $main, @ls);
    next unless @ls;
    write_conf($file, $port, $main, @ls);
    $accepted += @ls;
    if (my $err = start_httpd($file, $port)) {
        $err =~ s#\Q$W\E#W#g;
        violation($_, 'START', "configtest accepted it, httpd did not start: $err") for @ls;
        stop_httpd();
        next;
    }
    my @todo = map { my $L = $_; map { [$L, $_] }
                     requests_of($L, $port, $main == 1 ? 'main.test' : "l$L->{n}.test") } @ls;
    my @res = ask_all(@todo);
    $requests += @todo;
    stop_httpd();
    my $hits = read_hits();
    judge(@{ $todo[$_] }, $res[$_], $hits) for 0 .. $#todo;
}

# ---- the report ----------------------------------------------------------
printf "grammar: %d layouts (seed %d) and %d written out from the issue, module %s: %d accepted by httpd (%d at server level, "
       . "%d in a virtual host under server lines), %d refused by configtest\n",
    $COUNT, $SEED, scalar(@issue), $MODULE, $accepted, scalar(grep { !$_->{refused} && $_->{main} == 1 } @alone),
    scalar(grep { !$_->{refused} && $_->{main} == 2 } @alone), $refused;
printf "grammar: %d requests in %.0f s; answers: %s\n", $requests, time - $STARTED,
    join(', ', map { "$_: $status{$_}" } sort keys %status);
print "grammar: requests judged: ", join(', ', map { "$_ $kinds{$_}" } sort keys %kinds), "\n";
print "grammar: refusals: ", join('; ', map { "$refused_why{$_}x $_" }
                                      sort { $refused_why{$b} <=> $refused_why{$a} } keys %refused_why), "\n"
    if %refused_why;
if (%classes) {
    printf "grammar: violations: %s\n", join('; ', map {
        my $c = $_;
        "$c $classes{$c}" . (%{ $by{$c} || {} } ? ' (' . join(', ', map { "$_ $by{$c}{$_}" }
                                                               sort keys %{ $by{$c} }) . ')' : '')
    } sort keys %classes);
    my $open_issue = grep { $open_layouts{ $_->{n} } } @issue;
    my $acc_issue = grep { !$_->{refused} } @issue;
    printf "grammar: open layouts (a gated request let through, or its backend reached): %d of %d generated"
           . " ones accepted, %d of the %d from the issue accepted: %s\n", keys(%open_layouts) - $open_issue,
        $accepted - $acc_issue, $open_issue, $acc_issue, join(' ', sort { $a <=> $b } keys %open_layouts);
}
printf "grammar: the layouts from the issue (%d-%d): %s\n", $issue[0]{n}, $issue[-1]{n},
    join(', ', map { "$_->{n} " . ($_->{refused} ? 'refused by configtest'
                                   : $open_layouts{ $_->{n} } ? 'OPEN' : 'closed') } @issue);
# The first violation of each kind, then more, up to 12 layouts.
my (%shown_kind, %shown_layout, @show);
for my $pass (0, 1) {
    for my $v (@violations) {
        last if @show >= 12;
        next if $shown_layout{ $v->[0]{n} };
        next if !$pass && $shown_kind{ $v->[2] }++;
        $shown_layout{ $v->[0]{n} } = 1;
        push @show, $v;
    }
}
for my $v (@show) {
    my ($L, $msg) = @$v;
    print "grammar: layout $L->{n} (", ($L->{main} == 1 ? 'server level'
                                        : $L->{main} ? "virtual host l$L->{n}.test under (server) lines"
                                        : "virtual host l$L->{n}.test"),
          ", $L->{file}):\n    $msg\n";
    print "    | $_\n" for map { s#\Q$W\E#W#gr } @{ $L->{text} };
    print "    | (files/sub/.htaccess) $_\n" for split /\n/, $L->{htaccess};
}
if (my $c = $ENV{INTEGRATION_COUNTS}) {
    open my $fh, '>>', $c or die "grammar: $c: $!\n";
    print $fh "$passed $failed\n";
    close $fh;
}
printf "%-4s  %-24s %5d tests%s\n", $failed ? 'FAIL' : 'PASS', 'layouts-grammar', $passed + $failed,
    $failed ? ", $failed failed" : '';
exit($failed ? 1 : 0);
