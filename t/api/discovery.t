# An identity provider named by its issuer alone (issue 20 §1):
# LessonsJWTIssuer https://... with no key reads the provider's metadata
# and takes its keys from the jwks_uri there, with everything a keys URL
# guarantees.  Against the test provider (t/idp/idp.js, realms of one
# origin as Keycloak has them) over TLS with a test CA:
#
#   - a realm's token is accepted; another realm's, or one that claims
#     the realm's name with another key, is not;
#   - rotation: a new kid is accepted after one refetch of the metadata
#     and the keys;
#   - the provider moves its jwks_uri: followed;
#   - RFC 8414's metadata (path inserted after the host) where the OpenID
#     place has none, and asked first from then on;
#   - the metadata names another issuer: refused and logged (LESSONS00221),
#     503 before any set, the last good set after;
#   - the provider down: 503 before the first set, the last good set after;
#   - keys on another origin than the issuer's: taken;
#   - another issuer merged over discovered keys: 500, never their use;
#   - two realms in one section (<LessonsJWTIssuer> blocks): each its
#     own keys, neither's key in the other's name;
#   - an issuer line beside another section's key never reaches the
#     network.
#
# Server B is started here: one process, so that fetches are counted
# exactly, on the suite's database.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use Digest::SHA qw(hmac_sha256);
use File::Temp ();
use JSON::PP ();
use Time::HiRes qw(time sleep);
use LessonsTest;
use LessonsTest::IdP qw(start_idp idp_control);

my $dir     = File::Temp->newdir;
my $JSON    = JSON::PP->new->utf8->canonical;
my $REFRESH = 3;        # LessonsJWTKeysRefresh of /teachers
my $MIN     = 2;        # LessonsJWTKeysMinRefresh of every section

# ---- the provider and its realms
my $idp = start_idp("$dir");
my $ISS = $idp->{iss};
sub control { idp_control($idp, @_) }
sub realm_state { control(GET => "/state?realm=$_[0]") }
sub idp_token { LessonsTest::IdP::idp_token($idp, @_) }
sub header_of { $JSON->decode(b64url_decode((split /\./, $_[0])[0])) }
for my $name (qw(school teachers moved liar lazy north south)) {
    control(POST => '/realms', { name => $name });
}
my $SCHOOL   = "$ISS/realms/school";
my $TEACHERS = "$ISS/realms/teachers";
my ($NORTH, $SOUTH) = ("$ISS/realms/north", "$ISS/realms/south");
# Teachers' provider serves RFC 8414's metadata only; the liar's names
# another issuer from the start.
control(POST => '/metadata?realm=teachers', { openid => JSON::PP::false(),
                                             oauth => JSON::PP::true() });
control(POST => '/metadata?realm=liar', { issuer => 'https://evil.example.org' });
# The root issuer's keys are served under another origin's name (the
# certificate names localhost too).
control(POST => '/metadata', { jwks_uri => "https://localhost:" . ($ISS =~ /:(\d+)\z/)[0] . "/jwks" });

# ---- server B
my $port = free_port();
my $dead = free_port();         # nothing listens there
my $CA = qq{LessonsJWTKeysCA "$dir/ca.crt"\n    LessonsJWTKeysMinRefresh $MIN};
my $conf = httpd_conf($dir, $port, <<"EOF");
LogLevel info
@{[ one_process_conf() ]}<Location "/school/api/lessons">
    SetHandler lessons
    LessonsJWTIssuer $SCHOOL
    LessonsJWTAudience lessons
    $CA
</Location>
<Location "/teachers/api/lessons">
    SetHandler lessons
    LessonsJWTIssuer $TEACHERS
    LessonsJWTAlgorithm RS256
    LessonsJWTKeysRefresh $REFRESH
    $CA
</Location>
# Another issuer merged over the teachers' discovered keys: they verify
# only the teachers' tokens, so nothing here (500).
<LocationMatch "^/teachers/api/lessons/level/">
    LessonsJWTIssuer https://other.example.org
</LocationMatch>
<Location "/liar/api/lessons">
    SetHandler lessons
    LessonsJWTIssuer $ISS/realms/liar
    $CA
</Location>
<Location "/dead/api/lessons">
    SetHandler lessons
    LessonsJWTIssuer https://127.0.0.1:$dead/realms/gone
    $CA
</Location>
<Location "/root/api/lessons">
    SetHandler lessons
    LessonsJWTIssuer $ISS
    $CA
</Location>
# A school district: two realms of one provider, each by its issuer.
<Location "/district/api/lessons">
    SetHandler lessons
    <LessonsJWTIssuer $NORTH>
        LessonsJWTAudience lessons
        $CA
    </LessonsJWTIssuer>
    <LessonsJWTIssuer $SOUTH>
        LessonsJWTAudience lessons
        $CA
    </LessonsJWTIssuer>
</Location>
# The issuer only names the iss to check beside this key.
<Location "/lazy/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"
</Location>
<LocationMatch "^/lazy/api/lessons/level/">
    LessonsJWTIssuer $ISS/realms/lazy
    $CA
</LocationMatch>
EOF
my $out = `'@{[ LessonsTest::httpd_bin() ]}' -t -f '$conf' 2>&1`;
like $out, qr/Syntax OK/, 'configtest passes with discovered issuers' or diag $out;
is realm_state('school')->{discovery_requests}, 0, '... and fetched nothing';
start_httpd($conf, $port);
my $B = "http://127.0.0.1:$port";

sub get { call(GET => $_[0], base => $B, token => $_[1]) }
sub error_log { do { local (@ARGV, $/) = ("$dir/error_log"); <> } }
# Poll until the log matches (bounded); whether it did.
sub log_eventually {
    my ($re, $limit) = @_;
    my $end = time + $limit;
    do {
        return 1 if error_log() =~ $re;
        sleep 0.25;
    } while (time < $end);
    return 0;
}

# ---- a realm's token ---------------------------------------------------
my $school = idp_token(realm => 'school');
my $res = get('/school/api/lessons', $school);
is $res->code, 200, "a token of $SCHOOL, discovered from its issuer: 200"
    or diag $res->header('WWW-Authenticate') // '', "\n", error_log();
my $st = realm_state('school');
is $st->{discovery_requests}, 1, '... one metadata fetch';
is $st->{jwks_requests}, 1, '... one key set fetch';
like error_log(), qr/\[lessons:info\].*LESSONS00213: issuer \Q$SCHOOL\E: 1 key\(s\) in use \(\Q$st->{signing_kid}\E\), 0 skipped, from \Q$SCHOOL\E\/jwks/,
    'the log names the issuer and the jwks_uri its keys came from';
is get('/school/api/lessons', $school)->code, 200, 'again (cached token)';
is_unauthorized(get('/school/api/lessons', idp_token(realm => 'teachers')),
                'another realm\'s token', 'invalid_token');
is_unauthorized(get('/school/api/lessons', idp_token(realm => 'school', aud => 'other')),
                'the realm\'s token for another audience', 'invalid_token');
# The realm's own key, another issuer's name: discovered keys verify
# only tokens of the issuer they were discovered from.
control(POST => '/token-claims?realm=school', { iss => $TEACHERS });
is_unauthorized(get('/school/api/lessons', idp_token(realm => 'school')),
                'signed with the realm\'s key, naming another issuer', 'invalid_token');
control(POST => '/token-claims?realm=school', {});
# HS* never comes from a provider, whatever kid the header names.
{
    my $claims = (split /\./, $school)[1];
    my $input = b64url($JSON->encode({ alg => 'HS256', typ => 'JWT',
                                       kid => $st->{signing_kid} })) . ".$claims";
    is_unauthorized(get('/school/api/lessons',
                        "$input." . b64url(hmac_sha256($input, 'x' x 32))),
                    'HS256 with the discovered key\'s kid', 'invalid_token');
}

# ---- another issuer's token: refused for that, nothing fetched --------
# (issue 40) Its kid is one the school's set lacks, which made the
# school's keys be fetched again whenever LessonsJWTKeysMinRefresh
# allowed, for a token that could never pass: its iss is checked first.
{
    my $before = realm_state('school');
    my $logpos = length error_log();
    my @tokens = ([ 'another realm\'s token' => idp_token(realm => 'teachers') ],
                  [ 'the same again' => idp_token(realm => 'teachers') ],
                  [ 'a token without iss, its kid unknown here'
                      => token(alg => 'RS256', header => { kid => 'not-the-schools' }) ]);
    for my $t (@tokens) {
        sleep $MIN + 0.2;       # a refetch would be allowed by now
        $res = get('/school/api/lessons', $t->[1]);
        is_unauthorized($res, $t->[0], 'invalid_token');
        like $res->header('WWW-Authenticate') // '',
            qr/error_description="The access token issuer is not accepted here"/,
            "$t->[0]: the issuer is not accepted here";
    }
    my $after = realm_state('school');
    is $after->{jwks_requests}, $before->{jwks_requests},
        '... and the school\'s keys were not fetched again';
    is $after->{discovery_requests}, $before->{discovery_requests},
        '... nor its metadata';
    my $log = substr(error_log(), $logpos);
    is scalar(() = $log =~ /LESSONS00204: GET \/school\/api\/lessons refused \(401\): The access token issuer is not accepted here/g),
        3, 'each logged once at info';
    unlike $log, qr/LESSONS00218/, '... never as a key the server does not know';
    $st = $after;
}

# ---- rotation through discovery: one refetch of metadata and keys ------
sleep $MIN + 0.2;
my $kid2 = control(POST => '/keys?realm=school', { alg => 'ES256' })->{kid};
my $rotated = idp_token(realm => 'school');
is header_of($rotated)->{kid}, $kid2, 'the realm signs with its new key';
$res = get('/school/api/lessons', $rotated);
is $res->code, 200, 'a token with the new kid: 200 at once (one refetch)';
my $st2 = realm_state('school');
is $st2->{discovery_requests} - $st->{discovery_requests}, 1, '... which read the metadata again';
is $st2->{jwks_requests} - $st->{jwks_requests}, 1, '... and the keys';
is get('/school/api/lessons', $school)->code, 200, 'the old key still works while published';

# ---- the provider moves its jwks_uri: followed -------------------------
# The metadata now points at the "moved" realm's keys; a token signed
# there in the school's name is accepted at the next refetch, and the
# school's own keys, no longer published where the metadata points, stop.
sleep $MIN + 0.2;
control(POST => '/metadata?realm=school', { jwks_uri => "$ISS/realms/moved/jwks" });
control(POST => '/token-claims?realm=moved', { iss => $SCHOOL });
my $moved = idp_token(realm => 'moved');
my $moved_before = realm_state('moved')->{jwks_requests};
$res = get('/school/api/lessons', $moved);
is $res->code, 200, 'a key published at the new jwks_uri: 200 after one refetch'
    or diag $res->header('WWW-Authenticate') // '';
is realm_state('moved')->{jwks_requests} - $moved_before, 1,
    '... fetched from where the metadata now points';
like error_log(), qr/LESSONS00213: issuer \Q$SCHOOL\E: 1 key\(s\) in use \([^)]+\), 0 skipped, from \Q$ISS\E\/realms\/moved\/jwks/,
    '... and the log says so';
sleep $MIN + 0.2;
is_unauthorized(get('/school/api/lessons', $rotated),
                'a key the new jwks_uri does not publish', 'invalid_token');
control(POST => '/metadata?realm=school', {});
control(POST => '/token-claims?realm=moved', {});

# ---- RFC 8414's metadata, where the OpenID place has none --------------
my $teacher = idp_token(realm => 'teachers');
$res = get('/teachers/api/lessons', $teacher);
is $res->code, 200, 'an issuer whose provider serves RFC 8414 metadata only: 200'
    or diag $res->header('WWW-Authenticate') // '', "\n", error_log();
$st = realm_state('teachers');
is $st->{discovery_requests}, 1, '... the OpenID place was asked first (404)';
ok $st->{oauth_metadata_requests} >= 1,
    '... then /.well-known/oauth-authorization-server/realms/teachers';
# On the keys' schedule: the metadata again, from the place that answered.
my $end = time + 5 * ($REFRESH + $MIN);
sleep 0.25 while realm_state('teachers')->{oauth_metadata_requests}
                 < $st->{oauth_metadata_requests} + 1 && time < $end;
my $st3 = realm_state('teachers');
ok $st3->{oauth_metadata_requests} > $st->{oauth_metadata_requests},
    'the metadata is fetched again on the keys\' schedule (LessonsJWTKeysRefresh)';
is $st3->{discovery_requests}, $st->{discovery_requests},
    '... from RFC 8414\'s place first, now that it answered';

# ---- discovered keys under another issuer, merged in: fail closed ------
{
    my $logpos = length error_log();
    is_problem(get('/teachers/api/lessons/level/1', $teacher), 500,
               'a later section names another issuer over discovered keys');
    like substr(error_log(), $logpos),
        qr/LESSONS00201: the keys discovered from \Q$TEACHERS\E are in effect where LessonsJWTIssuer is https:\/\/other\.example\.org/,
        '... and the log says why';
    unlike error_log(), qr/issuer https:\/\/other\.example\.org:/,
        '... and that issuer\'s metadata is never fetched';
}

# ---- the metadata names another issuer ---------------------------------
$res = get('/liar/api/lessons', idp_token(realm => 'liar'));
is_problem($res, 503, 'metadata for another issuer, no key set yet');
like $res->header('Retry-After') // '', qr/\A\d+\z/, '... with Retry-After';
like error_log(), qr/\[lessons:error\].*LESSONS00221: issuer \Q$ISS\E\/realms\/liar: metadata \Q$ISS\E\/realms\/liar\/\.well-known\/openid-configuration refused: the metadata names the issuer "https:\/\/evil\.example\.org", not this one \(RFC 8414 3\.3\); no key set yet/,
    'refused and logged, naming both issuers';
is realm_state('liar')->{jwks_requests}, 0, '... and its keys never fetched';
# After a good set: refused, the last good set serves.
control(POST => '/metadata?realm=teachers', { openid => JSON::PP::false(), oauth => JSON::PP::true(),
                                              issuer => 'https://evil.example.org' });
ok log_eventually(qr/\[lessons:warn\].*LESSONS00221: issuer \Q$TEACHERS\E: .*names the issuer "https:\/\/evil\.example\.org".*; the last good key set still serves/,
                  5 * ($REFRESH + $MIN)),
    'a mismatch at a refresh: a warning';
is get('/teachers/api/lessons', $teacher)->code, 200, '... and the last good set serves';
control(POST => '/metadata?realm=teachers', { openid => JSON::PP::false(), oauth => JSON::PP::true() });

# ---- the provider down --------------------------------------------------
$res = get('/dead/api/lessons', $school);
is_problem($res, 503, 'an issuer whose provider never answered');
like $res->header('Retry-After') // '', qr/\A\d+\z/, '... with Retry-After';
like error_log(), qr/\[lessons:error\].*LESSONS00211: issuer https:\/\/127\.0\.0\.1:$dead\/realms\/gone: metadata https:\/\/127\.0\.0\.1:$dead\/realms\/gone\/\.well-known\/openid-configuration: .*; no key set yet/,
    '... logged as an error, with what failed';
like error_log(), qr/LESSONS00214: issuer https:\/\/127\.0\.0\.1:$dead\/realms\/gone has not given a key set yet: answering 503/,
    '... and the 503 says why';
control(POST => '/stop');
ok log_eventually(qr/\[lessons:warn\].*LESSONS00211: issuer \Q$TEACHERS\E: metadata .*; the last good key set still serves/,
                  5 * ($REFRESH + $MIN)),
    'the provider stopped: a warning at the next refresh';
is get('/teachers/api/lessons', $teacher)->code, 200, '... the last good set serves';
# (The school's set is still the one its moved jwks_uri gave.)
is get('/school/api/lessons', $moved)->code, 200, '... here too';
control(POST => '/start');

# ---- keys on another origin than the issuer's ---------------------------
$res = get('/root/api/lessons', idp_token());
is $res->code, 200, 'a jwks_uri on another origin (localhost, issuer 127.0.0.1): 200'
    or diag $res->header('WWW-Authenticate') // '', "\n", error_log();
like error_log(), qr/LESSONS00213: issuer \Q$ISS\E: .* from https:\/\/localhost:\d+\/jwks/,
    '... and the log names it';

# ---- two realms in one section, each by its issuer (issue 20 §2) ------
{
    my $north = idp_token(realm => 'north');
    my $south = idp_token(realm => 'south');
    is get('/district/api/lessons', $north)->code, 200, 'two realms in one section: north 200';
    is get('/district/api/lessons', $south)->code, 200, '... south 200';
    control(POST => '/token-claims?realm=north', { iss => $SOUTH });
    is_unauthorized(get('/district/api/lessons', idp_token(realm => 'north')),
                    'north\'s key in south\'s name', 'invalid_token');
    control(POST => '/token-claims?realm=north', {});
    $res = get('/district/api/lessons', idp_token());
    is_unauthorized($res, 'a token of neither realm', 'invalid_token');
    like $res->header('WWW-Authenticate') // '', qr/names no issuer accepted here/, '... and why';
    # A rotation in one realm fetches that realm's keys, not the other's.
    sleep $MIN + 0.2;
    my $n_before = realm_state('north');
    my $kid = control(POST => '/keys?realm=south', { alg => 'ES256' })->{kid};
    my $rotated_south = idp_token(realm => 'south');
    is header_of($rotated_south)->{kid}, $kid, 'south signs with a new key';
    is get('/district/api/lessons', $rotated_south)->code, 200, '... accepted after one refetch';
    my $n_after = realm_state('north');
    is $n_after->{jwks_requests} + $n_after->{discovery_requests},
       $n_before->{jwks_requests} + $n_before->{discovery_requests},
       '... which fetched nothing of north\'s';
    is get('/district/api/lessons', $north)->code, 200, 'north still 200';
}

# ---- an issuer beside another section's key: the iss to check, nothing
# fetched ---------------------------------------------------------------
my $hs = token(alg => 'HS256', claims => { iss => "$ISS/realms/lazy" });
is get('/lazy/api/lessons/level/1', $hs)->code, 200,
    'an issuer line beside a key from another section: that key verifies';
is_unauthorized(get('/lazy/api/lessons/level/1', token(alg => 'HS256')),
                '... and the iss is checked', 'invalid_token');
is realm_state('lazy')->{discovery_requests}, 0, '... and its metadata is never fetched';
unlike error_log(), qr/issuer \Q$ISS\E\/realms\/lazy/, '... nor logged';

done_testing();
