# Blank titles and control characters (issue 6 §4): a title made only of
# white space, invisible format characters or control characters is blank
# and gets exactly the 400 an empty title gets; a control character in
# title, topic or description is a 400 naming the field, except tab, CR
# and LF in description, which are stored and read back exactly.  Every
# rejected write leaves the table as it was.
use strict;
use warnings FATAL => 'all';
use utf8;

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use LessonsTest;

my ($id) = seed(
    { level_id => 2, title => 'Vorhandene Lektion', sort_order => 3,
      topic => 'Alt', description => "Zeile 1\nZeile 2" },
    { level_id => 4, title => 'Andere Lektion', sort_order => 1,
      topic => 'Nicht anfassen', description => 'bleibt' },
);

my %min = (levelId => 1, order => 1);

# The answer an empty title gets: every blank title must get the same.
my %empty = (
    POST => call(POST => '/api/lessons', json => { %min, title => '' }),
    PUT  => call(PUT => "/api/lessons/$id", json => { title => '' }),
);
for my $m (sort keys %empty) {
    my $p = is_validation($empty{$m}, ['title'], "$m empty title");
    is_deeply $p && $p->{errors}{title}, ['The title field is required.'],
        "$m empty title: the message";
}

# Send a request that must be refused; check it with $check and that the
# table did not change.
sub refused {
    my ($check, $name, $method, $path, @call) = @_;
    my $before = db_lessons();
    my $res = call($method => $path, @call);
    $check->($res, $name);
    is_deeply db_lessons(), $before, "$name: table unchanged";
}

# POST and PUT a title (a Perl string, or a raw JSON text with
# raw => 1): the very response an empty title gets.
sub blank_title {
    my ($title, $name, %o) = @_;
    for my $m (qw(POST PUT)) {
        my $path = $m eq 'POST' ? '/api/lessons' : "/api/lessons/$id";
        my @body;
        if ($o{raw}) {
            my $pre = $m eq 'POST' ? '"levelId":1,"order":1,' : '';
            @body = (body => "{$pre\"title\":\"$title\"}");
        }
        else {
            @body = (json => $m eq 'POST' ? { %min, title => $title }
                                          : { title => $title });
        }
        refused(sub {
            my ($res, $n) = @_;
            is_validation($res, ['title'], $n);
            is $res->content, $empty{$m}->content,
                "$n: the same body as an empty title";
            is $res->header('Content-Type'),
                $empty{$m}->header('Content-Type'), "$n: the same type";
        }, "$m $name", $m, $path, @body);
    }
}

# A field that must be refused with one message naming it.
sub bad_field {
    my ($field, $value, $name) = @_;
    my $msg = $field eq 'description'
        ? 'The field description must not contain control characters'
          . ' other than tab, carriage return and line feed.'
        : "The field $field must not contain control characters.";
    for my $m (qw(POST PUT)) {
        my ($path, $json) = $m eq 'POST'
            ? ('/api/lessons', { %min, title => 'T', $field => $value })
            : ("/api/lessons/$id", { $field => $value });
        refused(sub {
            my ($res, $n) = @_;
            my $p = is_validation($res, [$field], $n);
            is_deeply $p && $p->{errors}{$field}, [$msg], "$n: the message";
        }, "$m $name", $m, $path, json => $json);
    }
}

my %NAME = (0x00A0 => 'NBSP', 0x200B => 'ZWSP', 0x3000 => 'IDEOGRAPHIC SPACE',
            0x2028 => 'LINE SEPARATOR', 0xFEFF => 'BOM', 0x0000 => 'NUL',
            0x0001 => 'SOH', 0x001F => 'US', 0x007F => 'DEL',
            0x0080 => 'PAD', 0x0085 => 'NEL', 0x009F => 'APC',
            0x0009 => 'TAB', 0x000A => 'LF', 0x000D => 'CR',
            0x00AD => 'SOFT HYPHEN', 0x180E => 'MONGOLIAN VOWEL SEPARATOR',
            0x200C => 'ZWNJ', 0x200D => 'ZWJ', 0x2060 => 'WORD JOINER',
            0x2029 => 'PARAGRAPH SEPARATOR', 0x202F => 'NNBSP',
            0x1680 => 'OGHAM SPACE MARK', 0x2000 => 'EN QUAD',
            0x200A => 'HAIR SPACE', 0x205F => 'MMSP');
my @listed = (0x00A0, 0x200B, 0x3000, 0x2028, 0xFEFF,
              0x0000, 0x0001, 0x001F, 0x007F, 0x0080, 0x009F);
my @more = (0x0009, 0x000A, 0x000D, 0x0085, 0x00AD, 0x180E, 0x200C, 0x200D,
            0x2060, 0x2029, 0x202F, 0x1680, 0x2000, 0x200A, 0x205F);
sub u { sprintf 'U+%04X %s', $_[0], $NAME{ $_[0] } }

# ---- blank titles: each character alone, then mixed
blank_title(chr($_), u($_) . ' alone') for @listed, @more;
blank_title(join('', map { chr } @listed), 'every listed character');
blank_title(join(' ', '', (map { chr } @listed, @more), ''),
            'all of them between spaces');
blank_title("  \x{00A0} \x{200B}  \x{3000}\t\r\n\x{FEFF} ", 'spaces mixed in');
blank_title(' ' x 150 . "\x{2028}" . ' ' x 150, 'a long blank title');
blank_title('\u200b\u0000\u00a0\u3000\ufeff', 'as JSON escapes', raw => 1);
blank_title('\u0000', 'NUL as a JSON escape', raw => 1);

# ---- a visible character among them makes a title, kept as sent
{
    my $title = "\x{200B}\x{00A0}Hallo\x{3000}Welt\x{FEFF}";
    my $before = db_lessons();
    my $res = call(POST => '/api/lessons', json => { %min, title => $title });
    is $res->code, 201, 'visible among blanks: 201' or diag $res->as_string;
    my $new = (json_of($res) || {})->{id} // -1;
    is((json_of($res) || {})->{title}, $title, 'visible among blanks: echoed');
    is_deeply [ grep { $_->{id} != $new } @{ db_lessons() } ], $before,
        'visible among blanks: other rows untouched';
    is((lesson_row($new) || {})->{title}, $title,
       'visible among blanks: stored exactly');
    db_do("DELETE FROM lessons WHERE id = $new");
}

# ---- control characters in each field
for my $cp (0x00 .. 0x1F, 0x7F .. 0x9F) {
    my $c = chr $cp;
    my $u = sprintf 'U+%04X', $cp;
    # not blank: a visible character is there
    bad_field(title => "a${c}b", "$u in title");
    bad_field(topic => "a${c}b", "$u in topic");
    next if $cp == 0x09 || $cp == 0x0A || $cp == 0x0D;
    bad_field(description => "a${c}b", "$u in description");
}
bad_field(topic => "\t", 'a lone tab in topic');
bad_field(description => "\x{0000}", 'a lone NUL in description');

# A title that would be fine next to a bad topic: nothing is applied.
refused(sub { is_validation($_[0], [qw(title topic)], $_[1]) },
        'PUT blank title, bad topic, good order', PUT => "/api/lessons/$id",
        json => { title => "\x{3000}", topic => "x\x{1B}", order => 9 });
refused(sub { is_validation($_[0], ['description'], $_[1]) },
        'PUT NUL escape in description', PUT => "/api/lessons/$id",
        body => '{"title":"Neu","description":"a\u0000b"}');

# ---- tab, CR and LF in description: stored and read back exactly
for my $case (
    [ 'tab, CR, LF'   => "Spalte 1\tSpalte 2\r\nZeile 2\nZeile 3\r" ],
    [ 'only them'     => "\t\r\n" ],
    [ 'leading, many' => "\n\n\tEinrückung\r\n\r\n\t\tmehr\t" ],
) {
    my ($name, $descr) = @$case;
    my $res = call(POST => '/api/lessons', json => { %min,
                   title => 'Mit Zeilen', description => $descr });
    is $res->code, 201, "POST description $name: 201" or diag $res->as_string;
    my $new = (json_of($res) || {})->{id} // -1;
    is((json_of($res) || {})->{description}, $descr,
       "POST description $name: echoed exactly");
    is((lesson_row($new) || {})->{description}, $descr,
       "POST description $name: stored exactly");
    is((json_of(call(GET => "/api/lessons/$new")) || {})->{description},
       $descr, "POST description $name: read back exactly");

    my $put = call(PUT => "/api/lessons/$id",
                   json => { description => "$descr!" });
    is $put->code, 200, "PUT description $name: 200" or diag $put->as_string;
    is((lesson_row($id) || {})->{description}, "$descr!",
       "PUT description $name: stored exactly");
    is((json_of(call(GET => "/api/lessons/$id")) || {})->{description},
       "$descr!", "PUT description $name: read back exactly");
}

done_testing;
