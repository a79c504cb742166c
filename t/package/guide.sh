# README's production guide as a test: sourced by package-test.sh once the
# package it built has been installed, checked and purged.  The guide's
# shell blocks ("## In production on Debian 12 or 13", fenced ```sh) are
# taken from the document itself and run in order, as root, with only
# what a reader fills in changed: the first block's values, and the
# database host's name, port and password where the PostgreSQL block names
# them.  Twice, one database each:
#   ```sh build      the package's build, run once, by package-test.sh
#                    before everything else (guide_build): the package
#                    every run installs is the one it printed
#   ```sh            every time
#   ```sh sqlite     the SQLite run
#   ```sh pgsql      the PostgreSQL run, on the Apache server
#   ```sh pgsql-db-host   the PostgreSQL run, on the database host: here a
#                    cluster of this test's own (PGHOST, PGPORT name it)
# The identity provider is the test one (t/idp/serve.sh); the package is
# the one package-test.sh built.  After each run the API is exercised
# (401, 200, 201, the new row in the database, health) and everything the
# run made is removed, so that the next starts as on a fresh machine.
# A step the guide forgets, or one that fails, fails here.
#
# Needs from package-test.sh: check, pass, fail, detail, http helpers'
# style, apache_stop, apt_get, pkg_status, $WORK, $STATE, $DEB, $PORT,
# $ROOT, $WAS_RUNNING, $KEY_DIR, $DB_DIR, $APACHE_ETC, $PKG.

GUIDE_DOC=${GUIDE_DOC:-$ROOT/README.md}
GUIDE_HEADING='## In production on Debian 12 or 13'
# What a reader fills in: the names the guide may ask for.
GUIDE_NAMES="CHECKOUT ISSUER AUDIENCE PROVIDER_CA TOKEN SERVER DB_HOST DB_PORT DB_PASSWORD DB_CA"

# guide_extract DIR: the section's blocks as DIR/NN.TAG (TAG "all" when
# the fence names none).
guide_extract() {
    awk -v dir="$1" -v head="$GUIDE_HEADING" '
        $0 == head { sect = 1; next }
        sect && /^## / { sect = 0 }
        !sect { next }
        inb && /^```[ \t]*$/ { inb = 0; close(f); next }
        inb { print > f; next }
        /^```sh([ \t]|$)/ {
            tag = ($2 == "") ? "all" : $2
            f = sprintf("%s/%02d.%s", dir, ++n, tag)
            printf "" > f
            inb = 1
        }' "$GUIDE_DOC"
}

# guide_build: the guide's build block, run as written in the checkout
# copy package-test.sh made ($WORK/src as CHECKOUT); sets DEB to the
# path it printed.  Its output in $WORK/build.log.
guide_build() {
    local dir=$WORK/guide-blocks block="" f
    mkdir -p "$dir"
    [ -n "$(ls "$dir")" ] || guide_extract "$dir"
    for f in "$dir"/*.build; do
        [ -e "$f" ] && block=$f
        break
    done
    if [ -z "$block" ]; then
        echo "README's guide has no build block (\`\`\`sh build)" >"$WORK/build.log"
        return 1
    fi
    { GV_CHECKOUT=$WORK/src guide_fill "$dir/$(ls "$dir" | head -n 1)"
      cat "$block"
      # shellcheck disable=SC2016
      printf '%s\n' 'printf "%s\n" "$PACKAGE" >"$GUIDE_PACKAGE_OUT"'
    } >"$WORK/build.sh"
    (cd "$WORK" && GUIDE_PACKAGE_OUT=$WORK/package-path exec setsid \
        bash -euo pipefail "$WORK/build.sh") </dev/null >"$WORK/build.log" 2>&1 &
    BUILD_PID=$!
    wait "$BUILD_PID" || { BUILD_PID=""; return 1; }
    BUILD_PID=""
    DEB=$(cat "$WORK/package-path" 2>/dev/null) && [ -f "$DEB" ]
}

# guide_fill FILE: FILE with each "NAME=value" of a fill-in name given
# this run's value (GV_NAME in the environment), the rest as written.
guide_fill() {
    perl -pe '
        if (/^(\s*)([A-Z_]+)=(?:"[^"]*"|\x27[^\x27]*\x27|\S*)(.*)$/s
            && exists $ENV{"GV_$2"}) {
            my ($lead, $name, $rest) = ($1, $2, $3);
            (my $v = $ENV{"GV_$name"}) =~ s/\x27/\x27\\\x27\x27/g;
            $_ = "$lead$name=\x27$v\x27$rest";
        }' "$1"
}

# The first block may hold only comments and the names above.
guide_fill_in_block_ok() {
    local line name bad=""
    while IFS= read -r line; do
        case $line in ''|'#'*) continue ;; esac
        name=${line%%=*}
        if [ "$name" = "$line" ] || ! grep -qw -- "$name" <<<"$GUIDE_NAMES"; then
            bad+="${bad:+; }$line"
        fi
    done <"$1"
    [ -z "$bad" ] || { echo "not a value a reader fills in (or unknown to guide.sh): $bad"; return 1; }
}

guide_idp_start() {  # DIR: the provider; sets GUIDE_ISS, GUIDE_CA
    local dir=$1 port ctl _
    port=$(pick_port)
    ctl=$(pick_port "$port")
    IDP_MODULES=$ROOT/build/idp/node_modules setsid "$ROOT/t/idp/serve.sh" --dir "$dir" \
        --port "$port" --control-port "$ctl" --aud lessons-guide \
        </dev/null >"$dir.out" 2>&1 9>&- &
    echo $! >"$STATE/guide-idp"
    for _ in $(seq 1 100); do
        grep -q '^idp ready' "$dir.out" 2>/dev/null && break
        sleep 0.2
    done
    grep -q '^idp ready' "$dir.out" || { cat "$dir.out"; return 1; }
    GUIDE_ISS=https://127.0.0.1:$port
    GUIDE_CA=$dir/ca.crt
}
guide_idp_stop() {
    local pid
    pid=$(cat "$STATE/guide-idp" 2>/dev/null) || return 0
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
    rm -f "$STATE/guide-idp"
}
guide_token() {  # a token for the guide's audience, from the provider
    curl -sS --max-time 20 --cacert "$GUIDE_CA" -d grant_type=client_credentials \
        -d aud=lessons-guide -d "scope=read write" "$GUIDE_ISS/token" \
        | perl -MJSON::PP -e 'my $t = decode_json(join "", <STDIN>)->{access_token};
                              die "no access_token\n" unless $t; print $t'
}

# A PostgreSQL cluster of the test's own, run by the postgres user as a
# database host's would be: local connections trusted (the host's admin),
# TCP ones with a password, TLS on with a certificate made for the name
# the guide's DB_HOST gives (127.0.0.1), as Debian's cluster has one for
# the host's name.  Sets GUIDE_PG (its directory), GUIDE_PGPORT and
# GUIDE_PGCA (the certificate, as the admin copies it to the Apache
# server).
guide_pg_start() {
    local bin
    bin=$( (ls -d /usr/lib/postgresql/*/bin 2>/dev/null || true) | sort -V | tail -n 1)
    [ -x "$bin/initdb" ] || { echo "PostgreSQL binaries not found: t/tools/deps.sh"; return 1; }
    GUIDE_PG=$WORK/guide-pg
    GUIDE_PGPORT=$(pick_port)
    install -d -o postgres -g postgres -m 700 "$GUIDE_PG" || return 1
    echo "$bin $GUIDE_PG" >"$STATE/guide-pg"
    runuser -u postgres -- "$bin/initdb" -D "$GUIDE_PG/data" -U postgres \
        --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --no-locale --no-sync \
        >"$GUIDE_PG/initdb.log" 2>&1 9>&- || { cat "$GUIDE_PG/initdb.log"; return 1; }
    runuser -u postgres -- openssl req -x509 -newkey rsa:2048 -nodes -days 2 \
        -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
        -keyout "$GUIDE_PG/server.key" -out "$GUIDE_PG/server.crt" \
        >"$GUIDE_PG/openssl.log" 2>&1 9>&- || { cat "$GUIDE_PG/openssl.log"; return 1; }
    GUIDE_PGCA=$WORK/guide-db-ca.pem
    install -m 644 "$GUIDE_PG/server.crt" "$GUIDE_PGCA" || return 1
    runuser -u postgres -- "$bin/pg_ctl" -D "$GUIDE_PG/data" -w -l "$GUIDE_PG/log" \
        -o "-c listen_addresses=127.0.0.1 -c port=$GUIDE_PGPORT -c unix_socket_directories=$GUIDE_PG -c fsync=off -c ssl=on -c ssl_cert_file=$GUIDE_PG/server.crt -c ssl_key_file=$GUIDE_PG/server.key" \
        start >/dev/null 9>&- || { cat "$GUIDE_PG/log"; return 1; }
}
guide_pg_stop() {
    local bin dir
    read -r bin dir 2>/dev/null <"$STATE/guide-pg" || return 0
    runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1
    rm -f "$STATE/guide-pg"
}

# What a run changed outside the package: put back here and, after a run
# that died, by package-test.sh's restore().
guide_restore() {
    guide_idp_stop
    guide_pg_stop
    if [ -f "$STATE/guide-ports.conf" ]; then
        cp -p "$STATE/guide-ports.conf" "$APACHE_ETC/ports.conf" && rm -f "$STATE/guide-ports.conf"
    fi
    if [ -f "$STATE/guide-extended_states" ]; then
        cp -p "$STATE/guide-extended_states" /var/lib/apt/extended_states \
            && rm -f "$STATE/guide-extended_states"
    fi
}

# guide_block Q RUN FILE: one of the guide's blocks, as a reader runs it
# (on the database host for a *-db-host block, with PGHOST and PGPORT
# naming the test's cluster; on this server after the values filled in,
# RUN/fill-in.sh, otherwise); passes or fails "Q: block NAME runs".
guide_block() {
    local q=$1 run=$2 f=$3 name=${3##*/} out
    if [ "${name%-db-host}" != "$name" ]; then
        guide_fill "$f" >"$run/$name"
        out=$(cd "$run" && PGHOST=$GUIDE_PG PGPORT=$GUIDE_PGPORT \
              bash -euo pipefail "$run/$name" </dev/null 2>&1 9>&-)
    else
        { cat "$run/fill-in.sh"; guide_fill "$f"; } >"$run/$name"
        out=$(cd "$run" && bash -euo pipefail "$run/$name" </dev/null 2>&1 9>&-)
    fi
    # shellcheck disable=SC2181
    if [ $? -eq 0 ]; then
        pass "$q: block $name runs"
    else
        fail "$q: block $name runs" "$(printf '%s\n--- its output:\n%s' "$(cat "$f")" "$out")"
        return 1
    fi
}

# guide_switch: after the SQLite run, the guide's way to PostgreSQL: the
# database host's block, then the switch block on this server; every
# lesson the SQLite file held is served from PostgreSQL with its id,
# title and ETag's version, and a new one gets an id above the highest
# the file ever gave.
guide_switch() {
    local dir=$WORK/guide-blocks run=$WORK/guide-switch f n=0
    local q="guide (switch)" before after last seq
    mkdir -p "$run"
    export GV_DB_PORT=$GUIDE_PGPORT GV_DB_CA=$GUIDE_PGCA
    before=$(sqlite3 "$DB_DIR/lessons.db" "SELECT id || '|' || title || '|' || version FROM lessons ORDER BY id" 2>&1)
    seq=$(sqlite3 "$DB_DIR/lessons.db" "SELECT seq FROM sqlite_sequence WHERE name = 'lessons'" 2>&1)
    last=$(sqlite3 "$DB_DIR/lessons.db" "SELECT max(id) FROM lessons" 2>&1)
    check "$q: the SQLite file holds lessons to move ($last)" test -n "$last" || return 1
    guide_fill "$dir/$(ls "$dir" | head -n 1)" >"$run/fill-in.sh"
    printf "PACKAGE='%s'\n" "$DEB" >>"$run/fill-in.sh"
    for f in "$dir"/*.pgsql-db-host "$dir"/*.switch; do
        [ -e "$f" ] || continue
        n=$((n + 1))
        guide_block "$q" "$run" "$f" || return 1
    done
    check "$q: the guide has the database host's block and the switch block" test $n -ge 2 || return 1
    after=$(PGPASSWORD=change-me psql -qtA -h 127.0.0.1 -p "$GUIDE_PGPORT" -U lessons -d lessons \
            -c "SELECT id || '|' || title || '|' || version FROM lessons ORDER BY id" 2>&1)
    check "$q: PostgreSQL holds every lesson of the SQLite file, ids, titles and versions" \
        test "$after" = "$before"
    TOKEN=$GV_TOKEN
    authed GET "/api/lessons/$last"
    expect "$q: the last lesson, moved: 200" 200
    authed POST /api/lessons -H 'Content-Type: application/json' \
        -d '{"levelId":3,"title":"Nach dem Umzug","order":1,"topic":"Guide"}'
    expect "$q: create: 201 with Location" 201 '^Location: /api/lessons/[0-9]+$'
    local id
    id=$(PGPASSWORD=change-me psql -qtA -h 127.0.0.1 -p "$GUIDE_PGPORT" -U lessons -d lessons \
         -c "SELECT id FROM lessons WHERE title = 'Nach dem Umzug'" 2>&1)
    check "$q: the new lesson is in PostgreSQL, its id ($id) above the highest SQLite gave ($seq)" \
        test -n "$id" -a "$id" -gt "${seq:-0}" 2>/dev/null
}

# guide_run DB: the guide's blocks for DB (sqlite or pgsql), then the API.
guide_run() {
    local db=$1 dir=$WORK/guide-blocks run=$WORK/guide-$1 f tag first n=0
    local q="guide ($db)"
    mkdir -p "$run"
    first=$(ls "$dir" | head -n 1)
    export GV_ISSUER=$GUIDE_ISS GV_AUDIENCE=lessons-guide \
        GV_PROVIDER_CA=$GUIDE_CA GV_SERVER=http://127.0.0.1:$PORT \
        GV_DB_HOST=127.0.0.1 GV_DB_PORT=${GUIDE_PGPORT:-5432} GV_DB_PASSWORD=change-me \
        GV_DB_CA=${GUIDE_PGCA:-/etc/lessons/db-ca.pem}
    # apt-get install apache2 starts it on a fresh machine; here it may
    # have been stopped, and Debian's init script will not restart a
    # server it finds stopped while other programs named apache2 run
    # (the test suites' servers, the other release's root).
    if ! apache_running; then
        check "$q: apache2 runs, as after its installation" apache_start || return 1
    fi
    GV_TOKEN=$(guide_token) || { fail "$q: a token from the test provider" "$GV_TOKEN"; return 1; }
    export GV_TOKEN
    guide_fill "$dir/$first" >"$run/fill-in.sh"
    # What the build block set in the reader's shell.
    printf "PACKAGE='%s'\n" "$DEB" >>"$run/fill-in.sh"
    for f in $(ls "$dir"); do
        [ "$f" = "$first" ] && continue
        tag=${f#*.}
        case $tag in all|"$db"|"$db"-db-host) ;; *) continue ;; esac
        n=$((n + 1))
        guide_block "$q" "$run" "$dir/$f" || return 1
    done
    [ $n -ge 3 ] || { fail "$q: the guide has blocks for $db" "only $n"; return 1; }

    # The API it set up, with the provider's token.
    TOKEN=$GV_TOKEN
    http GET /api/lessons
    expect "$q: no token: 401" 401 '^WWW-Authenticate: Bearer'
    authed GET /api/lessons
    expect "$q: the provider's token: 200" 200
    authed POST /api/lessons -H 'Content-Type: application/json' \
        -d '{"levelId":2,"title":"Nach Anleitung","order":1,"topic":"Guide"}'
    expect "$q: create: 201 with Location" 201 '^Location: /api/lessons/[0-9]+$'
    local rows
    if [ "$db" = sqlite ]; then
        rows=$(sqlite3 "$DB_DIR/lessons.db" "SELECT count(*) FROM lessons WHERE title = 'Nach Anleitung'" 2>&1)
    else
        rows=$(PGPASSWORD=change-me psql -qtA -h 127.0.0.1 -p "$GUIDE_PGPORT" -U lessons -d lessons \
               -c "SELECT count(*) FROM lessons WHERE title = 'Nach Anleitung'" 2>&1)
    fi
    check "$q: the new lesson is in the database (1 row: $rows)" test "$rows" = 1
    if [ "$db" = pgsql ]; then
        # Apache's connections, as the guide's sslmode makes them: every
        # one encrypted (encrypted/all).
        local tls
        tls=$(PGPASSWORD=change-me psql -qtA -h 127.0.0.1 -p "$GUIDE_PGPORT" -U lessons -d lessons \
              -c "SELECT count(*) FILTER (WHERE s.ssl) || '/' || count(*) FROM pg_stat_activity a
                  JOIN pg_stat_ssl s USING (pid)
                  WHERE a.usename = 'lessons' AND a.pid <> pg_backend_pid()" 2>&1)
        check "$q: Apache's database connections use TLS ($tls)" \
            eval '[[ $tls =~ ^([1-9][0-9]*)/([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]'
    fi
    check "$q: the database driver Apache loaded is a package the guide installs" \
        guide_driver_installed "$run"
    http GET /health/lessons
    expect "$q: health: 200" 200
    check "$q: health: status pass" grep -q '"status":"pass"' <<<"$BODY"
}

# guide_driver_installed RUNDIR: the apr_dbd driver the serving Apache
# mapped comes from a package that the run's blocks name in an apt-get
# install line.  The module's package depends on either driver, so apt
# picks SQLite's: a guide that forgets PostgreSQL's works only on a
# machine that has it already, as this one does.
guide_driver_installed() {
    local so pkg pid master f
    master=$(apache_pid) || { echo "the system Apache does not run"; return 1; }
    so=$(for pid in "$master" $(pgrep -P "$master"); do
             grep -o '/[^ ]*apr_dbd_[a-z0-9]*[^ ]*\.so' "/proc/$pid/maps" 2>/dev/null
         done | sort -u)
    [ -n "$so" ] || { echo "no apr_dbd driver mapped by any apache2 process"; return 1; }
    for f in $so; do
        pkg=$(dpkg -S "$f" 2>/dev/null | head -n 1 | cut -d: -f1)
        [ -n "$pkg" ] || { echo "$f: no package holds it"; return 1; }
        grep -h 'apt-get install' "$1"/[0-9]* | grep -qw -- "$pkg" \
            || { echo "Apache loaded $f, from $pkg, which no apt-get install line of the guide names"; return 1; }
    done
}

# guide_clear: what a run made, gone, as before the next one.
guide_clear() {
    a2disconf -q lessons-api >/dev/null 2>&1
    if [ "$(pkg_status)" != not-installed ]; then
        apt_get purge "$PKG" >/dev/null || return 1
    fi
    rm -rf "$KEY_DIR" "$DB_DIR"
    if [ "$WAS_RUNNING" = stopped ]; then apache_stop || return 1; fi
    guide_pg_stop
}

guide_test() {
    local dir=$WORK/guide-blocks
    mkdir -p "$dir"
    guide_extract "$dir"
    check "guide: README has the section \"$GUIDE_HEADING\" with shell blocks" \
        test -n "$(ls "$dir")" || return 0
    check "guide: its first block is what a reader fills in" \
        guide_fill_in_block_ok "$dir/$(ls "$dir" | head -n 1)" || return 0
    : >"$STATE/made-key-dir"
    : >"$STATE/made-db-dir"
    rm -rf "$KEY_DIR" "$DB_DIR"
    cp -p /var/lib/apt/extended_states "$STATE/guide-extended_states" 2>/dev/null
    # A server the test starts listens on the test's port alone: Apache's
    # own port may be another server's (the other release's package test).
    if [ "$WAS_RUNNING" = stopped ]; then
        cp -p "$APACHE_ETC/ports.conf" "$STATE/guide-ports.conf"
        echo "# Emptied by mod_lessons' t/package/guide.sh while it runs; put back after." \
            >"$APACHE_ETC/ports.conf"
    fi
    # Not through check, whose subshell would lose what they set.
    if guide_idp_start "$WORK/guide-idp" >"$WORK/guide-idp.log" 2>&1; then
        pass "guide: the test provider starts ($GUIDE_ISS)"
        guide_run sqlite
        if guide_pg_start >"$WORK/guide-pg.log" 2>&1; then
            pass "guide (switch): a database host of the test's own (port $GUIDE_PGPORT)"
            guide_switch
        else
            fail "guide (switch): a database host of the test's own" "$(cat "$WORK/guide-pg.log")"
        fi
        check "guide (sqlite, switched): cleared for the next run" guide_clear
        rm -rf "$WORK/guide-pg"         # a fresh host for the PostgreSQL run
        if guide_pg_start >"$WORK/guide-pg.log" 2>&1; then
            pass "guide (pgsql): a database host of the test's own (port $GUIDE_PGPORT)"
            guide_run pgsql
            check "guide (pgsql): cleared" guide_clear
        else
            fail "guide (pgsql): a database host of the test's own" "$(cat "$WORK/guide-pg.log")"
        fi
    else
        fail "guide: the test provider starts" "$(cat "$WORK/guide-idp.log")"
    fi
    guide_restore
}
