# Opaque access tokens by introspection (issue 44, part 3; RFC 7662):
# LessonsJWTIntrospect asks the provider about every token that is no
# JWT (and, with no key in the section, about every token), with
# client_secret_basic, through the keys URL's bounds.  Against the test
# provider (t/idp/idp.js, its /introspect route) over TLS with a test CA:
#
#   - an active opaque token: 200; its request is a form POST with
#     token_type_hint=access_token and the client's id and secret;
#   - inactive (unknown, revoked): 401 invalid_token;
#   - answers are reused: a second request asks nothing; K requests at
#     once with one new token ask once (all 200), and with the provider
#     failing, once too (all 503 with Retry-After); a revocation is
#     seen once LessonsJWTIntrospectCacheMax has passed, not before, also
#     where another section of the same endpoint kept the answer longer;
#   - the provider stopped, too slow, or answering what cannot be used
#     ("active": "true", none, over 32 KiB): 503 with Retry-After, never
#     a 200; back: 200;
#   - Require jwt-claim scope on an introspected scope, two tokens with
#     two answers never swapped (the cache key);
#   - discover: the endpoint from the issuer's metadata; a metadata
#     document naming another origin refused (503, logged);
#   - wrong client secret: 503, the log names the directive;
#   - LessonsJWTIntrospectJWT: a revoked JWT refused;
#   - configtest refuses an http:// endpoint off loopback and an endpoint
#     without client;
#   - answers shared by a server's processes (server C, prefork, each
#     child ending after one connection, so every request is answered by
#     a process that has not met the token): an active token asked about
#     once is served by the others without a second request at the
#     provider, an inactive one too, two tokens' answers never swapped; an
#     answer over the shared table's 2048 bytes is asked for by each
#     process; a graceful restart keeps the answers; with
#     LessonsJWTIntrospectShared 0 each process asks.
#
# Server B is started here: one process, so that the provider's request
# counts are exact.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use IO::Socket::INET;
use POSIX ();
use JSON::PP ();
use Time::HiRes qw(time sleep);
use LessonsTest;
use LessonsTest::IdP qw(start_idp idp_control);

my $dir  = File::Temp->newdir;
my $JSON = JSON::PP->new->utf8->canonical;

# ---- the provider
my $idp = start_idp("$dir");
my $ISS = $idp->{iss};
my ($IDP_PORT) = $ISS =~ /:(\d+)\z/;
sub control { idp_control($idp, @_) }
sub state_of { control(GET => '/state' . ($_[0] ? "?realm=$_[0]" : '')) }
sub opaque {
    my ($claims, $realm) = @_;
    return control(POST => '/opaque' . ($realm ? "?realm=$realm" : ''),
                   { claims => $claims // {} })->{token};
}
for my $name (qw(far wrong flight)) {
    control(POST => '/realms', { name => $name });
}
# The far realm's metadata names an endpoint on another origin (the
# certificate names localhost too, so only the origin check refuses it).
control(POST => '/metadata?realm=far',
        { introspection_endpoint => "https://localhost:$IDP_PORT/realms/far/introspect" });

# ---- server B
for my $f ([ 'good.secret', "introspect-secret\n" ],
           [ 'wrong.secret', "not-the-secret\n" ]) {
    open my $fh, '>', "$dir/$f->[0]" or die "$dir/$f->[0]: $!";
    print $fh $f->[1];
    close $fh or die "$dir/$f->[0]: $!";
}
my $CLIENT = qq{LessonsJWTIntrospectClient lessons-api "$dir/good.secret"};
my $CA     = qq{LessonsJWTKeysCA "$dir/ca.crt"};
my $port = free_port();
my $conf = httpd_conf($dir, $port, <<"EOF");
LogLevel info
@{[ one_process_conf() ]}# Many fresh tokens a second from one address here: the budget of
# questions (introspect_flood.t tests it) out of the way.
LessonsJWTIntrospectRate 1000 1000
# The root issuer: its keys for JWTs, its endpoint (discovered) for the
# rest; a revocation seen within a second.
<Location "/op/api/lessons">
    SetHandler lessons
    LessonsJWTIssuer $ISS
    LessonsJWTAudience lessons
    LessonsJWTIntrospect discover
    $CLIENT
    LessonsJWTIntrospectCacheMax 1
    $CA
</Location>
# No key: every token asked about, the endpoint given; answers kept long.
<Location "/cached/api/lessons">
    SetHandler lessons
    LessonsJWTIntrospect $ISS/introspect
    $CLIENT
    LessonsJWTIntrospectCacheMax 3600
    $CA
</Location>
<Location "/scoped/api/lessons">
    SetHandler lessons
    LessonsJWTIntrospect $ISS/introspect
    $CLIENT
    LessonsJWTIntrospectCacheMax 3600
    $CA
    Require jwt-claim scope lessons:write
</Location>
<Location "/far/api/lessons">
    SetHandler lessons
    LessonsJWTIssuer $ISS/realms/far
    LessonsJWTIntrospect discover
    $CLIENT
    $CA
</Location>
# Its own realm, so that its counts are its own (see "one question").
<Location "/flight/api/lessons">
    SetHandler lessons
    LogLevel info lessons:debug
    LessonsJWTIntrospect $ISS/realms/flight/introspect
    $CLIENT
    LessonsJWTIntrospectCacheMax 3600
    $CA
</Location>
<Location "/wrong/api/lessons">
    SetHandler lessons
    LessonsJWTIntrospect $ISS/realms/wrong/introspect
    LessonsJWTIntrospectClient lessons-api "$dir/wrong.secret"
    $CA
</Location>
<Location "/revoke/api/lessons">
    SetHandler lessons
    LessonsJWTIssuer $ISS
    LessonsJWTIntrospect discover
    $CLIENT
    LessonsJWTIntrospectJWT On
    LessonsJWTIntrospectCacheMax 1
    $CA
</Location>
EOF
my $out = `'@{[ LessonsTest::httpd_bin() ]}' -t -f '$conf' 2>&1`;
like $out, qr/Syntax OK/, 'configtest passes with introspecting sections'
    or diag $out;
start_httpd($conf, $port);
my $B = "http://127.0.0.1:$port";

sub get { call(GET => $_[0], base => $B, token => $_[1]) }
sub error_log { do { local (@ARGV, $/) = ("$dir/error_log"); <> } }
# Poll until $code comes back (bounded); the last answer.
sub eventually {
    my ($path, $token, $code, $limit) = @_;
    my $end = time + $limit;
    my $res;
    do {
        $res = get($path, $token);
        return $res if $res->code == $code;
        sleep 0.25;
    } while (time < $end);
    return $res;
}

# ---- an active opaque token ---------------------------------------------
my $t = opaque();
unlike $t, qr/\./, 'the provider\'s opaque token has no dots';
my $res = get('/op/api/lessons', $t);
is $res->code, 200, 'an active opaque token: 200'
    or diag $res->header('WWW-Authenticate') // '', "\n", error_log();
my $st = state_of();
is $st->{introspect_requests}, 1, '... one introspection';
is $st->{introspect_hint}, 'access_token', '... token_type_hint=access_token';
is $st->{introspect_auth}, 'lessons-api:right secret',
    '... client_secret_basic with the configured client';
like error_log(), qr/LESSONS00745: issuer \Q$ISS\E: introspection endpoint \Q$ISS\E\/introspect \(from its metadata\)/,
    '... the endpoint came from the issuer\'s metadata';
unlike error_log(), qr/\Q$t\E/, 'the token is never logged';

is_unauthorized(get('/op/api/lessons', 'NoSuchTokenAtTheProvider0123'),
                'a token the provider does not know', 'invalid_token');
like error_log(), qr/LESSONS00740: .*says the token is not active/,
    '... logged as inactive';

# A JWT of the issuer is verified with its keys, not asked about.
{
    my $before = state_of()->{introspect_requests};
    my $jwt = LessonsTest::IdP::idp_token($idp);
    is get('/op/api/lessons', $jwt)->code, 200, 'a JWT beside it: 200';
    is state_of()->{introspect_requests}, $before, '... not asked about';
}

# ---- the cache ------------------------------------------------------------
{
    my $c = opaque();
    my $before = state_of()->{introspect_requests};
    is get('/cached/api/lessons', $c)->code, 200, 'no key, an opaque token: 200';
    is get('/cached/api/lessons', $c)->code, 200, '... again';
    is state_of()->{introspect_requests}, $before + 1, '... asked once';
    control(POST => '/opaque/revoke', { token => $c });
    is get('/cached/api/lessons', $c)->code, 200,
        'revoked, within LessonsJWTIntrospectCacheMax 3600: still the answer kept';
    is state_of()->{introspect_requests}, $before + 1, '... nothing asked';
}
{
    my $r = opaque();
    is get('/op/api/lessons', $r)->code, 200, 'a token to revoke: 200';
    control(POST => '/opaque/revoke', { token => $r });
    $res = eventually('/op/api/lessons', $r, 401, 15);
    is_unauthorized($res, 'revoked at the provider: 401 once the cache bound (1 s) has passed',
                    'invalid_token');
}

# One endpoint and client (one key) under two bounds: an answer a section
# of 3600 s kept is not served to one of 1 s past that second.
{
    my $x = opaque();
    is get('/cached/api/lessons', $x)->code, 200,
        'a token kept under a bound of 3600 s: 200';
    control(POST => '/opaque/revoke', { token => $x });
    $res = eventually('/op/api/lessons', $x, 401, 10);
    is_unauthorized($res, '... revoked: a section of the same endpoint with a bound of 1 s asks again and gets 401',
                    'invalid_token');
}

# ---- two tokens, two answers, never swapped ----------------------------
{
    my $writer = opaque({ sub => 'wanda', scope => 'lessons lessons:write' });
    my $reader = opaque({ sub => 'rita', scope => 'lessons' });
    for my $round (1 .. 3) {
        is get('/scoped/api/lessons', $writer)->code, 200,
            "round $round: the writer's scope lessons:write: 200";
        is get('/scoped/api/lessons', $reader)->code, 403,
            "round $round: the reader's scope lacks it: 403";
    }
}

# ---- the provider down: 503, never 200 ---------------------------------
{
    my $fresh = opaque();
    control(POST => '/stop');
    $res = get('/op/api/lessons', $fresh);
    is_problem($res, 503, 'the provider stopped, a token not asked about yet');
    like $res->header('Retry-After') // '', qr/\A\d+\z/, '... with Retry-After';
    like error_log(), qr/LESSONS00742: introspection at \Q$ISS\E\/introspect: .*answered 503/,
        '... and the 503 says why';
    control(POST => '/start');
    is get('/op/api/lessons', $fresh)->code, 200, 'the provider back: 200';
}

# ---- answers that cannot be used, a provider too slow: 503 -------------
{
    my @cases = ([ { body => '{"active":"true","sub":"alice"}' },
                   qr/LESSONS00743: .*cannot be used/, '"active": "true" (a string)' ],
                 [ { body => '{"sub":"alice"}' },
                   qr/LESSONS00743: .*cannot be used/, 'no "active"' ],
                 [ { body => '{"active":true,"x":"' . ('a' x 40000) . '"}' },
                   qr/LESSONS00742: .*larger than/, 'an answer over 32 KiB' ],
                 [ { delay_ms => 8000 },
                   qr/LESSONS00742: .*timed out/, 'no answer within 5 s' ]);
    for my $case (@cases) {
        control(POST => '/introspection', $case->[0]);
        $res = get('/op/api/lessons', opaque());
        is_problem($res, 503, "$case->[2]: 503, never 200");
        like $res->header('Retry-After') // '', qr/\A\d+\z/, '... with Retry-After';
        like error_log(), $case->[1], '... and logged why';
    }
    control(POST => '/introspection', {});
    is get('/op/api/lessons', opaque())->code, 200, 'the provider answering again: 200';
}

# ---- one question per token at a time, per process ----------------------
# K requests with $token, each connected first, then all sent at once (a
# pipe opens the gate): the server meets them together.  "code
# retry-after" of each.
sub burst {
    my ($path, $token, $k) = @_;
    pipe(my $gate, my $open) or die "pipe: $!";
    my @kids;
    for (1 .. $k) {
        pipe(my $r, my $w) or die "pipe: $!";
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            close $r;
            close $open;
            my $sock = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port",
                                             Timeout => 60);
            sysread $gate, my $byte, 1;
            my $line = '0 -';
            if ($sock) {
                print $sock "GET $path HTTP/1.0\r\nHost: 127.0.0.1:$port\r\n"
                    . "Authorization: Bearer $token\r\n\r\n";
                local $/;
                my $text = <$sock> // '';
                my ($code) = $text =~ m{\AHTTP/1\.\d (\d{3})};
                my ($retry) = $text =~ /^Retry-After: *(\S+)/mi;
                $line = join ' ', $code // 0, $retry // '-';
            }
            print $w "$line\n";
            close $w;
            POSIX::_exit(0);
        }
        close $w;
        push @kids, [ $pid, $r ];
    }
    close $gate;
    syswrite $open, 'x' x $k;
    close $open;
    my @out;
    for my $kid (@kids) {
        my $line = readline($kid->[1]) // '0 -';
        waitpid $kid->[0], 0;
        chomp $line;
        push @out, $line;
    }
    return @out;
}
# The provider (its own realm: no answer of a test above, delayed, is
# counted here) answers after 2 s, so that the K requests are all on
# their way while the first is asked about, however busy the machine
# (what is counted is the asks, not how long anything took).
{
    my $K = 8;
    my $asked = sub { state_of('flight')->{introspect_requests} // 0 };
    my $tok = opaque(undef, 'flight');
    control(POST => '/introspection?realm=flight', { delay_ms => 2000 });
    my $before = $asked->();
    my @got = burst('/flight/api/lessons', $tok, $K);
    is scalar(grep { /\A200 / } @got), $K,
        "$K requests at once with one new token: all 200"
        or diag join(', ', @got), "\n", error_log();
    is $asked->(), $before + 1, '... and the provider was asked once';
    like error_log(), qr/LESSONS00754: introspection answer [0-9a-f]{16}\.\.\.: the one another request of this process just had/,
        '... the others took its answer (logged at debug)';

    my $down = opaque(undef, 'flight');
    control(POST => '/introspection?realm=flight',
            { status => 503, delay_ms => 2000 });
    $before = $asked->();
    @got = burst('/flight/api/lessons', $down, $K);
    is scalar(grep { /\A503 \d+\z/ } @got), $K,
        "the provider failing: all $K at once 503 with Retry-After"
        or diag join(', ', @got);
    is $asked->(), $before + 1,
        '... and the provider was asked once, not once each';
    control(POST => '/introspection?realm=flight', {});
    is get('/flight/api/lessons', $down)->code, 200,
        '... answering again: 200 (a failure is not kept)';
}

# ---- an endpoint on another origin: refused ----------------------------
$res = get('/far/api/lessons', opaque(undef, 'far'));
is_problem($res, 503, 'metadata naming an endpoint on another origin: 503');
like error_log(), qr/LESSONS00742: .*not on the issuer's origin: refused/,
    '... logged as refused';
is state_of('far')->{introspect_requests}, 0, '... and nothing was asked there';

# ---- the provider refuses the client -----------------------------------
$res = get('/wrong/api/lessons', opaque(undef, 'wrong'));
is_problem($res, 503, 'a wrong client secret: 503');
like error_log(), qr/LESSONS00742: .*HTTP status 401.*were refused/,
    '... the log says the credentials were refused';

# ---- a provider that will not answer about a token ---------------------
# oidc-provider answers 400 unsupported_token_type when asked about a
# JWT (LessonsJWTIntrospectJWT On behind it): 503, and the log says what
# the 400 likely is and what to do.
control(POST => '/introspection?realm=flight', { status => 400 });
$res = get('/flight/api/lessons', opaque(undef, 'flight'));
is_problem($res, 503, 'the provider answers 400: 503');
like error_log(), qr/HTTP status 400, not 200 \(error "introspection fault"\).*unsupported_token_type.*LessonsJWTIntrospectJWT off/,
    '... the log names its answer, what a 400 likely is and what to do';
# As oidc-provider answers for a JWT: the line says so, from the answer.
control(POST => '/introspection?realm=flight', { status => 400, error => 'unsupported_token_type' });
$res = get('/flight/api/lessons', opaque({ sub => 'other' }, 'flight'));
is_problem($res, 503, 'the provider answers 400 unsupported_token_type: 503');
like error_log(), qr/HTTP status 400, not 200 \(error "unsupported_token_type"\) \(the provider does not introspect this kind of token: for JWTs, leave LessonsJWTIntrospectJWT off behind it\)/,
    '... the log names that answer and what to do';
control(POST => '/introspection?realm=flight', {});

# ---- LessonsJWTIntrospectJWT: a revoked JWT ------------------------------
{
    my $jwt = LessonsTest::IdP::idp_token($idp);
    is get('/revoke/api/lessons', $jwt)->code, 200, 'a JWT asked about too: 200';
    control(POST => '/opaque/revoke', { token => $jwt });
    $res = eventually('/revoke/api/lessons', $jwt, 401, 15);
    is_unauthorized($res, 'the JWT revoked at the provider: 401', 'invalid_token');
}

# ---- answers shared by the server's processes (server C) ----------------
{
    control(POST => '/realms', { name => 'shared' });
    mkdir "$dir/c";
    my $cport = free_port();
    my $EP = "$ISS/realms/shared/introspect";
    my $cconf = httpd_conf("$dir/c", $cport, <<"EOF", mpm => 'prefork');
LogFormat "%P %>s %U" pid
CustomLog "$dir/c/access_log" pid
LogLevel info lessons:debug
KeepAlive Off
LessonsJWTIntrospectRate 1000 1000
StartServers 3
MinSpareServers 3
MaxSpareServers 6
ServerLimit 8
MaxRequestWorkers 8
# Each child ends after one connection: no request meets a process that
# has met its token before.
MaxConnectionsPerChild 1
<Location "/shared/api/lessons">
    SetHandler lessons
    LessonsJWTIntrospect $EP
    $CLIENT
    LessonsJWTIntrospectCacheMax 3600
    $CA
</Location>
<Location "/sscoped/api/lessons">
    SetHandler lessons
    LessonsJWTIntrospect $EP
    $CLIENT
    LessonsJWTIntrospectCacheMax 3600
    $CA
    Require jwt-claim scope lessons:write
</Location>
EOF
    start_httpd($cconf, $cport);
    my $clog = sub { do { local (@ARGV, $/) = ("$dir/c/error_log"); <> } };
    # One request on a connection of its own: its status (0: none).
    my $hit = sub {
        my ($path, $token) = @_;
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                      PeerPort => $cport, Timeout => 15)
            or return 0;
        print $s "GET $path HTTP/1.1\r\nHost: localhost\r\n"
               . "Connection: close\r\nAuthorization: Bearer $token\r\n\r\n";
        my $line = <$s> // '';
        1 while <$s>;           # to the close: its access log line is
        close $s;               # written by then
        return $line =~ m{^HTTP/1\.[01] (\d{3})} ? $1 : 0;
    };
    # The pids that answered, in order, from line $from of the access log.
    my $answered = sub {
        my ($from) = @_;
        open my $fh, '<', "$dir/c/access_log" or return ();
        my @pids = map { /^(\d+) / ? $1 : () } <$fh>;
        return @pids[$from .. $#pids];
    };
    my $asked = sub { state_of('shared')->{introspect_requests} // 0 };
    my $served = sub { scalar(() = $clog->() =~ /LESSONS00752: /g) };

    my $t = opaque({ sub => 'sharon' }, 'shared');
    my $before = $asked->();
    my $from = () = $answered->(0);
    my @codes = map { $hit->('/shared/api/lessons', $t) } 1 .. 4;
    is "@codes", '200 200 200 200',
        'shared: an active token, four requests in four processes: 200'
        or diag $clog->();
    my @pids = $answered->($from);
    my %distinct = map { $_ => 1 } @pids;
    is scalar(keys %distinct), 4, '... answered by four processes'
        or diag "@pids";
    is $asked->(), $before + 1, '... the provider asked once';
    is $served->(), 3, '... three answers from the shared table (logged)';
    unlike $clog->(), qr/\Q$t\E/, '... the token never logged';

    # Not active: kept its 10 s, and shared too.
    my $dead = 'NoSuchSharedToken0123456789';
    $before = $asked->();
    $from = () = $answered->(0);
    @codes = map { $hit->('/shared/api/lessons', $dead) } 1 .. 2;
    is "@codes", '401 401', 'shared: an inactive token in two processes: 401';
    @pids = $answered->($from);
    isnt $pids[0], $pids[1], '... two processes' or diag "@pids";
    is $asked->(), $before + 1, '... the provider asked once';

    # Two tokens' answers, each process meeting them for the first time.
    my $writer = opaque({ sub => 'wanda', scope => 'lessons lessons:write' },
                        'shared');
    my $reader = opaque({ sub => 'rita', scope => 'lessons' }, 'shared');
    $before = $asked->();
    @codes = map { ($hit->('/sscoped/api/lessons', $writer),
                    $hit->('/sscoped/api/lessons', $reader)) } 1 .. 3;
    is "@codes", '200 403 200 403 200 403',
        'shared: the writer 200, the reader 403, in six processes';
    is $asked->(), $before + 2, '... each asked about once';

    # Over the shared table's bound: each process asks for itself.
    my $big = opaque({ sub => 'bertha', note => 'n' x 3000 }, 'shared');
    $before = $asked->();
    @codes = map { $hit->('/shared/api/lessons', $big) } 1 .. 2;
    is "@codes", '200 200',
        'shared: an answer over 2048 bytes, two processes: 200';
    is $asked->(), $before + 2, '... each process asked';
    like $clog->(), qr/LESSONS00751: introspection answer [0-9a-f]{16}\.\.\.: \d+ bytes, over the shared table's 2048: not shared/,
        '... logged as not shared';
    like $clog->(), qr/LESSONS00748: introspection answers: 4096 shared entries/,
        'the shared table\'s size logged at start-up';
    like $clog->(), qr/LESSONS00772: introspection: at most 1000 questions a second to the provider, 1000 of them for one client \(LessonsJWTIntrospectRate\), for the whole server/,
        '... and the budget of questions, the whole server\'s';

    # A graceful restart keeps the table, its answers with it.
    my $graceful = sub {
        my $n = generations("$dir/c/error_log");
        system(LessonsTest::httpd_bin(), '-f', $cconf, '-k', 'graceful') == 0
            or return 0;
        my $end = time + 20;
        my $now;
        sleep 0.2 while ($now = generations("$dir/c/error_log")) == $n && time < $end;
        return $now > $n;
    };
    ok $graceful->(), 'shared: a graceful restart' or diag $clog->();
    like $clog->(), qr/LESSONS00748: introspection answers: 4096 shared entries .*kept from before/,
        '... keeps the table';
    $before = $asked->();
    @codes = map { $hit->('/shared/api/lessons', $t) } 1 .. 2;
    is "@codes", '200 200', '... the token asked about before it: 200 in two new processes';
    is $asked->(), $before, '... without asking the provider';

    # LessonsJWTIntrospectShared 0: each process asks for itself.
    {
        open my $fh, '<', $cconf or die "$cconf: $!";
        my $text = do { local $/; <$fh> };
        close $fh;
        $text =~ s/^KeepAlive Off$/KeepAlive Off\nLessonsJWTIntrospectShared 0/m;
        open $fh, '>', $cconf or die "$cconf: $!";
        print $fh $text;
        close $fh or die "$cconf: $!";
    }
    ok $graceful->(), 'LessonsJWTIntrospectShared 0: a graceful restart'
        or diag $clog->();
    like $clog->(), qr/LESSONS00746: introspection answers: not shared/,
        '... logged';
    like $clog->(), qr/LESSONS00772: introspection: at most 1000 questions a second to the provider, 1000 of them for one client \(LessonsJWTIntrospectRate\), for each process/,
        '... the budget of questions then each process\'s (logged)';
    my $own = opaque({ sub => 'otto' }, 'shared');
    $before = $asked->();
    @codes = map { $hit->('/shared/api/lessons', $own) } 1 .. 2;
    is "@codes", '200 200', '... a token in two processes: 200';
    is $asked->(), $before + 2, '... each process asked';
}

# ---- configtest ----------------------------------------------------------
for my $case ([ "LessonsJWTIntrospect http://example.org/introspect\n    $CLIENT",
                qr/only on 127\.0\.0\.1/, 'an http:// endpoint off loopback' ],
              [ "LessonsJWTIntrospect $ISS/introspect",
                qr/LESSONS00744: .*needs LessonsJWTIntrospectClient/,
                'an endpoint without client' ],
              [ "LessonsJWTIntrospect $ISS/introspect\n    "
                . qq{LessonsJWTIntrospectClient c "$dir/none.secret"},
                qr/client secret file/, 'a secret file that cannot be read' ]) {
    mkdir "$dir/bad";
    my $bad = httpd_conf("$dir/bad", free_port(), <<"EOF");
<Location "/x/api/lessons">
    SetHandler lessons
    $case->[0]
</Location>
EOF
    my $text = `'@{[ LessonsTest::httpd_bin() ]}' -t -f '$bad' 2>&1`;
    unlike $text, qr/Syntax OK/, "configtest refuses $case->[2]";
    like $text, $case->[1], '... and says why';
}

done_testing();
