#!/bin/bash
# What a connection costs (issue 45): userland instructions per request
# for the first request of a connection, a later one, and the one that
# closes it, and system calls per request on one keep-alive connection
# and with a new connection for every request; for GET by id, GET all and
# GET level/3, the module and its static twin (the same bytes as files),
# on make bench's server (t/bench/httpd.conf, bench.sh's database, key,
# twins and start_httpd: this script sources bench.sh for them).
#
#   t/bench/conn-cost.sh     (make conn-cost: after make; needs valgrind,
#                             strace, curl, perl)
#   CONN_COST_CONNS=10       connections measured per route and kind
#   CONN_COST_N=100          requests counted per syscall row
#   BENCH_DBS=sqlite3        or pgsql, or both
#   BENCH_KEEP=1             keep the temp dir: each phase's callgrind
#                            dumps in cg/DB-ROUTE-KIND/PHASE.N (for
#                            callgrind_annotate), strace's in out/
#
# Instructions: apache2 -X under callgrind; a Perl client opens a
# connection and sends three requests on it, the third with
# "Connection: close", and after each answer (once httpd has logged it,
# and, for the last, closed the connection) the counts are dumped:
# "first" is the accept, the connection's set-up and its first request,
# "later" a keep-alive request, "closing" a request and the lingering
# close after it.  Each is the mean over the connections.  The dumps
# also hold what the server's threads do while the client waits for
# the log line (a few hundred instructions a second).
#
# System calls: apache2 -X (no valgrind) with strace -f -c attached while
# N requests go on one connection ("keep-alive"), then N requests each on
# a connection of its own that the server closes ("Connection: close").
# Calls per request, and the calls that differ.
#
# Prints two tables.  Everything it starts is stopped on exit.
set -euo pipefail

# The client's dump after each phase: --dump DIR PID CGDIR USER PHASE
# moves the counts since the last dump to DIR/PHASE.N (USER: the one
# callgrind_control runs as, - for this one).
if [ "${1:-}" = --dump ]; then
    as=()
    [ "$5" = - ] || as=(setpriv --reuid="$5" --regid="$5" --init-groups)
    timeout 120 "${as[@]}" callgrind_control -d "$3" >/dev/null 2>&1 || exit 1
    dump=$(ls -t "$4"/callgrind.out."$3".* 2>/dev/null | head -n 1)
    [ -n "$dump" ] || exit 1
    n=$(ls "$2" | grep -c "^$6\\." || true)
    exec mv "$dump" "$2/$6.$n"
fi

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CONNS_N=${CONN_COST_CONNS:-10}
SYS_N=${CONN_COST_N:-100}
for c in strace callgrind_annotate; do
    command -v "$c" >/dev/null || { echo "conn-cost: $c not found (t/tools/deps.sh bench)" >&2; exit 1; }
done
export BENCH_DBS=${BENCH_DBS:-sqlite3}
BENCH_SOURCED=1
. "$ROOT/t/bench/bench.sh"
ROUTES="id all level3"

# The Perl client: CONNS connections of three requests to PATH, running
# "DUMP... PHASE" after each answer once the access log has its line (then
# a pause for the rest of the request, or for the close).
phase_client() {    # phase_client PATH CONNS DUMP...
    perl -MIO::Socket::INET -e '
        my ($port, $path, $token, $conns, $log, @dump) = @ARGV;
        sub lines { open(my $h, "<", $log) or return 0; my $n = 0; $n++ while <$h>; $n }
        sub answer {
            my ($s, $close) = @_;
            print $s "GET $path HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer $token\r\n"
                . ($close ? "Connection: close\r\n" : "") . "\r\n";
            my ($head, $buf) = ("", "");
            while ($head !~ /\r\n\r\n/) {
                sysread($s, $buf, 65536) or die "conn-cost: $path: closed in the head\n";
                $head .= $buf;
            }
            my ($h, $body) = split /\r\n\r\n/, $head, 2;
            $h =~ m{^HTTP/1\.1 200 } or die "conn-cost: $path: " . (split /\r\n/, $h)[0] . "\n";
            my ($len) = $h =~ /^Content-Length:\s*(\d+)/mi;
            while (length($body) < $len) {
                sysread($s, $buf, 65536) or die "conn-cost: $path: closed in the body\n";
                $body .= $buf;
            }
            if ($close) { 1 while sysread($s, $buf, 65536); close $s; }
        }
        sub phase {
            my ($name, $want) = @_;
            for (1 .. 600) { last if lines() >= $want; select(undef, undef, undef, 0.05) }
            lines() >= $want or die "conn-cost: $path: no access log line\n";
            select(undef, undef, undef, 0.3);
            system(@dump, $name) == 0 or die "conn-cost: dump failed\n";
        }
        my $n = lines();
        for (1 .. $conns) {
            my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port") or die "conn-cost: $!\n";
            answer($s, 0); phase("first", $n += 1);
            answer($s, 0); phase("later", $n += 1);
            answer($s, 1); phase("closing", $n += 1);
        }' "$PORT" "$1" "$TOKEN" "$2" "$RUN_ROOT/logs/access.log" "${@:3}"
}
# mean_ir DIR PHASE: the mean of DIR/PHASE.*'s counts (each dump's
# summary: its totals line can hold more, from before the zeroing).
mean_ir() {
    awk '/^summary:/ { s += $2; n++ } END { printf "%d", s / n }' "$1/$2".*
}

INSTR=$WORK/out/conn-instr.tsv       # db route kind first later closing
SYSC=$WORK/out/conn-sys.tsv          # db route kind case calls-per-request top
: >"$INSTR"; : >"$SYSC"
instructions_phase() {
    local db=$1 r kind dir args=()
    log "$db: callgrind: $CONNS_N connections of 3 requests per route and kind"
    start_httpd valgrind --tool=callgrind --callgrind-out-file="$WORK/cg/callgrind.out.%p"
    for r in $ROUTES; do
        for kind in mod twin; do
            mapfile -t args < <(route_args "$r" "$kind")
            dir=$WORK/cg/$db-$r-$kind
            mkdir -p "$dir"
            [ "$(id -u)" -ne 0 ] || chown "$HTTPD_USER:" "$dir"
            curl_n 20 "$r" "$kind"              # warm: caches, pools, threads
            timeout 120 "${AS_HTTPD[@]}" callgrind_control -z "$HTTPD_PID" >/dev/null \
                || die "callgrind_control -z failed"
            phase_client "${args[0]}" "$CONNS_N" "$ROOT/t/bench/conn-cost.sh" --dump \
                "$dir" "$HTTPD_PID" "$WORK/cg" "$([ ${#AS_HTTPD[@]} -eq 0 ] && echo - || echo "$HTTPD_USER")"
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$db" "$r" "$kind" \
                "$(mean_ir "$dir" first)" "$(mean_ir "$dir" later)" "$(mean_ir "$dir" closing)" >>"$INSTR"
            tail -n 1 "$INSTR" | awk -F'\t' '{ printf "conn-cost:   %-7s %-7s %-5s first %7d  later %7d  closing %7d\n", $1, $2, $3, $4, $5, $6 }' >&2
        done
    done
    stop_httpd
}

# A request N times: on one connection (ka), or each on its own that the
# server closes (close).
requests() {    # requests CASE ROUTE KIND N
    local args=() u i
    mapfile -t args < <(route_args "$2" "$3")
    u=$(url "${args[0]}")
    if [ "$1" = ka ]; then
        curl_n "$4" "$2" "$3"
    else
        for ((i = 0; i < $4; i++)); do
            curl -s -o /dev/null -w '%{http_code}\n' "${args[@]:1}" -H 'Connection: close' "$u"
        done | grep -c '^200$' | grep -qx "$4" || die "$2 $3: not every answer was 200"
    fi
}
syscalls_phase() {
    local db=$1 r kind c out st
    log "$db: strace: $SYS_N requests per route, kind and case"
    start_httpd env
    for r in $ROUTES; do
        for kind in mod twin; do
            requests ka "$r" "$kind" 20
            for c in ka close; do
                out=$WORK/out/strace-$db-$r-$kind-$c.txt
                strace -f -c -o "$out" -p "$HTTPD_PID" 2>/dev/null &
                st=$!
                sleep 1                                 # attached to every thread
                requests "$c" "$r" "$kind" "$SYS_N"
                sleep 0.5
                kill -INT "$st"
                wait "$st" || true
                # calls per request, then "name calls" of each call
                awk -v n="$SYS_N" -v db="$db" -v r="$r" -v k="$kind" -v c="$c" '
                    NF >= 5 && $NF != "total" && $1 ~ /^[0-9.]+$/ { per[$NF] = $4 }
                    END { s = 0; for (k2 in per) s += per[k2]
                          line = ""; for (k2 in per) line = line sprintf(" %s=%.2f", k2, per[k2] / n)
                          printf "%s\t%s\t%s\t%s\t%.2f\t%s\n", db, r, k, c, s / n, line }' "$out" >>"$SYSC"
                tail -n 1 "$SYSC" | awk -F'\t' '{ printf "conn-cost:   %-7s %-7s %-5s %-5s %6.2f calls/request\n", $1, $2, $3, $4, $5 }' >&2
            done
        done
    done
    stop_httpd
}

for DRIVER in $DBS; do
    "setup_$DRIVER"
    start_httpd
    capture "$DRIVER"
    stop_httpd
    instructions_phase "$DRIVER"
    syscalls_phase "$DRIVER"
    [ "$DRIVER" != pgsql ] || stop_pgsql
done

echo "Userland instructions per request (callgrind, apache2 -X; mean of $CONNS_N connections)"
echo
echo "| db | route | kind | first | later | closing | a connection's own (first + closing - 2 later) |"
echo "|---|---|---|--:|--:|--:|--:|"
awk -F'\t' '{ printf "| %s | %s | %s | %d | %d | %d | %d |\n", $1, $2, $3, $4, $5, $6, $4 + $6 - 2 * $5 }' "$INSTR"
echo
echo "System calls per request (strace -f -c, apache2 -X; $SYS_N requests)"
echo
echo "| db | route | kind | one keep-alive connection | a connection each (Connection: close) |"
echo "|---|---|---|--:|--:|"
awk -F'\t' '{ k = $1 "\t" $2 "\t" $3; v[k, $4] = $5; if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
    END { for (i = 1; i <= n; i++) { split(order[i], f, "\t")
          printf "| %s | %s | %s | %.2f | %.2f |\n", f[1], f[2], f[3], v[order[i], "ka"], v[order[i], "close"] } }' "$SYSC"
echo
echo "Each call, per request:"
awk -F'\t' '{ printf "  %s %s %s %s:%s\n", $1, $2, $3, $4, $6 }' "$SYSC"
