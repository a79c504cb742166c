# The Patroni tier of the history suite (issue 58), sourced by
# t/history/run.sh: three etcd members and three PostgreSQL nodes, each
# run by its own Patroni, from Debian's packages alone (patroni,
# etcd-server), on 127.0.0.1 ports.  Synchronous mode: a commit is
# answered once a standby has it, and only that standby may be promoted,
# so no answered write is lost when the primary is.  The settings are
# docs/operations.md's ("High availability with Patroni"), with the
# ports and directories of this run: each node's etcd settings and its
# Patroni configuration are the section's own blocks (its ```sh and
# ```yaml), with the document's example values (the first host, pg1 at
# 10.0.0.11, and the others) replaced by this run's; a value the document
# no longer has fails the run, so that page and test cannot drift apart.
#
# Needs from run.sh: WORK, PGBIN, AS_PG (the PostgreSQL user's prefix),
# pick_port, die, pg, psql_at.  Sets HA_TTL, the leader key's TTL in
# effect (run.sh's bounds follow it).
#
#   ha_setup            the cluster, with the lessons database, 1 primary
#                       and 2 streaming replicas (1 synchronous)
#   ha_dbd_params       the DBDParams line for the Apache servers
#   ha_dbd_min          the DBDMin line's number
#   ha_primary          the name of the node that leads (n0, n1, n2)
#   ha_kill_node NODE   SIGKILL of its Patroni and its postgres
#   ha_signal_node SIG NODE
#   ha_start_node NODE  its Patroni started again
#   ha_stop             everything stopped
# Which etcd API Patroni speaks: etcd3, or etcd (v2, which etcd 3.4 and
# 3.5 serve with --enable-v2).  Patroni before 3.0.3 (Debian 12 has
# 3.0.2) may overwrite a new leader's key on etcd3 after a pause longer
# than the TTL (patroni/patroni#2689): the old primary takes the lead
# back and the new one's answered writes are rewound away.  Its v2 code
# compares the key's value before renewing it.
HA_PATRONI_VERSION=$(patroni --version | awk '{ print $2 }')
if [ -z "${HA_DCS:-}" ]; then
    HA_DCS=etcd3
    dpkg --compare-versions "$HA_PATRONI_VERSION" lt 3.0.3 && HA_DCS=etcd
fi
HA_NODES="n0 n1 n2"
declare -A HA_PG_PORT HA_API_PORT HA_ETCD_PORT HA_PEER_PORT HA_PATRONI_PID HA_ETCD_PID

HA_DOC=${HA_DOC:-$ROOT/docs/operations.md}
HA_HEADING='## High availability with Patroni'

# ha_doc_block LANG: the section's first block fenced as LANG.
ha_doc_block() {
    awk -v head="$HA_HEADING" -v fence="\`\`\`$1" '
        $0 == head { sect = 1; next }
        sect && /^## / { exit }
        !sect { next }
        inb && /^```[ \t]*$/ { exit }
        inb { print; next }
        $0 == fence { inb = 1 }' "$HA_DOC"
}

# ha_fill FROM TO ...: stdin with each FROM (as written) made TO; a FROM
# not found fails, naming it.
ha_fill() {
    HA_DOC=$HA_DOC perl -e 'local $/; my $t = <STDIN>; my @p = @ARGV;
        while (@p) {
            my ($from, $to) = splice(@p, 0, 2);
            $t =~ s/\Q$from\E/$to/g
                or die "patroni.sh: $ENV{HA_DOC} no longer has \"$from\"\n";
        }
        print $t' "$@"
}

# The TTL in effect: the document's, which Patroni 4.0 (Debian 13) raises
# to 20 when smaller (its config.py), as the document says; the block is
# then written with 20, as the document asks an admin to.
HA_DOC_TTL=$(ha_doc_block yaml | sed -n 's/^ *ttl: *\([0-9][0-9]*\) *$/\1/p')
[ -n "$HA_DOC_TTL" ] || die "patroni.sh: $HA_DOC has no ttl in its Patroni block"
HA_TTL=$HA_DOC_TTL
if [ "$HA_TTL" -lt 20 ] && dpkg --compare-versions "$HA_PATRONI_VERSION" ge 4.0; then
    HA_TTL=20
fi

ha_etcd_hosts() {
    local n out=""
    for n in $HA_NODES; do out="$out${out:+,}127.0.0.1:${HA_ETCD_PORT[$n]}"; done
    echo "$out"
}

# The document's /etc/default/etcd for NODE, and etcd started with it as
# Debian's unit does (EnvironmentFile).
ha_write_etcd() {       # ha_write_etcd NODE
    local n=$1 cluster="" m u="http://127.0.0.1"
    for m in $HA_NODES; do
        cluster="$cluster${cluster:+,}e$m=$u:${HA_PEER_PORT[$m]}"
    done
    ha_doc_block sh | ha_fill \
        "ETCD_INITIAL_CLUSTER=pg1=http://10.0.0.11:2380,pg2=http://10.0.0.12:2380,pg3=http://10.0.0.13:2380" \
        "ETCD_INITIAL_CLUSTER=$cluster" \
        "ETCD_NAME=pg1" "ETCD_NAME=e$n" \
        "ETCD_DATA_DIR=/var/lib/etcd/lessons" "ETCD_DATA_DIR=$WORK/etcd-$n" \
        "http://10.0.0.11:2379,http://127.0.0.1:2379" "$u:${HA_ETCD_PORT[$n]}" \
        "http://10.0.0.11:2379" "$u:${HA_ETCD_PORT[$n]}" \
        "http://10.0.0.11:2380" "$u:${HA_PEER_PORT[$n]}" \
        "ETCD_ENABLE_V2=true" "ETCD_ENABLE_V2=$([ "$HA_DCS" = etcd ] && echo true || echo false)" \
        >"$WORK/etcd-$n.env" || return 1
}
ha_start_etcd() {       # ha_start_etcd NODE
    local n=$1
    mkdir -p "$WORK/etcd-$n"
    [ "$(id -u)" -ne 0 ] || chown "$PG_USER_SYS:" "$WORK/etcd-$n"
    # shellcheck disable=SC2046
    setsid "${AS_PG[@]}" env -C "$WORK" $(grep -v '^[[:space:]]*#' "$WORK/etcd-$n.env" | grep '=') etcd \
        </dev/null >>"$WORK/etcd-$n.log" 2>&1 &
    HA_ETCD_PID[$n]=$!
    disown "$!"     # killed on purpose: no "Killed" from bash
}

# The document's /etc/patroni/config.yml for NODE.  The sockets go to
# this run's directory (Debian's /var/run/postgresql is not the test
# user's).
ha_write_patroni() {    # ha_write_patroni NODE
    local n=$1
    { ha_doc_block yaml | ha_fill \
        "name: pg1" "name: $n" \
        "ttl: $HA_DOC_TTL" "ttl: $HA_TTL" \
        "10.0.0.11:8008" "127.0.0.1:${HA_API_PORT[$n]}" \
        $'\netcd:\n  hosts:' $'\n'"$HA_DCS:"$'\n  hosts:' \
        "10.0.0.11:2379,10.0.0.12:2379,10.0.0.13:2379" "$(ha_etcd_hosts)" \
        "10.0.0.0/24" "127.0.0.1/32" \
        "10.0.0.11:5432" "127.0.0.1:${HA_PG_PORT[$n]}" \
        "/var/lib/postgresql/15/lessons" "$WORK/pg-$n" \
        "/usr/lib/postgresql/15/bin" "$PGBIN" \
        "/var/lib/postgresql/.pgpass.patroni" "$WORK/pgpass-$n" \
        || return 1
      printf "  parameters:\n    unix_socket_directories: '%s'\n" "$WORK"
    } >"$WORK/patroni-$n.yml"
}

# The end of each node's Patroni and etcd log: the run's directory is
# gone after CI (and with the other release's root, after the run).
ha_log_tails() {
    local f
    for f in "$WORK"/etcd-*.log "$WORK"/patroni-*.log; do
        [ -f "$f" ] || continue
        echo "history: the end of ${f##*/}:"
        tail -n 12 "$f" | sed 's/^/    /'
    done
}

ha_start_node() {       # ha_start_node NODE
    local n=$1
    # From this run's directory: as root Patroni runs as the test user,
    # and its initdb (Python's multiprocessing) goes back to the
    # directory it was started in, which a checkout in a private
    # directory (mktemp -d, /root) does not let that user enter.
    setsid "${AS_PG[@]}" env -C "$WORK" patroni "$WORK/patroni-$n.yml" \
        </dev/null >>"$WORK/patroni-$n.log" 2>&1 &
    HA_PATRONI_PID[$n]=$!
    disown "$!"
}

# The node whose Patroni leads, from any member's REST API.
ha_primary() {
    local n
    for n in $HA_NODES; do
        curl -s --max-time 2 "http://127.0.0.1:${HA_API_PORT[$n]}/cluster" 2>/dev/null \
            | perl -MJSON::PP -e 'my $c = eval { decode_json(join "", <STDIN>) } or exit 1;
                for (@{$c->{members}}) { if ($_->{role} eq "leader" && $_->{state} eq "running")
                    { print $_->{name}, "\n"; exit 0 } } exit 1' && return 0
    done
    return 1
}
# "leader sync replica" states of the members, from the leader's view.
ha_roles() {
    local n
    for n in $HA_NODES; do
        curl -s --max-time 2 "http://127.0.0.1:${HA_API_PORT[$n]}/cluster" 2>/dev/null \
            | perl -MJSON::PP -e 'my $c = eval { decode_json(join "", <STDIN>) } or exit 1;
                print join(" ", map { "$_->{name}=$_->{role}/$_->{state}" }
                    sort { $a->{name} cmp $b->{name} } @{$c->{members}}), "\n"' && return 0
    done
    return 1
}
# Until a leader runs with a synchronous standby and the other replica
# streams: within SECONDS (default 60).
ha_wait_healthy() {
    local roles i
    for i in $(seq 1 $((${1:-60} * 5))); do
        roles=$(ha_roles || true)
        if [ "$(grep -o '=leader/running' <<<"$roles" | wc -l)" = 1 ] \
            && grep -q '=sync_standby/\(running\|streaming\)' <<<"$roles" \
            && [ "$(grep -o '=\(sync_standby\|replica\)/\(running\|streaming\)' <<<"$roles" | wc -l)" = 2 ]; then
            return 0
        fi
        sleep 0.2
    done
    echo "history: the Patroni cluster is not healthy: ${roles:-no member answers}" >&2
    return 1
}

# A free port none of this cluster's others is (they are bound only once
# everything is picked).
ha_port() {
    local p
    while :; do
        p=$(pick_port)
        case $HA_USED in *" $p "*) ;; *) echo "$p"; return 0 ;; esac
    done
}

ha_setup() {
    local n f leader
    [ "$(id -u)" -ne 0 ] || chown "$PG_USER_SYS:" "$WORK"
    HA_USED=" "
    for n in $HA_NODES; do
        HA_PG_PORT[$n]=$(ha_port); HA_USED+="${HA_PG_PORT[$n]} "
        HA_API_PORT[$n]=$(ha_port); HA_USED+="${HA_API_PORT[$n]} "
        HA_ETCD_PORT[$n]=$(ha_port); HA_USED+="${HA_ETCD_PORT[$n]} "
        HA_PEER_PORT[$n]=$(ha_port); HA_USED+="${HA_PEER_PORT[$n]} "
    done
    for n in $HA_NODES; do
        ha_write_etcd "$n" || die "the etcd block of $HA_DOC changed"
        ha_start_etcd "$n"
    done
    for _ in $(seq 1 100); do
        ETCDCTL_API=3 etcdctl --endpoints "$(ha_etcd_hosts)" endpoint health >/dev/null 2>&1 && break
        sleep 0.2
    done
    for n in $HA_NODES; do
        ha_write_patroni "$n" || die "the Patroni block of $HA_DOC changed"
        ha_start_node "$n"
    done
    ha_wait_healthy 90 || { ha_log_tails >&2; die "Patroni did not make a cluster (logs in $WORK)"; }
    leader=$(ha_primary) || die "no leader"
    # The document's passwords (pg_hba: scram-sha-256); the API's role
    # has this run's.
    PGPASSWORD=change-me-1 pg psql -X -q -At -h 127.0.0.1 -p "${HA_PG_PORT[$leader]}" \
        -U postgres -d postgres -c "CREATE ROLE app LOGIN PASSWORD 'history'" \
        -c "CREATE DATABASE lessons OWNER app" >/dev/null
    for f in schema.pgsql.sql sample-lessons.sql; do
        PGPASSWORD=history PGOPTIONS="-c client_min_messages=warning" pg psql -X -q -h 127.0.0.1 \
            -p "${HA_PG_PORT[$leader]}" -U app -d lessons -v ON_ERROR_STOP=1 -f - \
            <"$ROOT/sql/$f" >/dev/null
    done
    P1=${HA_PG_PORT[$leader]}
}

# The document's DBDParams, for this run's nodes and role.
ha_dbd_params() {
    local n hosts="" ports=""
    for n in $HA_NODES; do
        hosts="$hosts${hosts:+,}127.0.0.1"; ports="$ports${ports:+,}${HA_PG_PORT[$n]}"
    done
    ha_doc_block apache | sed -n 's/^DBDParams "\(.*\)"$/\1/p' | ha_fill \
        "host=10.0.0.11,10.0.0.12,10.0.0.13" "host=$hosts" \
        "port=5432,5432,5432" "port=$ports" \
        "user=lessons password=secret" "user=app password=history" \
        || die "the DBDParams of $HA_DOC changed"
}

# The document's DBDMin (0: mod_dbd makes connections under its pool's
# lock, and a minimum has it try after each request).
ha_dbd_min() {
    local n
    n=$(ha_doc_block apache | sed -n 's/^DBDMin \([0-9][0-9]*\)$/\1/p')
    [ -n "$n" ] || die "the apache block of $HA_DOC has no DBDMin"
    echo "$n"
}

# The postmaster of NODE, from its data directory; nothing when it is
# down (and never a failure: run.sh runs under set -e).
ha_postmaster() { head -n 1 "$WORK/pg-$1/postmaster.pid" 2>/dev/null || true; }

ha_signal_node() {      # ha_signal_node SIG NODE: its Patroni and all its postgres
    local sig=$1 n=$2 pm
    pm=$(ha_postmaster "$n")
    kill -"$sig" -- "-${HA_PATRONI_PID[$n]}" 2>/dev/null || true
    if [ -n "$pm" ]; then
        # shellcheck disable=SC2046
        kill -"$sig" "$pm" $(pgrep -P "$pm") 2>/dev/null || true
    fi
}

# Every process that runs NODE's database: the postmaster named by its
# postmaster.pid, any process whose command line names its data
# directory (a postmaster Patroni is starting again has no pid file yet,
# and Patroni starts it in a session of its own, out of the group
# ha_signal_node kills; so do pg_rewind and pg_basebackup), and their
# children (the backends' titles do not name the directory).
ha_node_pids() {        # ha_node_pids NODE
    local n=$1 pm
    for pm in $(ha_postmaster "$n") \
        $(pgrep -f -- "$WORK/pg-$n(/| |\$)" 2>/dev/null || true); do
        echo "$pm"
        pgrep -P "$pm" 2>/dev/null || true
    done
}
# Whether PID runs (a zombie left for init to reap does not).
ha_running() { case "$(ps -o stat= -p "$1" 2>/dev/null)" in ""|Z*) return 1 ;; esac; }

# Everything killed, and gone before it returns: a postgres still dying
# writes into the data directory stop_pg removes next (CI saw rm fail
# on pg-n1/base/16386, "Directory not empty", after the hastop fault).
ha_stop() {
    local n pids live seen=() pid
    for n in $HA_NODES; do
        [ -z "${HA_PATRONI_PID[$n]:-}" ] || ha_signal_node CONT "$n"
        [ -z "${HA_PATRONI_PID[$n]:-}" ] || ha_signal_node KILL "$n"
        [ -z "${HA_ETCD_PID[$n]:-}" ] || kill -KILL -- "-${HA_ETCD_PID[$n]}" 2>/dev/null || true
    done
    for _ in $(seq 1 100); do
        pids=() live=()
        for n in $HA_NODES; do
            # shellcheck disable=SC2207
            pids+=($(ha_node_pids "$n"))
        done
        for pid in "${pids[@]}" "${seen[@]}"; do
            ha_running "$pid" && live+=("$pid")
        done
        [ "${#live[@]}" -gt 0 ] || break
        kill -KILL "${live[@]}" 2>/dev/null || true
        seen+=("${live[@]}")
        sleep 0.1
    done
    HA_PATRONI_PID=() HA_ETCD_PID=()
}
