# Read-your-writes under concurrent reads (issue 19): on PostgreSQL the
# threads of a process share the catalog version's reads (lessons_flight),
# each taking only a read sent after its request arrived.  So a GET that
# starts after a write was answered must show that write, however many
# GETs share reads around it.
#
# A server of this test's own (event, 2 processes of 16 threads); one
# writer renames a lesson "rN" with N counting up, through it or straight
# through SQL (as another server would), 100 times; 24 readers GET the
# lesson and the level's list on kept-alive connections meanwhile.  Every read
# that began after write N was answered must show N or later, and no
# read may show a name that was never written.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use HTTP::Tiny;
use JSON::PP;
use POSIX qw(_exit);
use Time::HiRes qw(time sleep);
use LessonsTest;

my $READERS = 24;
my $WRITES  = 100;
my $dir  = File::Temp->newdir;
my $JSON = JSON::PP->new->utf8->canonical;
my $TOKEN = good_token(claims => { exp => time + 3600 });

my ($id) = seed({ level_id => 2, title => 'r0', sort_order => 1 });

my $port = free_port();
my $conf = httpd_conf("$dir", $port, <<"EOF");
KeepAlive On
MaxKeepAliveRequests 0
StartServers 2
ServerLimit 2
ThreadsPerChild 16
ThreadLimit 16
MaxRequestWorkers 32
@{[ api_location() ]}
EOF
start_httpd($conf, $port);
my $base = "http://127.0.0.1:$port/api/lessons";
my %auth = (Authorization => "Bearer $TOKEN");

# Each reader logs "start<TAB>N" per read (N from the name it saw; -1 for
# a name that was never written, -2 for an answer other than 200).
sub reader {
    my ($n, $log, $stop) = @_;
    my $http = HTTP::Tiny->new(timeout => 30, keep_alive => 1);
    open my $out, '>', $log or die "$log: $!";
    until (-e $stop) {
        my $list = rand() < 0.5;
        my $t0 = time;
        my $res = $http->get($list ? "$base/level/2" : "$base/$id", { headers => \%auth });
        my $seen = -2;
        if ($res->{status} == 200) {
            my $doc = eval { $JSON->decode($res->{content}) };
            my ($item) = $list ? grep { $_->{id} == $id } @{ $doc || [] } : ($doc);
            my $title = $item ? $item->{title} // '' : '';
            $seen = $title =~ /\Ar(\d+)\z/ ? $1 : -1;
        }
        printf $out "%.6f\t%d\t%s\n", $t0, $seen, $list ? 'list' : 'id';
    }
    close $out;
}

my $stop = "$dir/stop";
my @kids;
for my $n (1 .. $READERS) {
    my $pid = fork // die "fork: $!";
    if (!$pid) { reader($n, "$dir/reader-$n.log", $stop); _exit(0) }
    push @kids, $pid;
}

# The writer, here: every tenth write through SQL, as another server's
# (the SQL client takes longer: SQLite's shell waits for the lock).
my $http = HTTP::Tiny->new(timeout => 30, keep_alive => 1);
my (@done, $w);             # $done[N]: when write N was answered
my $bad_writes = 0;
sleep 0.5;
for (1 .. $WRITES) {
    $w++;
    if ($w % 10) {
        my $res = $http->request(PUT => "$base/$id", { headers => { %auth,
            'Content-Type' => 'application/json' }, content => $JSON->encode({ title => "r$w" }) });
        $bad_writes++ unless $res->{status} == 200;
    }
    else {
        db_do("UPDATE lessons SET title = 'r$w' WHERE id = $id");
    }
    $done[$w] = time;
}
sleep 0.2;
open my $s, '>', $stop or die "$stop: $!";
close $s;
waitpid $_, 0 for @kids;

my ($reads, $stale, $never, $other) = (0, 0, 0, 0);
my @examples;
for my $n (1 .. $READERS) {
    open my $fh, '<', "$dir/reader-$n.log" or die "reader $n: $!";
    while (<$fh>) {
        chomp;
        my ($t0, $seen, $what) = split /\t/;
        $reads++;
        if ($seen == -2) { $other++; next }
        if ($seen == -1 || $seen > $w) { $never++; next }
        # the newest write answered before this read began
        my $want = 0;
        for my $k (reverse 1 .. $w) {
            if ($done[$k] < $t0) { $want = $k; last }
        }
        if ($seen < $want) {
            $stale++;
            push @examples, sprintf('%s read at %.6f saw r%d; r%d was answered at %.6f',
                                    $what, $t0, $seen, $want, $done[$want]) if @examples < 5;
        }
    }
}
diag "$w writes, $reads reads by $READERS readers";
is $bad_writes, 0, 'every write through the API answered 200';
ok $reads > 200, "the readers read ($reads)";
is $other, 0, 'every read answered 200';
is $never, 0, 'no read showed a name never written';
is $stale, 0, 'no read that began after a write was answered missed it'
    or diag join "\n", @examples;

done_testing;
