# No client takes more than its share of the DPoP proofs seen (issue 55
# §4).  The server keeps the proofs it took in one table for every
# client; a client makes keys for nothing, and gets a bound token for
# each from its provider, so the share is the client's as the token
# names it (issuer, client_id, sub), never the key's:
#
#   - configtest: LessonsJWTDPoPSlots takes 1024 to 4194304, in the main
#     server only;
#   - a table of 1,024 slots (LessonsJWTDPoPSlots 1024: a client's share
#     is 64): one client floods with 40 keys, a bound token for each and
#     30 fresh proofs per key (1,200, more than the table holds), as fast
#     as one connection goes, while another client keeps calling between
#     its requests: the flooder's first 64 proofs get 200, every other
#     one 429 with Retry-After and a problem+json body (no challenge),
#     each logged once at info (LESSONS00760), none 503; the other client
#     gets 200 every time, and after the flood too;
#   - another user of the flooder's own application is another client:
#     200 while the flooder is over its share;
#   - a tenant whose own key signs what it likes (a section of its own,
#     its own HS256 key) floods with 100 subjects, 8 proofs each (800,
#     each subject within its share): its clients together take a
#     quarter of the table (256), the rest 429, never 503, while the
#     other client, whose tokens other keys vouch for, keeps getting 200.
#
# Bounded: 1,240 requests on one keep-alive connection, and every proof
# is made before the flood, a few seconds ahead, so that all of them
# still pass at the last request (a proof lives 60 s); a machine too
# slow for that skips the counts rather than fail for its speed.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use HTTP::Response ();
use JSON::PP ();
use LWP::UserAgent ();
use Time::HiRes qw(time);
use LessonsTest;
use LessonsTest::DPoP qw(ec_key build_signer proofs_of);

my $dir   = File::Temp->newdir;
my $slots = 1024;
my $share = $slots / 16;

# The tenant's own secret (its provider's key, on a shared server).
my $tenant_secret = join '', map { sprintf '%02x', int rand 256 } 1 .. 32;
{
    open my $fh, '>', "$dir/tenant.key" or die "$dir/tenant.key: $!";
    print $fh "$tenant_secret\n";
    close $fh or die "$dir/tenant.key: $!";
}

sub sections {
    return <<"EOF";
<Location "/dpop/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"
    LessonsJWTDPoP required
</Location>
<Location "/tenant/dpop/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$dir/tenant.key"
    LessonsJWTDPoP required
</Location>
EOF
}

# ---- configtest: its bounds, and the main server only
for my $case (["LessonsJWTDPoPSlots $slots\n", 0, 'the fewest slots'],
              ["LessonsJWTDPoPSlots 4194304\n", 0, 'the most slots'],
              ["LessonsJWTDPoPSlots 1023\n", 1, 'too few slots'],
              ["LessonsJWTDPoPSlots 4194305\n", 1, 'too many slots'],
              ["<VirtualHost 127.0.0.1:*>\n    LessonsJWTDPoPSlots 2048\n</VirtualHost>\n",
               1, 'in a virtual host']) {
    my ($line, $refused, $name) = @$case;
    my $d = File::Temp->newdir;
    my $conf = httpd_conf("$d", free_port(), $line . sections());
    my $out = `'@{[ LessonsTest::httpd_bin() ]}' -t -f '$conf' 2>&1`;
    if ($refused) {
        isnt $? >> 8, 0, "configtest refuses $name" or diag $out;
        like $out, qr/LessonsJWTDPoPSlots/, '... naming the directive';
    }
    else {
        is $? >> 8, 0, "configtest takes $name" or diag $out;
    }
}

my $port = free_port();
my $base = "http://127.0.0.1:$port";
my $uri  = "$base/dpop/api/lessons";
start_httpd(httpd_conf("$dir", $port, "ServerName 127.0.0.1:$port\nLogLevel info\n"
                       . "LessonsJWTDPoPSlots $slots\n" . sections()), $port);

# A token bound to $k, of client $client for user $sub.
sub bound_token {
    my ($k, $client, $sub) = @_;
    return good_token(claims => { iss => 'https://idp.example', client_id => $client,
                                  sub => $sub, cnf => { jkt => $k->{jkt} } });
}

my $signer = build_signer("$dir");
my $iat    = int(time) + 3;     # a few seconds ahead: all pass at the last
my @flood;
for my $i (1 .. 40) {
    my $k = ec_key("$dir", "flood-$i");
    my $t = bound_token($k, 'flood-app', 'mallory');
    push @flood, map { [ $t, $_ ] } proofs_of($signer, "$dir", $k, $uri, $t, 30, $iat, "f$i");
}
# The keys' proofs in turn, as a flooder spreads them.
@flood = map { $flood[ ($_ % 40) * 30 + int($_ / 40) ] } 0 .. $#flood;
my $alice  = ec_key("$dir", 'alice');
my $atoken = bound_token($alice, 'school-app', 'alice');
my @others = proofs_of($signer, "$dir", $alice, $uri, $atoken, 40, $iat, 'alice');
my $bob    = ec_key("$dir", 'bob');
my $btoken = bound_token($bob, 'flood-app', 'bob');
my @bobs   = proofs_of($signer, "$dir", $bob, $uri, $btoken, 5, $iat, 'bob');

my $ua = LWP::UserAgent->new(keep_alive => 1, timeout => 60);
sub send_proof {
    my ($token, $proof) = @_;
    return $ua->get($uri, Authorization => "DPoP $token", DPoP => $proof);
}

my (%fcodes, %ocodes, $first_over);
my $start = time;
for my $n (0 .. $#flood) {
    my $r = send_proof(@{ $flood[$n] });
    $fcodes{ $r->code }++;
    $first_over ||= $r if $r->code == 429;
    # The other client, between the flooder's requests.
    if ($n % 40 == 39) {
        $ocodes{ send_proof($atoken, shift @others)->code }++;
    }
}
my $took = time - $start;
diag sprintf 'flood: %d proofs in %.1f s: %s; the other client: %s', scalar(@flood), $took,
    join(', ', map { "$_ x$fcodes{$_}" } sort keys %fcodes),
    join(', ', map { "$_ x$ocodes{$_}" } sort keys %ocodes);

# What holds whatever the machine's speed: the other client is never
# refused, and the flooder is never answered 503 (the table is not full).
is join(',', map { "$_ x$ocodes{$_}" } sort keys %ocodes), '200 x30',
    'the other client, between the flood: 200 every time';
ok !$fcodes{503}, 'no flood proof 503 (the table never fills)';
my $res = send_proof($atoken, shift @others);
is $res->code, 200, 'the other client after the flood: 200';
SKIP: {
    # Every proof passes until 63 s after it was made: a machine too
    # slow to send them all within that cannot show the share.
    skip "the flood took ${took}s: too slow to show the share within a proof's time", 10
        if $took > 50;
    is $fcodes{200}, $share, "the flooder, 40 keys: its first $share proofs (its share) 200";
    is $fcodes{429}, @flood - $share, '... all the others 429';
    $first_over ||= HTTP::Response->new(599, 'no 429');
    is $first_over->code, 429, 'over its share: 429';
    like $first_over->header('Retry-After') // '', qr/\A[1-9][0-9]*\z/, '... with Retry-After';
    is $first_over->header('Content-Type'), 'application/problem+json', '... problem+json';
    my $doc = eval { JSON::PP::decode_json($first_over->decoded_content) } || {};
    is $doc->{status}, 429, '... its status';
    is $doc->{title}, 'Too Many Requests', '... its title';
    like $doc->{detail} // '', qr/Too many DPoP proofs from this client/, '... its detail';
    ok !defined $first_over->header('WWW-Authenticate'), '... no challenge';
    # Another user of the flooder's own application: another client.
    is send_proof($btoken, shift @bobs)->code, 200,
       'another user of the flooding application: 200';
}

# ---- a tenant whose own key signs any number of subjects ----------------
my $turi = "$base/tenant/dpop/api/lessons";
my $tiat = int(time) + 3;
my @tflood;
for my $i (1 .. 100) {
    my $k = ec_key("$dir", "tenant-$i");
    my $t = token(key => $tenant_secret,
                  claims => { iss => 'https://tenant.example', client_id => 'tenant-app',
                              sub => "user-$i", cnf => { jkt => $k->{jkt} } });
    push @tflood, map { [ $t, $_ ] } proofs_of($signer, "$dir", $k, $turi, $t, 8, $tiat, "t$i");
}
@others = proofs_of($signer, "$dir", $alice, $uri, $atoken, 25, $tiat, 'alice-2');
my (%tcodes, %o2codes);
$start = time;
for my $n (0 .. $#tflood) {
    my ($t, $p) = @{ $tflood[$n] };
    $tcodes{ $ua->get($turi, Authorization => "DPoP $t", DPoP => $p)->code }++;
    $o2codes{ send_proof($atoken, shift @others)->code }++ if $n % 40 == 39;
}
$took = time - $start;
diag sprintf 'tenant: %d proofs of 100 subjects in %.1f s: %s; the other client: %s',
    scalar(@tflood), $took, join(', ', map { "$_ x$tcodes{$_}" } sort keys %tcodes),
    join(', ', map { "$_ x$o2codes{$_}" } sort keys %o2codes);
is join(',', map { "$_ x$o2codes{$_}" } sort keys %o2codes), '200 x20',
    'the other client, between the tenant\'s flood: 200 every time';
ok !$tcodes{503}, 'no tenant proof 503 (the table never fills)';
SKIP: {
    skip "the tenant's flood took ${took}s: too slow to show the share", 2
        if $took > 50;
    is $tcodes{200}, $slots / 4, 'the tenant\'s clients together: a quarter of the table (' . $slots / 4 . ') 200';
    is $tcodes{429}, @tflood - $slots / 4, '... all the others 429';
}

# Each 429 logged once, at info, by its own tag; no table-full line.
my ($over_lines, $group_lines, $full_lines) = (0, 0, 0);
if (open my $fh, '<', "$dir/error_log") {
    while (<$fh>) {
        $over_lines++ if /\[lessons:info\].*LESSONS00760: GET \S+ refused \(429\): the token's client \(owner [0-9a-f]{8}\) already holds its share/;
        $group_lines++ if /\[lessons:info\].*LESSONS00760: GET \S+ refused \(429\): the clients of the token's keys \(\S*tenant\.key\) already hold their share/;
        $full_lines++ if /LESSONS00242/;
    }
}
is $over_lines, $fcodes{429} // 0, 'each 429 logged once at info (LESSONS00760)';
is $group_lines, $tcodes{429} // 0, '... the tenant\'s too, naming its keys';
is $full_lines, 0, 'no "table full" line (LESSONS00242)';

done_testing();
