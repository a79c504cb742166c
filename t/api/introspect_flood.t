# One client flooding the introspection endpoint with random opaque
# tokens (issue 55, item 4): every token no cache answers was one POST to
# the provider with the server's client credentials, so one
# unauthenticated client drove the provider as fast as it could send,
# until the provider throttled the server's client and every client's new
# token got 503.  Against the test provider (t/idp/idp.js), which here
# throttles as real ones do (limit_per_s: 429 past 30 requests in a
# second), and a server of several processes (answers and budget shared)
# with LessonsJWTIntrospectRate 10 3:
#
#   - start-up states the bound (LESSONS00772);
#   - while 127.0.0.1 sends random tokens from three processes as fast as
#     they go, 127.0.0.2 keeps getting 200 for a token it used before the
#     flood and for fresh tokens it never used;
#   - the flood gets 429 problem+json with Retry-After, asking nothing
#     (LESSONS00770), the few it may ask about 401, never 200;
#   - the provider never throttles the server (no 429 there), and counts
#     at most the documented bound: 10 a second with a burst of one
#     second's worth, over the time measured here (with a second's
#     slack);
#   - configtest refuses a client's part over the whole, 0, and the
#     directive in a virtual host.
#
# Bounded: the flood lasts 4 s, the good client's rounds are counted.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(time sleep);
use LessonsTest;
use LessonsTest::IdP qw(start_idp idp_control);

my $RATE   = 10;            # LessonsJWTIntrospectRate, the server's
my $SHARE  = 3;             # ... and one client's
my $LIMIT  = 30;            # the provider's own throttle, a second
my $FLOOD  = 4;             # seconds
my $FLOODERS = 3;           # processes sending random tokens

my $dir = File::Temp->newdir;

# ---- the provider
my $idp = start_idp("$dir");
my $ISS = $idp->{iss};
sub control { idp_control($idp, @_) }
control(POST => '/realms', { name => 'flood' });
control(POST => '/introspection?realm=flood', { limit_per_s => $LIMIT });
sub state_of { control(GET => '/state?realm=flood') }
sub opaque {
    return control(POST => '/opaque?realm=flood',
                   { claims => $_[0] // {} })->{token};
}

# ---- the server: Debian's event MPM sizes (several processes)
open my $fh, '>', "$dir/good.secret" or die "$dir/good.secret: $!";
print $fh "introspect-secret\n";
close $fh or die "$dir/good.secret: $!";
my $port = free_port();
my $conf = httpd_conf($dir, $port, <<"EOF");
LogLevel info
StartServers 2
ServerLimit 2
ThreadsPerChild 25
MaxRequestWorkers 50
LessonsJWTIntrospectRate $RATE $SHARE
<Location "/flood/api/lessons">
    SetHandler lessons
    LessonsJWTIntrospect $ISS/realms/flood/introspect
    LessonsJWTIntrospectClient lessons-api "$dir/good.secret"
    LessonsJWTIntrospectCacheMax 3600
    LessonsJWTKeysCA "$dir/ca.crt"
</Location>
EOF
my $out = `'@{[ LessonsTest::httpd_bin() ]}' -t -f '$conf' 2>&1`;
like $out, qr/Syntax OK/, 'configtest passes with LessonsJWTIntrospectRate'
    or diag $out;
start_httpd($conf, $port);
sub error_log { do { local (@ARGV, $/) = ("$dir/error_log"); <> } }
like error_log(), qr/LESSONS00772: introspection: at most $RATE questions a second to the provider, $SHARE of them for one client .*for the whole server/,
    'start-up states the bound';

# One request from $from (a local address: the server listens on
# 127.0.0.1, which every 127/8 address reaches): "code retry-after
# content-type", or "0 - -" without an answer.
sub from {
    my ($from, $token) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port",
                                  LocalAddr => $from, Timeout => 15)
        or return '0 - -';
    print $s "GET /flood/api/lessons HTTP/1.0\r\nHost: localhost\r\n"
           . "Authorization: Bearer $token\r\n\r\n";
    my $text = do { local $/; <$s> } // '';
    close $s;
    my ($code) = $text =~ m{\AHTTP/1\.\d (\d{3})};
    my ($retry) = $text =~ /^Retry-After: *(\S+)/mi;
    my ($type) = $text =~ /^Content-Type: *([^;\r\n]+)/mi;
    return join ' ', $code // 0, $retry // '-', $type // '-';
}
my $GOOD = '127.0.0.2';
my $BAD  = '127.0.0.1';

my $known = opaque({ sub => 'gail' });
like from($GOOD, $known), qr/\A200 /, 'the good client\'s token before the flood: 200'
    or diag error_log();

# ---- the flood ------------------------------------------------------------
my $before = state_of();
my $t0 = time;
my @kids;
for my $k (1 .. $FLOODERS) {
    pipe(my $r, my $w) or die "pipe: $!";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $r;
        my %codes;
        my $sample = '';
        my $end = time + $FLOOD;
        my $n = 0;
        while (time < $end && $n < 100_000) {
            my $junk = join '', map { ('a' .. 'z', 'A' .. 'Z', 0 .. 9)[rand 62] }
                1 .. 32;
            my $got = from($BAD, $junk);
            my ($code) = split / /, $got;
            $codes{$code}++;
            $sample = $got if $code == 429 && !$sample;
            $n++;
        }
        print $w join(',', map { "$_=$codes{$_}" } sort keys %codes),
                 "|$sample\n";
        close $w;
        POSIX::_exit(0);
    }
    close $w;
    push @kids, [ $pid, $r ];
}
# Meanwhile the good client: its known token and a fresh one each round,
# two fresh tokens a second at most (within its share of 3).
my (@good, $rounds);
while (time < $t0 + $FLOOD) {
    my $fresh = opaque({ sub => 'gail' });
    push @good, [ 'known', from($GOOD, $known) ],
                [ 'fresh', from($GOOD, $fresh) ],
                [ 'fresh again', from($GOOD, $fresh) ];
    $rounds++;
    sleep 0.5;
}
my (%flood, @samples);
for my $kid (@kids) {
    my $line = readline($kid->[1]) // '|';
    waitpid $kid->[0], 0;
    chomp $line;
    my ($codes, $sample) = split /\|/, $line, 2;
    for (split /,/, $codes // '') {
        my ($c, $n) = split /=/;
        $flood{$c} += $n;
    }
    push @samples, $sample if $sample;
}
my $elapsed = time - $t0;
my $after = state_of();

# ---- what held -------------------------------------------------------------
my @bad = grep { $_->[1] !~ /\A200 / } @good;
ok $rounds >= 2, "the good client made $rounds rounds during the flood";
is scalar(@bad), 0,
    'the good client: 200 every time, for its known token and for fresh ones'
    or diag join("\n", map { "$_->[0]: $_->[1]" } @bad), "\n",
            'flood: ', join(', ', map { "$_=$flood{$_}" } sort keys %flood);
my $sent = 0;
$sent += $_ for values %flood;
ok $sent > 2 * $RATE * $FLOOD,
    "the flood sent $sent random tokens (more than the budget allows asking about)";
ok !$flood{200}, '... none of them 200';
ok $flood{429}, '... the flood got 429' or diag join ', ', %flood;
like $samples[0] // '', qr{\A429 \d+ application/problem\+json\z},
    '... problem+json with Retry-After';
like error_log(), qr/LESSONS00770: .*client 127\.0\.0\.1 has used its share of LessonsJWTIntrospectRate: answered 429, nothing asked/,
    '... logged at info, naming the client';
unlike error_log(), qr/LESSONS00770: .*client 127\.0\.0\.2 /,
    '... and never the good client';
is $after->{introspect_limited} - $before->{introspect_limited}, 0,
    'the provider never had to throttle the server';
my $asked = $after->{introspect_requests} - $before->{introspect_requests};
my $bound = $RATE * (int($elapsed) + 2);
ok $asked <= $bound,
    "the provider was asked $asked times in ${\ sprintf '%.1f', $elapsed} s: "
    . "within $RATE a second and a second's burst ($bound)";

# After the flood the good client's token still passes, and the flood's
# client gets its share back.
like from($GOOD, $known), qr/\A200 /, 'after the flood: the known token 200';
sleep 1.5;
like from($BAD, 'AfterTheFloodNoSuchToken0123'), qr/\A401 /,
    'the flooding client, a second later: its share back (401 for its junk)';

# ---- configtest ----------------------------------------------------------
for my $case ([ 'LessonsJWTIntrospectRate 10 11', qr/one client's part \(11\) cannot be more than the server's budget \(10\)/,
                'a client\'s part over the whole' ],
              [ 'LessonsJWTIntrospectRate 0', qr/LessonsJWTIntrospectRate takes a whole number from 1 to 1000000 questions a second, not '0'/,
                'a rate of 0' ],
              [ "<VirtualHost 127.0.0.1:*>\n    LessonsJWTIntrospectRate 10\n</VirtualHost>",
                qr/LessonsJWTIntrospectRate cannot occur within <VirtualHost> section/,
                'a virtual host\'s' ]) {
    mkdir "$dir/bad";
    my $bad = httpd_conf("$dir/bad", free_port(), "$case->[0]\n");
    my $text = `'@{[ LessonsTest::httpd_bin() ]}' -t -f '$bad' 2>&1`;
    unlike $text, qr/Syntax OK/, "configtest refuses $case->[2]";
    like $text, $case->[1], '... and says why' or diag $text;
}

done_testing();
