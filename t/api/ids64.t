# 64-bit ids (issue 11 §3) and PUTs that never lose each other's changes
# (issue 6 §2).
#
# Lessons whose ids are past 2^31 (put straight into the database) are
# listed by every list route, fetched, updated and deleted by their own
# id; POST after them, and on PostgreSQL with the identity moved past
# 2^31, answers 201 with the id in Location and stores the row once.  An
# id past 2^63 - 1 in a path is a 404, never a 500.  Then two clients
# update the title and the topic of one lesson at the same moment, round
# after round, and both changes must be stored every time.
use strict;
use warnings FATAL => 'all';
use utf8;

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use IO::Handle ();
use POSIX ();
use LessonsTest;

my $pg = $ENV{LESSONS_TEST_DRIVER} eq 'pgsql';

sub wire { LessonsTest::wire_lesson(@_) }

# Ids compared as decimal strings: no Perl number rounding on the way.
sub ids_of {
    my ($list) = @_;
    return [ map { "$_->{id}" } ref $list eq 'ARRAY' ? @$list : () ];
}

# ---- rows past 2^31, inserted without the module, and a small one
# 4294967297 is 1 in 32 bits; 9000000000000000000 is far past both.  No
# row has id 1.
my @BIG = (
    { id => '2147483648', level_id => 1, title => 'Jenseits von 2^31',
      sort_order => 1, topic => 'Zahlen', description => 'erste' },
    { id => '4294967297', level_id => 5, title => 'Jenseits von 2^32',
      sort_order => 2, topic => 'Zahlen', description => 'zweite' },
    { id => '9000000000000000000', level_id => 3, title => 'Ganz weit',
      sort_order => 3, topic => 'Zahlen', description => 'dritte' },
);
my $true = $pg ? 'TRUE' : '1';
seed();                         # an empty table
db_do(join ";\n", map {
    "INSERT INTO lessons (id, level_id, title, sort_order, topic,"
    . " description, is_active) VALUES ($_->{id}, $_->{level_id}, "
    . sq($_->{title}) . ", $_->{sort_order}, " . sq($_->{topic}) . ", "
    . sq($_->{description}) . ", $true)"
} { id => '3', level_id => 2, title => 'Kleine Id', sort_order => 1,
    topic => '', description => '' }, @BIG);
my $rows = db_lessons();
is scalar @$rows, 4, 'four rows, three past 2^31';
my %row = map { ("$_->{id}" => $_) } @$rows;

# Every list route answers 200 and carries the big ids, exactly.
{
    my $res = call(GET => '/api/lessons');
    is $res->code, 200, 'GET all: 200';
    is_deeply ids_of(json_of($res)), [ map { "$_->{id}" } @$rows ],
        'GET all: every id, in order';
    like $res->content, qr/"id":9000000000000000000,/,
        'GET all: the id in full, as a JSON integer';
}
for my $case ([ '/api/lessons/beginner', '2147483648' ],
              [ '/api/lessons/advanced', '4294967297' ],
              [ '/api/lessons/level/1', '2147483648' ],
              [ '/api/lessons/level/5', '4294967297' ],
              [ '/api/lessons/level/3', '9000000000000000000' ]) {
    my ($path, $id) = @$case;
    my $res = call(GET => $path);
    is $res->code, 200, "GET $path: 200";
    ok((grep { $_ eq $id } @{ ids_of(json_of($res)) }),
       "GET $path: includes $id");
}
for my $b (@BIG) {
    is_json_lesson(call(GET => "/api/lessons/$b->{id}"), 200,
                   wire($row{ $b->{id} }), "GET $b->{id}");
    is call(HEAD => "/api/lessons/$b->{id}")->code, 200, "HEAD $b->{id}";
}
# What 32 bits would make of them names nothing.
is_empty_404(call(GET => '/api/lessons/1'), 'GET 1 (4294967297 in 32 bits)');
is call(GET => '/api/lessons/level/4294967297')->code, 404,
    'level 4294967297 is no level (404)';

# ---- update and delete by a big id
{
    my $id = '4294967297';
    my $res = call(PUT => "/api/lessons/$id", json => { title => 'Umbenannt' });
    is_json_lesson($res, 200, wire({ %{ $row{$id} }, title => 'Umbenannt' }),
                   "PUT $id");
    is lesson_row($id)->{title}, 'Umbenannt', "PUT $id: row updated";
    is lesson_row('2147483648')->{title}, 'Jenseits von 2^31',
        "PUT $id: 2147483648 untouched";
    is call(DELETE => "/api/lessons/$id")->code, 204, "DELETE $id: 204";
    ok !lesson_row($id), "DELETE $id: row gone";
    is db_count(), 3, "DELETE $id: the others stay";
}

# ---- ids past 2^63 - 1 and the largest one: 404, never 500
for my $path ('/api/lessons/9223372036854775808',
              '/api/lessons/9223372036854775808/',
              '/api/lessons/18446744073709551617',
              '/api/lessons/-9223372036854775809',
              '/api/lessons/99999999999999999999999999') {
    for my $m (qw(GET PUT DELETE)) {
        my $before = db_lessons();
        my $res = call($m => $path,
                       $m eq 'PUT' ? (json => { title => 'Nie' }) : ());
        is $res->code, 404, "$m $path: 404";
        is_deeply db_lessons(), $before, "$m $path: table unchanged";
    }
}
is_empty_404(call(GET => '/api/lessons/9223372036854775807'),
             'GET 9223372036854775807 (no such lesson)');
is_empty_404(call(PUT => '/api/lessons/9223372036854775807',
                  json => { title => 'Nie' }),
             'PUT 9223372036854775807 (no such lesson)');

# ---- POST after the big rows
sub post_ok {
    my ($title, $name) = @_;
    my $before = db_count();
    my $res = call(POST => '/api/lessons',
                   json => { levelId => 4, title => $title, order => 7 });
    is $res->code, 201, "$name: 201" or diag $res->as_string;
    my ($id) = ($res->content =~ /\A\{"id":(\d+),/);
    ok defined $id, "$name: id in the body";
    $id //= 'none';
    is $res->header('Location'), "/api/lessons/$id", "$name: Location";
    is db_count(), $before + 1, "$name: one row more";
    my $same = db_rows('SELECT id FROM lessons WHERE title = ' . sq($title));
    is_deeply ids_of($same), [ $id ], "$name: stored exactly once, as $id";
    is_json_lesson(call(GET => "/api/lessons/$id"), 200,
                   wire({ id => $id, level_id => 4, title => $title,
                          sort_order => 7, topic => '', description => '',
                          is_active => 1 }), "$name: GET it back");
    return $id;
}
{
    my $id = post_ok('Nach den großen Ids', 'POST after big ids');
    # SQLite numbers on from the largest id; PostgreSQL's identity goes
    # its own way until it is moved below.
    is $id, '9000000000000000001', 'POST: SQLite takes the next id'
        unless $pg;
}
if ($pg) {
    db_do("SELECT setval(pg_get_serial_sequence('lessons', 'id'), 2147483648)");
    is post_ok('Identität über 2^31', 'POST with the identity past 2^31'),
        '2147483649', 'POST: the identity hands out 2147483649';
}

# ---- concurrent PUTs (issue 6 §2): one client sets the title, the other
# the topic, at the same moment, round after round; after every round
# both values are stored.  No timing is asserted.
my $ROUNDS = 200;
my ($lesson) = seed({ level_id => 2, title => 'Start', sort_order => 1,
                      topic => 'Start', description => 'bleibt' });

# A client process: reads a round number, sends one PUT, says the status.
sub client {
    my ($field) = @_;
    pipe(my $go_r, my $go_w) or die "pipe: $!";
    pipe(my $done_r, my $done_w) or die "pipe: $!";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $go_w;
        close $done_r;
        $done_w->autoflush(1);
        my $token = good_token();
        while (defined(my $round = <$go_r>)) {
            chomp $round;
            my $res = call(PUT => "/api/lessons/$lesson", token => $token,
                           json => { $field => "$field $round" });
            print $done_w $res->code, "\n";
        }
        POSIX::_exit(0);        # no Test::More END blocks in the child
    }
    close $go_r;
    close $done_w;
    $go_w->autoflush(1);
    return { pid => $pid, go => $go_w, done => $done_r, field => $field };
}

my @clients = (client('title'), client('topic'));
my (%lost, %bad_status, $first_loss);
for my $round (1 .. $ROUNDS) {
    print { $_->{go} } "$round\n" for @clients;
    for my $c (@clients) {
        my $code = readline $c->{done};
        $code = 'none' unless defined $code;
        chomp $code;
        $bad_status{"$c->{field}: $code"}++ if $code ne '200';
    }
    # What is stored: read through the API every round (fast), and
    # straight from the database every tenth round and the last.
    my $r = json_of(call(GET => "/api/lessons/$lesson")) || {};
    $r = lesson_row($lesson) || {} if $round % 10 == 0 || $round == $ROUNDS;
    for my $field (qw(title topic)) {
        next if ($r->{$field} // '') eq "$field $round";
        $lost{$field}++;
        $first_loss //= "round $round: $field is '"
            . ($r->{$field} // 'missing') . "'";
    }
}
# Each client holds the other's end of its pipe too (fork copies it):
# close every one before waiting for any.
close $_->{go} for @clients;
waitpid $_->{pid}, 0 for @clients;
is_deeply \%bad_status, {}, "concurrent PUTs: all $ROUNDS x 2 answered 200";
is $lost{title} // 0, 0, 'concurrent PUTs: no title change lost';
is $lost{topic} // 0, 0, 'concurrent PUTs: no topic change lost';
diag "first lost change: $first_loss" if $first_loss;
{
    my $r = lesson_row($lesson);
    is_deeply [ @$r{qw(level_id sort_order description is_active)} ],
        [ 2, 1, 'bleibt', 1 ], 'concurrent PUTs: fields not sent kept';
}

# ---- leave the ids as a fresh database has them, for the files after
db_do('DELETE FROM lessons');
db_do($pg ? "SELECT setval(pg_get_serial_sequence('lessons', 'id'), 1, false)"
          : "DELETE FROM sqlite_sequence WHERE name = 'lessons'");

done_testing;
