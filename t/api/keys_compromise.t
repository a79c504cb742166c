# After a signing-key compromise (issue 55 §2): the provider removes
# the key, the admin reloads Apache (docs/operations.md, "After a
# signing-key compromise"), and within seconds the key's tokens are
# refused on every process, under a graceful restart and a full one
# (SIGHUP) alike.  The key set kept across restarts still serves while
# the provider is down: no outage.
#
#   - a token of key 1: 200;
#   - the provider publishes key 2 and removes key 1: key 1's token is
#     still 200 (the kept set, next refresh in an hour): why the admin
#     reloads;
#   - apachectl graceful: key 1's token 401 within seconds, key 2's 200;
#   - the same with key 3 for key 2 and apachectl restart;
#   - the provider down, a graceful restart: key 3's token still 200.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use Time::HiRes qw(time sleep);
use LessonsTest;
use LessonsTest::IdP qw(start_idp idp_control);

my $dir = File::Temp->newdir;
my $idp = start_idp("$dir");
sub control { idp_control($idp, @_) }
sub idp_token { LessonsTest::IdP::idp_token($idp) }

my $port = free_port();
my $conf = httpd_conf($dir, $port, <<"EOF");
LogLevel info
StartServers 2
ServerLimit 4
ThreadsPerChild 4
ThreadLimit 4
MaxRequestWorkers 8
<Location "/api/lessons">
    SetHandler lessons
    LessonsJWTKey RS256 $idp->{jwks}
    LessonsJWTKeysCA "$dir/ca.crt"
</Location>
EOF
start_httpd($conf, $port);
my $B = "http://127.0.0.1:$port";

sub get { call(GET => '/api/lessons', base => $B, token => $_[0])->code }
sub error_log { do { local (@ARGV, $/) = ("$dir/error_log"); <> } }
sub apachectl {
    system(LessonsTest::httpd_bin(), '-f', $conf, '-k', $_[0]) == 0
        or die "$_[0] failed\n";
}
# Seconds until $n answers in a row are $status (undef: not within 15 s).
sub settles {
    my ($token, $status, $n) = @_;
    my ($start, $row) = (time, 0);
    while (time - $start < 15) {
        $row = get($token) == $status ? $row + 1 : 0;
        return time - $start if $row >= $n;
        sleep 0.1;
    }
    return undef;
}
# Rotate: publish a key that signs from now on, then remove the old one;
# the new key's token is never shown to the server before the reload
# (a kid the set lacks would make it fetch on its own).
sub compromise {
    my ($old_kid) = @_;
    my $new = control(POST => '/keys', { alg => 'RS256' });
    control(POST => '/keys/remove', { kid => $old_kid });
    return ($new->{kid}, idp_token());
}

my $kid1 = control(GET => '/state')->{signing_kid};
my $token1 = idp_token();
is get($token1), 200, 'key 1\'s token: 200';
my ($kid2, $token2) = compromise($kid1);
is get($token1), 200,
    'key 1 removed at the provider: its token still 200 (the kept set)';

apachectl('graceful');
my $took = settles($token1, 401, 10);
ok defined $took, 'after apachectl graceful: key 1\'s token 401, ten in a row'
    . (defined $took ? sprintf(' (%.1f s)', $took) : '') or diag error_log();
is get($token2), 200, '... key 2\'s: 200';
like error_log(), qr/LESSONS00213: keys URL \Q$idp->{jwks}\E: 1 key\(s\) in use \(\Q$kid2\E\)/,
    '... the log names the keys in use, key 1 not among them';

my (undef, $token3) = compromise($kid2);
is get($token2), 200, 'key 2 removed at the provider: its token still 200';
apachectl('restart');
sleep 1;
$took = settles($token2, 401, 10);
ok defined $took, 'after apachectl restart: key 2\'s token 401, ten in a row'
    . (defined $took ? sprintf(' (%.1f s)', $took) : '') or diag error_log();
is get($token3), 200, '... key 3\'s: 200';

# The provider down: a reload keeps the set serving.
control(POST => '/stop');
apachectl('graceful');
sleep 1;
my @codes = map { get($token3) } 1 .. 10;
is join(',', grep { $_ != 200 } @codes), '',
    'the provider down, after a graceful restart: key 3\'s token still 200';
like error_log(), qr/\[lessons:warn\].*LESSONS00211: keys URL \Q$idp->{jwks}\E: .*the last good key set still serves/,
    '... the failed fetch at the reload logged as a warning';
control(POST => '/start');

done_testing();
