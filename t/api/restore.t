# A database restored in place from a backup while Apache runs (issue
# 18): on PostgreSQL pg_restore --clean of a pg_dump, on SQLite sqlite3's
# .restore.  The restored rows and counters are the backup's, so writes
# after the restore bring a lesson's version and the catalog's counter
# back to numbers that tags from before the restore carry, with other
# content.  No tag and no cached body from before may then pass as
# current, and no graceful restart is needed:
#   - If-None-Match with a tag from before: 200 with what is stored now;
#   - the list, asked again, is what is stored now in every process;
#   - If-Match with a tag from before: 412, nothing written;
#   - the lesson's and the list's tags differ from those before;
#   - no 500: on SQLite the restore expires every pooled connection's
#     prepared statements (apr_dbd_sqlite3 prepares with the legacy
#     interface, which never prepares again), so each connection's next
#     request is a 503 with Retry-After and prepares them afresh; a
#     request here is retried on those, and they are counted.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Basename qw(dirname);
use File::Temp qw(tempdir);
use LessonsTest;
use LessonsTest::Parallel qw(renew_suite_server);

my $DRIVER = LessonsTest::db_driver();
my $tmp = tempdir(DIR => $ENV{LESSONS_TEST_TMPDIR} || '/tmp', CLEANUP => 1);
chmod 0755, $tmp;

sub backup {
    if ($DRIVER eq 'sqlite3') {
        system('sqlite3', LessonsTest::db_name(), ".backup '$tmp/backup.db'") == 0
            or die "sqlite3 .backup failed\n";
        return;
    }
    my $bin = dirname(LessonsTest::env('LESSONS_TEST_PSQL'));
    system("'$bin/pg_dump' -Fc -f '$tmp/backup.dump' '@{[ LessonsTest::db_name() ]}'") == 0
        or die "pg_dump failed\n";
}

sub restore {
    if ($DRIVER eq 'sqlite3') {
        system('sqlite3', LessonsTest::db_name(), ".timeout 20000",
               ".restore '$tmp/backup.db'") == 0 or die "sqlite3 .restore failed\n";
        return;
    }
    my $bin = dirname(LessonsTest::env('LESSONS_TEST_PSQL'));
    system("'$bin/pg_restore' --clean --if-exists --single-transaction"
           . " -d '@{[ LessonsTest::db_name() ]}' '$tmp/backup.dump'") == 0
        or die "pg_restore failed\n";
}

# A request, tried again while it is a 503 with Retry-After (a pooled
# connection preparing afresh after the restore); any other 5xx ends it.
my ($retried, @bad5xx) = (0);
sub ask {
    my @req = @_;
    for (1 .. 64) {
        my $res = call(@req);
        if ($res->code == 503 && $res->header('Retry-After')) {
            $retried++;
            next;
        }
        push @bad5xx, $res->code . " $req[0] $req[1]" if $res->code >= 500;
        return $res;
    }
    die "still 503 after 64 tries: @req[0, 1]\n";
}

# Every process and thread of the suite's server: ask often enough that
# each has cached the list.
sub lists {
    my (%opt) = @_;
    return map { ask(GET => '/api/lessons', %opt) } 1 .. 24;
}

sub put_title {
    my ($id, $title, %opt) = @_;
    return ask(PUT => "/api/lessons/$id", json => { title => $title }, %opt);
}

my ($id) = seed({ level_id => 2, title => 'vor der Sicherung', sort_order => 1 });
my $url = "/api/lessons/$id";

backup();

# After the backup: one update, and its tags.
is put_title($id, 'nach der Sicherung')->code, 200, 'an update after the backup';
my $after = ask(GET => $url);
my $lesson_tag = $after->header('ETag');
ok $lesson_tag, "the lesson's tag after the update: $lesson_tag";
my @l = lists();
is scalar(grep { $_->code == 200 && $_->content =~ /nach der Sicherung/ } @l), scalar @l,
    'the list shows the update in every answer';
my $list_tag = $l[0]->header('ETag');

restore();
is lesson_row($id)->{title}, 'vor der Sicherung', 'the restore brought the backup back';

# The same number of writes as before: the same version and counter.
my $res = put_title($id, 'nach der Wiederherstellung', headers => [ 'If-Match' => $lesson_tag ]);
is $res->code, 412, 'If-Match with a tag from before the restore: 412';
is lesson_row($id)->{title}, 'vor der Sicherung', '... and nothing written';
is put_title($id, 'nach der Wiederherstellung')->code, 200, 'the same update after the restore';

$res = ask(GET => $url, headers => [ 'If-None-Match' => $lesson_tag ]);
is $res->code, 200, 'If-None-Match with the lesson\'s tag from before the restore: 200';
like $res->content, qr/nach der Wiederherstellung/, '... with what is stored now';
isnt $res->header('ETag'), $lesson_tag, '... under another tag';

@l = lists(headers => [ 'If-None-Match' => $list_tag ]);
is scalar(grep { $_->code == 200 } @l), scalar @l,
    'If-None-Match with the list\'s tag from before the restore: 200 in every answer';
@l = lists();
my @stale = grep { $_->content !~ /nach der Wiederherstellung/ } @l;
is scalar @stale, 0, 'no process serves the list it cached before the restore';
isnt $l[0]->header('ETag'), $list_tag, "the list's tag differs from before";
is scalar @bad5xx, 0, 'no 5xx but 503 with Retry-After after the restore'
    or diag join "\n", @bad5xx;
diag "$DRIVER: $retried requests answered 503 with Retry-After after the restore";
ok $DRIVER eq 'sqlite3' || $retried == 0, '... and none on PostgreSQL';

db_do("DELETE FROM lessons WHERE id = $id");
# Connections of the suite's server this test did not reach would give
# the next test files their one 503 each: fresh ones instead.
ok defined renew_suite_server(), "the suite's server, restarted gracefully, answers again";
done_testing;
