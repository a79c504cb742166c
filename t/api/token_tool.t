# lessons-token (support/lessons-token.c, /usr/bin/lessons-token in the
# package) against the module (issue 43): the tokens it makes are taken
# (HS256 from the suite's secret, RS256 and ES256 from the private keys
# whose public halves the suite's sections have, iss and aud where a
# section requires them), a token of another key is refused 401, and
# `lessons-token check` prints the status and, for a refusal, the reason
# the server sent (the challenge's error and error_description, the
# problem's title and detail), exiting 0 for 2xx only.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use File::Temp ();
use IPC::Open3 qw(open3);
use Symbol qw(gensym);
use LessonsTest;

# integration.sh copies build/lessons-token beside the module.
my $tool = Apache::Test::vars('serverroot') . '/../build/lessons-token';
unless (ok -x $tool, "lessons-token is built ($tool)") {
    done_testing;
    exit 0;
}

# run(args, stdin => TEXT): exit status, standard output, standard error.
sub run {
    my ($args, %o) = @_;
    my $err = gensym;
    my $pid = open3(my $in, my $out, $err, $tool, @$args);
    print $in $o{stdin} if defined $o{stdin};
    close $in;
    my $stdout = do { local $/; <$out> } // '';
    my $stderr = do { local $/; <$err> } // '';
    waitpid $pid, 0;
    return ($? >> 8, $stdout, $stderr);
}

# make's token, or '' (with a diagnostic) when it printed none.
sub made {
    my ($rc, $out, $err) = run([ 'make', @_ ]);
    is $rc, 0, "make @_: exit 0" or diag $err;
    like $out, qr/\A[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\n\z/,
        "make @_: one compact JWS on a line";
    chomp $out;
    return $out;
}

my $dir  = File::Temp->newdir;
my $base = base_url();
my $hs   = $ENV{LESSONS_TEST_HS_KEY};
seed({ level_id => 2, title => 'Werkzeug', sort_order => 1 });

# Another secret, which the server has never seen.
my $wrong = "$dir/wrong.key";
{
    open my $fh, '>', $wrong or die "$wrong: $!";
    print $fh 'f' x 64, "\n";
    close $fh or die "$wrong: $!";
}

# ---- make: the module takes its tokens
{
    my $t = made('--key', $hs);
    my $res = call(GET => '/api/lessons', token => $t);
    is $res->code, 200, 'HS256 token from the secret file: 200';
    is scalar @{ json_of($res) || [] }, 1, 'and the lessons are listed';
}
is call(GET => '/rs/api/lessons',
        token => made('--key', $ENV{LESSONS_TEST_RSA_KEY}))->code, 200,
    'RS256 token (the default for an RSA key) on the RS256 section: 200';
is call(GET => '/es/api/lessons',
        token => made('--key', $ENV{LESSONS_TEST_EC_KEY}, '--alg', 'ES256'))
        ->code, 200,
    'ES256 token from the P-256 private key on the ES256 section: 200';
is call(GET => '/strict/api/lessons',
        token => made('--key', $hs, '--iss', 'https://auth.example.org',
                      '--aud', 'lessons-api'))->code, 200,
    'iss and aud where the section requires them: 200';
is_unauthorized(call(GET => '/strict/api/lessons',
                     token => made('--key', $hs, '--iss',
                                   'https://auth.example.org')),
                'no aud where the section requires one', 'invalid_token');
is_unauthorized(call(GET => '/api/lessons', token => made('--key', $wrong)),
                "another key's token", 'invalid_token');
{
    my ($rc, $out, $err) = run([ 'make', '--key', $ENV{LESSONS_TEST_RSA_PUB} ]);
    is $rc, 1, 'make with a public key: exit 1';
    is $out, '', 'and no token';
    like $err, qr/holds a public key: a token is signed with the private key/,
        'and it says why';
}

# ---- check
{
    my ($rc, $out, $err) = run([ 'check', "$base/api/lessons", '--key', $hs ]);
    is $rc, 0, 'check with the server\'s key: exit 0' or diag $err;
    is $out, "200 OK\n", 'check: the status alone';
}
{
    my $t = made('--key', $hs, '--sub', 'piped');
    my ($rc, $out) = run([ 'check', "$base/api/lessons", '--token', '-' ],
                         stdin => "$t\n");
    is $rc, 0, 'check --token - reads the token from standard input';
    is $out, "200 OK\n", 'check --token -: 200';
}
{
    # What the server says to this very token, asked directly.
    my $t   = made('--key', $wrong);
    my $res = call(GET => '/api/lessons', token => $t);
    my ($desc) = ($res->header('WWW-Authenticate') // '')
        =~ /error_description="([^"]*)"/;
    ok defined $desc && length $desc,
        'the server gives an error_description for a wrong key';
    my $problem = json_of($res) || {};

    my ($rc, $out, $err) = run([ 'check', "$base/api/lessons", '--token', $t ]);
    is $rc, 1, "check with another key's token: exit 1";
    my @lines = split /\n/, $out;
    is $lines[0], '401 Unauthorized', 'check prints 401 and its phrase first';
    ok((grep { $_ eq 'error: invalid_token' } @lines),
       'check prints the challenge\'s error') or diag $out;
    ok((grep { $_ eq "error_description: " . ($desc // '') } @lines),
       'check prints the error_description the server sent') or diag $out;
    ok((grep { $_ eq "title: $problem->{title}" } @lines),
       'check prints the problem\'s title') or diag $out;
    is $err, '', 'check: nothing on standard error for an answer';

    ($rc, $out) = run([ 'check', "$base/api/lessons", '--key', $wrong ]);
    is $rc, 1, 'check --key with another key: exit 1';
    like $out, qr/\A401 Unauthorized\nerror: invalid_token\n/,
        'check --key with another key: 401 and the reason';
}
{
    my ($rc, $out) = run([ 'check', "$base/api/lessons" ]);
    is $rc, 1, 'check without a token: exit 1';
    like $out, qr/\A401 Unauthorized\n/, 'check without a token: 401';
    unlike $out, qr/^error:/m,
        'no error line: a request without a token gets a bare challenge';
}
{
    # A 5xx with a problem document: the database cannot be reached.
    my $down = base_url('lessons_down');
    my $res = call(GET => '/api/lessons', vhost => 'lessons_down');
    my $detail = (json_of($res) || {})->{detail};
    my ($rc, $out) = run([ 'check', "$down/api/lessons", '--key', $hs ]);
    is $rc, 1, 'check where the database is down: exit 1';
    like $out, qr/\A503 Service Unavailable\n/, 'check: 503';
    ok(defined $detail && index($out, "detail: $detail\n") >= 0,
       'check prints the problem\'s detail') or diag $out;
}
{
    my ($rc, $out, $err) = run([ 'check', 'http://127.0.0.1:1/api/lessons',
                                 '--key', $hs ]);
    is $rc, 1, 'check where nothing listens: exit 1';
    is $out, '', 'and no status';
    like $err, qr{\Alessons-token: GET http://127\.0\.0\.1:1/api/lessons: },
        'and the reason on standard error';
}
{
    my ($rc, undef, $err) = run([ 'check', "$base/api/lessons", '--key', $hs,
                                  '--token', 'x' ]);
    is $rc, 2, 'check with --key and --token: a usage error (2)';
    like $err, qr/--key or --token, not both/, 'which says so';
}

done_testing;
