# Database faults.  lessons_fault: a database whose lessons table refuses
# every INSERT/UPDATE/DELETE (a trigger raises "simulated fault"): writes
# answer 500 with a problem body that leaks nothing, and leave no partial
# row; reads still work.  lessons_readfault: every lesson read fails when
# it runs: 500.  lessons_down: a database that cannot be reached: 503.
# All with problem bodies.
use strict;
use warnings FATAL => 'all';
use utf8;

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use LessonsTest;

# Words that would mean the driver's message or our SQL reached the client.
my $LEAK = qr/simulated|INSERT|UPDATE|DELETE\s+FROM|SELECT|SQL|sqlite|postgres|
              lessons_|RAISE|trigger|constraint|driver|apr_dbd|ERROR:/xi;

sub no_leak {
    my ($res, $name) = @_;
    my $text = join "\n", $res->headers->as_string, $res->content;
    unlike $text, $LEAK, "$name: no internals in the answer";
}

# ---- the fault database (seeded with four lessons before the trigger;
# groupcommit.t adds lessons its trigger spares)
my $fault = db_lessons('fault');
is scalar(grep { $_->{title} =~ /\AFault seed / } @$fault), 4,
    'fault database has its four seed lessons';
my $id = $fault->[0]{id};

{
    my $res = call(GET => '/api/lessons', vhost => 'lessons_fault');
    is $res->code, 200, 'fault: reads still work';
    is_deeply [ map { $_->{id} } @{ json_of($res) || [] } ],
        [ map { $_->{id} } @$fault ], 'fault: list from the fault database';
    is call(GET => "/api/lessons/$id", vhost => 'lessons_fault')->code, 200,
        'fault: GET by id';
    is call(GET => '/api/lessons/beginner', vhost => 'lessons_fault')->code, 200,
        'fault: beginner';
}

for my $case (
    [ POST   => '/api/lessons', json => { levelId => 1, title => 'Neu', order => 3 } ],
    [ PUT    => "/api/lessons/$id", json => { title => 'Geändert', order => 9 } ],
    [ DELETE => "/api/lessons/$id" ],
) {
    my ($m, $path, @rest) = @$case;
    my $res = call($m => $path, vhost => 'lessons_fault', @rest);
    is_problem($res, 500, "fault: $m");
    no_leak($res, "fault: $m");
    is_deeply db_lessons('fault'), $fault, "fault: $m left the table unchanged";
}
# Validation still answers 400 before touching the database.
is_validation(call(POST => '/api/lessons', vhost => 'lessons_fault',
                   json => { levelId => 1, title => '', order => 1 }),
              ['title'], 'fault: validation');
is_deeply db_lessons('fault'), $fault, 'fault: still unchanged';

# The main database was never involved.
{
    my ($main_id) = seed({ level_id => 1, title => 'Hauptdatenbank', sort_order => 1 });
    my $before = db_lessons();
    is call(GET => '/api/lessons')->code, 200, 'main server unaffected';
    is_deeply db_lessons(), $before, 'main database unchanged';
}

# ---- reads that fail when they run: 500, never an empty or short list
for my $path ('/api/lessons', '/api/lessons/1', '/api/lessons/2',
              '/api/lessons/beginner', '/api/lessons/advanced',
              '/api/lessons/level/1') {
    my $res = call(GET => $path, vhost => 'lessons_readfault');
    is_problem($res, 500, "read fault: GET $path");
    no_leak($res, "read fault: GET $path");
}

# ---- the unreachable database
for my $case (
    [ GET    => '/api/lessons' ],
    [ GET    => '/api/lessons/1' ],
    [ GET    => '/api/lessons/level/1' ],
    [ POST   => '/api/lessons', json => { levelId => 1, title => 'Neu', order => 3 } ],
    [ PUT    => '/api/lessons/1', json => { title => 'x' } ],
    [ DELETE => '/api/lessons/1' ],
) {
    my ($m, $path, @rest) = @$case;
    my $res = call($m => $path, vhost => 'lessons_down', @rest);
    is_problem($res, 503, "down: $m $path");
    no_leak($res, "down: $m $path");
}
{
    my $res = call(HEAD => '/api/lessons', vhost => 'lessons_down');
    is $res->code, 503, 'down: HEAD 503';
}
# Authentication still comes first.
is call(GET => '/api/lessons', vhost => 'lessons_down', token => undef)->code,
    401, 'down: no token is still 401';
# Routing needs no database.
is call(GET => '/api/lessons/foo', vhost => 'lessons_down')->code, 404,
    'down: unknown path is still 404';

done_testing;
