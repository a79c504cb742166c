# Databases an admin can get wrong (issue 11 item 3), each answered as
# what it is and logged once with what to do:
#   no schema                      500 (trying again will not help)
#   SQLite file read-only          writes 503, reads 200
#   SQLite directory read-only     writes 503 (no journal can be made)
#   SQLite disk full               writes 503, nothing half written
#   SQLite file replaced           writes 503, nothing lost
#   SQLite file missing (URI form) 503, and no empty file is created
use strict;
use warnings FATAL => 'all';
use utf8;

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Copy ();
use LessonsTest;

my $sqlite = $ENV{LESSONS_TEST_DRIVER} eq 'sqlite3';
my $error_log = Apache::Test::vars('t_logs') . '/error_log';
my $work = $ENV{LESSONS_TEST_WORK};

sub log_size { -s $error_log || 0 }

# The lines the module logged since $from.
sub logged_since {
    my ($from) = @_;
    open my $fh, '<', $error_log or die "$error_log: $!";
    seek $fh, $from, 0;
    local $/;
    my $text = <$fh> // '';
    return join '', grep { /\[lessons:/ } split /^/m, $text;
}

sub post {
    my ($vhost, $title, %o) = @_;
    return call(POST => '/api/lessons', vhost => $vhost,
                json => { levelId => 1, title => $title, order => 7, %o });
}

sub sqlite_rows {
    my ($file) = @_;
    my $out = `sqlite3 -batch '$file' 'SELECT count(*) FROM lessons' 2>&1`;
    chomp $out;
    return $out;
}

# ---- no schema: 500, and the log names the database and the file to load
{
    my $from = log_size();
    for my $path ('/api/lessons', '/api/lessons/1') {
        my $res = call(GET => $path, vhost => 'lessons_noschema');
        is_problem($res, 500, "no schema: GET $path");
        ok !defined $res->header('Retry-After'), "no schema: GET $path no Retry-After";
    }
    is_problem(post('lessons_noschema', 'Ohne Schema'), 500, 'no schema: POST');
    my $log = logged_since($from);
    like $log, qr/has no lessons schema \(load sql\/schema\.(sqlite|pgsql)\.sql/,
        'no schema: the log names the file to load';
    like $log, $sqlite ? qr/noschema\.db/ : qr/lessons_noschema/,
        'no schema: the log names the database';
}

SKIP: {
    skip 'SQLite file faults', 30 unless $sqlite;

    # ---- read-only file: reads work, writes 503 naming file and permission
    my $rofile = "$work/db/rofile.db";
    my $before = sqlite_rows($rofile);
    is call(GET => '/api/lessons', vhost => 'lessons_rofile')->code, 200,
        'read-only file: GET 200';
    my $from = log_size();
    my $res = post('lessons_rofile', 'Schreibgeschützt');
    is_problem($res, 503, 'read-only file: POST');
    like $res->header('Retry-After') // '', qr/\A\d+\z/, 'read-only file: Retry-After';
    is_problem(call(DELETE => '/api/lessons/1', vhost => 'lessons_rofile'), 503,
               'read-only file: DELETE');
    like logged_since($from), qr/permission on the file \Q$rofile\E/,
        'read-only file: the log names the file and the permission';
    is sqlite_rows($rofile), $before, 'read-only file: nothing written';

    # ---- read-only directory: no journal can be made
    my $rodir = "$work/db/rodir";
    $before = sqlite_rows("$rodir/lessons.db");
    $from = log_size();
    is_problem(post('lessons_rodir', 'Verzeichnis'), 503, 'read-only directory: POST');
    like logged_since($from), qr/write permission on the directory \Q$rodir\E/,
        'read-only directory: the log names the directory';
    is sqlite_rows("$rodir/lessons.db"), $before, 'read-only directory: nothing written';

    # ---- disk full (max_page_count at the file's size)
    my $full = "$work/db/full.db";
    $before = sqlite_rows($full);
    $from = log_size();
    $res = post('lessons_full', 'Voll', description => 'x' x 4000);
    is_problem($res, 503, 'disk full: POST');
    like logged_since($from), qr/full/i, 'disk full: logged';
    is sqlite_rows($full), $before, 'disk full: nothing written';
    is `sqlite3 -batch '$full' 'PRAGMA integrity_check'`, "ok\n",
        'disk full: the database is intact';
    is call(GET => '/api/lessons', vhost => 'lessons_full')->code, 200,
        'disk full: reads still work';

    # ---- the file replaced while the server runs: its open connections
    # would write into the unlinked file, acknowledged and lost
    my $moved = "$work/db/moved.db";
    is call(GET => '/api/lessons', vhost => 'lessons_moved')->code, 200,
        'moved: GET before the move';
    rename $moved, "$moved.old" or die "rename: $!";
    File::Copy::copy("$moved.old", $moved) or die "copy: $!";
    my $old_rows = sqlite_rows("$moved.old");
    $from = log_size();
    my (@created, $refused);
    for my $i (1 .. 6) {
        my $r = post('lessons_moved', "Nach dem Umzug $i");
        if ($r->code == 201) { push @created, json_of($r)->{id} }
        else { is_problem($r, 503, "moved: POST $i"); $refused++ }
    }
    ok $refused, 'moved: writes through the old file are refused';
    like logged_since($from), qr/deleted or replaced/, 'moved: logged';
    is sqlite_rows("$moved.old"), $old_rows, 'moved: nothing went into the old file';
    for my $id (@created) {
        my $n = `sqlite3 -batch '$moved' 'SELECT count(*) FROM lessons WHERE id = $id'`;
        is $n, "1\n", "moved: 201 lesson $id is in the current file";
    }

    # ---- a missing file in the URI form (mode=rw): 503, nothing created
    my $missing = "$work/db/missing.db";
    is_problem(call(GET => '/api/lessons', vhost => 'lessons_missing'), 503,
               'missing file: GET');
    is_problem(post('lessons_missing', 'Fehlt'), 503, 'missing file: POST');
    ok !-e $missing, 'missing file: no empty database was created';
}

done_testing;
