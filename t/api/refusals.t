# The refusals' summary (issue 57 §3): at Debian's LogLevel warn each
# refused token's own line (info) is hidden, so an admin whose every
# client gets "wrong audience" saw nothing.  Now each section that makes
# a token needed gets one warn line a minute at most, from httpd's
# parent, summing up its refusals by reason (largest first), with the
# audience it expected; in the error log of the section's server.
#
# A server of its own at LogLevel warn: refused tokens to three of the
# main server's sections and to a section of each of two virtual hosts
# (the same <Location> in both; one with an ErrorLog of its own), and
# requests without a token (not summed up) to another.  One section's
# refusals span two graceful restarts, the second of which adds a
# section above the others (their rows are made anew, by what they are,
# not where): its line counts every refusal once.  Then, within a
# minute and a half, exactly one line per section that refused a token,
# none for the others, and no per-request line.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use Time::HiRes qw(time sleep);
use LessonsTest;

# A server of its own whose database no request reaches: once, on SQLite
# (a minute and a half of waiting for the parent's lines, which the
# PostgreSQL run, the longer, would add to CI).
plan skip_all => 'no database involved: run on SQLite'
    unless LessonsTest::db_driver() eq 'sqlite3';

my $dir = File::Temp->newdir(CLEANUP => !$ENV{LESSONS_TEST_KEEP});
my %seen;
my ($pa, $pb, $pc) = map { my $p; do { $p = free_port() } while $seen{$p}++; $p } 1 .. 3;

sub section {
    my ($path, $audience) = @_;
    return api_location($path, $audience ? "LessonsJWTAudience $audience" : ());
}

# $added: a section above all the others (the second reload).
sub write_conf {
    my ($added) = @_;
    return httpd_conf($dir, $pa, <<"EOF");
@{[ $added ? section('/added/api/lessons', 'added-api') : '' ]}LogLevel warn
Listen 127.0.0.1:$pb
Listen 127.0.0.1:$pc
StartServers 2
ServerLimit 4
ThreadsPerChild 4
MinSpareThreads 4
MaxSpareThreads 16
MaxRequestWorkers 16
@{[ section('/aud/api/lessons', 'lessons-api') ]}@{[ section('/quiet/api/lessons') ]}@{[ section('/reload/api/lessons') ]}
<VirtualHost 127.0.0.1:$pb>
    ServerName b.example
    ErrorLog "$dir/error_b.log"
@{[ section('/api/lessons', 'b-api') ]}</VirtualHost>
<VirtualHost 127.0.0.1:$pc>
    ServerName c.example
@{[ section('/api/lessons', 'c-api') ]}</VirtualHost>
EOF
}

my $conf = write_conf(0);
my $pid = start_httpd($conf, $pa);
wait_port($_) or BAIL_OUT("httpd does not listen on $_") for $pb, $pc;

my %url = (a => "http://127.0.0.1:$pa", b => "http://127.0.0.1:$pb",
           c => "http://127.0.0.1:$pc");
my $forged = token(key => 'not the server secret, but long enough');
sub expired { good_token(claims => { aud => $_[0], iat => time - 7200, exp => time - 3600 }) }
sub for_aud { good_token(claims => { aud => $_[0] }) }

# Each refused as it should be: 401.
sub refused {
    my ($what, $server, $path, $token, $n) = @_;
    for my $i (1 .. $n) {
        my $res = call(GET => $path, base => $url{$server}, token => $token);
        is $res->code, 401, "$what ($i of $n): 401";
    }
}

# After a graceful restart: the new generation answers.
sub graceful {
    my ($what) = @_;
    sleep 0.5;                  # the requests before it are logged
    system(LessonsTest::httpd_bin(), '-f', $conf, '-k', 'graceful') == 0
        or BAIL_OUT("httpd -k graceful failed");
    my $code = 0;
    for (1 .. 100) {
        $code = call(GET => '/quiet/api/lessons', base => $url{a},
                     token => undef)->code;
        last if $code == 401;
        sleep 0.1;
    }
    is $code, 401, "$what: the server answers again";
}

my $t0 = time;
refused('/aud: another audience', a => '/aud/api/lessons', for_aud('other-api'), 5);
refused('/aud: expired', a => '/aud/api/lessons', expired('lessons-api'), 2);
refused('/quiet: no token', a => '/quiet/api/lessons', undef, 3);
refused('b: another audience', b => '/api/lessons', for_aud('lessons-api'), 3);
refused('c: expired', c => '/api/lessons', expired('c-api'), 1);
refused('/reload: bad signature', a => '/reload/api/lessons', $forged, 2);
graceful('a graceful restart, the same sections');
refused('/reload: bad signature, after it', a => '/reload/api/lessons', $forged, 1);
$conf = write_conf(1);
graceful('a graceful restart, one section more, above the others');
refused('/reload: bad signature, after that', a => '/reload/api/lessons', $forged, 1);

sub lines_of {
    my ($file) = @_;
    open my $fh, '<', $file or return ();
    return grep { /LESSONS00602/ } <$fh>;
}

# The lines come 60 to 70 s after each section's first refusal (the
# parent looks every ten seconds); then one more look, for a second.
my @want = (qr{by <Location "/aud/api/lessons">}, qr{by <Location "/reload/api/lessons">},
            qr{virtual host c\.example});
my (@main, @b);
while (time - $t0 < 110) {
    @main = lines_of("$dir/error_log");
    @b = lines_of("$dir/error_b.log");
    my $all = @b && !grep { my $re = $_; !grep { $_ =~ $re } @main } @want;
    last if $all;
    sleep 2;
}
diag sprintf 'the lines came after %.0f s', time - $t0;
sleep 11;
@main = lines_of("$dir/error_log");
@b = lines_of("$dir/error_b.log");
diag "main error_log:\n", @main, "b's error_log:\n", @b;

# Exactly one line with these words, whose span is about a minute.
sub one_line {
    my ($name, $lines, $re) = @_;
    my @hits = grep { $_ =~ $re } @$lines;
    is scalar(@hits), 1, "$name: exactly one line" or return;
    like $hits[0], qr/\] \[lessons:warn\] \[pid $pid(?::tid \d+)?\] LESSONS00602: /,
        "$name: at warn, from the parent ($pid), tagged";
    my ($secs) = $hits[0] =~ /in the last (\d+) seconds/;
    ok defined $secs && $secs >= 60 && $secs <= 80,
        "$name: over the last minute (" . ($secs // '?') . ' s)';
}

one_line('/aud', \@main, qr{: 7 tokens refused in the last \d+ seconds by <Location "/aud/api/lessons"> \(\Q$conf\E:\d+\), the main server: 5 wrong audience \(expected lessons-api\), 2 expired$});
one_line('/reload, across two graceful restarts', \@main,
         qr{: 4 tokens refused in the last \d+ seconds by <Location "/reload/api/lessons"> \(\Q$conf\E:\d+\), the main server: 4 bad signature$});
one_line('virtual host c, in the main error_log', \@main,
         qr{: 1 token refused in the last \d+ seconds by <Location "/api/lessons"> \(\Q$conf\E:\d+\), virtual host c\.example:\Q$pc\E \(\Q$conf\E:\d+\): 1 expired$});
one_line('virtual host b, in its own error_log', \@b,
         qr{: 3 tokens refused in the last \d+ seconds by <Location "/api/lessons"> \(\Q$conf\E:\d+\), virtual host b\.example:\Q$pb\E \(\Q$conf\E:\d+\): 3 wrong audience \(expected b-api\)$});
is scalar(@main), 3, 'the main error_log: no other summary line';
is scalar(@b), 1, "b's error_log: no other summary line";
ok !(grep { /quiet|added/ } @main), 'no line for the sections that refused no token';

# At warn, no line of any single refusal (LESSONS00202, 00204: info).
for my $file ("$dir/error_log", "$dir/error_b.log") {
    open my $fh, '<', $file or die "$file: $!";
    my @per = grep { /LESSONS002\d\d/ } <$fh>;
    is scalar(@per), 0, "$file: no per-request line at warn"
        or diag @per;
}

done_testing;
