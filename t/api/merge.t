# Algorithm and key resolve as one setting across sections (issue 11):
# /merge/api/lessons holds RS256 with the RSA public key; an <If> inside
# it and a later <LocationMatch> for its level routes each set a whole
# HS256 pair.  Whatever section wins, the algorithm and the key come
# from that one section, so the classic forgery (an HS256 token whose
# HMAC key is the public PEM) never gets in, and each section's own
# tokens do.  The base path defaults to the <Location> holding the key.
use strict;
use warnings FATAL => 'all';
use utf8;

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use LessonsTest;

my ($id) = seed({ level_id => 3, title => 'Zusammengeführt', sort_order => 1 });
my $pem = rsa_public_pem();
my @forged = (
    [ 'HS256 keyed with the public PEM', token(alg => 'HS256', key => $pem) ],
    [ 'HS256 keyed with the PEM, no final newline',
      token(alg => 'HS256', key => $pem =~ s/\n\z//r) ],
);
my $rs = token(alg => 'RS256');
my $hs = token(alg => 'HS256');
my @use_hs = (headers => [ 'X-Lessons-Test-HS' => 1 ]);

sub refused {
    my ($res, $name) = @_;
    is_unauthorized($res, $name, 'invalid_token');
}

# ---- the Location alone: RS256 and its public key
is call(GET => '/merge/api/lessons', token => $rs)->code, 200,
    'Location: RS256 token 200';
is call(GET => "/merge/api/lessons/$id", token => $rs)->code, 200,
    'Location: base path defaults to the Location (item route 200)';
refused(call(GET => '/merge/api/lessons', token => $hs),
        'Location: HS256 token with the real secret is refused');
refused(call(GET => '/merge/api/lessons', token => $_->[1]), "Location: $_->[0]")
    for @forged;

# ---- the <If> sets a whole HS256 pair
is call(GET => '/merge/api/lessons', token => $hs, @use_hs)->code, 200,
    '<If>: HS256 token with the real secret 200';
refused(call(GET => '/merge/api/lessons', token => $rs, @use_hs),
        '<If>: the RS256 token is refused (its key is not in effect)');
for my $f (@forged) {
    refused(call(GET => '/merge/api/lessons', token => $f->[1], @use_hs),
            "<If>: $f->[0]");
    my $before = db_lessons();
    refused(call(POST => '/merge/api/lessons', token => $f->[1], @use_hs,
                 json => { levelId => 1, title => 'Gefälscht', order => 1 }),
            "<If>: POST with $f->[0]");
    is_deeply db_lessons(), $before, "<If>: $f->[0] stored nothing";
}

# ---- the later <LocationMatch> sets a whole HS256 pair for level routes
{
    my $res = call(GET => '/merge/api/lessons/level/3', token => $hs);
    is $res->code, 200, '<LocationMatch>: HS256 token 200';
    is_deeply [ map { $_->{id} } @{ json_of($res) || [] } ], [$id],
        '<LocationMatch>: level route lists the lesson';
}
refused(call(GET => '/merge/api/lessons/level/3', token => $rs),
        '<LocationMatch>: the RS256 token is refused');
refused(call(GET => '/merge/api/lessons/level/3', token => $_->[1]),
        "<LocationMatch>: $_->[0]") for @forged;

# ---- Location of a create under the defaulted base path
{
    my $res = call(POST => '/merge/api/lessons', token => $rs,
                   json => { levelId => 2, title => 'Neu hier', order => 4 });
    is $res->code, 201, 'create under the defaulted base path: 201';
    like $res->header('Location') || '', qr{\A/merge/api/lessons/\d+\z},
        'Location is under the section path';
}

done_testing;
