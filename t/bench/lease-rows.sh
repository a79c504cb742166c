# make bench's read-lease rows (issue 56, docs/scaling.md's "Read
# leases"), sourced by t/bench/bench.sh: what LessonsDBLease takes off
# the primary and what it adds to writes, each row with the lease off
# (as without the directive) and on (LEASE seconds, BENCH_LEASE), on
# PostgreSQL only (SQLite needs none of it).
#
#   servers  GET by id on N separate httpds on the one database (N in
#            LEASE_SERVERS, BENCH_SERVERS: "1 4" by default, "1 4 8"
#            for more), as the many-servers row (servers_round): the
#            statements to the primary per GET, split into the GETs'
#            own and the leases' (renewals, checks, acknowledgements:
#            pg_statements_split), and where the GETs took the catalogue
#            version (lessons-metrics' lessons_catalog_versions_total).
#            Route servers<N><off|on> of DB "lease-pgsql".
#   shipped  GET by id and the 304 against their static twins on the
#            shipped configuration (t/bench/shipped.sh), with
#            LessonsDBLease added for "on".  DBs leaseoff-shipped-pgsql
#            and leaseon-shipped-pgsql.
#   writes   creates and updates at 8 and 32 clients (write_rounds:
#            wrk --latency, t/bench/wrk-write.lua, pgbench of the same
#            statement in the same rounds) on one of 4 servers
#            (BENCH_WRITE_SERVERS), the others holding leases too and
#            so acknowledging every write; rounds alternate off and on.  DBs leaseoff-pgsql
#            and leaseon-pgsql.
#
# A server with a lease is measured only once its holder has a lease
# row renewed within the lease length and serves from it (lease_wait).
#
# BENCH_PEERS_APART=1: the write rows' other servers run SCHED_FIFO
# (chrt), lease off and on alike.  On one machine they share its CPUs
# with the written server, PostgreSQL and wrk, so a datagram waits for
# a CPU before it is answered; in production each is a host of its own,
# idle but for its GETs.  A real-time policy stands in for that: the
# receiver runs as soon as its datagram comes.  Its work still takes
# this machine's CPUs, so the rows stay a bound from below.

LEASE_SERVERS=${BENCH_SERVERS:-1 4}
LEASE_WRITE_SERVERS=${BENCH_WRITE_SERVERS:-4}

# lease_servers_up MODE N: N of t/bench/httpd.conf's servers
# (servers_start) with the metrics handler, and with the lease when
# MODE is on (then once they hold it: lease_wait).
lease_servers_up() {
    EXTRA_DEFINES=(-D BENCH_METRICS)
    [ "$1" != on ] || EXTRA_DEFINES+=(-C "Define BENCH_LEASE $LEASE")
    PEER_PORTS=
    [ "$1" != on ] || [ "${BENCH_LEASE_PEER:-0}" != 1 ] || PEER_PORTS=1
    servers_start "$2"
    PEER_PORTS=
    EXTRA_DEFINES=()
    [ "$1" != on ] || lease_wait "$2" "${SERVER_PORTS[@]}"
}

# peers_apart: every process and thread of SERVER_PIDS but the first
# (their sessions: servers_start makes each its own) SCHED_FIFO 1, and
# the children forked later inherit it.  Root or CAP_SYS_NICE.
peers_apart() {
    local i pid
    for i in "${!SERVER_PIDS[@]}"; do
        [ "$i" -gt 0 ] || continue
        for pid in $(pgrep -s "${SERVER_PIDS[$i]}"); do
            chrt -a -f -p 1 "$pid" >/dev/null 2>&1 \
                || kill -0 "$pid" 2>/dev/null \
                || continue     # gone meanwhile
            chrt -p "$pid" | grep -q SCHED_FIFO \
                || die "BENCH_PEERS_APART: chrt could not make $pid SCHED_FIFO (root or CAP_SYS_NICE)"
        done
    done
}

# lease_wait N [PORT...]: until N leases are live (renewed within their
# length), at most 15 s; a warning, and META lease_missing, if they are
# not.  Then until each server serves from its lease: a lease starts in
# two steps (its run 65% of a lease old, docs/scaling.md), read off the
# PORTs' /lessons-metrics (lessons_db_lease_valid), or waited out (one
# lease covers it) where no PORT is given or one does not answer.
lease_wait() {
    local want=$1 n=0 port valid out
    shift
    for _ in $(seq 1 75); do
        n=$(pg_run -d lessons -At -c "SELECT count(*) FROM lessons_leases
            WHERE renewed > now() - length_ms * interval '1 ms'")
        [ "$n" -lt "$want" ] || break
        sleep 0.2
    done
    if [ "$n" -lt "$want" ]; then
        log "warning: $n of $want servers hold a lease after 15 s (error_log of server-*)"
        meta lease-pgsql lease_missing "$n/$want"
        return 0
    fi
    [ $# -gt 0 ] || { sleep "$LEASE"; return 0; }
    for _ in $(seq 1 75); do
        valid=0
        for port in "$@"; do
            out=$(curl -sf "http://127.0.0.1:$port/lessons-metrics") \
                || { sleep "$LEASE"; return 0; }
            ! grep -qx 'lessons_db_lease_valid 1' <<<"$out" || valid=$((valid + 1))
        done
        [ "$valid" -lt $# ] || return 0
        sleep 0.2
    done
    log "warning: $valid of $# servers serve from their lease after 15 s more"
    meta lease-pgsql lease_missing "$valid/$#"
}

lease_servers_rows() {
    local n mode round
    for n in $LEASE_SERVERS; do
        for mode in off on; do
            log "pgsql: $n server(s), lease $mode, GET by id, $CONNS clients each, $ROUNDS round(s)"
            lease_servers_up "$mode" "$n"
            for round in $(seq 1 "$ROUNDS"); do
                servers_round lease-pgsql "servers$n$mode" "$round"
            done
            stop_servers
        done
    done
}

lease_shipped_rows() {
    local db=$1 mode
    shipped_setup "$db"
    for mode in off on; do
        log "$db: the shipped configuration, lease $mode: GET by id and the 304 against their twins"
        EXTRA_DEFINES=()
        [ "$mode" != on ] || EXTRA_DEFINES=(-c "LessonsDBLease $LEASE")
        shipped_start
        EXTRA_DEFINES=()
        shipped_check "$db"
        [ "$mode" != on ] || lease_wait 1
        get_phase "lease$mode-shipped-$db" "id r304"
        meta "lease$mode-shipped-$db" errors "$(error_lines "shipped error_log, lease $mode")"
        stop_httpd
    done
}

# lease_write_ways ROUTE: how the written server's writes of the round
# went (lessons_db_lease_unchecked_writes_total): told (each waited for a
# round of datagrams), held (answered at once under the others' holds)
# and alone, logged and summed into ROUTE's meta.  The told share is the
# writes that paid a round's wait: what the lease adds to the tail.
lease_write_ways() {
    local m how n total line=""
    m=$(curl -sf "http://127.0.0.1:$PORT/lessons-metrics" || true)
    for how in alone told held; do
        n=$(sed -n "s/^lessons_db_lease_unchecked_writes_total{how=\"$how\"} \([0-9]*\)\$/\1/p" <<<"$m")
        total=$(meta_get "$1" "writes_$how")
        meta "$1" "writes_$how" $(( ${total:-0} + ${n:-0} ))
        line="$line $how=${n:-0}"
    done
    log "$1: the written server's unchecked writes this round:$line"
    # Each write's own time on the lease (lessons_db_lease_write_wait_
    # seconds): the share within each bound, whatever else ran; the
    # counts summed over the rounds into ROUTE's meta (wait_<bound>).
    local le count
    while read -r le count; do
        total=$(meta_get "$1" "wait_$le")
        meta "$1" "wait_$le" $(( ${total:-0} + count ))
    done < <(sed -n 's/^lessons_db_lease_write_wait_seconds_bucket{le="\([^"]*\)"} \([0-9]*\)$/\1 \2/p' <<<"$m")
    line=$(awk '
        /^lessons_db_lease_write_wait_seconds_bucket/ {
            le = $0; sub(/.*le="/, "", le); sub(/".*/, "", le)
            les[++n] = le; counts[n] = $NF
        }
        END {
            if (!n || !counts[n]) { print " none"; exit }
            for (i = 1; i < n; i++)
                printf " <=%ss %.2f%%", les[i], 100 * counts[i] / counts[n]
            printf " of %d\n", counts[n]
        }' <<<"$m")
    log "$1: the written server's writes' time on the lease:$line"
}

# Writes alternate: each round starts the servers afresh with the lease
# off, then on (on first in even rounds), so that neither side always
# meets the machine's other load of the moment.
lease_write_rows() {
    local db=$1 mode round modes e
    for round in $(seq 1 "$ROUNDS"); do
        modes="off on"
        [ $((round % 2)) -eq 1 ] || modes="on off"
        for mode in $modes; do
            log "$db: creates and updates on one of $LEASE_WRITE_SERVERS servers, lease $mode, round $round"
            lease_servers_up "$mode" "$LEASE_WRITE_SERVERS"
            [ "${BENCH_PEERS_APART:-0}" != 1 ] || peers_apart
            PORT=${SERVER_PORTS[0]}
            ERROR_LOG=$WORK/server-1/logs/error.log
            WRITE_ROUND_LIST=$round write_rounds "lease$mode-$db"
            [ "$mode" != on ] || lease_write_ways "lease$mode-$db"
            e=$(meta_get "lease$mode-$db" errors)
            meta "lease$mode-$db" errors $(( ${e:-0} + $(error_lines "server-1 error_log, lease $mode") ))
            stop_servers
            ERROR_LOG=$RUN_ROOT/logs/error.log
        done
    done
}

# lease_phase DB: every read-lease row (PostgreSQL only).
lease_phase() {
    local db=$1
    [ "$db" = pgsql ] || return 0
    meta lease-pgsql lease_seconds "$LEASE"
    meta lease-pgsql lease_servers "$LEASE_SERVERS"
    meta lease-pgsql lease_write_servers "$LEASE_WRITE_SERVERS"
    meta lease-pgsql peers_apart "${BENCH_PEERS_APART:-0}"
    lease_servers_rows
    # The full run's write rows came first and changed the lessons the
    # twins were made from: the shipped rows compare bodies, so they
    # read the dataset as loaded (ids 1..102 again; the schema's
    # TRUNCATE trigger moves the catalog version on).
    pg_run -d lessons -c 'TRUNCATE lessons RESTART IDENTITY' >/dev/null
    pg_run -d lessons -f "$BENCH_DIR/bench-lessons.sql" >/dev/null
    lease_shipped_rows "$db"
    lease_write_rows "$db"
}

# lease_write_phase DB: the write rows alone (BENCH_ONLY=lease-writes).
lease_write_phase() {
    meta lease-pgsql lease_seconds "$LEASE"
    meta lease-pgsql lease_write_servers "$LEASE_WRITE_SERVERS"
    meta lease-pgsql peers_apart "${BENCH_PEERS_APART:-0}"
    lease_write_rows "$1"
}
