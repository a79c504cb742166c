#!/usr/bin/perl
# The token gate under generated httpd.conf layouts (issue 18).
#
#   t/layouts/layouts.pl [--count N] [--seed S] [--keep]
#
# Makes N layouts (default 520) from a seed: the API's <Location>, and
# around it algorithm/key pairs, Require lines, Satisfy Any and nested
# <If> sections in the virtual host, <Location>, <LocationMatch>,
# <Directory> and <If>, in random order and sections.  Some layouts are
# broken on purpose (an algorithm without its key, a key that cannot
# serve its algorithm, a directive in the wrong context, ...): each of
# those is run through `apache2 -t` alone, which must refuse it naming
# the file and the line of the broken directive.  The others are served
# by one httpd per batch, one name-based virtual host per layout (and
# some alone, at the main server's level), and every path of every
# layout is asked with every token of a pool: tokens of each configured
# pair, tokens that mix one pair's algorithm with another's key
# (the HMAC-with-public-key forgery included), alg "none", expired,
# garbage and none at all.
#
# Checked for every request:
#  - the gate: a request without a token valid for some pair of its own
#    layout never gets 2xx or 3xx where a key is in force;
#  - pairs hold: a path never lets in tokens of two different pairs, and
#    only ever a pair that one section set together;
#  - the model: the answer is exactly what httpd's merge order says
#    (the last matching section that sets a pair wins; Require lines of
#    the last matching section that has some decide for a good token;
#    no key where SetHandler lessons is, a 500).
# Prints the counts, and the first violations with their layout.  With
# INTEGRATION_COUNTS=FILE, appends "passed failed" to FILE (make test).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../lib";
use File::Path qw(make_path remove_tree);
use File::Temp qw(tempdir);
use Getopt::Long;
use LWP::UserAgent;
use POSIX qw(setsid WNOHANG);
use LessonsTest ();
use LessonsTest::JWT qw(jwt read_secret);

my $ROOT = "$FindBin::Bin/../..";
my ($COUNT, $SEED, $KEEP) = (520, 18, 0);
GetOptions('count=i' => \$COUNT, 'seed=i' => \$SEED, 'keep' => \$KEEP)
    or die "usage: $0 [--count N] [--seed S] [--keep]\n";
my $HTTPD   = $ENV{HTTPD} // '/usr/sbin/apache2';
my $MODDIR  = $ENV{HTTPD_MODULES} // '/usr/lib/apache2/modules';
my $MODULE  = $ENV{MODULE} // "$ROOT/build/mod_lessons.so";
my $BATCH   = 65;               # layouts per httpd
my $MAIN_EVERY = 13;            # every 13th good layout runs alone, at server level
my $BROKEN_EVERY = 6;           # every 6th layout is broken on purpose

die "layouts: $MODULE not found: run make first\n" unless -f $MODULE;
die "layouts: $HTTPD not found: run t/tools/deps.sh test\n" unless -x $HTTPD;
srand($SEED);

# ---- the work directory --------------------------------------------------
my $W = tempdir('/tmp/lessons-layouts.XXXXXX', CLEANUP => !$KEEP);
chmod 0755, $W;
make_path(map { "$W/$_" } qw(keys logs run conf free));
my $ISROOT = $> == 0;
my $USER = $ISROOT ? 'www-data' : scalar getpwuid($>);

sub run_quiet { system("@_ >/dev/null 2>&1") == 0 or die "layouts: failed: @_\n" }

# Keys: two HMAC secrets, two RSA keys, one EC key.
for my $h (qw(hsA hsB)) {
    open my $r, '<:raw', '/dev/urandom' or die "layouts: /dev/urandom: $!\n";
    read $r, my $bytes, 32;
    write_file("$W/keys/$h", unpack 'H*', $bytes);
}
for my $r (qw(rsa1 rsa2)) {
    run_quiet("openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out $W/keys/$r.key");
    run_quiet("openssl pkey -in $W/keys/$r.key -pubout -out $W/keys/$r.pub");
}
run_quiet("openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out $W/keys/ec1.key");
run_quiet("openssl pkey -in $W/keys/ec1.key -pubout -out $W/keys/ec1.pub");

# The database: the schema and the sample lessons, readable by httpd.
my $DB = "$W/db/lessons.db";
make_path("$W/db");
system("sqlite3 $DB <$ROOT/sql/schema.sqlite.sql >/dev/null && sqlite3 $DB <$ROOT/sql/sample-lessons.sql >/dev/null") == 0
    or die "layouts: cannot make the database\n";
write_file("$W/free/f.txt", "free\n");
my $ID = `sqlite3 $DB 'SELECT min(id) FROM lessons'`;
chomp $ID;
die "layouts: no lesson in the sample data\n" unless $ID =~ /^\d+$/;
if ($ISROOT) {
    run_quiet("chown -R $USER: $W/db $W/logs $W/run");
}

# ---- pairs and tokens ----------------------------------------------------
# A pair: the algorithms and the key file one section sets together.
my %PAIR = (
    A => { algs => ['HS256'],          key => 'hsA' },
    B => { algs => ['HS256', 'HS512'], key => 'hsB' },
    C => { algs => ['RS256'],          key => 'rsa1' },
    D => { algs => ['RS256', 'RS384'], key => 'rsa2' },
    E => { algs => ['ES256'],          key => 'ec1' },
);
sub key_file { my $k = shift; $k =~ /^hs/ ? "$W/keys/$k" : "$W/keys/$k.pub" }

# Tokens: [label, alg, key material, valid-at-all].  Material is the key
# name; HMAC over a public key's PEM text is the classic forgery.
my @TOKENS;
{
    my $now = time;
    my %claims = (scope => 'lessons', sub => 'layout-user');
    for my $alg (qw(HS256 HS512)) {
        for my $m (qw(hsA hsB)) {
            push @TOKENS, ["$alg/$m", $alg, $m,
                           jwt(alg => $alg, key => read_secret("$W/keys/$m"),
                               claims => \%claims)];
        }
        for my $m (qw(rsa1 rsa2 ec1)) {
            my $pem = do { local (@ARGV, $/) = ("$W/keys/$m.pub"); <> };
            push @TOKENS, ["$alg/$m.pub-as-secret", $alg, "$m.pub", jwt(alg => $alg, key => $pem, claims => \%claims)];
        }
    }
    for my $alg (qw(RS256 RS384)) {
        push @TOKENS, ["$alg/$_", $alg, $_,
                       jwt(alg => $alg, key => "$W/keys/$_.key", claims => \%claims)]
            for qw(rsa1 rsa2);
    }
    push @TOKENS, ['ES256/ec1', 'ES256', 'ec1',
                   jwt(alg => 'ES256', key => "$W/keys/ec1.key", claims => \%claims)];
    push @TOKENS, ['expired HS256/hsA', 'HS256', 'expired',
                   jwt(alg => 'HS256', key => read_secret("$W/keys/hsA"),
                       claims => { %claims, exp => $now - 7200, iat => $now - 9000 })];
    push @TOKENS, ['alg none', 'none', 'none', jwt(alg => 'none', claims => \%claims)];
    push @TOKENS, ['garbage', 'none', 'none', 'abc.def.ghi'];
    push @TOKENS, ['no token', 'none', 'none', undef];
}

# Does token $t verify under pair $p?
sub fits {
    my ($t, $p) = @_;
    return $p && $t->[2] eq $PAIR{$p}{key} && grep { $_ eq $t->[1] } @{ $PAIR{$p}{algs} };
}

# ---- the generator -------------------------------------------------------
# Paths every layout is asked for: [path, kind].
my @PATHS = (
    ['/api/lessons', 'api'], ["/api/lessons/$ID", 'api'],
    ['/api/lessons/level/3', 'api'], ['/api/lessons/beginner', 'api'],
    ['/static/f.txt', 'static'], ['/free/f.txt', 'free'],
);

# If conditions: [expression, the paths it matches].
my @IFS = (
    ['%{REQUEST_URI} =~ m#/level/#',  sub { $_[0] =~ m#/level/# }],
    ['%{REQUEST_URI} =~ m#^/static/#', sub { $_[0] =~ m#^/static/# }],
    ["%{REQUEST_METHOD} == 'GET'",     sub { 1 }],
    ["-n req('X-Never-Sent')",         sub { 0 }],
);

# Require lines: [text, grants a request with a good token?].
my @REQUIRES = (
    ['Require all granted', 1], ['Require all denied', 0],
    ['Require jwt-claim scope lessons', 1], ['Require jwt-claim scope admin', 0],
    ['Require ip 127.0.0.1', 1], ['Require ip 10.255.255.1', 0],
    ['Require valid-user', 1],
);

sub pick { $_[int rand @_] }

# Section kinds: [kind, opening line, matcher(path, kind)].  DOCROOT is
# filled in per layout.
my @SECTIONS = (
    ['loc',   '<Location "/api/lessons/level">', sub { $_[0] =~ m#^/api/lessons/level(/|$)# }],
    ['locrx', '<LocationMatch "^/api/lessons/(beginner|advanced)$">', sub { $_[0] =~ m#^/api/lessons/(beginner|advanced)$# }],
    ['locrx', '<LocationMatch "^/api/lessons/[0-9]+$">', sub { $_[0] =~ m#^/api/lessons/[0-9]+$# }],
    ['locrx', '<LocationMatch "^/static/">', sub { $_[0] =~ m#^/static/# }],
    ['loc',   '<Location "/static">', sub { $_[0] =~ m#^/static(/|$)# }],
    ['dir',   '<Directory "DOCROOT">', sub { $_[1] eq 'static' }],
    ['dir',   '<Directory "DOCROOT/static">', sub { $_[1] eq 'static' }],
);

# A section's body: a list of lines, and what it sets ({pair}, {requires}).
sub body {
    my ($s, $allow_require) = @_;
    my @lines;
    if (rand() < 0.55) {
        my $p = pick(sort keys %PAIR);
        $s->{pair} = $p;
        my $algs = join ' ', @{ $PAIR{$p}{algs} };
        if (rand() < 0.5) {
            push @lines, ["LessonsJWTKey $algs " . key_file($PAIR{$p}{key}), 'jwt'];
        }
        else {
            push @lines, ["LessonsJWTAlgorithm $algs", 'jwt'],
                         ["LessonsJWTKeyFile " . key_file($PAIR{$p}{key}), 'jwt'];
        }
    }
    if ($allow_require && rand() < 0.45) {
        my @r = map { pick(@REQUIRES) } 1 .. (rand() < 0.3 ? 2 : 1);
        $s->{grants} = (grep { $_->[1] } @r) ? 1 : 0;
        $s->{require_kinds} = [map { $_->[0] } @r];
        push @lines, [$_->[0], 'require'] for @r;
    }
    if ($allow_require && rand() < 0.15) {
        $s->{compat} = 1;
        push @lines, ['Order deny,allow', 'compat'], ['Deny from all', 'compat'],
                     ['Allow from 127.0.0.1', 'compat'], ['Satisfy Any', 'compat'];
    }
    # Any order within the section.
    for (my $i = @lines - 1; $i > 0; $i--) {
        my $j = int rand($i + 1);
        @lines[$i, $j] = @lines[$j, $i];
    }
    $s->{lines} = [map { $_->[0] } @lines];
    return $s;
}

# One layout: {main, sections => [..], broken => {...}}.
sub layout {
    my ($n, $broken) = @_;
    my $L = { n => $n, sections => [] };
    # The server/vhost level: a pair sometimes, never Require (not
    # allowed there).
    push @{ $L->{sections} }, body({ kind => 'top', match => sub { 1 } }, 0);
    # The API's own <Location>, and 1-4 others, in random order.
    my @secs = (body({ kind => 'api', open => '<Location "/api/lessons">',
                       match => sub { $_[0] =~ m#^/api/lessons(/|$)# },
                       handler => 1 }, 1));
    for (1 .. 1 + int rand 4) {
        my $k = pick(@SECTIONS);
        push @secs, body({ kind => $k->[0], open => $k->[1], match => $k->[2] }, 1);
    }
    for (my $i = @secs - 1; $i > 0; $i--) {
        my $j = int rand($i + 1);
        @secs[$i, $j] = @secs[$j, $i];
    }
    # Nested and top-level <If>s.
    for my $s (@secs) {
        next unless rand() < 0.3;
        my $c = pick(@IFS);
        $s->{ifs} = [body({ kind => 'if', cond => $c->[0], match => $c->[1] }, 1)];
    }
    if (rand() < 0.35) {
        my $c = pick(@IFS);
        $L->{sections}[0]{ifs} = [body({ kind => 'if', cond => $c->[0], match => $c->[1] }, 1)];
    }
    push @{ $L->{sections} }, @secs;
    break_layout($L) if $broken;
    # No key anywhere: start-up refuses SetHandler lessons (when the
    # layout is alone: in a batch, another layout's key counts).
    if (!$broken && !grep { $_->{pair} } map { ($_, @{ $_->{ifs} || [] }) } @{ $L->{sections} }) {
        $L->{broken} = 'SetHandler lessons without any key';
        $L->{nokey} = 1;
    }
    return $L;
}

# Break a layout on purpose: each way names the line start-up must point
# at (the directive itself, or the first JWT directive of its section).
my @BREAKS = (
    ['an algorithm without its key',   sub { ["LessonsJWTAlgorithm RS256"] }],
    ['a key file without algorithm',   sub { ["LessonsJWTKeyFile " . key_file('rsa1')] }],
    ['HMAC with an RSA public key',    sub { ["LessonsJWTKey HS256 " . key_file('rsa1')] }],
    ['RSA with a shared secret',       sub { ["LessonsJWTKey RS256 " . key_file('hsA')] }],
    ['ES256 with an RSA key',          sub { ["LessonsJWTKey ES256 " . key_file('rsa2')] }],
    ['an unknown algorithm',           sub { ["LessonsJWTKey HS257 " . key_file('hsA')] }],
    ['keys URL settings without URL',  sub { ["LessonsJWTKeysRefresh 60"] }],
    ['LessonsDBTimeout in a section',  sub { ["LessonsDBTimeout 5"] }],
    ['LessonsCacheSize in a section',  sub { ["LessonsCacheSize 1M"] }],
);
sub break_layout {
    my ($L) = @_;
    my $b = pick(@BREAKS);
    # Into a section other than the top, a fresh one so that no pair of
    # the section hides the break.
    my @cands = grep { $_->{kind} ne 'top' } @{ $L->{sections} };
    my $s = pick(@cands);
    $s->{pair} = undef;
    $s->{lines} = [grep { !/^LessonsJWT/ } @{ $s->{lines} }];
    my $at = int rand(@{ $s->{lines} } + 1);
    splice @{ $s->{lines} }, $at, 0, @{ $b->[1]->() };
    $s->{broken} = 1;
    $L->{broken} = $b->[0];
}

# ---- writing layouts -----------------------------------------------------
# Lines of a layout's sections; records the line number of a broken
# directive in $L->{bad_line} (relative to the first line written).
sub render {
    my ($L, $docroot, $first_line) = @_;
    my @out;
    my $emit = sub {
        my ($s, $indent) = @_;
        for my $l (@{ $s->{lines} }) {
            if ($s->{broken} && !defined $L->{bad_line}
                && $l =~ /^Lessons(JWT|DBTimeout|CacheSize)/) {
                $L->{bad_line} = $first_line + @out;
            }
            push @out, "$indent$l";
        }
    };
    for my $s (@{ $L->{sections} }) {
        if ($s->{kind} eq 'top') {
            $emit->($s, '    ');
        }
        else {
            (my $open = $s->{open}) =~ s/DOCROOT/$docroot/;
            push @out, "    $open";
            if ($s->{handler}) {
                $L->{bad_line} = $first_line + @out if $L->{nokey};
                push @out, '        SetHandler lessons';
            }
            $emit->($s, '        ');
            for my $i (@{ $s->{ifs} || [] }) {
                push @out, qq(        <If "$i->{cond}">);
                $emit->($i, '            ');
                push @out, '        </If>';
            }
            (my $close = $open) =~ s/^<(\w+).*/<\/$1>/;
            push @out, "    $close";
        }
        if ($s->{kind} eq 'top') {
            for my $i (@{ $s->{ifs} || [] }) {
                push @out, qq(    <If "$i->{cond}">);
                $emit->($i, '        ');
                push @out, '    </If>';
            }
        }
    }
    return @out;
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
LessonsBasePath /api/lessons
Alias /free $W/free
<Directory />
    Require all granted
</Directory>
EOF
}

sub docroot_of {
    my ($n) = @_;
    my $d = "$W/docroot/l$n";
    make_path("$d/static");
    write_file("$d/static/f.txt", "static $n\n");
    return $d;
}

sub write_file {
    my ($path, $text) = @_;
    open my $fh, '>', $path or die "layouts: $path: $!\n";
    print $fh $text;
    close $fh;
}

# The config of a batch of layouts (one vhost each), or of one layout at
# the main server's level.
sub write_conf {
    my ($file, $port, $main, @layouts) = @_;
    my $head = conf_head($port);
    my @lines = split /\n/, $head;
    for my $L (@layouts) {
        my $docroot = docroot_of($L->{n});
        if ($main) {
            push @lines, "DocumentRoot $docroot";
            push @lines, render($L, $docroot, @lines + 1);
        }
        else {
            push @lines, "<VirtualHost 127.0.0.1:$port>",
                         "    ServerName l$L->{n}.test",
                         "    DocumentRoot $docroot";
            push @lines, render($L, $docroot, @lines + 1);
            push @lines, '</VirtualHost>';
        }
        $L->{file} = $file;
    }
    write_file($file, join("\n", @lines) . "\n");
}

# ---- the model -----------------------------------------------------------
# Sections of $L that apply to a request for $path, in httpd's merge
# order: the server/vhost level, <Directory> (static files only: the API
# maps to no file), <Location>/<LocationMatch> in the order written, then
# the <If>s in the order their parents merged.
sub merged {
    my ($L, $path, $kind) = @_;
    my @secs = @{ $L->{sections} };
    my @order = grep { $_->{kind} eq 'top' } @secs;
    push @order, sort { length $a->{open} <=> length $b->{open} }
                 grep { $_->{kind} eq 'dir' && $_->{match}->($path, $kind) } @secs;
    push @order, grep { $_->{kind} =~ /^(loc|locrx|api)$/ && $_->{match}->($path, $kind) } @secs;
    my @ifs = map { @{ $_->{ifs} || [] } } @order;
    push @order, grep { $_->{match}->($path, $kind) } @ifs;
    return @order;
}

# What the request should get: the status, and whether a key is in
# force there.
sub expect {
    my ($L, $path, $kind, $t) = @_;
    my @order = merged($L, $path, $kind);
    my ($pair)   = map { $_->{pair} } grep { $_->{pair} } reverse @order;
    my ($req)    = grep { $_->{require_kinds} } reverse @order;
    my ($compat) = grep { $_->{compat} } reverse @order;
    if (!$pair) {
        # httpd alone: Satisfy Any lets the local host in, else Require
        # lines decide (those that need a user or a token cannot grant);
        # then the API's handler fails closed without a key: 500.
        my $pass = $kind eq 'api' ? 500 : 200;
        return ($pass, 0) if $compat || !$req;
        my %grants = map { $_->[0] => $_->[1] } @REQUIRES;
        my @plain = grep { !/jwt-claim|valid-user/ } @{ $req->{require_kinds} };
        return ($pass, 0) if grep { $grants{$_} } @plain;
        return (403, 0) if @plain == @{ $req->{require_kinds} };
        return ('not2xx', 0);
    }
    return (401, 1) unless fits($t, $pair);
    # A good token: the Require lines decide, Satisfy Any or not.
    return (403, 1) if $req && !$req->{grants};
    return (200, 1);
}

# ---- the runs ------------------------------------------------------------
my (@good, @broken_layouts);
for my $n (1 .. $COUNT) {
    my $L = layout($n, $n % $BROKEN_EVERY == 0);
    push @{ $L->{broken} ? \@broken_layouts : \@good }, $L;
}

my ($passed, $failed, @violations) = (0, 0);
my %outcomes;
my %classes;
sub violation {
    my ($L, $msg) = @_;
    $failed++;
    $classes{$1}++ while $msg =~ /^(GATE|MODEL|PAIRS|configtest|a good layout)/mg;
    push @violations, [$L, $msg] if @violations < 15;
}

# Broken layouts: configtest alone must refuse each, naming file and line.
for my $L (@broken_layouts) {
    my $file = "$W/conf/broken-$L->{n}.conf";
    write_conf($file, 1, 0, $L);
    my $out = `$HTTPD -t -d $W -f $file 2>&1`;
    my $rc = $? >> 8;
    my $line = $L->{bad_line} // 0;
    if ($rc == 0) {
        violation($L, "configtest accepted a layout with $L->{broken}");
    }
    elsif ($out !~ /\Q$file\E:$line\b/ && $out !~ /line $line of \Q$file\E/) {
        violation($L, "configtest refused $L->{broken} without naming $file:$line:\n$out");
    }
    else {
        $passed++;
    }
}

my $http = LWP::UserAgent->new(timeout => 30, keep_alive => 4);
sub http_get {
    my ($url, @h) = @_;
    my $r = $http->get($url, @h);
    # LWP's own failures (no connection) carry this header.
    my $st = ($r->header('Client-Warning') // '') eq 'Internal response' ? 599 : $r->code;
    return { status => $st, content => $r->decoded_content // '' };
}
my $pid;
sub stop_httpd {
    return unless $pid;
    kill 'TERM', $pid;
    for (1 .. 150) { last if waitpid($pid, WNOHANG) == $pid; select undef, undef, undef, 0.1 }
    kill 'KILL', -$pid;
    $pid = undef;
}
END { stop_httpd() }
$SIG{INT} = $SIG{TERM} = sub { stop_httpd(); exit 130 };

sub start_httpd {
    my ($file, $port) = @_;
    my $t = `$HTTPD -t -d $W -f $file 2>&1`;
    if ($?) { return "configtest refused it:\n$t" }
    $pid = fork // die "layouts: fork: $!\n";
    if (!$pid) {
        setsid();
        open STDIN, '<', '/dev/null';
        open STDOUT, '>>', "$W/logs/httpd.out";
        open STDERR, '>&', \*STDOUT;
        exec $HTTPD, '-DFOREGROUND', '-d', $W, '-f', $file;
        exit 127;
    }
    for (1 .. 300) {
        my $r = http_get("http://127.0.0.1:$port/free/f.txt");
        return undef if $r->{status} != 599;
        return "httpd exited:\n" . `tail -n 20 $W/logs/error.log $W/logs/httpd.out 2>&1`
            if waitpid($pid, WNOHANG) == $pid;
        select undef, undef, undef, 0.1;
    }
    return 'httpd did not answer in 30 s';
}

# Ask every path of $L with every token, and judge each answer.
sub probe {
    my ($L, $port, $host) = @_;
    my %accepted;               # path => {pair-ish key => 1}
    for my $p (@PATHS) {
        my ($path, $kind) = @$p;
        for my $t (@TOKENS) {
            my @h = (Host => $host);
            push @h, Authorization => "Bearer $t->[3]" if defined $t->[3];
            my $r = http_get("http://127.0.0.1:$port$path", @h);
            my $st = $r->{status};
            my ($want, $keyed) = expect($L, $path, $kind, $t);
            $outcomes{$st}++;
            my $legit = grep { fits($t, $_) } map { $_->{pair} || () } @{ $L->{sections} },
                        map { @{ $_->{ifs} || [] } } @{ $L->{sections} };
            my @msg;
            # The gate, whatever the model says.
            if ($st >= 200 && $st < 400 && !$legit && ($keyed || $kind eq 'api')) {
                push @msg, "GATE: $path with $t->[0] answered $st";
            }
            if ($kind eq 'api' && $st == 200) {
                $accepted{$path}{"$t->[1] $t->[2]"} = 1;
            }
            my $ok = $want eq 'not2xx' ? ($st < 200 || $st >= 300) : $st == $want;
            push @msg, "MODEL: $path with $t->[0]: got $st, the merge says $want" unless $ok;
            if (@msg) { violation($L, join "\n", @msg) } else { $passed++ }
        }
    }
    # Pairs hold: what a path lets in is one pair's tokens.
    for my $path (sort keys %accepted) {
        my @in = sort keys %{ $accepted{$path} };
        my @by = grep {
            my $p = $_;
            !grep { my ($a, $k) = split / /; !($k eq $PAIR{$p}{key} && grep { $_ eq $a } @{ $PAIR{$p}{algs} }) } @in
        } sort keys %PAIR;
        if (!@by) { violation($L, "PAIRS: $path let in tokens of no single pair: @in") }
        else { $passed++ }
    }
}

my @batches;
my @alone = grep { $_->{n} % $MAIN_EVERY == 0 } @good;
my @vh    = grep { $_->{n} % $MAIN_EVERY != 0 } @good;
push @batches, [1, $_] for @alone;
while (my @b = splice @vh, 0, $BATCH) { push @batches, [0, @b] }

my $requests = 0;
for my $b (@batches) {
    my ($main, @ls) = @$b;
    my $port = LessonsTest::free_port();
    my $file = "$W/conf/" . ($main ? "main-$ls[0]{n}" : "batch-$ls[0]{n}") . '.conf';
    write_conf($file, $port, $main, @ls);
    if (my $err = start_httpd($file, $port)) {
        violation($_, "a good layout did not start: $err") for @ls;
        stop_httpd();
        next;
    }
    for my $L (@ls) {
        probe($L, $port, $main ? '127.0.0.1' : "l$L->{n}.test");
        $requests += @PATHS * @TOKENS;
    }
    stop_httpd();
}

# ---- the report ----------------------------------------------------------
my $ngood = @good;
my $nbroken = @broken_layouts;
printf "layouts: %d layouts (seed %d): %d served (%d at server level, %d in virtual hosts), %d broken on purpose\n",
    $COUNT, $SEED, $ngood, scalar @alone, $ngood - @alone, $nbroken;
printf "layouts: %d requests; answers: %s\n", $requests,
    join(', ', map { "$_: $outcomes{$_}" } sort keys %outcomes);
print "layouts: violations: ", join(', ', map { "$_ $classes{$_}" } sort keys %classes), "\n" if %classes;
for my $v (@violations) {
    my ($L, $msg) = @$v;
    print "layouts: layout $L->{n} ($L->{file}): $msg\n";
    my @lines = render({ %$L, bad_line => undef }, "$W/docroot/l$L->{n}", 0);
    print "    | $_\n" for @lines;
}
if (my $c = $ENV{INTEGRATION_COUNTS}) {
    open my $fh, '>>', $c or die "layouts: $c: $!\n";
    print $fh "$passed $failed\n";
    close $fh;
}
printf "%-4s  %-24s %5d tests%s\n", $failed ? 'FAIL' : 'PASS', 'layouts', $passed + $failed,
    $failed ? ", $failed failed" : '';
exit($failed ? 1 : 0);
