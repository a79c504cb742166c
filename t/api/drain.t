# Refusals cost the server nothing (issue 40 §5): over HTTP/2 the gate
# reads a refused request's body before answering (else mod_http2 resets
# the stream and curl loses the 401, t/api/h2c.t), and it must drop it
# as it comes, never hold it.  One child (event MPM, one process) with
# LessonsMaxBodySize 16 MiB gets, after small ones, an h2c POST of 8 MiB
# without a token, then ten at once, twice: every one is answered 401
# with the Bearer challenge, and the child's resident size and its peak
# (VmHWM) grow by less than 24 MiB over them.  Measured: +6.8 MiB at the
# peak; when the body was gathered, +85 MiB.  Skipped under the
# sanitizers (their quarantine keeps freed memory on purpose).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp qw(tempdir);
use Time::HiRes qw(sleep);
use LessonsTest;

plan skip_all => 'under the sanitizers: their quarantine keeps freed memory'
    if $ENV{LESSONS_TEST_SANITIZE};
plan skip_all => 'curl not installed' unless grep { -x "$_/curl" } split /:/, $ENV{PATH};

my $mods = $ENV{LESSONS_TEST_HTTPD_MODULES} || '/usr/lib/apache2/modules';
my $MiB  = 1024 * 1024;
my $dir  = tempdir(DIR => $ENV{LESSONS_TEST_TMPDIR} || '/tmp', CLEANUP => 1);
my $port = free_port();
my $conf = httpd_conf($dir, $port, <<"EOF");
LoadModule http2_module "$mods/mod_http2.so"
Protocols h2c http/1.1
@{[ one_process_conf(16) ]}MaxConnectionsPerChild 0
LogLevel info
<Location "/api/lessons">
    SetHandler lessons
    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"
    LessonsMaxBodySize 16777216
</Location>
EOF
my $ppid = start_httpd($conf, $port);

my @kids = child_pids($ppid);
is scalar @kids, 1, 'one child process';
my $child = $kids[0];

# VmRSS and VmHWM (its peak) of the child, in KiB.
sub mem_kb {
    my %m = (VmRSS => 0, VmHWM => 0);
    open my $fh, '<', "/proc/$child/status" or return \%m;
    while (<$fh>) { $m{$1} = $2 if /^(VmRSS|VmHWM):\s+(\d+)/ }
    return \%m;
}

# An 8 MiB body: a JSON string the API would take, were it allowed to.
my $body = "$dir/body.json";
{
    open my $fh, '>', $body or die "$body: $!";
    print $fh '{"levelId":1,"order":1,"title":"', 'x' x (8 * $MiB - 40), '"}';
    close $fh or die "$body: $!";
}

# $n POSTs of the body (default the 8 MiB one) over h2c at once, without
# a token: their status lines and WWW-Authenticate headers.
sub posts {
    my ($n, $file) = @_;
    $file //= $body;
    my @pids;
    for my $i (1 .. $n) {
        my $pid = fork // die "fork: $!";
        if (!$pid) {
            exec 'curl', '-s', '--http2-prior-knowledge', '--max-time', '60',
                '-D', "$dir/head.$i", '-o', '/dev/null',
                '-H', 'Content-Type: application/json',
                '--data-binary', "\@$file", "http://127.0.0.1:$port/api/lessons";
            exit 127;
        }
        push @pids, $pid;
    }
    waitpid $_, 0 for @pids;
    my @got;
    for my $i (1 .. $n) {
        my ($status, $challenge) = ('none', '');
        if (open my $fh, '<', "$dir/head.$i") {
            while (my $l = <$fh>) {
                $l =~ s/\r?\n\z//;
                $status = $1 if $l =~ m{^HTTP/2 (\d{3})};
                $challenge = $1 if $l =~ /^www-authenticate:\s*(.*)$/i;
            }
        }
        unlink "$dir/head.$i";
        push @got, [ $status, $challenge ];
    }
    return @got;
}

# First small ones: what a child takes once (its threads, mod_http2's
# pools), the drain included.
my $small = "$dir/small.json";
{
    open my $fh, '>', $small or die "$small: $!";
    print $fh '{"levelId":1,"order":1,"title":"klein"}';
    close $fh or die "$small: $!";
}
my @warm = posts(10, $small);
is scalar(grep { $_->[0] eq '401' } @warm), 10, 'ten small POSTs without a token over h2c: 401';
sleep 0.5;
my $start = mem_kb();
my @got = (posts(1), posts(10), posts(10));
sleep 0.5;
my $end = mem_kb();
is scalar(grep { $_->[0] eq '401' } @got), 21, 'twenty-one 8 MiB POSTs without a token over h2c: 401'
    or diag explain \@got;
is scalar(grep { $_->[1] eq 'Bearer realm="lessons"' } @got), 21, '... each with the Bearer challenge';
my ($rss, $peak) = map { ($end->{$_} - $start->{$_}) / 1024 } qw(VmRSS VmHWM);
diag sprintf 'child %d: VmRSS %d -> %d KiB (%+.1f MiB), VmHWM %d -> %d KiB (%+.1f MiB)',
    $child, $start->{VmRSS}, $end->{VmRSS}, $rss, $start->{VmHWM}, $end->{VmHWM}, $peak;
ok $start->{VmRSS} > 0, 'the child\'s memory can be read';
cmp_ok $rss, '<', 24, 'the child\'s resident size grew by less than 24 MiB';
cmp_ok $peak, '<', 24, '... and so did its peak: no body was held';
ok kill(0, $child), 'the same child answered throughout';

done_testing;
