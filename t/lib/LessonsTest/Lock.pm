package LessonsTest::Lock;

# A lock on the lessons table held from outside the server, as a
# migration or another writer holds it: on PostgreSQL LOCK TABLE ...
# ACCESS EXCLUSIVE, on SQLite the write lock (BEGIN IMMEDIATE).
#
#   my $lock = hold_lock();     # returns once the lock is really held
#   my $lock = hold_lock('fault');  # on the fault database (which
#                               # refuses updates: the lock alone)
#   my $lock = hold_level_lock(4);  # PostgreSQL: level 4's row FOR
#                               # UPDATE, so a create of a lesson of that
#                               # level waits at its foreign key check,
#                               # after the statements before it in its
#                               # transaction, while new connections
#                               # still prepare theirs (a table lock
#                               # stops a PREPARE of an INSERT too);
#                               # SQLite: hold_lock()
#   release($lock);

use strict;
use warnings;

use Exporter 'import';
use IO::Handle ();
use Time::HiRes qw(sleep);
use LessonsTest qw(db_rows);

our @EXPORT_OK = qw(hold_lock hold_level_lock locked release);

# Hold the lock in a database client of our own until release().
sub hold_lock {
    my ($which) = @_;
    my @cmd = LessonsTest::sql_cmd($which);
    open my $fh, '|-', @cmd or die "cannot start @cmd: $!";
    $fh->autoflush(1);
    if (LessonsTest::db_driver() eq 'pgsql') {
        print $fh "BEGIN;\nLOCK TABLE lessons IN ACCESS EXCLUSIVE MODE;\n";
    }
    else {
        print $fh ".timeout 20000\nBEGIN IMMEDIATE;\n"
            . ($which ? '' : "UPDATE lessons SET sort_order = sort_order;\n");
    }
    # Wait until the lock is really held (a busy machine starts slowly).
    for (1 .. 200) {
        return $fh if locked($which);
        sleep 0.1;
    }
    die "the lock was never taken\n";
}

sub hold_level_lock {
    my ($level) = @_;
    return hold_lock() unless LessonsTest::db_driver() eq 'pgsql';
    $level =~ /\A\d+\z/ or die "hold_level_lock: bad level $level\n";
    my $sql = "SELECT id FROM levels WHERE id = $level FOR UPDATE";
    my @cmd = LessonsTest::sql_cmd();
    open my $fh, '|-', @cmd or die "cannot start @cmd: $!";
    $fh->autoflush(1);
    print $fh "BEGIN;\n$sql;\n";
    for (1 .. 200) {
        return $fh if db_rows("SELECT count(*) AS n FROM pg_stat_activity"
            . " WHERE state = 'idle in transaction' AND query LIKE '%$sql%'")->[0]{n};
        sleep 0.1;
    }
    die "the lock was never taken\n";
}

sub locked {
    my ($which) = @_;
    if (LessonsTest::db_driver() eq 'pgsql') {
        my $rows = db_rows("SELECT count(*) AS n FROM pg_locks l JOIN pg_class c"
            . " ON c.oid = l.relation WHERE c.relname = 'lessons'"
            . " AND l.mode = 'AccessExclusiveLock' AND l.granted", $which);
        return $rows->[0]{n} > 0;
    }
    # A second writer that does not wait fails while the lock is held.
    my @cmd = LessonsTest::sql_cmd($which);
    my $pid = open(my $out, '-|') // die "fork: $!";
    if (!$pid) {
        open STDERR, '>&', \*STDOUT;
        exec @cmd, '.timeout 0', 'BEGIN IMMEDIATE;', 'ROLLBACK;' or exit 99;
    }
    local $/;
    my $text = <$out> // '';
    close $out;
    return $text =~ /locked|busy/i;
}

sub release {
    my ($fh) = @_;
    print $fh "ROLLBACK;\n";
    close $fh;
}

1;
