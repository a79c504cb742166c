# Two Apache servers on one database (issue 7): each keeps its own
# response caches (one per process), and a write through either one, or
# straight through SQL (a lesson, a level's name), is seen at once
# through both, on every route, with moved ETags.
#
# Server A is the suite's own.  Server B is started here: its own httpd,
# two processes, the same module, database and key, and mod_deflate on
# application/json as an admin might add it: nothing may be compressed
# twice, and revalidation must still work.
use strict;
use warnings FATAL => 'all';
use utf8;

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use IO::Uncompress::Gunzip qw(gunzip $GunzipError);
use JSON::PP ();
use LessonsTest;

my $mods   = $ENV{LESSONS_TEST_HTTPD_MODULES} || '/usr/lib/apache2/modules';
my $dir    = File::Temp->newdir;
my $JSON   = JSON::PP->new->utf8->canonical;

# ---- server B
my $port = free_port();
my $cache_size = 64 * 1024;
my $conf = httpd_conf($dir, $port, <<"EOF");
LogLevel info lessons:trace1
LoadModule filter_module     "$mods/mod_filter.so"
LoadModule deflate_module    "$mods/mod_deflate.so"
StartServers 2
MinSpareThreads 2
MaxSpareThreads 10
ServerLimit 2
ThreadsPerChild 5
MaxRequestWorkers 10
AddOutputFilterByType DEFLATE application/json
# Small, so that many distinct lessons overflow it.
LessonsCacheSize $cache_size
@{[ api_location() ]}
EOF
start_httpd($conf, $port);

my $A = base_url();
my $B = "http://127.0.0.1:$port";

# ---- what the database says each route holds (level names included)
sub expected {
    my $rows = db_rows(
        'SELECT l.id, l.level_id, v.name AS level_name, v.code AS level_code,'
        . ' l.title, l.sort_order, l.topic, l.description,'
        . ' CASE WHEN l.is_active THEN 1 ELSE 0 END AS is_active'
        . ' FROM lessons l JOIN levels v ON v.id = l.level_id ORDER BY l.id');
    my @all = map { {
        id => $_->{id}, levelId => $_->{level_id},
        levelName => $_->{level_name}, levelCode => $_->{level_code},
        title => $_->{title}, order => $_->{sort_order}, topic => $_->{topic},
        description => $_->{description},
        isActive => $_->{is_active} ? JSON::PP::true : JSON::PP::false,
    } } @$rows;
    my $pair = sub {
        my ($x, $y) = @_;
        return [ sort { $a->{levelId} <=> $b->{levelId}
                        || $a->{order} <=> $b->{order} || $a->{id} <=> $b->{id} }
                 grep { $_->{levelId} == $x || $_->{levelId} == $y } @all ];
    };
    my %e = ('/api/lessons' => \@all,
             '/api/lessons/beginner' => $pair->(1, 2),
             '/api/lessons/advanced' => $pair->(4, 5));
    for my $n (1 .. 6) {
        $e{"/api/lessons/level/$n"} = [ grep { $_->{levelId} == $n } @all ];
    }
    $e{"/api/lessons/$_->{id}"} = $_ for @all;
    return \%e;
}

# The body as the client sees it, inflated when it came gzip.
sub body_of {
    my ($res) = @_;
    my $raw = $res->content;
    my $enc = $res->header('Content-Encoding') || '';
    if ($enc eq 'gzip') {
        my $out;
        gunzip(\$raw => \$out) or return "gunzip failed: $GunzipError";
        return $out;
    }
    return $raw;
}

# Every route, on both servers, a few times each (so that requests land
# on different processes and threads), plain and gzip: each answer must
# be what the database holds now.  Returns route => ETag (plain, from A).
my @warm_ids;
sub check_all {
    my ($label, @gone) = @_;
    my $exp = expected();
    my (%tags, %bad);
    for my $path (sort keys %$exp, @gone) {
        for my $server ([A => $A], [B => $B]) {
            for my $try (1 .. 4) {
                my $gz = $try % 2 == 0;
                my $res = call(GET => $path, base => $server->[1],
                               headers => [ $gz ? ('Accept-Encoding' => 'gzip') : () ]);
                my $want = $exp->{$path};
                if (!defined $want) {
                    $bad{"$server->[0] $path: want 404, got " . $res->code}++
                        unless $res->code == 404;
                    next;
                }
                if ($res->code != 200) {
                    $bad{"$server->[0] $path: " . $res->code}++;
                    next;
                }
                my $got = eval { $JSON->decode(body_of($res)) };
                if (!$got || $JSON->encode($got) ne $JSON->encode($want)) {
                    $bad{"$server->[0] $path" . ($gz ? ' (gzip)' : '')
                         . ': stale or wrong body'}++;
                }
                my $tag = $res->header('ETag') || '';
                $bad{"$server->[0] $path: ETag altered by mod_deflate ($tag)"}++
                    if $tag =~ /-gzip"\z/;
                $tags{$path} ||= $tag if !$gz && $server->[0] eq 'A';
                $bad{"$path: A and B disagree on the ETag"}++
                    if !$gz && $server->[0] eq 'B' && $tags{$path} ne $tag;
            }
        }
    }
    ok !%bad, "$label: both servers serve what the database holds"
        or diag join "\n", sort keys %bad;
    return \%tags;
}

sub moved_ok {
    my ($label, $before, $after, @paths) = @_;
    my @same = grep { defined $before->{$_} && defined $after->{$_}
                      && $before->{$_} eq $after->{$_} } @paths;
    ok !@same, "$label: the ETags moved" or diag "unmoved: @same";
}

# ---- set-up: a known catalogue, both caches warm
my @ids = seed(
    { level_id => 1, title => 'Hallo', sort_order => 1 },
    { level_id => 2, title => 'Perfekt', sort_order => 1 },
    { level_id => 3, title => 'Nebensätze', sort_order => 2, description => 'x' x 1500 },
    { level_id => 4, title => 'Passiv', sort_order => 1 },
    { level_id => 5, title => 'Nominalstil', sort_order => 1 },
    { level_id => 1, title => 'Zahlen', sort_order => 2, description => 'y' x 1500 },
);
my $t0 = check_all('warm');
my $t1 = check_all('warm, again');
is_deeply $t1, $t0, 'nothing changed: the ETags stay';

# a conditional GET revalidates on both servers, plain and gzip
for my $server ([A => $A], [B => $B]) {
    for my $gz (0, 1) {
        my @ae = $gz ? ('Accept-Encoding' => 'gzip') : ();
        my $res = call(GET => '/api/lessons', base => $server->[1], headers => [@ae]);
        my $tag = $res->header('ETag');
        is $res->header('Content-Encoding') || '', $gz ? 'gzip' : '',
            "$server->[0] gzip=$gz: the encoding asked for";
        my $again = call(GET => '/api/lessons', base => $server->[1],
                         headers => [@ae, 'If-None-Match' => $tag]);
        is $again->code, 304, "$server->[0] gzip=$gz: If-None-Match answers 304";
        is $again->content, '', "$server->[0] gzip=$gz: 304 has no body";
        is $again->header('ETag'), $tag, "$server->[0] gzip=$gz: 304 carries the ETag";
    }
}

# ---- a create through A
my $res = call(POST => '/api/lessons', base => $A,
               json => { levelId => 2, title => 'Neu über A', order => 9 });
is $res->code, 201, 'create through A';
my $t2 = check_all('create through A');
moved_ok('create through A', $t0, $t2, '/api/lessons', '/api/lessons/beginner',
         '/api/lessons/level/2');

# ---- an update through B, with If-Match from A
my $item = call(GET => "/api/lessons/$ids[1]", base => $A);
$res = call(PUT => "/api/lessons/$ids[1]", base => $B,
            json => { title => 'Perfekt, über B geändert' },
            headers => [ 'If-Match' => $item->header('ETag') ]);
is $res->code, 200, 'update through B with If-Match from A';
my $t3 = check_all('update through B');
moved_ok('update through B', $t2, $t3, '/api/lessons', "/api/lessons/$ids[1]",
         '/api/lessons/level/2', '/api/lessons/beginner');
is $t3->{"/api/lessons/$ids[0]"}, $t2->{"/api/lessons/$ids[0]"},
    "another lesson's ETag stays";

# the old tag no longer matches, on either server
for my $server ($A, $B) {
    $res = call(PUT => "/api/lessons/$ids[1]", base => $server,
                json => { title => 'Überschrieben' },
                headers => [ 'If-Match' => $item->header('ETag') ]);
    is_problem($res, 412, 'a stale If-Match');
}
is lesson_row($ids[1])->{title}, 'Perfekt, über B geändert', '412 changed nothing';

# ---- a delete through A
$res = call(DELETE => "/api/lessons/$ids[3]", base => $A);
is $res->code, 204, 'delete through A';
my $t4 = check_all('delete through A', "/api/lessons/$ids[3]");
moved_ok('delete through A', $t3, $t4, '/api/lessons', '/api/lessons/advanced',
         '/api/lessons/level/4');

# ---- a lesson changed straight through SQL
db_do("UPDATE lessons SET title = 'Per SQL geändert' WHERE id = $ids[0]");
my $t5 = check_all('UPDATE of a lesson through SQL');
moved_ok('UPDATE of a lesson through SQL', $t4, $t5, '/api/lessons',
         "/api/lessons/$ids[0]", '/api/lessons/beginner', '/api/lessons/level/1');

# ---- a level renamed straight through SQL: in every lesson of it
db_do("UPDATE levels SET name = 'Anfänger' WHERE id = 1");
my $t6 = check_all('level renamed through SQL');
moved_ok('level renamed through SQL', $t5, $t6, '/api/lessons',
         "/api/lessons/$ids[0]", "/api/lessons/$ids[5]", '/api/lessons/level/1');
is $t6->{"/api/lessons/$ids[2]"}, $t5->{"/api/lessons/$ids[2]"},
    "a lesson of another level keeps its ETag";
db_do("UPDATE levels SET name = 'Beginner' WHERE id = 1");
check_all('level name restored');

# ---- many distinct lessons: B's cache stays within LessonsCacheSize, and
# every answer is still right
{
    my @many = seed(map { { level_id => 1 + $_ % 6, title => "Viele $_",
                            sort_order => $_, description => "z$_ " x 300 } } 1 .. 120);
    my $exp = expected();
    my $wrong = 0;
    for my $pass (1, 2) {
        for my $id (@many) {
            my $res = call(GET => "/api/lessons/$id", base => $B);
            my $got = eval { $JSON->decode(body_of($res)) };
            $wrong++ unless $res->code == 200 && $got
                && $JSON->encode($got) eq $JSON->encode($exp->{"/api/lessons/$id"});
        }
    }
    is $wrong, 0, 'many distinct lessons through a small cache: every answer right';
    open my $log, '<', "$dir/error_log" or die "$dir/error_log: $!";
    my ($lines, $max, $evicted) = (0, 0, 0);
    while (<$log>) {
        next unless /LESSONS00601: cache: (\d+) entries, (\d+) bytes, (\d+) evictions/;
        $lines++;
        $max = $2 if $2 > $max;
        $evicted = $3 if $3 > $evicted;
    }
    ok $lines > 0, 'B logged its cache at trace1';
    cmp_ok $max, '<=', $cache_size, "B's cache never held more than LessonsCacheSize ($max bytes)";
    cmp_ok $evicted, '>', 0, 'it evicted to stay within it';
}

# ---- no token, no answer: not even a 304
$res = call(GET => '/api/lessons', base => $B, token => undef,
            headers => [ 'If-None-Match' => $t6->{'/api/lessons'} ]);
is $res->code, 401, 'If-None-Match without a token: 401';
is $res->header('ETag'), undef, '... and no ETag';

done_testing();
