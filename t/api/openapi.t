# The OpenAPI document (conf/openapi.yaml, issue 9) against the running
# server.  First a real OpenAPI 3.1 validator checks the document
# (t/openapi/validate.mjs, installed by make openapi-deps).  Then the walk:
# for every path and method of the document, requests that reach each
# documented status; every answer is checked against what the document
# says for that operation and status (the status is documented, required
# headers are there, every documented header and body validates against
# its schema with JSON::Validator); request bodies are checked against the
# documented request schema; every other method on every path is 405 with
# an Allow that lists exactly the documented methods, and paths the
# document does not have are 404.  The 403s of Require lines and the
# CORS answers (preflights, and the headers a browser needs on every
# answer) are walked in sections of their own (t/conf/lessons-openapi.conf.in).
# Last, every documented status must have been reached.
use strict;
use warnings FATAL => 'all';
use utf8;

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use IO::Uncompress::Gunzip qw(gunzip $GunzipError);
use JSON::PP ();
use JSON::Validator::Schema::Draft201909 ();
use Time::HiRes qw(sleep);
use YAML::XS ();
use LessonsTest;
use LessonsTest::Lock qw(hold_level_lock release);
use LessonsTest::Parallel qw(start collect);

my $ROOT    = "$FindBin::Bin/../..";
my $DOC     = "$ROOT/conf/openapi.yaml";
my $MODULES = "$ROOT/build/openapi/node_modules";
my $JSON    = JSON::PP->new->utf8->allow_nonref;

# ---------------------------------------------------------------- validator
{
    my ($out, $rc) = ('', -1);
    if (-d $MODULES) {
        my $pid = open(my $fh, '-|') // die "fork: $!";
        if (!$pid) {
            open STDERR, '>&', \*STDOUT;
            exec 'node', "$ROOT/t/openapi/validate.mjs", $MODULES, $DOC
                or die "exec node: $!";
        }
        local $SIG{ALRM} = sub { kill 'TERM', $pid; die "node timed out\n" };
        alarm 120;
        $out = do { local $/; <$fh> } // '';
        close $fh;
        $rc = $? >> 8;
        alarm 0;
    }
    ok -d $MODULES, "the validator is installed ($MODULES: make openapi-deps)";
    my $res = eval { $JSON->decode($out) };
    ok ref $res eq 'HASH' && @{ $res->{checks} || [] }, 'the validator ran'
        or diag substr($out, 0, 2000);
    for my $c (@{ ref $res eq 'HASH' ? $res->{checks} : [] }) {
        ok $c->{ok}, "validator: $c->{name}"
            or diag $JSON->canonical->pretty->encode($c->{errors} // 'no detail');
    }
    is $rc, 0, 'the validator exits 0';
}

# ---------------------------------------------------------------- document
$YAML::XS::Boolean = 'JSON::PP';
my $doc = YAML::XS::LoadFile($DOC);

# The node a local $ref names (one level at a time, as deep as it goes).
sub deref {
    my ($node) = @_;
    my $n = 0;
    while (ref $node eq 'HASH' && defined $node->{'$ref'}) {
        my $ref = $node->{'$ref'};
        die "not a local ref: $ref\n" unless $ref =~ s{\A#/}{};
        $node = $doc;
        for my $part (split m{/}, $ref) {
            $part =~ s/~1/\//g;
            $part =~ s/~0/~/g;
            $node = ref $node eq 'HASH' ? $node->{$part} : undef;
        }
        die "dangling ref $_[0]{'$ref'}\n" unless defined $node;
        die "ref loop\n" if ++$n > 20;
    }
    return $node;
}

# A validator for a schema of the document (JSON Schema 2019-09, the
# subset 2020-12 shares; local refs resolve into the document).
my %FORMATS = (
    int32 => sub { $_[0] =~ /\A-?[0-9]+\z/ && $_[0] >= -2**31 && $_[0] < 2**31
                   ? undef : 'Not an int32.' },
    int64 => sub { $_[0] =~ /\A-?[0-9]+\z/ ? undef : 'Not an int64.' },
);
my %validators;
sub schema_errors {
    my ($schema, $data) = @_;
    my $key = $JSON->canonical->encode($schema);
    my $v = $validators{$key} //= do {
        my $s = JSON::Validator::Schema::Draft201909->new(
            { components => $doc->{components}, allOf => [ $schema ] });
        $s->formats({ %{ $s->formats }, %FORMATS });
        $s;
    };
    return map { "$_" } $v->validate($data);
}

my @METHODS = qw(get head post put delete options);
my (%ops, %allowed);                    # "METHOD template" => op; template => [METHODS]
for my $path (sort keys %{ $doc->{paths} }) {
    my $item = deref($doc->{paths}{$path});
    for my $m (@METHODS) {
        next unless $item->{$m};
        $ops{uc($m) . " $path"} = deref($item->{$m});
        push @{ $allowed{$path} }, uc $m;
    }
    for my $k (keys %$item) {
        next if grep { $_ eq $k } @METHODS, qw(summary description parameters servers);
        next if $k =~ /\Ax-/;
        fail "$path: the document has $k, which no server route answers";
    }
}
is_deeply [ sort keys %allowed ],
    [ sort '/api/lessons', '/api/lessons/{id}', '/api/lessons/beginner',
      '/api/lessons/advanced', '/api/lessons/level/{level}', '/health', '/metrics' ],
    'the document has the paths the module routes';

# ---------------------------------------------------------------- checks
my (%seen, @request_checks);

# The response headers the document describes (for some response).
my @DESCRIBED_HEADERS = qw(ETag Location Allow WWW-Authenticate Retry-After Vary
    Idempotent-Replayed
    Content-Encoding Access-Control-Allow-Origin Access-Control-Expose-Headers
    Access-Control-Allow-Methods Access-Control-Allow-Headers Access-Control-Max-Age);

# A response header's value as the document's schema sees it (a single
# string; several fields of one name are joined as HTTP joins them).
sub header_value {
    my ($res, $name) = @_;
    my @v = $res->headers->header($name);
    return @v ? join(', ', @v) : undef;
}

# Check $res as the answer of operation $op_key ("METHOD template"),
# against the document's response for its status, or, with $response,
# against that response object.
sub check_response {
    my ($op_key, $res, $name, $response) = @_;
    my $code = $res->code;
    my ($method) = split / /, $op_key;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    if (!$response) {
        my $op = $ops{$op_key} or return fail "$name: $op_key is not in the document";
        my $r = $op->{responses}{$code};
        ok $r, "$name: $code is documented for $op_key" or return;
        $seen{$op_key}{$code}++;
        $response = deref($r);
    }
    my @problems;
    # A header the document describes somewhere must be documented for
    # this response when the server sends it.
    for my $h (@DESCRIBED_HEADERS) {
        next unless defined $res->headers->header($h);
        push @problems, "header $h is sent but not documented for this response"
            unless grep { lc $_ eq lc $h } keys %{ $response->{headers} || {} };
    }
    for my $h (sort keys %{ $response->{headers} || {} }) {
        my $hd = deref($response->{headers}{$h});
        my $v = header_value($res, $h);
        if (!defined $v) {
            push @problems, "required header $h missing" if $hd->{required};
            next;
        }
        push @problems, map { "header $h: $v: $_" } schema_errors($hd->{schema}, $v)
            if $hd->{schema};
    }
    my $content = $response->{content};
    my $body = $res->content;
    if ($method eq 'HEAD' || $code == 204 || $code == 304) {
        push @problems, 'a body where none belongs' if length $body;
    }
    elsif (!$content) {
        push @problems, 'a body where the document has none' if length $body;
    }
    else {
        my $type = lc($res->header('Content-Type') // '');
        $type =~ s/\s*;.*//s;
        my ($media) = grep { $_ eq $type } keys %$content;
        ($media) = grep { my $re = quotemeta; $re =~ s/\\\*/[^\/]*/g; $type =~ /\A$re\z/ }
                   keys %$content unless $media;
        if (!$media) {
            push @problems, "Content-Type $type is not documented ("
                . join(', ', sort keys %$content) . ')';
        }
        elsif (my $schema = $content->{$media}{schema}) {
            if (($res->header('Content-Encoding') // '') eq 'gzip') {
                my $plain;
                gunzip(\$body => \$plain) or push @problems, "gunzip: $GunzipError";
                $body = $plain // '';
            }
            my $data = $type =~ /json\z/ ? eval { $JSON->decode($body) } : $body;
            if ($type =~ /json\z/ && $@) {
                push @problems, "body is not JSON: $@";
            }
            else {
                push @problems, map { "body: $_" } schema_errors($schema, $data);
                if (ref $data eq 'HASH' && $type eq 'application/problem+json') {
                    push @problems, "problem status $data->{status} is not $code"
                        unless ($data->{status} // 0) == $code;
                }
            }
        }
    }
    ok !@problems, "$name: $code as documented" or diag join "\n", @problems;
    return $res;
}

# Send a request for operation $op_key (its template filled in as $path)
# and expect $want; the answer is checked against the document.
#   body    a JSON request body (a Perl value), checked against the
#           documented request schema: valid => 1 if the schema must
#           accept it, valid => 0 if it must refuse it
#   headers sent as they are; with params_valid => 1 every header that
#           is a documented header parameter of the operation must
#           validate against its schema, with params_valid => 0 one must
#           fail it
sub walk {
    my ($op_key, $path, $want, $name, %o) = @_;
    my $valid = delete $o{valid};
    my $params_valid = delete $o{params_valid};
    if (defined $params_valid) {
        my ($m, $tpl) = split / /, $op_key;
        my %params;
        for my $p (@{ deref($doc->{paths}{$tpl})->{parameters} || [] },
                   @{ ($ops{$op_key} || {})->{parameters} || [] }) {
            my $pd = deref($p);
            $params{lc $pd->{name}} = $pd if $pd->{in} eq 'header';
        }
        my (@e, $n);
        my @h = @{ $o{headers} || [] };
        while (my ($k, $v) = splice @h, 0, 2) {
            my $pd = $params{lc $k} or next;
            $n++;
            push @e, map { "$k: $v: $_" } schema_errors($pd->{schema}, $v);
        }
        local $Test::Builder::Level = $Test::Builder::Level + 1;
        ok $n, "$op_key, $name: the request has documented header parameters";
        if ($params_valid) {
            ok !@e, "$op_key, $name: its header parameters are valid per the document"
                or diag join "\n", @e;
        }
        else {
            ok scalar @e, "$op_key, $name: the document's parameter schemas refuse one too";
        }
    }
    my $res = call((split / /, $op_key)[0] => $path, %o);
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    is $res->code, $want, "$op_key, $name: $want"
        or diag substr($res->as_string, 0, 1500);
    check_response($op_key, $res, "$op_key, $name");
    if (exists $o{json} && defined $valid) {
        my $rb = deref($ops{$op_key}{requestBody} || {});
        my $schema = ($rb->{content}{'application/json'} || {})->{schema};
        my @e = $schema ? schema_errors($schema, $o{json}) : ('no request schema');
        if ($valid) {
            ok !@e, "$op_key, $name: the request body is valid per the document"
                or diag join "\n", @e;
        }
        else {
            ok scalar @e, "$op_key, $name: the document's request schema refuses it too";
        }
    }
    return $res;
}

my $not_allowed = deref($doc->{components}{responses}{MethodNotAllowed});
my $no_such = deref($doc->{components}{responses}{NoSuchResource});

# ---------------------------------------------------------------- data
my @ids = seed(
    { level_id => 1, title => 'Begrüßung', sort_order => 1, topic => 'Hallo' },
    { level_id => 2, title => 'Einkaufen', sort_order => 1 },
    { level_id => 4, title => 'Konjunktiv', sort_order => 1,
      description => 'Lang ' x 400 },
    { level_id => 5, title => 'Debatte', sort_order => 2, is_active => 0 },
);
my $missing = $ids[-1] + 1000;
my $lesson = { levelId => 1, title => 'Zahlen', order => 3, topic => 'Zählen' };

my %list_paths = (
    '/api/lessons'               => '/api/lessons',
    '/api/lessons/beginner'      => '/api/lessons/beginner',
    '/api/lessons/advanced'      => '/api/lessons/advanced',
    '/api/lessons/level/{level}' => '/api/lessons/level/4',
    '/api/lessons/{id}'          => "/api/lessons/$ids[0]",
);

# ---------------------------------------------------------------- reads
for my $tpl (sort keys %list_paths) {
    my $path = $list_paths{$tpl};
    for my $m (qw(GET HEAD)) {
        my $op = "$m $tpl";
        my $res = walk($op, $path, 200, 'a token');
        my $tag = $res->header('ETag') // '"none"';
        walk($op, $path, 304, 'If-None-Match: the tag',
             headers => [ 'If-None-Match' => $tag ]);
        walk($op, $path, 200, 'Accept-Encoding: gzip',
             headers => [ 'Accept-Encoding' => 'gzip' ]);
        walk($op, $path, 401, 'no token', token => undef);
        walk($op, $path, 401, 'a bad token', token => 'a.b.c');
        walk($op, $path, 400, 'a malformed Authorization', auth => 'Bearer a b');
        walk($op, $tpl eq '/api/lessons/{id}' ? '/api/lessons/1' : $path, 500,
             'a read that fails', vhost => 'lessons_readfault');
        walk($op, $path, 503, 'the database down', vhost => 'lessons_down');
    }
}
{
    my $res = walk('GET /api/lessons', '/api/lessons', 200, 'gzip, a long list',
                   headers => [ 'Accept-Encoding' => 'gzip' ]);
    is $res->header('Content-Encoding'), 'gzip', 'the long list came gzip-compressed';
    walk('GET /api/lessons/level/{level}', '/api/lessons/level/6', 200, 'an empty level');
    walk("$_ /api/lessons/{id}", "/api/lessons/$missing", 404, 'no such lesson')
        for qw(GET HEAD);
    walk('GET /api/lessons/{id}', '/api/lessons/-3', 404, 'a negative id');
    walk("$_ /api/lessons/level/{level}", '/api/lessons/level/2147483648', 404,
         'a level beyond 32 bits') for qw(GET HEAD OPTIONS);
    walk('OPTIONS /api/lessons/{id}', '/api/lessons/abc', 404,
         'an id that is not an integer');
}

# ---------------------------------------------------------------- writes
my $created;
{
    my $op = 'POST /api/lessons';
    my $res = walk($op, '/api/lessons', 201, 'a valid lesson', json => $lesson,
                   valid => 1);
    $created = (json_of($res) || {})->{id};
    like $res->header('Location') // '', qr{\A/api/lessons/\Q@{[ $created // 'x' ]}\E\z},
        'Location names the new lesson';
    walk($op, '/api/lessons', 201, 'every field, an unknown one, a +json type',
         json => { %$lesson, description => "Zeile\neins", isActive => JSON::PP::false,
                   extra => 1 },
         type => 'application/vnd.lessons+json', valid => 1);
    for my $bad ([ 'no title', { levelId => 1, order => 1 } ],
                 [ 'a string levelId', { %$lesson, levelId => '1' } ],
                 [ 'a negative order', { %$lesson, order => -1 } ],
                 [ 'a long title', { %$lesson, title => 'x' x 201 } ],
                 [ 'a control character', { %$lesson, topic => "a\x01b" } ],
                 [ 'a null isActive', { %$lesson, isActive => undef } ]) {
        walk($op, '/api/lessons', 400, $bad->[0], json => $bad->[1], valid => 0);
    }
    walk($op, '/api/lessons', 400, 'an unknown level', json => { %$lesson, levelId => 99 });
    walk($op, '/api/lessons', 400, 'not JSON', body => '{"levelId":');
    walk($op, '/api/lessons', 400, 'a malformed Authorization', json => $lesson,
         auth => 'Bearer a b');
    walk($op, '/api/lessons', 401, 'no token', json => $lesson, token => undef);
    walk($op, '/api/lessons', 413, 'a body over LessonsMaxBodySize',
         body => LessonsTest::padded_body(70000));
    walk($op, '/limit/api/lessons', 413, "a chunked body over httpd's LimitRequestBody",
         body => LessonsTest::padded_body(600), chunked => 1);
    walk($op, '/api/lessons', 415, 'text/plain', json => $lesson, type => 'text/plain');
    walk($op, '/api/lessons', 500, 'a write that fails', json => $lesson,
         vhost => 'lessons_fault');
    walk($op, '/api/lessons', 503, 'the database down', json => $lesson,
         vhost => 'lessons_down');

    # Idempotency-Key: a create, its replay, the key with another
    # request, a key that is none.
    my @key = (headers => [ 'Idempotency-Key' => '"openapi-1"' ]);
    $res = walk($op, '/api/lessons', 201, 'with Idempotency-Key', json => $lesson,
                @key, params_valid => 1);
    ok !defined $res->header('Idempotent-Replayed'), "$op with Idempotency-Key: a create";
    my $again = walk($op, '/api/lessons', 201, 'the same request with its key again',
                     json => $lesson, @key, params_valid => 1);
    is $again->header('Idempotent-Replayed'), 'true', "$op again: Idempotent-Replayed";
    is $again->content, $res->content, "$op again: the first answer's body";
    walk($op, '/api/lessons', 422, 'the key with another body',
         json => { %$lesson, order => 9 }, @key, params_valid => 1);
    $again = walk($op, '/api/lessons', 201, 'the key without quotes (the same key)',
                  json => $lesson, headers => [ 'Idempotency-Key' => 'openapi-1' ],
                  params_valid => 1);
    is $again->header('Idempotent-Replayed'), 'true', "$op, the key bare: Idempotent-Replayed";
    walk($op, '/api/lessons', 400, 'a byte sequence as Idempotency-Key', json => $lesson,
         headers => [ 'Idempotency-Key' => ':b3BlbmFwaS0x:' ], params_valid => 0);
    walk($op, '/api/lessons', 400, 'a bare key with a space', json => $lesson,
         headers => [ 'Idempotency-Key' => 'openapi 1' ], params_valid => 0);
    walk($op, '/api/lessons', 400, 'a key of 256 characters', json => $lesson,
         headers => [ 'Idempotency-Key' => '"' . ('k' x 256) . '"' ], params_valid => 0);
    # 409: while the first with a key waits behind its level's row
    # (PostgreSQL; SQLite's writers take turns and never answer it).
    if (LessonsTest::db_driver() eq 'pgsql') {
        my @busy = (json => { %$lesson, levelId => 4 },
                    headers => [ 'Idempotency-Key' => '"openapi-busy"' ]);
        my $lock = hold_level_lock(4);
        my @kids = start([ 'first', POST => undef, '/api/lessons', @busy ]);
        for (1 .. 200) {
            last if db_rows("SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory'"
                            . ' AND granted')->[0]{n};
            sleep 0.05;
        }
        walk($op, '/api/lessons', 409, 'the key while its first request is in flight',
             @busy, params_valid => 1);
        release($lock);
        my ($first) = collect(@kids);
        is $first->{code}, 201, "$op: the first, once the lock is gone: 201";
    }
}
{
    my $op = 'PUT /api/lessons/{id}';
    my $path = "/api/lessons/$ids[1]";
    my $res = walk($op, $path, 200, 'a change', json => { title => 'Markt' }, valid => 1);
    my $tag = $res->header('ETag') // '"none"';
    walk($op, $path, 200, 'If-Match: the tag', json => { order => 4 }, valid => 1,
         headers => [ 'If-Match' => $tag ]);
    walk($op, $path, 412, 'If-Match: a stale tag', json => { order => 5 },
         headers => [ 'If-Match' => $tag ]);
    walk($op, "/api/lessons/$missing", 412, 'If-Match: * on no lesson',
         json => { order => 5 }, headers => [ 'If-Match' => '*' ]);
    walk($op, "/api/lessons/$missing", 404, 'no such lesson', json => { order => 5 });
    walk($op, $path, 200, 'nothing to change', json => {}, valid => 1);
    walk($op, $path, 400, 'an empty title', json => { title => '' }, valid => 0);
    walk($op, $path, 400, 'a fractional order', json => { order => 1.5 }, valid => 0);
    walk($op, $path, 400, 'an array', body => '[]');
    walk($op, $path, 400, 'a malformed Authorization', json => { order => 1 },
         auth => 'Bearer a b');
    walk($op, $path, 401, 'no token', json => { order => 1 }, token => undef);
    walk($op, $path, 413, 'a body over LessonsMaxBodySize',
         body => LessonsTest::padded_body(70000));
    walk($op, $path, 415, 'a latin-1 JSON body', json => { order => 1 },
         type => 'application/json; charset=iso-8859-1');
    walk($op, $path, 400, 'Idempotency-Key (POST only)', json => { order => 1 },
         headers => [ 'Idempotency-Key' => '"openapi-put"' ]);
    walk($op, '/api/lessons/1', 500, 'a write that fails', json => { order => 1 },
         vhost => 'lessons_fault');
    walk($op, '/api/lessons/1', 503, 'the database down', json => { order => 1 },
         vhost => 'lessons_down');
}
{
    my $op = 'DELETE /api/lessons/{id}';
    walk($op, "/api/lessons/$missing", 404, 'no such lesson');
    walk($op, "/api/lessons/$ids[2]", 412, 'If-Match: a foreign tag',
         headers => [ 'If-Match' => '"L1.1.x"' ]);
    walk($op, "/api/lessons/$ids[2]", 400, 'a malformed Authorization', auth => 'Bearer a b');
    walk($op, "/api/lessons/$ids[2]", 400, 'Idempotency-Key (POST only)',
         headers => [ 'Idempotency-Key' => '"openapi-delete"' ]);
    walk($op, "/api/lessons/$ids[2]", 401, 'no token', token => undef);
    walk($op, '/api/lessons/1', 500, 'a write that fails', vhost => 'lessons_fault');
    walk($op, '/api/lessons/1', 503, 'the database down', vhost => 'lessons_down');
    walk($op, "/api/lessons/$created", 204, 'a lesson') if defined $created;
}

# ---------------------------------------------------------------- OPTIONS
for my $tpl (sort keys %list_paths) {
    my $path = $list_paths{$tpl};
    my $op = "OPTIONS $tpl";
    my $res = walk($op, $path, 204, 'a token');
    is $res->header('Allow'), join(', ', @{ $allowed{$tpl} }),
        "$op: Allow lists exactly the documented methods";
    walk($op, $path, 401, 'no token', token => undef);
    walk($op, $path, 400, 'a malformed Authorization', auth => 'Bearer a b');
    walk($op, "/openapi-nokey$path", 500, 'a section without a key');
}

# ---------------------------------------------------------------- 403
# Authorization: on every API operation, a valid token without the
# claim at /openapi-claim/api/lessons (a copy of the API with "Require
# jwt-claim role editor"): the insufficient_scope challenge; and any
# token at /openapi-deny/api/lessons ("Require all denied"): no
# challenge.  Nothing is written either way.
{
    my $reader = good_token(claims => { sub => 'reader', role => 'reader' });
    my $before = db_lessons();
    for my $op_key (sort grep { m{ /api/lessons} } keys %ops) {
        my ($m, $tpl) = split / /, $op_key;
        my $path = $tpl eq '/api/lessons/{id}' ? "/api/lessons/$ids[0]" : $list_paths{$tpl};
        my @body = $m eq 'POST' ? (json => $lesson) : $m eq 'PUT' ? (json => { order => 1 }) : ();
        my $res = walk($op_key, "/openapi-claim$path", 403, 'a valid token without the claim',
                       token => $reader, @body);
        like $res->header('WWW-Authenticate') // '',
            qr/\ABearer realm="lessons", error="insufficient_scope", error_description="[^"]+"\z/,
            "$op_key: the claim's 403 has the insufficient_scope challenge";
        $res = walk($op_key, "/openapi-deny$path", 403, 'Require all denied', @body);
        ok !defined $res->header('WWW-Authenticate'),
            "$op_key: another Require's 403 has no challenge";
    }
    is_deeply db_lessons(), $before, '403: nothing was written';
}

# ---------------------------------------------------------------- CORS
# At /openapi-cors/api/lessons (LessonsCORSOrigins https://app.example.org):
# every response of an API operation documents the CORS headers; the
# preflights of each path; and answers to a browser, which must carry
# them (and Vary: Origin) whatever the status.
my $APP  = 'https://app.example.org';
my $CORS = '/openapi-cors';
{
    for my $op_key (sort grep { m{ /api/lessons} } keys %ops) {
        for my $code (sort keys %{ $ops{$op_key}{responses} }) {
            my $h = deref($ops{$op_key}{responses}{$code})->{headers} || {};
            my @missing = grep { !$h->{$_} }
                qw(Access-Control-Allow-Origin Access-Control-Expose-Headers Vary);
            ok !@missing, "$op_key $code documents the CORS headers"
                or diag "missing: @missing";
        }
    }
}

sub cors_readable {
    my ($res, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    is $res->header('Access-Control-Allow-Origin'), $APP,
        "$name: Access-Control-Allow-Origin is the origin";
    ok defined $res->header('Access-Control-Expose-Headers'),
        "$name: Access-Control-Expose-Headers";
    like header_value($res, 'Vary') // '', qr/(^|[ ,])Origin($|[ ,])/, "$name: Vary: Origin";
}
sub cors_unreadable {
    my ($res, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    ok !defined $res->header('Access-Control-Allow-Origin')
       && !defined $res->header('Access-Control-Expose-Headers'),
        "$name: no Access-Control-Allow-Origin or -Expose-Headers";
}

# Preflights: no token.
for my $tpl (sort keys %list_paths) {
    my $path = "$CORS$list_paths{$tpl}";
    my $op = "OPTIONS $tpl";
    my $options = deref($ops{$op}{responses}{204});
    my $preflight = sub {
        my ($origin, $method, $headers) = @_;
        return (token => undef, headers => [
            Origin => $origin, 'Access-Control-Request-Method' => $method,
            (defined $headers ? ('Access-Control-Request-Headers' => $headers) : ()) ]);
    };
    for my $m (@{ $allowed{$tpl} }) {
        my $ask = (grep { $_ eq $m } qw(POST PUT)) ? 'authorization,content-type,if-match'
                : 'authorization,if-none-match';
        my $res = walk($op, $path, 204, "a preflight for $m",
                       $preflight->($APP, $m, $ask), params_valid => 1);
        my @absent = grep { $_ ne 'Allow' && !defined $res->header($_) }
                     sort keys %{ $options->{headers} };
        ok !@absent, "$op, a preflight for $m: every preflight header of the 204"
            or diag "absent: @absent";
        is $res->header('Access-Control-Allow-Methods'), join(', ', @{ $allowed{$tpl} }),
            "$op, a preflight for $m: Access-Control-Allow-Methods lists the documented methods";
        cors_readable($res, "$op, a preflight for $m");
        ok !defined $res->header('WWW-Authenticate'), "$op, a preflight for $m: no challenge";
    }
    walk($op, $path, 204, 'a preflight, header names in any case',
         $preflight->($APP, 'GET', ' Authorization , If-None-Match'), params_valid => 1);
    walk($op, $path, 204, 'a preflight that asks for no headers',
         $preflight->($APP, 'GET'), params_valid => 1);

    my $res = walk($op, $path, 403, 'a preflight from an unlisted origin',
                   $preflight->('https://evil.example', 'GET', 'authorization'),
                   params_valid => 1);
    cors_unreadable($res, "$op, an unlisted origin");
    like header_value($res, 'Vary') // '', qr/\bOrigin\b/, "$op, an unlisted origin: Vary: Origin";
    ok !defined $res->header('WWW-Authenticate'), "$op, an unlisted origin: no challenge";
    $res = walk($op, $path, 403, 'a preflight for PATCH',
                $preflight->($APP, 'PATCH', 'authorization'), params_valid => 0);
    cors_readable($res, "$op, a preflight for PATCH");
    ok !defined $res->header('WWW-Authenticate'), "$op, a preflight for PATCH: no challenge";
    my ($other) = grep { my $m = $_; !grep { $_ eq $m } @{ $allowed{$tpl} } } qw(POST PUT DELETE);
    $res = walk($op, $path, 403, "a preflight for $other (not this path's)",
                $preflight->($APP, $other, 'authorization'), params_valid => 1);
    cors_readable($res, "$op, a preflight for $other");
    $res = walk($op, $path, 403, 'a preflight for a header the API does not read',
                $preflight->($APP, 'GET', 'authorization, x-requested-with'),
                params_valid => 0);
    cors_readable($res, "$op, a preflight for X-Requested-With");
    walk($op, $path, 403, 'a preflight from the "null" origin',
         $preflight->('null', 'GET'));

    # Not preflights: an OPTIONS without Access-Control-Request-Method
    # needs a token; the API without LessonsCORSOrigins answers none.
    $res = walk($op, $path, 401, 'Origin, no Access-Control-Request-Method, no token',
                token => undef, headers => [ Origin => $APP ], params_valid => 1);
    cors_readable($res, "$op, a plain OPTIONS without a token");
    $res = walk($op, $path, 204, 'Origin and a token',
                headers => [ Origin => $APP ], params_valid => 1);
    is $res->header('Allow'), join(', ', @{ $allowed{$tpl} }),
        "$op, Origin and a token: Allow, not a preflight";
    cors_readable($res, "$op, Origin and a token");
    $res = walk($op, $list_paths{$tpl}, 401, 'a preflight where LessonsCORSOrigins is off',
                $preflight->($APP, 'GET'), params_valid => 1);
    cors_unreadable($res, "$op, LessonsCORSOrigins off");
}

# Answers to a browser.
{
    my @from_app = (headers => [ Origin => $APP ]);
    for my $tpl (sort keys %list_paths) {
        my $path = "$CORS$list_paths{$tpl}";
        for my $m (qw(GET HEAD)) {
            my $op = "$m $tpl";
            my $res = walk($op, $path, 200, 'from a listed origin', @from_app);
            cors_readable($res, "$op, 200");
            like header_value($res, 'Vary') // '', qr/\bAccept-Encoding\b/,
                "$op, 200: Vary still names Accept-Encoding";
            $res = walk($op, $path, 304, 'from a listed origin, If-None-Match',
                        headers => [ Origin => $APP,
                                     'If-None-Match' => $res->header('ETag') // '"x"' ]);
            cors_readable($res, "$op, 304");
            $res = walk($op, $path, 401, 'from a listed origin, no token', @from_app,
                        token => undef);
            cors_readable($res, "$op, 401");
            $res = walk($op, $path, 400, 'from a listed origin, a malformed Authorization',
                        @from_app, auth => 'Bearer a b');
            cors_readable($res, "$op, 400");
            $res = walk($op, $path, 200, 'from an unlisted origin',
                        headers => [ Origin => 'https://evil.example' ]);
            cors_unreadable($res, "$op, an unlisted origin");
            like header_value($res, 'Vary') // '', qr/\bOrigin\b/,
                "$op, an unlisted origin: Vary: Origin";
            $res = walk($op, $path, 200, 'no Origin');
            cors_unreadable($res, "$op, no Origin");
            like header_value($res, 'Vary') // '', qr/\bOrigin\b/, "$op, no Origin: Vary: Origin";
        }
    }
    my $res = walk('POST /api/lessons', "$CORS/api/lessons", 201, 'from a listed origin',
                   @from_app, json => $lesson, valid => 1);
    cors_readable($res, 'POST 201');
    my $id = (json_of($res) || {})->{id} // 0;
    like $res->header('Location') // '', qr{\A\Q$CORS\E/api/lessons/$id\z},
        'POST 201 at the CORS mount: Location under its base path';
    $res = walk('POST /api/lessons', "$CORS/api/lessons", 400, 'from a listed origin, no title',
                @from_app, json => { levelId => 1, order => 1 }, valid => 0);
    cors_readable($res, 'POST 400');
    $res = walk('POST /api/lessons', "$CORS/api/lessons", 415, 'from a listed origin, text/plain',
                @from_app, json => $lesson, type => 'text/plain');
    cors_readable($res, 'POST 415');
    $res = walk('PUT /api/lessons/{id}', "$CORS/api/lessons/$id", 200, 'from a listed origin',
                @from_app, json => { order => 7 }, valid => 1);
    cors_readable($res, 'PUT 200');
    $res = walk('PUT /api/lessons/{id}', "$CORS/api/lessons/$id", 412,
                'from a listed origin, a stale tag', json => { order => 8 },
                headers => [ Origin => $APP, 'If-Match' => '"stale"' ]);
    cors_readable($res, 'PUT 412');
    $res = walk('GET /api/lessons/{id}', "$CORS/api/lessons/$missing", 404,
                'from a listed origin, no such lesson', @from_app);
    cors_readable($res, 'GET 404');
    $res = walk('DELETE /api/lessons/{id}', "$CORS/api/lessons/$id", 204,
                'from a listed origin', @from_app);
    cors_readable($res, 'DELETE 204');
    $res = walk('DELETE /api/lessons/{id}', "$CORS/api/lessons/$id", 404,
                'from a listed origin, gone', @from_app);
    cors_readable($res, 'DELETE 404');

    $res = call(PATCH => "$CORS/api/lessons/$ids[0]", @from_app, json => { order => 1 });
    is $res->code, 405, 'PATCH from a listed origin: 405';
    check_response('PATCH /api/lessons/{id}', $res, 'PATCH from a listed origin', $not_allowed);
    cors_readable($res, 'PATCH 405');
    $res = call(GET => "$CORS/api/lessons/abc", @from_app);
    is $res->code, 404, 'GET /api/lessons/abc from a listed origin: 404';
    check_response('GET /api/lessons/abc', $res, 'GET /api/lessons/abc from a listed origin',
                   $no_such);
    cors_readable($res, 'GET 404 (no such resource)');
    $res = call(OPTIONS => "$CORS/api/lessons/abc", token => undef,
                headers => [ Origin => $APP, 'Access-Control-Request-Method' => 'GET' ]);
    is $res->code, 401, 'a preflight for a path the document does not have: 401 (not answered)';
    check_response('OPTIONS /api/lessons/abc', $res, 'a preflight for /api/lessons/abc',
                   deref($doc->{components}{responses}{Unauthorized}));
    cors_readable($res, 'a preflight for /api/lessons/abc');
}

# ---------------------------------------------------------------- health
for my $m (qw(GET HEAD)) {
    walk("$m /health", '/health', 200, 'the database answers', token => undef);
    walk("$m /health", '/health', 503, 'the database down', token => undef,
         vhost => 'lessons_down');
}

# ---------------------------------------------------------------- metrics
for my $m (qw(GET HEAD)) {
    walk("$m /metrics", '/metrics', 200, 'the counters', token => undef);
}

# ---------------------------------------------------------------- the rest
# Every other method on every path: 405, Allow naming the documented ones.
# TRACE included: the module answers it on the API, the health check and
# the metrics.
my %no_token = map { $_ => 1 } '/health', '/metrics';
my %instances = (%list_paths, map { $_ => $_ } keys %no_token);
for my $tpl (sort keys %instances) {
    for my $m (qw(GET HEAD POST PUT DELETE OPTIONS PATCH TRACE PROPFIND FOO)) {
        next if grep { $_ eq $m } @{ $allowed{$tpl} };
        my $res = call($m => $instances{$tpl},
                       ($no_token{$tpl} ? (token => undef) : ()),
                       (grep { $_ eq $m } qw(POST PUT PATCH)) ? (json => $lesson) : ());
        is $res->code, 405, "$m $tpl (undocumented): 405";
        is $res->header('Allow') // '', join(', ', @{ $allowed{$tpl} }),
            "$m $tpl: Allow lists the documented methods";
        check_response("$m $tpl", $res, "$m $tpl", $not_allowed);
    }
}

# Paths the document does not have.
for my $path (qw(/api/lessons/abc /api/lessons/1/x /api/lessons/level
                 /api/lessons/level/x /api/lessons/level/2147483648
                 /api/lessons/9223372036854775808 /api/lessons/beginner/1
                 /api/lessons/1.5 /api/lessons/+1)) {
    my $res = call(GET => $path);
    is $res->code, 404, "GET $path (not in the document): 404";
    check_response("GET $path", $res, "GET $path", $no_such);
}
is call(GET => '/api/lessonsX')->code, 404, 'GET /api/lessonsX (outside the mount): 404';
# One trailing slash names the same resource, as the document says.
is call(GET => '/api/lessons/beginner/')->content,
   call(GET => '/api/lessons/beginner')->content, 'a trailing slash: the same list';

# The document, served as docs/api.md shows it.
{
    my $res = call(GET => '/api/openapi.yaml', token => undef);
    is $res->code, 200, 'the document is served';
    is $res->header('Content-Type'), 'application/yaml', '... as application/yaml';
    open my $fh, '<:raw', $DOC or die "$DOC: $!";
    is $res->content, do { local $/; <$fh> }, '... byte for byte';
}

# ---------------------------------------------------------------- coverage
for my $op_key (sort keys %ops) {
    for my $code (sort keys %{ $ops{$op_key}{responses} }) {
        if ($op_key eq 'POST /api/lessons' && $code == 409
            && LessonsTest::db_driver() eq 'sqlite3') {
            ok !$seen{$op_key}{$code}, "$op_key: documented $code is PostgreSQL's "
                . '(SQLite writers take turns: KeyInFlight says so)';
            next;
        }
        ok $seen{$op_key}{$code}, "$op_key: documented $code was reached";
    }
}

done_testing;
