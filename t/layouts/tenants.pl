#!/usr/bin/perl
# Tenants of one server who name one keys URL with other trust (issue 55
# §1): generated layouts of virtual hosts that all name the same keys
# URL, each with its own CA (the provider's, an attacker's, or none: the
# system's CAs), its own proxy (none, an honest one, or an attacker's
# that ends every tunnel at the attacker's server) and its algorithms,
# in a <Location>, a <LocationMatch> or the virtual host itself, as
# LessonsJWTKey or as LessonsJWTAlgorithm beside LessonsJWTKeysURL, in
# random order.
#
#   t/layouts/tenants.pl [--count N] [--seed S] [--keep]
#
# The provider and the attacker each serve a JWKS over TLS (openssl
# s_server) with a certificate of their own CA, under the same kid: the
# attacker's key where the victim expects the provider's.  N servers
# (default 24) of 5 to 8 virtual hosts each (every third: the issue's
# victim and attacker alone); every virtual host is asked
# with the provider's token and the attacker's.  The model: a virtual
# host reaches the attacker when its own proxy is the attacker's, else
# the provider; its fetch succeeds when its own CA signed that server's
# certificate; a token passes (200) exactly when the fetch succeeded and
# the token's signer is the server reached.  Every layout must pass
# configtest (a CA or a proxy of one section is never another's
# conflict), and every answer must be 200 exactly where the model says.
# Prints the counts and the first violations with their layout.  With
# INTEGRATION_COUNTS=FILE, appends "passed failed" to FILE.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../lib";
use File::Path qw(make_path);
use File::Temp qw(tempdir);
use Getopt::Long;
use LWP::UserAgent;
use HTTP::Request;
use POSIX qw(setsid WNOHANG);
use Time::HiRes qw(time sleep);
use LessonsTest ();
use LessonsTest::JWT qw(jwt b64url);
use LessonsTest::Proxy qw(start_proxy);

my %opt = (count => 24, seed => 55, keep => 0);
GetOptions(\%opt, 'count=i', 'seed=i', 'keep')
    or die "usage: $0 [--count N] [--seed S] [--keep]\n";
my ($COUNT, $SEED, $KEEP) = @opt{qw(count seed keep)};
my ($HTTPD, $MODDIR, $MODULE) = (
    $ENV{HTTPD} // '/usr/sbin/apache2',
    $ENV{HTTPD_MODULES} // '/usr/lib/apache2/modules',
    $ENV{MODULE} // "$FindBin::Bin/../../build/mod_lessons.so");
die "tenants: $MODULE not found: run make first\n" unless -f $MODULE;

my $W = tempdir('/tmp/lessons-tenants.XXXXXX', CLEANUP => !$KEEP);
chmod 0755, $W;
make_path(map { "$W/$_" } qw(logs run files good evil));
srand($SEED);
my $USER = $> == 0 ? 'www-data' : scalar getpwuid($>);

sub run_quiet { system("@_ >/dev/null 2>&1") == 0 or die "tenants: failed: @_\n" }
sub write_file {
    my ($path, $text) = @_;
    open my $fh, '>', $path or die "tenants: $path: $!\n";
    print $fh $text;
    close $fh or die "tenants: $path: $!\n";
}

# ---- the provider ("good") and the attacker ("evil"): a CA, a server
# certificate for 127.0.0.1, an RSA key published as kid "k1" each
my %port;
for my $side (qw(good evil)) {
    my $d = "$W/$side";
    run_quiet("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
              . " -keyout $d/ca.key -out $d/ca.crt -subj /CN=tenants-$side-ca -days 2");
    run_quiet("openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
              . " -keyout $d/server.key -out $d/server.csr -subj /CN=127.0.0.1");
    write_file("$d/ext", "subjectAltName=IP:127.0.0.1\n");
    run_quiet("openssl x509 -req -in $d/server.csr -CA $d/ca.crt -CAkey $d/ca.key"
              . " -CAcreateserial -out $d/server.crt -days 2 -extfile $d/ext");
    run_quiet("openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out $d/rsa.key");
    my ($hex) = `openssl rsa -in $d/rsa.key -noout -modulus 2>/dev/null` =~ /Modulus=([0-9A-F]+)/
        or die "tenants: no modulus\n";
    write_file("$d/jwks.json", '{"keys":[{"kty":"RSA","kid":"k1","use":"sig","n":"'
               . b64url(pack 'H*', $hex) . '","e":"AQAB"}]}');
}
# A program in a session of its own, in $dir, its output to logs/NAME.out.
sub spawn {
    my ($dir, $name, @cmd) = @_;
    my $pid = fork // die "tenants: fork: $!\n";
    return $pid if $pid;
    setsid();
    chdir $dir or POSIX::_exit(1);
    open STDIN, '<', '/dev/null';
    open STDOUT, '>>', "$W/logs/$name.out";
    open STDERR, '>&', \*STDOUT;
    { exec @cmd }
    POSIX::_exit(127);
}
my @servers;
END { kill 'TERM', @servers if @servers }
for my $side (qw(good evil)) {
    $port{$side} = LessonsTest::free_port();
    push @servers, spawn("$W/$side", $side, 'openssl', 's_server', '-quiet',
                         '-accept', "127.0.0.1:$port{$side}", '-cert', 'server.crt',
                         '-key', 'server.key', '-WWW');
    LessonsTest::wait_port($port{$side});
}
my $URL = "https://127.0.0.1:$port{good}/jwks.json";
# The attacker's proxy ends every tunnel at the attacker's server; the
# honest one relays to where it is asked.
my $evil_proxy = start_proxy($W, 'evil', to => "127.0.0.1:$port{evil}");
my $honest_proxy = start_proxy($W, 'honest');
my %token = map {
    $_ => jwt(alg => 'RS256', key => "$W/$_/rsa.key", header => { kid => 'k1' })
} qw(good evil);

# ---- a tenant: its trust, its section, its directive form
sub tenant {
    my ($n) = @_;
    my %t = (
        n     => $n,
        ca    => (qw(good evil none))[int rand 3],
        proxy => (qw(none honest evil))[int rand 3],
        algs  => rand() < 0.7 ? 'RS256' : 'RS256 ES256',
        where => (qw(location match vhost))[int rand 3],
        form  => rand() < 0.5 ? 'key' : 'split',
    );
    # Reached: the attacker only through the attacker's proxy.
    $t{reached} = $t{proxy} eq 'evil' ? 'evil' : 'good';
    $t{fetched} = $t{ca} eq $t{reached};
    return \%t;
}

sub lines_of {
    my ($t) = @_;
    my @l = $t->{form} eq 'key'
        ? ("LessonsJWTKey $t->{algs} $URL")
        : ("LessonsJWTAlgorithm $t->{algs}", "LessonsJWTKeysURL $URL");
    push @l, qq{LessonsJWTKeysCA "$W/$t->{ca}/ca.crt"} if $t->{ca} ne 'none';
    push @l, 'LessonsJWTKeysProxy '
        . ($t->{proxy} eq 'evil' ? $evil_proxy : $honest_proxy)->{url}
        if $t->{proxy} ne 'none';
    @l = reverse @l if rand() < 0.3;        # another order
    return @l;
}

sub conf_of {
    my ($port, @tenants) = @_;
    # One small server: the module, mod_dbd it needs, and a file.
    my %mod = (mpm_event => 'mod_mpm_event.so', authz_core => 'mod_authz_core.so',
               dbd => 'mod_dbd.so');
    my $text = join '', map { "$_\n" }
        "ServerName 127.0.0.1", "Listen 127.0.0.1:$port",
        "PidFile $W/run/httpd.pid", "DefaultRuntimeDir $W/run",
        "User $USER", "Group $USER",
        (map { "LoadModule ${_}_module $MODDIR/$mod{$_}" } qw(mpm_event authz_core dbd)),
        "LoadModule lessons_module $MODULE",
        "StartServers 1", "ServerLimit 2", "ThreadsPerChild 16",
        "MaxRequestWorkers 32", "ErrorLog $W/logs/error.log", "LogLevel warn",
        "DocumentRoot $W/files", "<Directory />", "    Require all granted",
        "</Directory>";
    for my $t (@tenants) {
        my @l = lines_of($t);
        $text .= "<VirtualHost 127.0.0.1:$port>\n    ServerName t$t->{n}.test\n";
        if ($t->{where} eq 'vhost') {
            $text .= join '', map { "    $_\n" } @l;
        }
        else {
            my $open = $t->{where} eq 'match' ? '<LocationMatch "^/gated">'
                                              : '<Location "/gated">';
            my $close = $t->{where} eq 'match' ? '</LocationMatch>' : '</Location>';
            $text .= "    $open\n" . join('', map { "        $_\n" } @l) . "    $close\n";
        }
        $text .= "</VirtualHost>\n";
    }
    return $text;
}
write_file("$W/files/gated", "gated\n");

my $ua = LWP::UserAgent->new(timeout => 30, keep_alive => 0);
sub ask {
    my ($port, $host, $token) = @_;
    my $r = $ua->request(HTTP::Request->new(GET => "http://127.0.0.1:$port/gated",
        [ Host => $host, Authorization => "Bearer $token" ]));
    return ($r->header('Client-Warning') // '') eq 'Internal response' ? 599 : $r->code;
}

# ---- the runs --------------------------------------------------------------
my ($passed, $failed, $requests, $open, $shut) = (0, 0, 0, 0, 0);
my @violations;
my $n = 0;
for my $batch (1 .. $COUNT) {
    # Every third server: the issue's pair, a victim naming no CA
    # beside the attacker naming its own CA and proxy (nothing there
    # for a start-up check to see), in either order.
    my @tenants = map { tenant(++$n) } 1 .. ($batch % 3 ? 5 + int rand 4 : 2);
    if ($batch % 3 == 0) {
        @{ $tenants[0] }{qw(ca proxy reached fetched)} = ('none', 'none', 'good', 0);
        @{ $tenants[1] }{qw(ca proxy reached fetched)} = ('evil', 'evil', 'evil', 1);
        @tenants = reverse @tenants if rand() < 0.5;
    }
    my $port = LessonsTest::free_port();
    my $file = "$W/httpd-$batch.conf";
    write_file($file, conf_of($port, @tenants));
    my $out = `$HTTPD -t -d $W -f $file 2>&1`;
    if ($? || $out !~ /Syntax OK/) {
        $failed++;
        push @violations, "batch $batch ($file): configtest refused:\n$out";
        next;
    }
    $passed++;
    my $pid = spawn($W, 'httpd', $HTTPD, '-DFOREGROUND', '-d', $W, '-f', $file);
    LessonsTest::wait_port($port);
    for my $t (@tenants) {
        for my $who (qw(good evil)) {
            my $want = $t->{fetched} && $t->{reached} eq $who ? 200 : 0;
            # A fetch may still be under way at the first request (it
            # waits for it, at most 10 s): ask until the answer holds.
            my ($got, $end) = (0, time + 20);
            while (1) {
                $got = ask($port, "t$t->{n}.test", $token{$who});
                $requests++;
                last if ($want == 200 ? $got == 200 : $got != 599)
                        || time > $end;
                sleep 0.2;
            }
            if (($got == 200) == ($want == 200) && $got != 599) {
                $passed++;
                $want == 200 ? $open++ : $shut++;
            }
            else {
                $failed++;
                push @violations, sprintf "batch %d, t%d.test (CA %s, proxy %s, %s, %s): "
                    . "the %s token got %d, the model says %s\n%s", $batch, $t->{n},
                    $t->{ca}, $t->{proxy}, $t->{algs}, $t->{where}, $who, $got,
                    $want == 200 ? '200' : 'a refusal',
                    join '', map { "    | $_\n" } lines_of($t);
            }
        }
    }
    kill 'TERM', $pid;
    for (1 .. 150) { last if waitpid($pid, WNOHANG) == $pid; sleep 0.1 }
    kill 'KILL', -$pid;
    waitpid $pid, 0;
}

print "tenants: $COUNT servers, $n virtual hosts, $requests requests: "
    . "$open answers 200 where the tenant's own trust reaches its signer, "
    . "$shut refused elsewhere\n";
print "tenants: $_\n" for grep { defined } @violations[0 .. 9];
if (my $c = $ENV{INTEGRATION_COUNTS}) {
    open my $fh, '>>', $c or die "tenants: $c: $!\n";
    print $fh "$passed $failed\n";
    close $fh;
}
printf "%-4s  %-24s %5d tests%s\n", $failed ? 'FAIL' : 'PASS', 'layouts-tenants',
    $passed + $failed, $failed ? ", $failed failed" : '';
exit($failed ? 1 : 0);
