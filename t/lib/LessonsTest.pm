package LessonsTest;

# Shared helpers for t/api/*.t:
#   tokens     good_token(), token(%opt) (see LessonsTest::JWT::jwt)
#   requests   call($method, $path, %opt) -> HTTP::Response
#   JSON       json_of($res), top_keys($text)
#   checks     is_problem, is_validation, is_empty_404, is_json_lesson
#   database   db_rows($sql), db_do($sql), db_lessons(), seed(@rows), sq()
#   servers    free_port(), wait_port($port), httpd_conf(...), start_httpd(...),
#              one_process_conf()
#
# Every setting comes from the LESSONS_TEST_* environment that
# t/tools/integration.sh exports.

use strict;
use warnings;

use Exporter 'import';
use File::Temp ();
use HTTP::Request ();
use IO::Socket::INET ();
use JSON::PP ();
use Test::More ();
use Apache::Test ();
use Apache::TestRequest ();

use LessonsTest::Ports qw(reserve_ports);
use LessonsTest::JWT qw(jwt jwt_sign b64url b64url_decode json_text
                        read_secret);

our @EXPORT = qw(
    jwt jwt_sign b64url b64url_decode json_text
    hs_secret rsa_public_pem good_token token
    call base_url json_of top_keys object_keys lesson_keys
    is_problem is_validation is_empty_404 is_json_lesson is_unauthorized
    db_rows db_do db_lessons db_count seed sq lesson_row
    free_port wait_port httpd_conf start_httpd child_pids one_process_conf
    conf_test generations
    pg_ctl pg_start
    api_location
    suite_log_size suite_log_since
    LESSON_TYPE PROBLEM_TYPE VALIDATION_TITLE
);

use constant LESSON_TYPE      => 'application/json; charset=utf-8';
use constant PROBLEM_TYPE     => 'application/problem+json';
use constant VALIDATION_TITLE => 'One or more validation errors occurred.';

my $JSON = JSON::PP->new->utf8->canonical->allow_nonref;

sub env {
    my ($name) = @_;
    my $v = $ENV{$name};
    die "$name is not set: run the suite through t/tools/integration.sh\n"
        unless defined $v;
    return $v;
}

# ---------------------------------------------------------------- servers
# For tests that need an httpd of their own beside the suite's.

my @STARTED;    # [httpd pid, pid of the process that started it]

sub httpd_bin { $ENV{LESSONS_TEST_HTTPD} || '/usr/sbin/apache2' }

# The module under test: the sanitizer build's, or the checkout's.
sub module_path {
    return $ENV{LESSONS_TEST_MODULE}
        || Apache::Test::vars('serverroot') . '/../build/mod_lessons.so';
}

# A TCP port on 127.0.0.1 that nothing listens on now, reserved until
# this process ends against every suite on the machine (this one's other
# files, the other database's, the release root's): LessonsTest::Ports.
# A port this process handed out is never handed out again (CI saw
# "Cannot define multiple Listeners on the same IP:port" when two calls
# in a row named one port).
my @ports_held;
sub free_port {
    my ($port, $hold) = reserve_ports(1);
    push @ports_held, $hold;
    return $port;
}

# 1 once something listens on 127.0.0.1:$port; 0 after 15 s.
sub wait_port {
    my ($port) = @_;
    for (1 .. 150) {
        return 1 if IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port",
                                          Timeout => 1);
        select undef, undef, undef, 0.1;
    }
    return 0;
}

# httpd_conf($dir, $port, $body, mpm => 'prefork'): writes
# $dir/httpd.conf, an httpd on 127.0.0.1:$port with its pid file,
# error_log and runtime files in $dir, the MPM (event unless named),
# authz_core, mod_dbd, the module and the suite's database; then $body
# (more modules, MPM sizes, locations).  Returns its path.  With
# module => 0, neither mod_dbd nor the module: httpd as it is without
# them, to compare with.
sub httpd_conf {
    my ($dir, $port, $body, %opt) = @_;
    my $mpm = $opt{mpm} || 'event';
    my $mods = $ENV{LESSONS_TEST_HTTPD_MODULES} || '/usr/lib/apache2/modules';
    my $module = module_path();
    my $conf = "$dir/httpd.conf";
    my $lessons = defined $opt{module} && !$opt{module} ? '' : <<"EOF";
LoadModule dbd_module        "$mods/mod_dbd.so"
LoadModule lessons_module    "$module"
DBDriver @{[ env('LESSONS_TEST_DRIVER') ]}
DBDParams "@{[ env('LESSONS_TEST_DBPARAMS') ]}"
DBDInitSQL "@{[ env('LESSONS_TEST_INITSQL') ]}"
EOF
    open my $fh, '>', $conf or die "$conf: $!";
    print $fh <<"EOF";
ServerRoot "$dir"
ServerName localhost
Listen 127.0.0.1:$port
PidFile "$dir/httpd.pid"
ErrorLog "$dir/error_log"
DefaultRuntimeDir "$dir"
LoadModule mpm_${mpm}_module  "$mods/mod_mpm_$mpm.so"
LoadModule authz_core_module "$mods/mod_authz_core.so"
$lessons$body
EOF
    close $fh or die "$conf: $!";
    return $conf;
}

# conf_test($dir, $body): httpd -t on httpd_conf's server with mod_alias
# and $body, written in a new directory under $dir.  Returns httpd's exit
# code, its output and the conf's path (for the file:line it names).
my $conf_tests = 0;
sub conf_test {
    my ($dir, $body) = @_;
    my $mods = $ENV{LESSONS_TEST_HTTPD_MODULES} || '/usr/lib/apache2/modules';
    my $sub = "$dir/ct" . ++$conf_tests;
    mkdir $sub or die "$sub: $!";
    my $c = httpd_conf($sub, free_port(),
                       "LoadModule alias_module \"$mods/mod_alias.so\"\n$body");
    my $out = `'@{[ httpd_bin() ]}' -t -f '$c' 2>&1`;
    return ($? >> 8, $out, $c);
}

# The MPM lines of a server of one process with 25 threads (or as many
# as given), for tests that count what each process fetches (keys URLs,
# discovered issuers) or how many of its threads are taken.
sub one_process_conf {
    my ($threads) = @_;
    $threads ||= 25;
    return join '', map { "$_\n" } 'StartServers 1', 'ServerLimit 1',
        'MinSpareThreads 1', "MaxSpareThreads $threads",
        "ThreadsPerChild $threads", "MaxRequestWorkers $threads";
}

# The child processes of the httpd whose pid is $ppid: the parent listens
# before it forks, so this waits (bounded, 10 s) until there is one.
sub child_pids {
    my ($ppid) = @_;
    my $parent_of = sub {
        open my $fh, '<', "/proc/$_[0]/stat" or return 0;
        my $stat = <$fh> // '';
        return $stat =~ /\)\s+\S+\s+(\d+)/ ? $1 : 0;
    };
    my @kids;
    for (1 .. 100) {
        @kids = grep { $parent_of->($_) == $ppid }
                map { m{/proc/(\d+)$} ? $1 : () } glob '/proc/[0-9]*';
        last if @kids;
        select undef, undef, undef, 0.1;
    }
    return @kids;
}

# How many generations an httpd has started, by its error log: one line
# for the start and one for each restart, written once the parent has
# read its configuration again and forks the generation's children.
sub generations {
    my ($log) = @_;
    open my $fh, '<', $log or return 0;
    return scalar grep { /configured -- resuming normal operations/ } <$fh>;
}

# start_httpd($conf, $port): starts it, waits for its port (bails out
# otherwise) and returns its pid.  It is stopped when the test ends, by
# the process that started it only (forked clients leave it alone),
# through its pid: the
# test's temporary directory, pid file included, may be gone by then.
sub start_httpd {
    my ($conf, $port) = @_;
    (my $pidfile = $conf) =~ s{[^/]*\z}{httpd.pid};
    system(httpd_bin(), '-f', $conf, '-k', 'start') == 0
        or Test::More::BAIL_OUT("httpd -f $conf did not start: see its error_log");
    wait_port($port)
        or Test::More::BAIL_OUT("httpd -f $conf does not listen on $port");
    # It listens before it writes its pid file.
    my $pid;
    for (1 .. 100) {
        if (open my $fh, '<', $pidfile) {
            ($pid) = (<$fh> // '') =~ /(\d+)/;
        }
        last if $pid;
        select undef, undef, undef, 0.1;
    }
    $pid or Test::More::BAIL_OUT("httpd -f $conf wrote no pid file");
    push @STARTED, [ $pid, $$ ];
    return $pid;
}

END {
    for my $s (@STARTED) {
        next unless $$ == $s->[1] && kill 'TERM', $s->[0];
        for (1 .. 100) {            # its children end first
            last unless kill 0, $s->[0];
            select undef, undef, undef, 0.1;
        }
    }
}

# ---------------------------------------------------------------- tokens

sub hs_secret { read_secret(env('LESSONS_TEST_HS_KEY')) }

sub rsa_public_pem {
    my $path = env('LESSONS_TEST_RSA_PUB');
    open my $fh, '<:raw', $path or die "$path: $!";
    local $/;
    return scalar <$fh>;
}

# token(%opt): jwt() with the test keys filled in by algorithm: HS* the
# shared secret, RS* and PS* the RSA private key, ES* the EC private key.
sub token {
    my %o = @_;
    my $alg = exists $o{sign_alg} ? $o{sign_alg}
            : exists $o{alg}      ? $o{alg}
            : 'HS256';
    if (!exists $o{key} && defined $alg) {
        $o{key} = $alg =~ /\AHS/i ? hs_secret()
                : $alg =~ /\A[RP]S/i ? env('LESSONS_TEST_RSA_KEY')
                : $alg =~ /\AES/i ? env('LESSONS_TEST_EC_KEY')
                : undef;
    }
    return jwt(%o);
}

# The API's section as a server of a test's own serves it: path (default
# /api/lessons) with the suite's HS256 key, and any more lines given.
sub api_location {
    my ($path, @lines) = @_;
    $path //= '/api/lessons';
    return qq{<Location "$path">\n    SetHandler lessons\n}
         . qq{    LessonsJWTKey HS256 "$ENV{LESSONS_TEST_HS_KEY}"\n}
         . join('', map { "    $_\n" } @lines) . "</Location>\n";
}

# A valid HS256 token for the /api/lessons locations.
sub good_token { token(@_) }

# ---------------------------------------------------------------- requests

sub ua {
    my $ua = Apache::TestRequest::user_agent(reset => 1, keep_alive => 0,
                                             requests_redirectable => 0,
                                             timeout => 60);
    return $ua;
}

# http://host:port of the main server, or of a named vhost from
# extra.conf.in (lessons_fault, lessons_down).
sub base_url {
    my ($vhost) = @_;
    my $config = Apache::Test::config();
    my $hostport;
    if ($vhost) {
        $hostport = $config->{vhosts}{$vhost}{hostport}
            or die "no vhost $vhost in the Apache::Test config\n";
    }
    else {
        $hostport = Apache::TestRequest::hostport($config);
    }
    return "http://$hostport";
}

# call($method, $path, %opt) sends one request and returns the response.
#   token    the bearer token; default a fresh good_token(); undef: none
#   auth     the raw Authorization value (instead of token); an arrayref
#            sends several Authorization headers
#   json     a Perl value sent as the JSON body
#   body     a raw body (bytes)
#   type     Content-Type; default application/json when there is a body;
#            undef: no Content-Type
#   chunked  send the body with Transfer-Encoding: chunked
#   headers  arrayref of extra header => value pairs
#   vhost    a named vhost (lessons_fault, lessons_down)
#   base     http://host:port of another server (instead of vhost)
sub call {
    my ($method, $path, %o) = @_;
    my $req = HTTP::Request->new($method => ($o{base} || base_url($o{vhost}))
                                            . $path);

    if (exists $o{auth}) {
        my @v = ref $o{auth} ? @{ $o{auth} } : ($o{auth});
        $req->headers->push_header(Authorization => $_) for grep defined, @v;
    }
    else {
        my $t = exists $o{token} ? $o{token} : good_token();
        $req->header(Authorization => "Bearer $t") if defined $t;
    }

    my $body = exists $o{json} ? $JSON->encode($o{json}) : $o{body};
    if (defined $body) {
        my $type = exists $o{type} ? $o{type} : 'application/json';
        $req->header('Content-Type' => $type) if defined $type;
        if ($o{chunked}) {
            my @parts = unpack '(a512)*', $body;
            $req->content(sub { shift @parts });
        }
        else {
            $req->content($body);
            $req->header('Content-Length' => length $body);
        }
    }
    elsif (exists $o{type} && defined $o{type}) {
        $req->header('Content-Type' => $o{type});
    }

    my @h = @{ $o{headers} || [] };
    while (my ($k, $v) = splice @h, 0, 2) {
        $req->headers->push_header($k => $v);
    }

    my $res = ua()->request($req);
    if (($res->header('Client-Warning') || '') eq 'Internal response') {
        Test::More::diag("client error: " . $res->status_line);
    }
    return $res;
}

# ---------------------------------------------------------------- JSON

# The decoded body, or undef (with a diagnostic) if it is not JSON.
sub json_of {
    my ($res) = @_;
    my $v = eval { $JSON->decode($res->content) };
    Test::More::diag("body is not JSON: $@" . substr($res->content, 0, 300))
        if $@;
    return $v;
}

# Member names of JSON objects in $text, in the order they appear
# (JSON::PP forgets the order): one arrayref per object at nesting depth
# $depth (1: the top-level object; 2: the objects of a top-level array).
sub object_keys {
    my ($text, $want) = @_;
    my (@objects, @stack);      # @stack: 1 for an object, 0 for an array
    my $expect_key = 0;
    while ($text =~ /\G\s*(?:("(?:[^"\\]|\\.)*")|([{\[])|([}\]])|(:)|(,)|([^\s"{}\[\]:,]+))/gcs) {
        if (defined $1) {
            push @{ $objects[-1] }, $JSON->decode($1)
                if $expect_key && @stack == $want;
            $expect_key = 0;
        }
        elsif (defined $2) {
            push @stack, $2 eq '{' ? 1 : 0;
            $expect_key = $stack[-1];
            push @objects, [] if $stack[-1] && @stack == $want;
        }
        elsif (defined $3) { pop @stack; $expect_key = 0 }
        elsif (defined $5) { $expect_key = @stack && $stack[-1] }
    }
    return @objects;
}

# The member names of the top-level object, in order.
sub top_keys { my ($o) = object_keys($_[0], 1); return $o ? @$o : () }

sub lesson_keys {
    qw(id levelId levelName levelCode title order topic description isActive);
}

# ---------------------------------------------------------------- checks

# A problem+json response with this status.
sub is_problem {
    my ($res, $status, $name) = @_;
    my $tb = Test::More->builder;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my $ok = $tb->is_num($res->code, $status, "$name: status $status");
    my $type = $res->header('Content-Type') || '';
    $ok &= $tb->like($type, qr{\Aapplication/problem\+json(?:;|\z)}i,
                     "$name: problem+json");
    my $p = json_of($res);
    $ok &= $tb->ok(ref $p eq 'HASH' && defined $p->{status}
                   && $p->{status} == $status && defined $p->{title}
                   && !ref $p->{title} && length $p->{title},
                   "$name: problem body with status and title");
    return $ok ? $p : undef;
}

# A 400 validation problem naming exactly these fields (each an array of
# message strings).  $fields: arrayref of camelCase names.
sub is_validation {
    my ($res, $fields, $name) = @_;
    my $tb = Test::More->builder;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my $p = is_problem($res, 400, $name) or return;
    $tb->is_eq($p->{title}, VALIDATION_TITLE, "$name: validation title");
    my $errors = ref $p->{errors} eq 'HASH' ? $p->{errors} : {};
    $tb->ok(ref $p->{errors} eq 'HASH', "$name: errors object");
    $tb->is_eq(join(',', sort keys %$errors), join(',', sort @$fields),
               "$name: errors name " . join(',', @$fields));
    my $good = 1;
    for my $f (@$fields) {
        my $m = $errors->{$f};
        $good = 0 unless ref $m eq 'ARRAY' && @$m
            && !grep { !defined $_ || ref $_ || !length $_ } @$m;
    }
    $tb->ok($good, "$name: each error is a list of messages");
    return $p;
}

# 404 with an empty body.
sub is_empty_404 {
    my ($res, $name) = @_;
    my $tb = Test::More->builder;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    $tb->is_num($res->code, 404, "$name: 404");
    $tb->is_eq($res->content, '', "$name: empty body");
    my $len = $res->header('Content-Length');
    $tb->is_eq($len, '0', "$name: Content-Length 0");
}

# A lesson JSON response body: content type, key order, and values
# equal to $want (a hashref in wire names).
sub is_json_lesson {
    my ($res, $status, $want, $name) = @_;
    my $tb = Test::More->builder;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    $tb->is_num($res->code, $status, "$name: status $status");
    $tb->is_eq($res->header('Content-Type'), LESSON_TYPE, "$name: type");
    $tb->is_eq(join(',', top_keys($res->content)), join(',', lesson_keys()),
               "$name: keys in order");
    my $got = json_of($res);
    Test::More::is_deeply(norm_lesson($got), norm_lesson($want),
                          "$name: lesson values");
    return $got;
}

# Booleans as 0/1 so JSON::PP::Boolean and plain values compare.
sub norm_lesson {
    my ($l) = @_;
    return $l unless ref $l eq 'HASH';
    my %c = %$l;
    if (exists $c{isActive}) {
        my $v = $c{isActive};
        $c{isActive} = JSON::PP::is_bool($v) ? ($v ? 'true' : 'false')
                     : defined $v ? "not a boolean: $v" : 'null';
    }
    return \%c;
}

# 401 for a bad token: invalid_token challenge, problem body.
sub is_unauthorized {
    my ($res, $name, $error) = @_;
    my $tb = Test::More->builder;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    is_problem($res, 401, $name);
    my $wa = $res->header('WWW-Authenticate') || '';
    if (defined $error) {
        $tb->like($wa, qr/\ABearer realm="lessons", error="\Q$error\E"(?:,|\z)/,
                  "$name: WWW-Authenticate error=\"$error\"");
    }
    else {
        $tb->is_eq($wa, 'Bearer realm="lessons"',
                   "$name: WWW-Authenticate without error");
    }
}

# ---------------------------------------------------------------- database

# SQL string literal.
sub sq {
    my ($s) = @_;
    return 'NULL' unless defined $s;
    (my $q = $s) =~ s/'/''/g;
    return "'$q'";
}

# Run a command with $input (characters, sent as UTF-8) on stdin; return
# stdout (bytes), die on failure.
sub run_with_input {
    my ($input, @cmd) = @_;
    utf8::encode($input);
    my $in = File::Temp->new;
    binmode $in, ':raw';
    print $in $input;
    close $in;
    my $pid = open(my $out, '-|') // die "fork: $!";
    if (!$pid) {
        open STDIN, '<', $in->filename or die "stdin: $!";
        exec @cmd or die "exec $cmd[0]: $!";
    }
    binmode $out, ':raw';
    local $/;
    my $text = <$out>;
    close $out;
    die "@cmd failed (exit " . ($? >> 8) . ") on:\n$input\n" if $?;
    return defined $text ? $text : '';
}

sub db_name {
    my ($which) = @_;
    return env($which && $which eq 'fault' ? 'LESSONS_TEST_FAULT_DB'
                                           : 'LESSONS_TEST_DB');
}

sub db_driver { env('LESSONS_TEST_DRIVER') }

# The suite's error log: its size now, and what it gained since a size.
sub suite_log_size { -s Apache::Test::vars('t_logs') . '/error_log' || 0 }

sub suite_log_since {
    my ($from) = @_;
    my $log = Apache::Test::vars('t_logs') . '/error_log';
    open my $fh, '<:raw', $log or die "$log: $!";
    seek $fh, $from, 0;
    local $/;
    return <$fh> // '';
}

sub sql_cmd {
    my ($which, @extra) = @_;
    if (db_driver() eq 'sqlite3') {
        return ('sqlite3', '-bail', '-batch', @extra, db_name($which));
    }
    return ($ENV{LESSONS_TEST_PSQL} || 'psql', '-X', '-q', '-A', '-t',
            '-v', 'ON_ERROR_STOP=1', @extra, '-d', db_name($which));
}

# The suite's PostgreSQL cluster, stopped and started by a test:
# pg_ctl('restart', '-m', 'fast'), pg_ctl('stop', '-m', 'fast'), and
# pg_start() with the options t/tools/integration.sh started it with.
sub pg_ctl {
    my $args = join ' ', @_;
    system("'@{[ env('LESSONS_TEST_PG_CTL') ]}' -D '@{[ env('LESSONS_TEST_PGDATA') ]}'"
           . " -w -t 60 $args >/dev/null 2>&1") == 0
        or die "pg_ctl $args failed\n";
}

sub pg_start {
    pg_ctl('start', '-o', "'-c listen_addresses=127.0.0.1 -p @{[ env('PGPORT') ]} -c "
           . "unix_socket_directories=@{[ env('LESSONS_TEST_PGDATA') ]}/.. -c fsync=off'");
}

# A PostgreSQL handle of this process for a database, kept between
# calls: a psql per query cost ~90 ms (its start and a new backend), and
# the suites ask thousands of times.  It is idle in autocommit between
# calls, so it holds no lock a test could meet; a handle a restart of
# the cluster closed is opened again.  undef without DBD::Pg (psql then).
my %pg_handles;
sub pg_handle {
    my ($db) = @_;
    return undef unless eval { require DBI; require DBD::Pg; 1 };
    my $key = "$$ $db";              # a forked child opens its own
    my $dbh = $pg_handles{$key};
    return $dbh if $dbh && $dbh->ping > 0;
    $dbh = DBI->connect("dbi:Pg:dbname=$db", '', '',
                        { RaiseError => 1, PrintError => 0, AutoCommit => 1,
                          AutoInactiveDestroy => 1, pg_enable_utf8 => 0,
                          pg_server_prepare => 0 });
    $dbh->do("SET client_encoding TO 'UTF8'");
    $dbh->do('SET client_min_messages TO warning');
    return $pg_handles{$key} = $dbh;
}

# Rows of a query (or an INSERT ... RETURNING) as hashrefs.
#   db_rows($sql, 'fault') runs against the fault database.
sub db_rows {
    my ($sql, $which) = @_;
    $sql =~ s/;\s*\z//;
    my $text;
    if (db_driver() eq 'sqlite3') {
        # Through DBD::SQLite, not the sqlite3 shell's .mode json: the
        # shell of SQLite 3.46 (Debian 13) writes a control character as
        # "u0007", its backslash lost.
        require DBI;
        my $dbh = DBI->connect('dbi:SQLite:dbname=' . db_name($which), '', '',
                               { RaiseError => 1, PrintError => 0,
                                 sqlite_unicode => 1 });
        $dbh->sqlite_busy_timeout(20000);
        my $rows = $dbh->selectall_arrayref($sql, { Slice => {} });
        $dbh->disconnect;
        return $rows;
    }
    else {
        my $query = "WITH q AS ($sql) SELECT coalesce(json_agg(q), '[]'::json) FROM q";
        if (my $dbh = pg_handle(db_name($which))) {
            utf8::encode($query);        # bytes in, bytes out, as psql
            ($text) = $dbh->selectrow_array($query);
        }
        else {
            local $ENV{PGCLIENTENCODING} = 'UTF8';
            $text = run_with_input("$query;\n", sql_cmd($which));
        }
    }
    return [] unless $text =~ /\S/;
    return $JSON->decode($text);
}

# Statements without results.
sub db_do {
    my ($sql, $which) = @_;
    if (db_driver() ne 'sqlite3' && (my $dbh = pg_handle(db_name($which)))) {
        utf8::encode($sql);
        $dbh->do($sql);                 # several statements: one simple query
        return 1;
    }
    local $ENV{PGCLIENTENCODING} = 'UTF8';
    my $pre = db_driver() eq 'sqlite3'
        ? ".timeout 20000\nPRAGMA foreign_keys = ON;\n"
        : "SET client_min_messages = warning;\n";
    run_with_input("$pre$sql;\n", sql_cmd($which));
    return 1;
}

# The whole lessons table in id order, is_active as 0/1: compare it before
# and after a request with is_deeply.
sub db_lessons {
    my ($which) = @_;
    return db_rows(
        'SELECT id, level_id, title, sort_order, topic, description,'
        . ' CASE WHEN is_active THEN 1 ELSE 0 END AS is_active'
        . ' FROM lessons ORDER BY id', $which);
}

sub db_count {
    my ($which) = @_;
    return db_rows('SELECT count(*) AS n FROM lessons', $which)->[0]{n};
}

# One row by id (hashref as in db_lessons), or undef.
sub lesson_row {
    my ($id, $which) = @_;
    $id =~ /\A-?\d+\z/ or die "lesson_row: bad id $id";
    my ($row) = grep { $_->{id} == $id } @{ db_lessons($which) };
    return $row;
}

# Replace the lessons table's contents.  Each row: {level_id, title,
# sort_order, topic, description, is_active} (topic/description default
# '', is_active 1).  Returns the new ids in the order given.
sub seed {
    my @rows = @_;
    my $bool = db_driver() eq 'sqlite3' ? sub { $_[0] ? 1 : 0 }
                                        : sub { $_[0] ? 'TRUE' : 'FALSE' };
    my $sql = "DELETE FROM lessons;\n";
    for my $r (@rows) {
        $sql .= sprintf "INSERT INTO lessons (level_id, title, sort_order,"
            . " topic, description, is_active) VALUES (%d, %s, %d, %s, %s, %s);\n",
            $r->{level_id}, sq($r->{title}), $r->{sort_order},
            sq(defined $r->{topic} ? $r->{topic} : ''),
            sq(defined $r->{description} ? $r->{description} : ''),
            $bool->(exists $r->{is_active} ? $r->{is_active} : 1);
    }
    $sql =~ s/;\n\z//;
    db_do($sql);
    my @ids = map { $_->{id} } @{ db_lessons() };
    die "seed: expected " . @rows . " rows, found " . @ids . "\n"
        unless @ids == @rows;
    return @ids;
}

# A row as db_lessons() gives it, in the API's wire form (with its
# level's name and code), for is_json_lesson.  Call it by its full name,
# LessonsTest::wire_lesson($row).
my %LEVEL_NAME_CODE = (
    1 => [ 'Beginner',           'A1' ],
    2 => [ 'Elementary',         'A2' ],
    3 => [ 'Intermediate',       'B1' ],
    4 => [ 'Upper Intermediate', 'B2' ],
    5 => [ 'Advanced',           'C1' ],
    6 => [ 'Proficiency',        'C2' ],
);

sub wire_lesson {
    my ($r) = @_;
    my $level = $LEVEL_NAME_CODE{ $r->{level_id} } || [ undef, undef ];
    return { id => $r->{id}, levelId => $r->{level_id},
             levelName => $level->[0], levelCode => $level->[1],
             title => $r->{title}, order => $r->{sort_order},
             topic => $r->{topic}, description => $r->{description},
             isActive => $r->{is_active} ? JSON::PP::true : JSON::PP::false };
}

# A valid create body of exactly $n bytes (padded with JSON whitespace),
# for the body-size tests.  Call it by its full name.
sub padded_body {
    my ($n) = @_;
    my $json = '{"levelId":1,"title":"Polster","order":1}';
    die "too small" if $n < length $json;
    return substr($json, 0, -1) . (' ' x ($n - length $json)) . '}';
}

1;
