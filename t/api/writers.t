# Concurrent writers across processes (issue 6 item 3): many clients
# create, update and delete at once through every httpd process.  With
# SQLite's busy handling the module's job (a short busy wait, the write
# lock taken up front by BEGIN IMMEDIATE), no writer ever sees a 500:
# each write is done (2xx) or refused with 503 and Retry-After, and the
# database holds exactly the writes that were answered 2xx.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use LessonsTest;
use LessonsTest::Parallel qw(parallel);

my @ids = seed(map { { level_id => 2, title => "Ziel $_", sort_order => $_ } } 1 .. 8);

my (%codes, $created);
for my $round (1 .. 6) {
    my @res = parallel(
        (map { [ "post", POST => undef, '/api/lessons',
                 json => { levelId => 3, title => "Schreiber $round-$_", order => $_ } ] } 1 .. 8),
        (map { [ "put", PUT => undef, "/api/lessons/$ids[$_ - 1]",
                 json => { topic => "Runde $round" } ] } 1 .. 8),
        (map { [ "get", GET => undef, '/api/lessons' ] } 1 .. 4),
    );
    for my $r (@res) {
        $codes{"$r->{tag} $r->{code}"}++;
        $created++ if $r->{tag} eq 'post' && $r->{code} == 201;
        like $r->{retry}, qr/\A\d+\z/, "round $round: $r->{tag} 503 has Retry-After"
            if $r->{code} == 503;
    }
}
diag join ', ', map { "$_ x$codes{$_}" } sort keys %codes;
my @bad = grep { !/ (?:200|201|503)\z/ } keys %codes;
ok !@bad, 'no writer or reader saw anything but 200, 201 or 503'
    or diag "unexpected: @bad";
cmp_ok $codes{'post 201'} // 0, '>', 0, 'writes went through';
is db_rows("SELECT count(*) AS n FROM lessons WHERE title LIKE 'Schreiber %'")->[0]{n},
    $created, "rows stored equal 201 answers ($created)";

done_testing;
