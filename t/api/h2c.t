# HTTP/2 (issue 18): the eight operations over h2c (mod_http2, clear
# text, prior knowledge: curl --http2-prior-knowledge), each checked for
# the protocol really used, status, headers, body and the database after
# it; and over HTTP/2 too, a request without a token is refused with the
# Bearer challenge and a bad body with a problem, changing nothing.
use strict;
use warnings FATAL => 'all';
use utf8;

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp qw(tempdir);
use JSON::PP;
use LessonsTest;

plan skip_all => 'curl not installed' unless grep { -x "$_/curl" } split /:/, $ENV{PATH};

my $JSON = JSON::PP->new->utf8;
my $dir = tempdir(DIR => $ENV{LESSONS_TEST_TMPDIR} || '/tmp', CLEANUP => 1);
my $base = base_url();
my $token = good_token();

# h2($method, $path, %opt): {version, status, headers (lower-case
# names), body} of one request over h2c.  opt: token (undef: none),
# json (a body), headers (more, as [name, value] pairs).
sub h2 {
    my ($method, $path, %o) = @_;
    my @cmd = ('curl', '-s', '--http2-prior-knowledge', '-X', $method,
               '-D', "$dir/head", '-o', "$dir/body", '-w', '%{http_version}',
               '--max-time', '30');
    my $t = exists $o{token} ? $o{token} : $token;
    push @cmd, '-H', "Authorization: Bearer $t" if defined $t;
    if (defined $o{json}) {
        push @cmd, '-H', 'Content-Type: application/json',
                   '--data-binary', ref $o{json} ? $JSON->encode($o{json}) : $o{json};
    }
    push @cmd, '-H', "$_->[0]: $_->[1]" for @{ $o{headers} || [] };
    open my $p, '-|', @cmd, "$base$path" or die "curl: $!";
    my $version = <$p> // '';
    close $p;
    my %h;
    my $status = 0;
    open my $fh, '<', "$dir/head" or return { version => $version, status => 0 };
    while (my $l = <$fh>) {
        $l =~ s/\r?\n\z//;
        if ($l =~ m{^HTTP/\S+ (\d{3})}) { $status = $1; %h = () }
        elsif ($l =~ /^([^:]+):\s*(.*)$/) { $h{ lc $1 } = $2 }
    }
    my $body = do { local (@ARGV, $/) = ("$dir/body"); <> } // '';
    return { version => $version, status => $status, headers => \%h, body => $body };
}

sub json_body { my $b = $_[0]{body}; length $b ? eval { $JSON->decode($b) } : undef }

my @ids = seed(
    { level_id => 1, title => 'Zweispurig', sort_order => 1 },
    { level_id => 4, title => 'Strom', sort_order => 2 },
    { level_id => 3, title => 'Mitte', sort_order => 3 },
);

# ---- the eight operations
my $r = h2(GET => '/api/lessons');
is $r->{version}, '2', 'list all: HTTP/2';
is $r->{status}, 200, 'list all: 200';
like $r->{headers}{'content-type'} // '', qr{^application/json}, 'list all: JSON';
ok $r->{headers}{etag}, 'list all: an ETag';
is scalar @{ json_body($r) || [] }, 3, 'list all: the three lessons';

$r = h2(GET => "/api/lessons/$ids[0]");
is $r->{status}, 200, 'get by id: 200';
is json_body($r)->{title}, 'Zweispurig', 'get by id: the lesson';
my $tag = $r->{headers}{etag};
is h2(GET => "/api/lessons/$ids[0]", headers => [[ 'If-None-Match' => $tag ]])->{status},
    304, 'get by id: If-None-Match over h2 gives 304';

$r = h2(GET => '/api/lessons/beginner');
is $r->{status}, 200, 'beginner: 200';
is_deeply [ map { $_->{title} } @{ json_body($r) || [] } ], ['Zweispurig'], 'beginner: levels 1 and 2';

$r = h2(GET => '/api/lessons/advanced');
is $r->{status}, 200, 'advanced: 200';
is_deeply [ map { $_->{title} } @{ json_body($r) || [] } ], ['Strom'], 'advanced: levels 4 and 5';

$r = h2(GET => '/api/lessons/level/3');
is $r->{status}, 200, 'by level: 200';
is_deeply [ map { $_->{title} } @{ json_body($r) || [] } ], ['Mitte'], 'by level: level 3';

$r = h2(POST => '/api/lessons', json => { levelId => 2, title => 'Über h2', order => 4 });
is $r->{status}, 201, 'create: 201';
my $new = json_body($r) || {};
like $r->{headers}{location} // '', qr{/api/lessons/\Q$new->{id}\E\z}, 'create: Location';
is db_rows('SELECT title FROM lessons WHERE id = ' . ($new->{id} + 0))->[0]{title},
    'Über h2', 'create: stored';

$r = h2(PUT => "/api/lessons/$new->{id}", json => { title => 'Geändert über h2' },
        headers => [[ 'If-Match' => $r->{headers}{etag} // '*' ]]);
is $r->{status}, 200, 'update: 200';
is json_body($r)->{title}, 'Geändert über h2', 'update: the stored lesson answered';
is db_rows('SELECT title FROM lessons WHERE id = ' . ($new->{id} + 0))->[0]{title},
    'Geändert über h2', 'update: stored';

$r = h2(DELETE => "/api/lessons/$new->{id}");
is $r->{status}, 204, 'delete: 204';
is $r->{body}, '', 'delete: no body';
is db_count(), 3, 'delete: gone';

# ---- refusals over h2
my $before = db_lessons();
$r = h2(GET => '/api/lessons', token => undef);
is $r->{status}, 401, 'no token over h2: 401';
is $r->{headers}{'www-authenticate'}, 'Bearer realm="lessons"', 'no token over h2: the challenge';
like $r->{headers}{'content-type'} // '', qr{^application/problem\+json}, 'no token over h2: a problem';
# Refused before its body is read: the module reads a small body first,
# else mod_http2 resets the stream after the answer (RFC 9113 8.1) and
# curl 7.88 loses the answer (about one time in four): asked 20 times.
my @no401 = grep { $_ != 401 }
            map { h2(POST => '/api/lessons', token => undef,
                     json => { levelId => 1, title => 'Ohne', order => 1 })->{status} } 1 .. 20;
is scalar @no401, 0, 'POST without a token over h2: 401, 20 times out of 20'
    or diag "answers: @no401";
# The same, its body held back for 100 Continue: without the read first,
# every one of these lost its answer.
$r = h2(POST => '/api/lessons', token => undef, json => { levelId => 1, title => 'Ohne', order => 1 },
        headers => [[ Expect => '100-continue' ]]);
is $r->{status}, 401, 'POST without a token over h2, its body awaiting 100 Continue: 401';
$r = h2(POST => '/api/lessons', json => '{"levelId": 1, "title": ');
is $r->{status}, 400, 'a broken body over h2: 400';
like $r->{headers}{'content-type'} // '', qr{^application/problem\+json}, 'a broken body over h2: a problem';
$r = h2(PUT => "/api/lessons/$ids[0]", json => { title => 'Veraltet' },
        headers => [[ 'If-Match' => '"L1.1.0000"' ]]);
is $r->{status}, 412, 'a stale If-Match over h2: 412';
is_deeply db_lessons(), $before, 'the refusals changed nothing';

done_testing;
