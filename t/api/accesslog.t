# r->user is the token's sub, so the access log shows who did what
# (extra.conf.in: LogFormat "%u %m %U %>s" lessonsfmt).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use Apache::TestUtil qw(t_catfile);
use LessonsTest;

my ($id) = seed({ level_id => 1, title => 'Protokoll', sort_order => 1 });
my $log = t_catfile(Apache::Test::vars('t_logs'), 'lessons_access.log');
# This file's lines of the shared log only (files run before it log
# refused requests of their own, such as a 401 on /api/lessons).
my $log_from = -s $log || 0;

# A unique subject per run, so lines of earlier requests cannot match.
my $sub = 'log-user-' . $$ . '-' . time;

is call(GET => "/api/lessons/$id", token => token(claims => { sub => $sub }))->code,
    200, 'GET as the subject';
my $res = call(POST => '/api/lessons', token => token(claims => { sub => "$sub-w" }),
               json => { levelId => 1, title => 'Neu', order => 2 });
is $res->code, 201, 'POST as another subject';
is call(GET => '/api/lessons', token => token(alg => 'HS256',
        claims => { sub => "$sub-bad", exp => time - 3600 }))->code,
    401, 'an expired token';

ok wait_for_line(qr/^\Q$sub\E GET \/api\/lessons\/$id 200$/),
    'access log: sub as %u for the GET';
ok wait_for_line(qr/^\Q$sub\E-w POST \/api\/lessons 201$/),
    'access log: sub as %u for the POST';
ok wait_for_line(qr/^- GET \/api\/lessons 401$/),
    'access log: a refused request has no user';
ok !grep({ /\Q$sub\E-bad/ } lines()), 'a refused token\'s sub is never logged';

sub lines {
    open my $fh, '<', $log or return ();
    seek $fh, $log_from, 0 or return ();
    chomp(my @l = <$fh>);
    return @l;
}

# The log line is written after the response is sent: poll for it
# (a bound on waiting, not a timing assumption).
sub wait_for_line {
    my ($re) = @_;
    for (1 .. 100) {
        return 1 if grep { $_ =~ $re } lines();
        select undef, undef, undef, 0.1;
    }
    diag "no line matching $re in $log; last lines:\n"
        . join("\n", (lines())[-5 .. -1]);
    return 0;
}

done_testing;
