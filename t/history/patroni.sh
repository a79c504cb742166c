# The Patroni tier of the history suite (issue 58), sourced by
# t/history/run.sh: three etcd members and three PostgreSQL nodes, each
# run by its own Patroni, from Debian's packages alone (patroni,
# etcd-server), on 127.0.0.1 ports.  Synchronous mode: a commit is
# answered once a standby has it, and only that standby may be promoted,
# so no answered write is lost when the primary is.  The settings are
# docs/operations.md's ("High availability with Patroni"), with the
# ports and directories of this run.
#
# Needs from run.sh: WORK, PGBIN, AS_PG (the PostgreSQL user's prefix),
# pick_port, die, pg, psql_at, ha_settings (below) reads HA_TTL,
# HA_LOOP_WAIT, HA_RETRY_TIMEOUT.
#
#   ha_setup            the cluster, with the lessons database, 1 primary
#                       and 2 streaming replicas (1 synchronous)
#   ha_dbd_params       the DBDParams line for the Apache servers
#   ha_primary          the name of the node that leads (n0, n1, n2)
#   ha_kill_node NODE   SIGKILL of its Patroni and its postgres
#   ha_signal_node SIG NODE
#   ha_start_node NODE  its Patroni started again
#   ha_stop             everything stopped
HA_TTL=${HA_TTL:-10}
HA_LOOP_WAIT=${HA_LOOP_WAIT:-2}
HA_RETRY_TIMEOUT=${HA_RETRY_TIMEOUT:-4}
# Which etcd API Patroni speaks: etcd3, or etcd (v2, which etcd 3.4 and
# 3.5 serve with --enable-v2).  Patroni before 3.0.3 (Debian 12 has
# 3.0.2) may overwrite a new leader's key on etcd3 after a pause longer
# than the TTL (patroni/patroni#2689): the old primary takes the lead
# back and the new one's answered writes are rewound away.  Its v2 code
# compares the key's value before renewing it.
if [ -z "${HA_DCS:-}" ]; then
    HA_DCS=etcd3
    dpkg --compare-versions "$(patroni --version | awk '{ print $2 }')" lt 3.0.3 && HA_DCS=etcd
fi
HA_NODES="n0 n1 n2"
declare -A HA_PG_PORT HA_API_PORT HA_ETCD_PORT HA_PEER_PORT HA_PATRONI_PID HA_ETCD_PID

ha_etcd_hosts() {
    local n out=""
    for n in $HA_NODES; do out="$out${out:+,}127.0.0.1:${HA_ETCD_PORT[$n]}"; done
    echo "$out"
}

ha_start_etcd() {       # ha_start_etcd NODE
    local n=$1 cluster="" m
    for m in $HA_NODES; do
        cluster="$cluster${cluster:+,}e$m=http://127.0.0.1:${HA_PEER_PORT[$m]}"
    done
    mkdir -p "$WORK/etcd-$n"
    [ "$(id -u)" -ne 0 ] || chown "$PG_USER_SYS:" "$WORK/etcd-$n"
    # A busy two-core machine misses 100 ms heartbeats; these are
    # etcd's advice for slower networks.
    setsid "${AS_PG[@]}" etcd --name "e$n" --data-dir "$WORK/etcd-$n" \
        --listen-client-urls "http://127.0.0.1:${HA_ETCD_PORT[$n]}" \
        --advertise-client-urls "http://127.0.0.1:${HA_ETCD_PORT[$n]}" \
        --listen-peer-urls "http://127.0.0.1:${HA_PEER_PORT[$n]}" \
        --initial-advertise-peer-urls "http://127.0.0.1:${HA_PEER_PORT[$n]}" \
        --initial-cluster "$cluster" --initial-cluster-token lessons-history \
        --initial-cluster-state new --heartbeat-interval 250 --election-timeout 2500 \
        $([ "$HA_DCS" != etcd ] || echo --enable-v2) \
        </dev/null >>"$WORK/etcd-$n.log" 2>&1 &
    HA_ETCD_PID[$n]=$!
    disown "$!"     # killed on purpose: no "Killed" from bash
}

ha_write_patroni() {    # ha_write_patroni NODE
    local n=$1
    cat >"$WORK/patroni-$n.yml" <<EOF
scope: lessons
namespace: /service/
name: $n
restapi:
  listen: 127.0.0.1:${HA_API_PORT[$n]}
  connect_address: 127.0.0.1:${HA_API_PORT[$n]}
$HA_DCS:
  hosts: $(ha_etcd_hosts)
bootstrap:
  dcs:
    ttl: $HA_TTL
    loop_wait: $HA_LOOP_WAIT
    retry_timeout: $HA_RETRY_TIMEOUT
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_log_hints: 'on'
        max_wal_senders: 10
        max_replication_slots: 10
  initdb:
    - encoding: UTF8
    - no-locale
  pg_hba:
    - host replication replicator 127.0.0.1/32 trust
    - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:${HA_PG_PORT[$n]}
  connect_address: 127.0.0.1:${HA_PG_PORT[$n]}
  data_dir: $WORK/pg-$n
  bin_dir: $PGBIN
  pgpass: $WORK/pgpass-$n
  authentication:
    superuser:
      username: postgres
      password: history
    replication:
      username: replicator
      password: history
    rewind:
      username: postgres
      password: history
  parameters:
    unix_socket_directories: '$WORK'
EOF
}

ha_start_node() {       # ha_start_node NODE
    local n=$1
    setsid "${AS_PG[@]}" patroni "$WORK/patroni-$n.yml" </dev/null >>"$WORK/patroni-$n.log" 2>&1 &
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
    for n in $HA_NODES; do ha_start_etcd "$n"; done
    for _ in $(seq 1 100); do
        ETCDCTL_API=3 etcdctl --endpoints "$(ha_etcd_hosts)" endpoint health >/dev/null 2>&1 && break
        sleep 0.2
    done
    for n in $HA_NODES; do ha_write_patroni "$n"; ha_start_node "$n"; done
    ha_wait_healthy 90 || die "Patroni did not make a cluster (logs in $WORK)"
    leader=$(ha_primary) || die "no leader"
    psql_at_db() { pg psql -X -q -At -h 127.0.0.1 -p "${HA_PG_PORT[$leader]}" -U postgres "$@"; }
    psql_at_db -d postgres -c "CREATE ROLE app LOGIN" -c "CREATE DATABASE lessons OWNER app" >/dev/null
    for f in schema.pgsql.sql sample-lessons.sql; do
        PGOPTIONS="-c client_min_messages=warning" pg psql -X -q -h 127.0.0.1 \
            -p "${HA_PG_PORT[$leader]}" -U app -d lessons -v ON_ERROR_STOP=1 -f - \
            <"$ROOT/sql/$f" >/dev/null
    done
    P1=${HA_PG_PORT[$leader]}
}

ha_dbd_params() {
    local n hosts="" ports=""
    for n in $HA_NODES; do
        hosts="$hosts${hosts:+,}127.0.0.1"; ports="$ports${ports:+,}${HA_PG_PORT[$n]}"
    done
    echo "host=$hosts port=$ports dbname=lessons user=app target_session_attrs=read-write connect_timeout=2"
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

ha_stop() {
    local n
    for n in $HA_NODES; do
        [ -z "${HA_PATRONI_PID[$n]:-}" ] || ha_signal_node CONT "$n"
        [ -z "${HA_PATRONI_PID[$n]:-}" ] || ha_signal_node KILL "$n"
        [ -z "${HA_ETCD_PID[$n]:-}" ] || kill -KILL -- "-${HA_ETCD_PID[$n]}" 2>/dev/null || true
    done
    HA_PATRONI_PID=() HA_ETCD_PID=()
}
