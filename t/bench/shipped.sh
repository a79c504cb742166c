# make bench's shipped-configuration rows (issue 45), sourced by
# t/bench/bench.sh: the server a Debian admin gets, not the tuned one.
#
# Its ServerRoot is built the way Debian's apache2 package and ours lay
# one out: this machine's /etc/apache2/apache2.conf and its
# mods-available and conf-available as they are (Debian's KeepAlive On,
# MaxKeepAliveRequests 100, KeepAliveTimeout 5, Timeout 300; mpm_event.conf's
# StartServers 2, ThreadsPerChild 25, MaxRequestWorkers 150), the modules
# and confs a fresh install enables, the default site, `a2enmod lessons`
# (with its dbd) and `a2enconf lessons-api` of our conf/lessons-api.conf
# with mod_dbd's default pool. Only what a test server must change is
# changed: the port, the key and database paths the admin fills in (the
# PostgreSQL lines appended as README's production guide does), and the
# run, lock and log directories (Debian's envvars, here per run).
# The static twins are served by the same server from one added conf
# (bench-twin.conf below), with the fastest file settings this machine
# has (EnableSendfile On, EnableMMAP Off: t/bench/httpd.conf says why);
# Debian leaves httpd's defaults (EnableSendfile Off, EnableMMAP On),
# under which the twins would be slower and flatter the module.

SHIPPED_ETC=${BENCH_ETC_APACHE:-/etc/apache2}
# What apache2's postinst enables on a fresh install (Debian 12 and 13).
SHIPPED_MODS="access_compat alias auth_basic authn_core authn_file authz_core
authz_host authz_user autoindex deflate dir env filter mime mpm_event
negotiation reqtimeout setenvif status"
SHIPPED_CONFS="charset localized-error-pages other-vhosts-access-log security
serve-cgi-bin"
SHIPPED_ROUTES="all id beginner level3 r304 gzip"
SHIPPED_KA_ROUTES="all id"

# a2en KIND NAME: the symlinks a2enmod/a2enconf make.
shipped_a2en() {
    local kind=$1 name=$2 s=$WORK/shipped f found=""
    for f in "$s/$kind-available/$name.load" "$s/$kind-available/$name.conf"; do
        [ -e "$f" ] || continue
        ln -sf "../$kind-available/${f##*/}" "$s/$kind-enabled/${f##*/}"
        found=1
    done
    [ -n "$found" ] || die "shipped: $SHIPPED_ETC/$kind-available has no $name"
}

# shipped_setup DB: $WORK/shipped as the ServerRoot for DB.
shipped_setup() {
    local db=$1 s=$WORK/shipped m api
    [ -f "$SHIPPED_ETC/apache2.conf" ] || die "shipped: no $SHIPPED_ETC/apache2.conf (apt-get install apache2)"
    rm -rf "$s"
    mkdir -p "$s/mods-enabled" "$s/conf-available" "$s/conf-enabled" \
        "$s/sites-available" "$s/sites-enabled"
    cp "$SHIPPED_ETC/apache2.conf" "$s/"
    cp -a "$SHIPPED_ETC/mods-available" "$s/"
    cp -a "$SHIPPED_ETC/conf-available/." "$s/conf-available/"
    printf 'Listen 127.0.0.1:${BENCH_PORT}\n' >"$s/ports.conf"
    sed 's/<VirtualHost \*:80>/<VirtualHost *:${BENCH_PORT}>/' \
        "$SHIPPED_ETC/sites-available/000-default.conf" >"$s/sites-available/000-default.conf"
    grep -q 'VirtualHost \*:${BENCH_PORT}' "$s/sites-available/000-default.conf" \
        || die "shipped: 000-default.conf has no <VirtualHost *:80> to move"
    sed "s#/usr/lib/apache2/modules/mod_lessons.so#$WORK/mod_lessons.so#" \
        "$ROOT/conf/lessons.load" >"$s/mods-available/lessons.load"
    cp "$ROOT/conf/lessons.conf" "$s/mods-available/lessons.conf"
    grep -q "$WORK/mod_lessons.so" "$s/mods-available/lessons.load" \
        || die "shipped: conf/lessons.load does not load /usr/lib/apache2/modules/mod_lessons.so"
    # The admin's part of conf/lessons-api.conf: the key, and the
    # database (README: "In production on Debian 12 or 13").
    api=$s/conf-available/lessons-api.conf
    sed -e "s#/etc/lessons/jwt.key#$WORK/keys/hs256.key#" \
        -e "s#/var/lib/lessons/lessons.db#$WORK/db/sqlite/lessons.db#" \
        "$ROOT/conf/lessons-api.conf" >"$api"
    grep -q "LessonsJWTKey HS256 $WORK/keys/hs256.key" "$api" \
        || die "shipped: conf/lessons-api.conf has no LessonsJWTKey HS256 /etc/lessons/jwt.key"
    if [ "$db" = pgsql ]; then
        # Without the SQLite file the conf's check refuses to start.
        mkdir -p "$WORK/db/sqlite"
        [ -e "$WORK/db/sqlite/lessons.db" ] || sqlite3 "$WORK/db/sqlite/lessons.db" 'SELECT 1' >/dev/null
        printf 'DBDriver pgsql\nDBDParams "%s"\n' "$DBPARAMS" >>"$api"
    else
        grep -q "file:\${LESSONS_SQLITE_DB}" "$api" \
            || die "shipped: conf/lessons-api.conf no longer names its database as bench.sh expects"
    fi
    cat >"$s/conf-available/bench-twin.conf" <<EOF
# make bench: the static twins (t/bench/shipped.sh)
Alias /static $WORK/static
<Directory $WORK/static>
    Require all granted
    ForceType "application/json; charset=utf-8"
    EnableSendfile On
    EnableMMAP Off
    RemoveType .gz
    AddEncoding gzip .gz
</Directory>
EOF
    for m in $SHIPPED_MODS dbd lessons; do shipped_a2en mods "$m"; done
    for m in $SHIPPED_CONFS lessons-api bench-twin; do shipped_a2en conf "$m"; done
    ln -sf ../sites-available/000-default.conf "$s/sites-enabled/000-default.conf"
    mkdir -p "$RUN_ROOT/lock"
    [ "$(id -u)" -ne 0 ] || chown "$HTTPD_USER:" "$RUN_ROOT/lock"
    # What the run serves with, from the copy: a changed Debian default
    # shows in the report.
    meta "$db" shipped_keepalive "$(shipped_setting MaxKeepAliveRequests)"
    meta "$db" shipped_workers "$(shipped_setting ThreadsPerChild)/$(shipped_setting MaxRequestWorkers)"
    meta "$db" shipped_dbd "$(grep -hE '^\s*DBD(Min|Keep|Max)' "$s"/conf-enabled/*.conf "$s"/mods-enabled/*.conf 2>/dev/null | tr -s ' \t' ' ' | paste -sd, -)"
}
# shipped_setting NAME: its value in the shipped apache2.conf or MPM conf.
shipped_setting() {
    awk -v n="$1" '$1 == n { v = $2 } END { print v }' \
        "$WORK/shipped/apache2.conf" "$WORK/shipped/mods-enabled/mpm_event.conf"
}

# shipped_start DB: the shipped server, started as make bench's other
# servers are.
shipped_start() {
    SERVER_ROOT=$WORK/shipped CONF=shipped/apache2.conf
    start_httpd
    SERVER_ROOT=$WORK CONF=httpd.conf
}

# shipped_check DB: each route answers the twin's bytes here too, and the
# ETag to revalidate with is this server's.
shipped_check() {
    local db=$1 r
    for r in all id beginner level3; do
        fetch "shipped-$db-$r" 200 "$r" mod
        cmp -s "$WORK/out/shipped-$db-$r.body" "$WORK/static/$r" \
            || die "shipped: $r's body differs from its twin"
        fetch "shipped-$db-twin-$r" 200 "$r" twin
    done
    ETAG=$(header "shipped-$db-all" ETag)
    if [ -n "$ETAG" ]; then
        fetch "shipped-$db-r304" 304 r304 mod
        curl -s -o /dev/null -D "$WORK/out/shipped-$db-twin-all.hdr" \
            -H "Authorization: Bearer $TOKEN" "$(url /static/all)"
        TWIN_ETAG=$(header "shipped-$db-twin-all" ETag)
        fetch "shipped-$db-r304-twin" 304 r304 twin
    fi
    fetch "shipped-$db-gzip-twin" 200 gzip twin
    [ "$GZIP" != yes ] || [ "$(header "shipped-$db-gzip-twin" Content-Encoding)" = gzip ] \
        || die "shipped: the gzip twin came without Content-Encoding: gzip"
}

# shipped_connects WANT WHAT: 203 requests of GET by id's twin, one after
# another, took WANT connections (the keep-alive the server applies, WHAT),
# or die.  A connection serves its first request and MaxKeepAliveRequests
# more (httpd counts the ones kept alive).
shipped_connects() {
    local i urls=() u n
    u=$(url /static/id)
    for ((i = 0; i < 203; i++)); do urls+=("$u" -o /dev/null); done
    n=$(curl -s -w '%{num_connects}\n' "${urls[@]}" | awk '{ n += $1 } END { print n + 0 }')
    [ "$n" = "$1" ] || die "shipped: 203 requests took $n connection(s), not $1 ($2)"
}

# shipped_phase DB: the GET routes against their twins on the shipped
# server, in alternating rounds as the tuned ones; "shipped-DB" in
# RESULTS.
shipped_phase() {
    local db=$1
    log "$db: the shipped configuration (Debian's apache2.conf, conf/lessons-api.conf), GET routes, $ROUNDS round(s)"
    shipped_setup "$db"
    shipped_start
    shipped_check "$db"
    shipped_connects 3 "MaxKeepAliveRequests 100"
    get_phase "shipped-$db" "$SHIPPED_ROUTES"
    meta "shipped-$db" errors "$(error_lines "shipped error_log")"
    stop_httpd
    # What Debian's MaxKeepAliveRequests 100 costs, for README's
    # production page: the same server with connections kept ("0"), on
    # two routes, module and twin ("shipped0-DB").
    log "$db: the shipped configuration with MaxKeepAliveRequests 0, $SHIPPED_KA_ROUTES"
    EXTRA_DEFINES=(-c "MaxKeepAliveRequests 0")
    shipped_start
    EXTRA_DEFINES=()
    shipped_connects 1 "MaxKeepAliveRequests 0"
    get_phase "shipped0-$db" "$SHIPPED_KA_ROUTES"
    stop_httpd
}

# shipped_writes DB: creates and updates at 8 and 32 clients on the
# shipped server (mod_dbd's default pool), after every GET row: a write
# changes the catalogue, and the ETag the GET rows revalidate with.
shipped_writes() {
    local db=$1 before now
    log "$db: creates and updates on the shipped configuration"
    shipped_start
    write_rounds "shipped-$db"
    before=$(meta_get "shipped-$db" errors)
    now=$(error_lines "shipped error_log")
    meta "shipped-$db" errors $(( ${before:-0} + ${now:-0} ))
    stop_httpd
}
