# Reads: list all, one by id, beginner, advanced, level/{n}; HEAD on each.
use strict;
use warnings FATAL => 'all';
use utf8;

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use LessonsTest;

# Deliberately out of order: the sorted lists must sort, ties in order
# must fall back to id, and level 6 has no lessons.
my @fixtures = (
    { level_id => 2, title => 'Im Restaurant', sort_order => 2,
      topic => 'Essen', description => 'Bestellen und bezahlen' },
    { level_id => 1, title => 'Hallo und Tschüss', sort_order => 3,
      topic => 'Begrüßung', description => 'Grüße für jeden Tag' },
    { level_id => 5, title => 'Konjunktiv II', sort_order => 1 },
    { level_id => 1, title => 'Zahlen', sort_order => 1, is_active => 0 },
    { level_id => 3, title => 'Perfekt', sort_order => 1, topic => 'Zeiten' },
    { level_id => 4, title => 'Passiv', sort_order => 2 },
    { level_id => 2, title => 'Die Uhrzeit', sort_order => 1 },
    { level_id => 1, title => 'Familie', sort_order => 3 },
    { level_id => 4, title => 'Relativsätze "mit" \\ Sonderzeichen',
      sort_order => 1, topic => "Tab\there",
      description => "Zeile 1\nZeile 2 </script> \x{1F600} \x{7}" },
    { level_id => 5, title => 'Nominalstil', sort_order => 0,
      is_active => 0 },
    { level_id => 4, title => 'Indirekte Rede', sort_order => 2 },
);

my @ids = seed(@fixtures);
my @rows = @{ db_lessons() };

# The wire form of a stored row, level name and code from the level table.
sub wire { LessonsTest::wire_lesson(@_) }

sub norm_list {
    my ($list) = @_;
    return $list unless ref $list eq 'ARRAY';
    return [ map { LessonsTest::norm_lesson($_) } @$list ];
}

sub by_id { sort { $a->{id} <=> $b->{id} } @_ }
sub by_level_order_id {
    sort {
        $a->{level_id} <=> $b->{level_id}
            || $a->{sort_order} <=> $b->{sort_order}
            || $a->{id} <=> $b->{id}
    } @_;
}

sub list_ok {
    my ($path, $want_rows, $name) = @_;
    my $res = call(GET => $path);
    is $res->code, 200, "$name: 200";
    is $res->header('Content-Type'), LESSON_TYPE, "$name: content type";
    my $got = json_of($res);
    is ref $got, 'ARRAY', "$name: an array";
    is_deeply norm_list($got), norm_list([ map { wire($_) } @$want_rows ]),
        "$name: lessons and order";
    if (ref $got eq 'ARRAY' && @$got) {
        # Every element has exactly the lesson keys.
        my $shape = !grep { join(',', sort keys %$_) ne
                            join(',', sort(lesson_keys())) } @$got;
        ok $shape, "$name: every element has exactly the lesson keys";
        my $order = join ',', lesson_keys();
        ok !grep({ join(',', @$_) ne $order } object_keys($res->content, 2)),
            "$name: keys in order in every element";
    }
    return $res;
}

# ---- list all, in id order, inactive lessons included
list_ok('/api/lessons', [ by_id(@rows) ], 'list all');
list_ok('/api/lessons/', [ by_id(@rows) ], 'list all, trailing slash');

# ---- one by id, every fixture: exact shape and key order
for my $r (@rows) {
    my $res = call(GET => "/api/lessons/$r->{id}");
    is_json_lesson($res, 200, wire($r), "GET /api/lessons/$r->{id}");
}
{
    my $r = $rows[1];
    is_json_lesson(call(GET => "/api/lessons/$r->{id}/"), 200, wire($r),
                   'GET by id, trailing slash');
}

# levelName/levelCode come from the level table, for every level used.
{
    my %seen;
    for my $r (@rows) {
        next if $seen{ $r->{level_id} }++;
        my $got = json_of(call(GET => "/api/lessons/$r->{id}"));
        my $want = wire($r);
        is_deeply [ $got->{levelName}, $got->{levelCode} ],
            [ $want->{levelName}, $want->{levelCode} ],
            "level $r->{level_id} name and code";
    }
}

# Booleans are JSON booleans, ids and order JSON numbers.
{
    my $res = call(GET => "/api/lessons/$rows[3]{id}");
    like $res->content, qr/"isActive":\s*false/, 'isActive false literal';
    like $res->content, qr/"id":\s*$rows[3]{id}\s*,/, 'id is a number';
    like $res->content, qr/"order":\s*1\s*,/, 'order is a number';
    $res = call(GET => "/api/lessons/$rows[0]{id}");
    like $res->content, qr/"isActive":\s*true/, 'isActive true literal';
}

# ---- missing ids: 404 with an empty body
my $max = $ids[-1];
is_empty_404(call(GET => '/api/lessons/' . ($max + 1000)), 'missing id');
is_empty_404(call(GET => '/api/lessons/0'), 'id 0');
is_empty_404(call(GET => '/api/lessons/-1'), 'negative id');
is_empty_404(call(GET => '/api/lessons/2147483647'), 'INT_MAX id');

# ---- beginner (levels 1, 2) and advanced (levels 4, 5)
list_ok('/api/lessons/beginner',
        [ by_level_order_id(grep { $_->{level_id} == 1 || $_->{level_id} == 2 } @rows) ],
        'beginner');
list_ok('/api/lessons/advanced',
        [ by_level_order_id(grep { $_->{level_id} == 4 || $_->{level_id} == 5 } @rows) ],
        'advanced');
list_ok('/api/lessons/beginner/',
        [ by_level_order_id(grep { $_->{level_id} == 1 || $_->{level_id} == 2 } @rows) ],
        'beginner, trailing slash');

# ---- level/{n}: id order; a level without lessons, or no such level: []
for my $n (1 .. 5) {
    list_ok("/api/lessons/level/$n",
            [ by_id(grep { $_->{level_id} == $n } @rows) ], "level $n");
}
for my $n (6, 7, 99, 0, -3) {
    my $res = list_ok("/api/lessons/level/$n", [], "level $n (none)");
    like $res->content, qr/\A\s*\[\s*\]\s*\z/, "level $n: body is []";
}
list_ok('/api/lessons/level/4/', [ by_id(grep { $_->{level_id} == 4 } @rows) ],
        'level 4, trailing slash');

# ---- HEAD: same status and headers as GET, no body
for my $path ('/api/lessons', '/api/lessons/', "/api/lessons/$ids[0]",
              '/api/lessons/beginner', '/api/lessons/advanced',
              '/api/lessons/level/1', '/api/lessons/level/6') {
    my $get  = call(GET  => $path);
    my $head = call(HEAD => $path);
    is $head->code, $get->code, "HEAD $path: status as GET";
    is $head->header('Content-Type'), $get->header('Content-Type'),
        "HEAD $path: Content-Type as GET";
    my $len = $head->header('Content-Length');
    ok !defined $len || $len == length $get->content,
        "HEAD $path: Content-Length, if any, is the GET body's length";
    is $head->content, '', "HEAD $path: no body";
}
{
    my $head = call(HEAD => '/api/lessons/' . ($max + 1000));
    is $head->code, 404, 'HEAD missing id: 404';
    is $head->content, '', 'HEAD missing id: no body';
}

# ---- reads change nothing
is_deeply db_lessons(), \@rows, 'reads left the table unchanged';

# ---- an empty table
seed();
for my $path ('/api/lessons', '/api/lessons/beginner',
              '/api/lessons/advanced', '/api/lessons/level/1') {
    my $res = list_ok($path, [], "$path on an empty table");
    like $res->content, qr/\A\s*\[\s*\]\s*\z/, "$path: body is []";
}
is_empty_404(call(GET => "/api/lessons/$ids[0]"), 'GET after the table emptied');

done_testing;
