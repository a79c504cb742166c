package LessonsTest::IdP;

# The test identity provider (t/idp/idp.js, npm oauth2-mock-server) over
# TLS with a test CA of its own, for the tests that fetch keys from a
# keys URL (jwks.t, soak.t).
#
#   my $idp = start_idp($dir);      # { iss, jwks, ca, ctl, pid }
#   idp_control($idp, POST => '/keys', { alg => 'RS256' });
#   my $token = idp_token($idp);    # a client-credentials grant
#   idp_token($idp, realm => 'school');     # a realm's (POST /realms)
#   test_ca($dir, 'other');         # another CA: "$dir/other.crt"
#   server_cert($dir, 'ca', 'name');  # "$dir/name.crt" for 127.0.0.1
#   start_node($dir, 'name', @argv);  # another Node.js server of the tests
#
# The provider is stopped when the process that started it ends.

use strict;
use warnings;

use Exporter 'import';
use HTTP::Request ();
use JSON::PP ();
use Time::HiRes qw(sleep);
use LessonsTest ();

our @EXPORT_OK = qw(start_idp idp_control idp_token test_ca server_cert
                    start_node);

my $JSON = JSON::PP->new->utf8->canonical;
my @RUNNING;    # [provider pid, pid of the process that started it]

END {
    for my $p (@RUNNING) {
        next unless $p->[1] == $$;
        kill 'TERM', $p->[0];
        waitpid $p->[0], 0;
    }
}

sub openssl_quiet {
    my ($dir, $cmd) = @_;
    system("openssl $cmd >>$dir/openssl.log 2>&1") == 0 or die "failed: openssl $cmd\n";
}

# A self-signed P-256 CA: "$dir/$name.crt" and "$dir/$name.key".
sub test_ca {
    my ($dir, $name) = @_;
    openssl_quiet($dir, "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
                  . " -keyout $dir/$name.key -out $dir/$name.crt -subj /CN=lessons-test-$name -days 2");
    return "$dir/$name.crt";
}

# A certificate for 127.0.0.1 and localhost signed by the CA
# "$dir/$ca.crt": "$dir/$name.crt" and "$dir/$name.key".
sub server_cert {
    my ($dir, $ca, $name) = @_;
    openssl_quiet($dir, "req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
                  . " -keyout $dir/$name.key -out $dir/$name.csr -subj /CN=127.0.0.1");
    open my $ext, '>', "$dir/$name.ext" or die "$dir/$name.ext: $!";
    print $ext "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
    close $ext or die "$dir/$name.ext: $!";
    openssl_quiet($dir, "x509 -req -in $dir/$name.csr -CA $dir/$ca.crt -CAkey $dir/$ca.key"
                  . " -CAcreateserial -days 2 -extfile $dir/$name.ext -out $dir/$name.crt");
    return "$dir/$name.crt";
}

# A Node.js server of the tests: node @argv, its output in
# "$dir/$name.out" and "$dir/$name.err", stopped when the process that
# started it ends.  BAIL_OUT without node, or when no line "$name ready
# ..." comes within 60 s (a busy 2-core machine, fuzzers beside the
# suite, has taken more than 20 s to start one).  Its pid and its ready line.
sub start_node {
    my ($dir, $name, @argv) = @_;
    # A caller with a Node.js of its own passes it first: { node => PATH }.
    my $node = ref $argv[0] eq 'HASH' ? (shift @argv)->{node} : undef;
    chomp($node = `sh -c 'command -v node'`) unless $node;
    Test::More::BAIL_OUT('node not found: t/tools/deps.sh test installs it') unless $node;
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        open STDOUT, '>', "$dir/$name.out";
        open STDERR, '>', "$dir/$name.err";
        exec $node, @argv;
        exit 127;
    }
    push @RUNNING, [ $pid, $$ ];
    my $ready;
    for (1 .. 600) {
        if (open my $fh, '<', "$dir/$name.out") {
            ($ready) = grep { /^\Q$name\E ready / } <$fh>;
        }
        last if $ready;
        sleep 0.1;
    }
    $ready or Test::More::BAIL_OUT("$name did not start: "
                                   . do { local (@ARGV, $/) = ("$dir/$name.err"); <> // '' });
    chomp $ready;
    return ($pid, $ready);
}

# The provider on a free port with a certificate for 127.0.0.1 signed by
# "$dir/ca.crt"; BAIL_OUT when it cannot start (make test installs it).
sub start_idp {
    my ($dir) = @_;
    my $idp_dir = $ENV{LESSONS_TEST_IDP};
    Test::More::BAIL_OUT('no test identity provider: run make idp-deps (make test does)')
        unless $idp_dir && -f "$idp_dir/idp.js";

    my $ca = test_ca($dir, 'ca');
    server_cert($dir, 'ca', 'idp');

    my ($port, $ctl) = (LessonsTest::free_port(), LessonsTest::free_port());
    my ($pid) = start_node($dir, 'idp', "$idp_dir/idp.js", '--port', $port,
                           '--control-port', $ctl, '--cert', "$dir/idp.crt",
                           '--key', "$dir/idp.key");
    my $iss = "https://127.0.0.1:$port";
    return { iss => $iss, jwks => "$iss/jwks", ca => $ca,
             ctl => "http://127.0.0.1:$ctl", pid => $pid };
}

# A call to the provider's control port; its JSON answer.
sub idp_control {
    my ($idp, $method, $path, $body) = @_;
    my $req = HTTP::Request->new($method => "$idp->{ctl}$path");
    if ($body) {
        $req->header('Content-Type' => 'application/json');
        $req->content($JSON->encode($body));
    }
    my $res = LessonsTest::ua()->request($req);
    die "control $path: " . $res->status_line . "\n" unless $res->is_success;
    return $JSON->decode($res->content);
}

# A token through the provider's client-credentials grant: the root
# issuer's, or (realm => NAME) a realm's; aud => A sets its audience
# (default lessons).
sub idp_token {
    my ($idp, %opt) = @_;
    my $iss = $opt{realm} ? "$idp->{iss}/realms/$opt{realm}" : $idp->{iss};
    my $aud = $opt{aud} // 'lessons';
    my $out = `curl -sS --max-time 20 --cacert $idp->{ca} -d grant_type=client_credentials -d aud=$aud -d scope=lessons $iss/token 2>&1`;
    my $t = eval { $JSON->decode($out)->{access_token} };
    die "no token from the provider: $out\n" unless $t;
    return $t;
}

1;
