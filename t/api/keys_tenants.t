# Tenants of one server who name the same keys URL (issue 55 §1): a
# source is what its own section names (URL, CA file or the system's
# CAs, proxy or none, algorithms), and sections that differ in any of
# these never share a fetch, a slot or a key set.  Sections alike share
# one fetch.
#
#   - the attack: "victim" names the provider's keys URL and no CA (the
#     system's CAs); tenant-b names the same URL with its own CA and its
#     own proxy, which ends every tunnel at tenant-b's provider (a
#     certificate from tenant-b's CA, tenant-b's keys).  Tenant-b's
#     tokens pass on tenant-b and never on the victim; the victim, whose
#     system CAs never signed the test provider, has no keys (503);
#   - "victim2" names the provider's CA: its provider's tokens pass
#     (200), tenant-b2's (same URL, tenant-b's CA and proxy) get 401;
#   - "direct" names the CA but no proxy: it fetches straight from the
#     provider while tenant-c, with the same URL and CA, goes through its
#     own proxy: the provider served that URL twice, the proxy once;
#   - tenant-d and tenant-e name one URL alike: one fetch for both;
#   - configtest passes (nothing to refuse: nothing is merged).
#
# Server B is started here: one process, so that fetches are counted
# exactly, on the suite's database.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use Time::HiRes qw(time sleep);
use LessonsTest;
use LessonsTest::IdP qw(start_idp idp_control);
use LessonsTest::Proxy qw(start_proxy proxy_counts proxy_total);

my $dir = File::Temp->newdir;
mkdir "$dir/b" or die "$dir/b: $!";

my $idp  = start_idp("$dir");
my $JWKS = $idp->{jwks};
my ($TARGET) = $idp->{iss} =~ m{\Ahttps://(.*)\z};
sub control { idp_control($idp, @_) }
sub fetched { control(GET => '/state')->{jwks_requests_by_query}{$_[0]} // 0 }
# Tenant-b's provider, with its own CA and keys, behind tenant-b's proxy.
my $evil = start_idp("$dir/b");
my ($EVIL_TARGET) = $evil->{iss} =~ m{\Ahttps://(.*)\z};
my $b_proxy = start_proxy("$dir", 'tenant-b', to => $EVIL_TARGET);
my $c_proxy = start_proxy("$dir", 'tenant-c');

my $port = free_port();
my $CA = qq{LessonsJWTKeysCA "$dir/ca.crt"};
my $vhosts = '';
my $B_TRUST = qq{LessonsJWTKeysCA "$dir/b/ca.crt"\n}
            . "    LessonsJWTKeysProxy $b_proxy->{url}";
my %section = (
    victim      => "LessonsJWTKey RS256 $JWKS",
    'tenant-b'  => "LessonsJWTKey RS256 $JWKS\n    $B_TRUST",
    victim2     => "LessonsJWTKey RS256 $JWKS?v2\n    $CA",
    'tenant-b2' => "LessonsJWTKey RS256 $JWKS?v2\n    $B_TRUST",
    direct     => "LessonsJWTKey RS256 $JWKS?direct\n    $CA",
    'tenant-c' => "LessonsJWTKey RS256 $JWKS?direct\n    $CA\n"
                  . "    LessonsJWTKeysProxy $c_proxy->{url}",
    'tenant-d' => "LessonsJWTKey RS256 $JWKS?alike\n    $CA",
    'tenant-e' => "LessonsJWTKey RS256 $JWKS?alike\n    $CA",
);
for my $name (sort keys %section) {
    $vhosts .= <<"EOF";
<VirtualHost 127.0.0.1:$port>
  ServerName $name
  <Location "/api/lessons">
    SetHandler lessons
    $section{$name}
  </Location>
</VirtualHost>
EOF
}
my $conf = httpd_conf($dir, $port, "LogLevel info\n"
                                   . one_process_conf() . $vhosts);
my $out = `'@{[ LessonsTest::httpd_bin() ]}' -t -f '$conf' 2>&1`;
like $out, qr/Syntax OK/,
    'configtest: one URL named with other CAs and proxies is no conflict'
    or diag $out;
start_httpd($conf, $port);
my $B = "http://127.0.0.1:$port";

sub get {
    my ($host, $token) = @_;
    return call(GET => '/api/lessons', base => $B, token => $token,
                headers => [ Host => $host ]);
}
sub error_log { do { local (@ARGV, $/) = ("$dir/error_log"); <> } }
sub eventually {
    my ($status, $host, $token, $limit) = @_;
    my ($res, $end) = (undef, time + $limit);
    do {
        $res = get($host, $token);
        return $res if $res->code == $status;
        sleep 0.25;
    } while (time < $end);
    return $res;
}

my $token = LessonsTest::IdP::idp_token($idp);
my $b_token = LessonsTest::IdP::idp_token($evil);

# ---- tenant-b's CA and proxy are tenant-b's alone -----------------------
my $res = eventually(200, 'tenant-b', $b_token, 15);
is $res->code, 200, 'tenant-b, its token, through its proxy and with its CA: 200'
    or diag error_log();
$res = eventually(503, 'victim', $b_token, 15);
is_problem($res, 503,
    'tenant-b\'s token on the victim, who names no CA: never 200 (no keys)');
is get('victim', $token)->code, 503,
    '... nor the provider\'s: the system\'s CAs do not trust the test provider';
# The sections sort: tenant-b's source comes first, the victim's is the
# second of its URL, so the log names the victim's with its section.
like error_log(), qr/LESSONS00211: keys URL \Q$JWKS\E \(as \S+:\d+ names it\): .*certificate/i,
    '... the victim\'s own fetch failed on the certificate, logged with its section'
    or diag error_log();
unlike error_log(), qr/LESSONS00213: keys URL \Q$JWKS\E \(as /,
    '... and it never held a key set' or diag error_log();
is fetched(''), 0, 'the provider never served that URL: the victim\'s fetch stopped at TLS';

is eventually(200, 'victim2', $token, 15)->code, 200,
    'victim2, with the provider\'s CA: the provider\'s token, 200';
is get('victim2', $b_token)->code, 401, '... tenant-b2\'s token: 401';
is eventually(200, 'tenant-b2', $b_token, 15)->code, 200,
    'tenant-b2, same URL, its own CA and proxy: its token, 200';
is get('tenant-b2', $token)->code, 401, '... the provider\'s: 401';
ok fetched('v2') >= 1, 'the provider served victim2\'s fetch';
ok proxy_total($b_proxy) >= 2, 'tenant-b\'s proxy tunnelled tenant-b\'s and tenant-b2\'s';

# ---- a proxy of one section is never another's -------------------------
is eventually(200, 'direct', $token, 15)->code, 200, 'direct: 200';
is eventually(200, 'tenant-c', $token, 15)->code, 200, 'tenant-c: 200';
is fetched('direct'), 2,
    'one URL, two proxy settings: two fetches (' . fetched('direct') . ')';
is proxy_total($c_proxy), 1,
    '... tenant-c\'s proxy saw one tunnel, the other went direct';

# ---- sections alike share one fetch -------------------------------------
is eventually(200, 'tenant-d', $token, 15)->code, 200, 'tenant-d: 200';
is eventually(200, 'tenant-e', $token, 15)->code, 200, 'tenant-e: 200';
is fetched('alike'), 1, 'two sections alike: one fetch between them';

done_testing();
