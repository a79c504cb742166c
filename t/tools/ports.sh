# Free TCP ports on 127.0.0.1, for scripts that start servers of their
# own (t/tools/integration.sh, t/bench/bench.sh).  Sourced by bash; the
# caller defines die.
#   port_free PORT       0 when nothing listens there
#   pick_port [NOT]      a free port in 20000-49999 (other than NOT)
port_free() {
    perl -MIO::Socket::INET -e \
        'exit(IO::Socket::INET->new(LocalAddr => "127.0.0.1",
              LocalPort => $ARGV[0], Listen => 1, ReuseAddr => 1) ? 0 : 1)' "$1"
}
pick_port() {
    local p tries=0
    while [ $tries -lt 200 ]; do
        p=$(( 20000 + (RANDOM * 32768 + RANDOM) % 30000 ))
        if [ "$p" != "${1:-}" ] && port_free "$p"; then
            echo "$p"; return 0
        fi
        tries=$((tries + 1))
    done
    die "no free TCP port found"
}
