# PUT /api/lessons/{id}: fields present are validated and applied, absent
# fields keep their stored values; 404 for a missing id; every rejected
# write leaves the table unchanged.
use strict;
use warnings FATAL => 'all';
use utf8;

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use LessonsTest;

my %LEVEL = (1 => [qw(Beginner A1)], 2 => [qw(Elementary A2)],
             3 => [qw(Intermediate B1)], 4 => ['Upper Intermediate', 'B2'],
             5 => [qw(Advanced C1)], 6 => [qw(Proficiency C2)]);

my ($id, $other) = seed(
    { level_id => 1, title => 'Begrüßungen', sort_order => 1,
      topic => 'Alltag', description => 'Hallo, guten Morgen' },
    { level_id => 2, title => 'Andere Lektion', sort_order => 5,
      topic => 'Nicht anfassen', description => 'bleibt' },
);

sub wire {
    my ($r) = @_;
    return { id => $r->{id}, levelId => $r->{level_id},
             levelName => $LEVEL{ $r->{level_id} }[0],
             levelCode => $LEVEL{ $r->{level_id} }[1],
             title => $r->{title}, order => $r->{sort_order},
             topic => $r->{topic}, description => $r->{description},
             isActive => $r->{is_active} ? JSON::PP::true : JSON::PP::false };
}

# PUT a payload; the row must become $change applied to what it was.
sub update_ok {
    my ($payload, $change, $name, %o) = @_;
    my $before = db_lessons();
    my ($old) = grep { $_->{id} == $id } @$before;
    my $want = { %$old, %$change };
    my $res = call(PUT => "/api/lessons/$id", json => $payload, %o);
    is_json_lesson($res, 200, wire($want), $name);
    is_deeply lesson_row($id), $want, "$name: row updated";
    is_deeply [ grep { $_->{id} != $id } @{ db_lessons() } ],
        [ grep { $_->{id} != $id } @$before ], "$name: other rows untouched";
    is_json_lesson(call(GET => "/api/lessons/$id"), 200, wire($want),
                   "$name: GET it back");
}

sub rejected {
    my ($check, $name, $path, @call) = @_;
    my $before = db_lessons();
    my $res = call(PUT => $path, @call);
    $check->($res, $name);
    is_deeply db_lessons(), $before, "$name: table unchanged";
    return $res;
}

sub invalid {
    my ($payload, $fields, $name) = @_;
    rejected(sub { is_validation($_[0], $fields, $_[1]) }, $name,
             "/api/lessons/$id", json => $payload);
}

# ---- partial and full updates
update_ok({ title => 'Begrüßungen und Abschiede' },
          { title => 'Begrüßungen und Abschiede' }, 'title only');
update_ok({ order => 4 }, { sort_order => 4 }, 'order only');
update_ok({ isActive => JSON::PP::false }, { is_active => 0 }, 'deactivate');
update_ok({ isActive => JSON::PP::true }, { is_active => 1 }, 'reactivate');
update_ok({ levelId => 3 }, { level_id => 3 }, 'move to another level');
update_ok({ topic => '' , description => '' },
          { topic => '', description => '' }, 'clear topic and description');
update_ok({}, {}, 'empty object changes nothing');
update_ok({ levelId => 5, title => 'Ganz neu', order => 0,
            topic => 'Neu', description => "Neu\nbeschrieben",
            isActive => JSON::PP::false },
          { level_id => 5, title => 'Ganz neu', sort_order => 0,
            topic => 'Neu', description => "Neu\nbeschrieben", is_active => 0 },
          'every field');
update_ok({ TITLE => 'Groß', levelid => 2, ORDER => 9 },
          { title => 'Groß', level_id => 2, sort_order => 9 },
          'property names are case-insensitive');
update_ok({ id => $other, levelName => 'x', foo => 1, title => 'Id bleibt' },
          { title => 'Id bleibt' }, 'id and unknown properties ignored');
update_ok({ title => 'ü' x 200, topic => 'ö' x 100, description => 'ä' x 4000 },
          { title => 'ü' x 200, topic => 'ö' x 100, description => 'ä' x 4000 },
          'limits counted in characters');
update_ok({ title => 'Zurück' }, { title => 'Zurück' }, 'title again',
          type => 'application/json; charset=utf-8');

# The same update twice is fine (idempotent PUT).
update_ok({ title => 'Zweimal' }, { title => 'Zweimal' }, 'first of two');
update_ok({ title => 'Zweimal' }, { title => 'Zweimal' }, 'second of two');

# ---- missing id: 404, empty body, nothing written
for my $missing ($other + 1000, 0, -5, 2147483647) {
    rejected(sub { is_empty_404($_[0], $_[1]) }, "PUT missing id $missing",
             "/api/lessons/$missing", json => { title => 'Gibt es nicht' });
}

# ---- validation of present fields
invalid({ title => '' }, ['title'], 'empty title');
invalid({ title => '  ' }, ['title'], 'blank title');
invalid({ title => 'x' x 201 }, ['title'], 'title 201 characters');
invalid({ title => 'ü' x 201 }, ['title'], 'title 201 two-byte characters');
invalid({ topic => 'x' x 101 }, ['topic'], 'topic too long');
invalid({ description => 'x' x 4001 }, ['description'], 'description too long');
invalid({ title => undef }, ['title'], 'title null');
invalid({ levelId => '2' }, ['levelId'], 'levelId string');
invalid({ levelId => 1.5 }, ['levelId'], 'levelId float');
invalid({ levelId => undef }, ['levelId'], 'levelId null');
invalid({ order => JSON::PP::true }, ['order'], 'order boolean');
invalid({ order => '3' }, ['order'], 'order string');
invalid({ isActive => 'false' }, ['isActive'], 'isActive string');
invalid({ isActive => 0 }, ['isActive'], 'isActive number');
invalid({ levelId => 99 }, ['levelId'], 'unknown levelId');
invalid({ levelId => 99, title => 'Gültig' }, ['levelId'],
        'unknown levelId with a valid title: nothing applied');
invalid({ title => '', order => 'x', topic => 1 }, [qw(title order topic)],
        'every bad field is named');

# ---- malformed bodies and content types
for my $case ([ 'malformed JSON', '{"title":' ], [ 'array', '[]' ],
              [ 'null', 'null' ], [ 'empty', '' ],
              [ 'invalid UTF-8', qq({"title":"\xfe\xff"}) ]) {
    rejected(sub { is_problem($_[0], 400, $_[1]) }, "PUT $case->[0]",
             "/api/lessons/$id", body => $case->[1]);
}
rejected(sub { is_problem($_[0], 415, $_[1]) }, 'PUT text/plain',
         "/api/lessons/$id", json => { title => 'x' }, type => 'text/plain');
rejected(sub { is_problem($_[0], 415, $_[1]) }, 'PUT without Content-Type',
         "/api/lessons/$id", json => { title => 'x' }, type => undef);

done_testing;
