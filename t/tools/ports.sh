# Free TCP ports on 127.0.0.1, for scripts that start servers of their
# own (t/tools/integration.sh, t/bench/bench.sh).  Sourced by bash; the
# caller defines die.
#   port_free PORT       0 when nothing listens there
#   ephemeral_low        where the kernel's source ports begin
#   pick_port [NOT]      a free port from 10000 to below the kernel's
#                        ephemeral range (other than NOT): a port picked
#                        free and bound a moment later must not be taken
#                        meanwhile as the source port of some connection
#                        (etcd's and Patroni's make many)
port_free() {
    perl -MIO::Socket::INET -e \
        'exit(IO::Socket::INET->new(LocalAddr => "127.0.0.1",
              LocalPort => $ARGV[0], Listen => 1, ReuseAddr => 1) ? 0 : 1)' "$1"
}
# The first port of the kernel's ephemeral range (32768 when it cannot
# be read, or leaves too little room below it).
ephemeral_low() {
    local top
    top=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    [ "${top:-0}" -gt 12000 ] 2>/dev/null || top=32768
    echo "$top"
}
pick_port() {
    local p tries=0 top
    top=$(ephemeral_low)
    while [ $tries -lt 200 ]; do
        p=$(( 10000 + (RANDOM * 32768 + RANDOM) % (top - 10000) ))
        if [ "$p" != "${1:-}" ] && port_free "$p"; then
            echo "$p"; return 0
        fi
        tries=$((tries + 1))
    done
    die "no free TCP port found"
}
