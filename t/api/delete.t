# DELETE /api/lessons/{id}: 204 and the row is gone; 404 when missing.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use LessonsTest;

my @ids = seed(
    { level_id => 1, title => 'Eins', sort_order => 1 },
    { level_id => 1, title => 'Zwei', sort_order => 2 },
    { level_id => 2, title => 'Drei', sort_order => 1, is_active => 0 },
);
my ($first, $second, $third) = @ids;

# ---- delete one: 204, empty body, exactly that row gone
{
    my $before = db_lessons();
    my $res = call(DELETE => "/api/lessons/$second");
    is $res->code, 204, 'DELETE: 204';
    is $res->content, '', 'DELETE: empty body';
    ok !defined $res->header('Content-Type')
        || $res->header('Content-Type') !~ /json/,
        'DELETE: no JSON content type';
    is_deeply db_lessons(), [ grep { $_->{id} != $second } @$before ],
        'DELETE: only that row is gone';
    is_empty_404(call(GET => "/api/lessons/$second"), 'GET after DELETE');
    my @listed = map { $_->{id} } @{ json_of(call(GET => '/api/lessons')) };
    is_deeply \@listed, [ $first, $third ], 'list after DELETE';
}

# ---- the second delete: 404, empty body
{
    my $before = db_lessons();
    is_empty_404(call(DELETE => "/api/lessons/$second"), 'second DELETE');
    is_deeply db_lessons(), $before, 'second DELETE: table unchanged';
}

# ---- ids that never existed
for my $missing ($third + 1000, 0, -1, 2147483647) {
    my $before = db_lessons();
    is_empty_404(call(DELETE => "/api/lessons/$missing"),
                 "DELETE missing id $missing");
    is_deeply db_lessons(), $before, "DELETE missing id $missing: unchanged";
}

# ---- an inactive lesson is deleted like any other; a body is ignored
{
    my $res = call(DELETE => "/api/lessons/$third/",
                   json => { id => $first });
    is $res->code, 204, 'DELETE with trailing slash and a body: 204';
    ok !lesson_row($third), 'that row is gone';
    ok lesson_row($first), 'the id in the body was not used';
}

# ---- PUT to a deleted id is a 404 too, and does not resurrect it
{
    is_empty_404(call(PUT => "/api/lessons/$second", json => { title => 'x' }),
                 'PUT a deleted id');
    ok !lesson_row($second), 'still gone';
}

# ---- delete the last one: the table is empty, the list is []
is call(DELETE => "/api/lessons/$first")->code, 204, 'DELETE the last lesson';
is db_count(), 0, 'table empty';
is call(GET => '/api/lessons')->content =~ /\A\s*\[\s*\]\s*\z/ ? 1 : 0, 1,
    'list is []';

done_testing;
