# POST /api/lessons: the created lesson, its row, Location; validation,
# content types, malformed bodies.  Every rejected write leaves the table
# exactly as it was.
use strict;
use warnings FATAL => 'all';
use utf8;

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use LessonsTest;

seed({ level_id => 3, title => 'Vorhandene Lektion', sort_order => 1,
       topic => 'Alt', description => 'Schon da' });

# POST and check the created lesson against its row.
sub create_ok {
    my ($payload, $want, $name, %o) = @_;
    my $before = db_lessons();
    my $res = call(POST => '/api/lessons', json => $payload, %o);
    is $res->code, 201, "$name: 201" or diag $res->as_string;
    my $got = json_of($res) || {};
    my $id = $got->{id};
    ok defined $id && $id =~ /\A\d+\z/, "$name: numeric id";
    $id //= -1;
    is $res->header('Location'), "/api/lessons/$id", "$name: Location";
    my %levels = (1 => [qw(Beginner A1)], 2 => [qw(Elementary A2)],
                  3 => [qw(Intermediate B1)], 4 => ['Upper Intermediate', 'B2'],
                  5 => [qw(Advanced C1)], 6 => [qw(Proficiency C2)]);
    my $wire = {
        id => $id, levelId => $want->{level_id},
        levelName => $levels{ $want->{level_id} }[0],
        levelCode => $levels{ $want->{level_id} }[1],
        title => $want->{title}, order => $want->{sort_order},
        topic => $want->{topic}, description => $want->{description},
        isActive => $want->{is_active} ? JSON::PP::true : JSON::PP::false,
    };
    is_json_lesson($res, 201, $wire, "$name: body");
    my $after = db_lessons();
    is scalar @$after, @$before + 1, "$name: one row more";
    is_deeply [ grep { $_->{id} != $id } @$after ], $before,
        "$name: other rows untouched";
    is_deeply lesson_row($id), { id => $id, %$want }, "$name: row values";
    # And it reads back the same.
    is_json_lesson(call(GET => "/api/lessons/$id"), 200, $wire,
                   "$name: GET it back");
    return $id;
}

# A rejected POST: status, and the table unchanged.
sub rejected {
    my ($check, $name, @call) = @_;
    my $before = db_lessons();
    my $res = call(POST => '/api/lessons', @call);
    $check->($res, $name);
    is_deeply db_lessons(), $before, "$name: table unchanged";
    return $res;
}

sub invalid {
    my ($payload, $fields, $name, %o) = @_;
    rejected(sub { is_validation($_[0], $fields, $_[1]) }, $name,
             json => $payload, %o);
}

my %min = (levelId => 1, title => 'Guten Tag', order => 1);

# ---- successful creates
create_ok({ %min }, { level_id => 1, title => 'Guten Tag', sort_order => 1,
                      topic => '', description => '', is_active => 1 },
          'required fields only: defaults');
create_ok({ levelId => 5, title => 'Konjunktiv I', order => 7,
            topic => 'Grammatik', description => 'Indirekte Rede',
            isActive => JSON::PP::false },
          { level_id => 5, title => 'Konjunktiv I', sort_order => 7,
            topic => 'Grammatik', description => 'Indirekte Rede',
            is_active => 0 }, 'all fields, inactive');
create_ok({ levelId => 6, title => 'Redewendungen', order => 0,
            isActive => JSON::PP::true },
          { level_id => 6, title => 'Redewendungen', sort_order => 0,
            topic => '', description => '', is_active => 1 }, 'order 0');
create_ok({ LevelId => 2, TITLE => 'Groß und klein', Order => 3,
            TOPIC => 'Schreibung', Description => 'egal', ISACTIVE => JSON::PP::true },
          { level_id => 2, title => 'Groß und klein', sort_order => 3,
            topic => 'Schreibung', description => 'egal', is_active => 1 },
          'property names are case-insensitive');
create_ok({ %min, id => 999999, levelName => 'Hacked', levelCode => 'X',
            unknown => [1, 2] },
          { level_id => 1, title => 'Guten Tag', sort_order => 1,
            topic => '', description => '', is_active => 1 },
          'unknown and read-only properties ignored');
ok !lesson_row(999999), 'the id in the body was not used';
create_ok({ levelId => 4, title => "Sonderzeichen \"'\\ </script> \x{1F600}",
            order => 2, topic => 'Ünïcödé ß', description => "Zeile\r\nZwei\tdrei" },
          { level_id => 4, title => "Sonderzeichen \"'\\ </script> \x{1F600}",
            sort_order => 2, topic => 'Ünïcödé ß', description => "Zeile\r\nZwei\tdrei",
            is_active => 1 },
          'escaping and non-ASCII round-trip');
create_ok({ %min, title => 'ü' x 200, topic => 'ö' x 100,
            description => 'ä' x 4000 },
          { level_id => 1, title => 'ü' x 200, sort_order => 1,
            topic => 'ö' x 100, description => 'ä' x 4000, is_active => 1 },
          'limits counted in characters, not bytes');
create_ok({ %min, title => 'x' x 200, topic => 't' x 100,
            description => 'd' x 4000 },
          { level_id => 1, title => 'x' x 200, sort_order => 1,
            topic => 't' x 100, description => 'd' x 4000, is_active => 1 },
          'limits: ASCII at the maximum');
create_ok({ %min, order => 2147483647 },
          { level_id => 1, title => 'Guten Tag', sort_order => 2147483647,
            topic => '', description => '', is_active => 1 },
          'order INT_MAX');

# Accepted content types.
for my $type ('application/json; charset=utf-8', 'application/json;charset=UTF-8',
              'Application/JSON', 'application/merge-patch+json',
              'application/vnd.lessons+json') {
    create_ok({ %min }, { level_id => 1, title => 'Guten Tag', sort_order => 1,
                          topic => '', description => '', is_active => 1 },
              "Content-Type $type", type => $type);
}

# Ids are new each time.
{
    my $a = json_of(call(POST => '/api/lessons', json => { %min }))->{id};
    my $b = json_of(call(POST => '/api/lessons', json => { %min }))->{id};
    ok $a && $b && $b > $a, 'each create gets a new, larger id';
}

# ---- required fields
invalid({}, [qw(levelId title order)], 'empty object');
invalid({ title => 'x', order => 1 }, ['levelId'], 'levelId missing');
invalid({ levelId => 1, order => 1 }, ['title'], 'title missing');
invalid({ levelId => 1, title => 'x' }, ['order'], 'order missing');

# ---- strict types
for my $bad ('1', 1.5, JSON::PP::true, undef, [1], { id => 1 }) {
    my $d = defined $bad ? (ref $bad ? ref $bad : "'$bad'") : 'null';
    $d = 'true' if JSON::PP::is_bool($bad);
    invalid({ %min, levelId => $bad }, ['levelId'], "levelId $d");
    invalid({ %min, order => $bad }, ['order'], "order $d");
}
for my $bad (5, JSON::PP::false, undef, ['x'], { a => 1 }) {
    my $d = defined $bad ? (ref $bad ? ref $bad : $bad) : 'null';
    $d = 'false' if JSON::PP::is_bool($bad);
    invalid({ %min, title => $bad }, ['title'], "title $d");
    invalid({ %min, topic => $bad }, ['topic'], "topic $d");
    invalid({ %min, description => $bad }, ['description'], "description $d");
}
for my $bad (1, 0, 'true', undef, []) {
    my $d = defined $bad ? (ref $bad ? 'array' : "'$bad'") : 'null';
    invalid({ %min, isActive => $bad }, ['isActive'], "isActive $d");
}
invalid({ %min, levelId => 2147483648 }, ['levelId'], 'levelId overflows int');
invalid({ %min, order => 2147483648 }, ['order'], 'order overflows int');
invalid({ %min, order => -2147483649 }, ['order'], 'order underflows int');
invalid({ levelId => '1', title => '', order => 'x' },
        [qw(levelId title order)], 'every bad field is named');

# ---- lengths (characters) and blank titles
invalid({ %min, title => '' }, ['title'], 'empty title');
invalid({ %min, title => "   \t " }, ['title'], 'blank title');
invalid({ %min, title => 'x' x 201 }, ['title'], 'title 201 characters');
invalid({ %min, title => 'ü' x 201 }, ['title'], 'title 201 two-byte characters');
invalid({ %min, topic => 'x' x 101 }, ['topic'], 'topic 101 characters');
invalid({ %min, topic => 'ö' x 101 }, ['topic'], 'topic 101 two-byte characters');
invalid({ %min, description => 'x' x 4001 }, ['description'],
        'description 4001 characters');
invalid({ %min, description => "\x{1F600}" x 4001 }, ['description'],
        'description 4001 four-byte characters');

# ---- the level must exist
invalid({ %min, levelId => 99 }, ['levelId'], 'unknown levelId 99');
invalid({ %min, levelId => 0 }, ['levelId'], 'levelId 0');
invalid({ %min, levelId => -1 }, ['levelId'], 'levelId -1');
invalid({ %min, levelId => 7 }, ['levelId'], 'levelId 7');

# ---- a property given twice, in any case mix, is ambiguous
rejected(sub { is_problem($_[0], 400, $_[1]) }, 'duplicate property',
         body => '{"levelId":1,"title":"a","order":1,"TITLE":"b"}');
# ... the very same name too: the same field error, never "not valid JSON"
rejected(sub { is_validation($_[0], ['title'], $_[1]) }, 'a property given twice by name',
         body => '{"levelId":1,"title":"a","order":1,"title":"b"}');

# ---- what the JSON parser cannot hold is named as such
for my $case (
    [ 'a member the API ignores, given twice', '{"levelId":1,"title":"a","order":1,"x":1,"x":2}',
      qr/more than once/ ],
    [ 'an integer beyond 64 bits in an ignored member',
      '{"levelId":1,"title":"a","order":1,"x":123456789012345678901234567890}', qr/64 bits/ ],
    [ 'a number beyond a double', '{"levelId":1,"title":"a","order":1,"x":1e999}', qr/double/ ],
    [ 'a NUL in a property name', '{"levelId":1,"title":"a","order":1,"a\\u0000b":1}', qr/NUL/ ],
) {
    my ($name, $body, $says) = @$case;
    rejected(sub {
        my $p = is_problem($_[0], 400, $_[1]);
        like $p && $p->{detail} // '', $says, "$_[1]: the detail names the limit";
        unlike $p && $p->{detail} // '', qr/not valid JSON/, "$_[1]: not \"not valid JSON\"";
    }, $name, body => $body);
}

# ---- malformed bodies: 400 problem+json
for my $case (
    [ 'empty body',            '' ],
    [ 'truncated JSON',        '{"levelId":1,"title":"x","order":1' ],
    [ 'trailing comma',        '{"levelId":1,"title":"x","order":1,}' ],
    [ 'trailing garbage',      '{"levelId":1,"title":"x","order":1} x' ],
    [ 'two documents',         '{"levelId":1,"title":"x","order":1}{}' ],
    [ 'single quotes',         "{'levelId':1,'title':'x','order':1}" ],
    [ 'array',                 '[{"levelId":1,"title":"x","order":1}]' ],
    [ 'string',                '"hello"' ],
    [ 'number',                '42' ],
    [ 'null',                  'null' ],
    [ 'NaN',                   '{"levelId":NaN,"title":"x","order":1}' ],
    [ 'invalid UTF-8 (\xff)',  qq({"levelId":1,"title":"x\xffy","order":1}) ],
    [ 'invalid UTF-8 (overlong)',
                               qq({"levelId":1,"title":"\xc0\xafx","order":1}) ],
    [ 'invalid UTF-8 (surrogate)',
                               qq({"levelId":1,"title":"\xed\xa0\x80","order":1}) ],
    [ 'invalid UTF-8 (truncated)',
                               qq({"levelId":1,"title":"x\xc3","order":1}) ],
    [ 'NUL escape in title',   '{"levelId":1,"title":"a\u0000b","order":1}' ],
) {
    my ($name, $body) = @$case;
    rejected(sub { is_problem($_[0], 400, $_[1]) }, $name, body => $body);
}

# ---- content type: 415
for my $type ('text/plain', 'application/xml', 'application/x-www-form-urlencoded',
              'application/jsonx', 'application/json; charset=iso-8859-1',
              'text/json+plain') {
    rejected(sub { is_problem($_[0], 415, $_[1]) }, "Content-Type $type",
             json => { %min }, type => $type);
}
rejected(sub { is_problem($_[0], 415, $_[1]) }, 'no Content-Type',
         json => { %min }, type => undef);

# ---- the 201 body is the stored lesson, not an echo of the request
{
    my $res = call(POST => '/api/lessons',
                   body => '{"levelId":1,"title":"Echo","order":1,"topic":"t",'
                         . '"extra":"x","isActive":true}');
    my $text = $res->content;
    unlike $text, qr/extra/, 'created body does not echo unknown properties';
}

done_testing;
