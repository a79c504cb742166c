# A graceful restart reloads the module, not its libraries.  httpd
# unloads every module at a restart and loads it again; mod_lessons.so's
# libraries (libcurl and the thirty it brings, OpenSSL, cjose, jansson,
# ...) went with it, and the parent spent most of its restart, the time
# no child takes a connection, unmapping, mapping and initialising them
# again.  The module keeps them loaded (mod_lessons_kept.c).
#
# glibc's LD_DEBUG=files says, for each process, which objects it
# initialises and finalises: across three graceful restarts the server's
# parent must finalise none of the kept libraries and initialise none
# again, while mod_lessons.so itself is finalised and initialised once a
# restart (a new build of the module is still what a restart loads).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp qw(tempdir);
use Time::HiRes qw(time sleep);
use LessonsTest;

# What is kept does not depend on the database; SQLite's run holds it.
plan skip_all => 'the same on every database: run on SQLite'
    unless LessonsTest::db_driver() eq 'sqlite3';

my $RESTARTS = 3;
# What the module links (its DT_NEEDED entries), libc aside: a library
# added to the link but not to mod_lessons_kept.c fails here.
my $module = LessonsTest::module_path();
my @KEPT = map { /\[(lib[^.\]]+)\.so/ && $1 ne 'libc' ? $1 : () }
           `readelf -d $module`;
cmp_ok scalar @KEPT, '>=', 6, "the module's libraries, by readelf: @KEPT";

my $dir  = tempdir(DIR => $ENV{LESSONS_TEST_TMPDIR} || '/tmp',
                   CLEANUP => !$ENV{LESSONS_TEST_KEEP});
my $port = free_port();
my $conf = httpd_conf($dir, $port, "LogLevel warn\n" . api_location(), mpm => 'prefork');
my $log  = "$dir/error_log";

# glibc writes each process's lines to $dir/ld.PID of the process it
# started in; the pid at the start of each line is the writer's.
sub objects_of {
    my ($pid, $what) = @_;
    my %n;
    for my $file (glob "$dir/ld.*") {
        open my $fh, '<', $file or next;
        while (my $line = <$fh>) {
            next unless $line =~ m{^\s*(\d+):\s+calling \Q$what\E: (\S+)}
                        && $1 == $pid;
            (my $name = $2) =~ s{.*/}{};
            $name =~ s{\.so.*}{};
            $n{$name}++;
        }
    }
    return \%n;
}

my $pid = do {
    local $ENV{LD_DEBUG}        = 'files';
    local $ENV{LD_DEBUG_OUTPUT} = "$dir/ld";
    start_httpd($conf, $port);
};
# The first generation up before the first signal: a signal while the
# parent is still starting or restarting makes one restart of two.
my $t0 = time;
sleep 0.05 until generations($log) >= 1 || time - $t0 > 60;
my $gens = generations($log);
my $init_before = objects_of($pid, 'init');
for my $i (1 .. $RESTARTS) {
    kill 'USR1', $pid or die "kill USR1 $pid: $!";
    $t0 = time;
    sleep 0.05 until generations($log) > $gens || time - $t0 > 60;
    $gens = generations($log);
}
is $gens, 1 + $RESTARTS, "$RESTARTS graceful restarts, each one up";
my $init = objects_of($pid, 'init');
my $fini = objects_of($pid, 'fini');

# The test's own check: LD_DEBUG saw the module come and go.
is $fini->{mod_lessons} // 0, $RESTARTS,
    "the parent unloaded mod_lessons.so once a restart";
is(($init->{mod_lessons} // 0) - ($init_before->{mod_lessons} // 0), $RESTARTS,
   "and loaded it again once a restart");
for my $lib (@KEPT) {
    is $fini->{$lib} // 0, 0, "the parent kept $lib loaded (finalised 0 times)";
    is(($init->{$lib} // 0) - ($init_before->{$lib} // 0), 0,
       "and did not initialise it again");
}
# Libraries libcurl brought (GnuTLS, Kerberos, LDAP, ...): none unloaded.
my @gone = grep { !/^mod_/ } sort keys %$fini;
is "@gone", '', 'no library of the module finalised by the parent';

done_testing();
