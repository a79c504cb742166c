#!/bin/bash
# The history suite as make test-all runs it (issue 56): every fault kind
# with read leases (t/history/run.sh: the servers' faults with every
# server on datagrams, the database's with one server without), then the
# modules broken on purpose (make lease-broken), which the checker must
# catch: one serves from its cache past its lease, one answers writes
# before the acknowledgements, one serves a new run's lease at once, one
# acknowledges datagrams and INVALIDATEs without raising or dropping its
# version (LessonsDBLeasePeer), one answers HOLDs without holding its
# drop; then the Patroni tier's faults (t/history/patroni.sh,
# issue 58).  HISTORY_SECONDS (default 10 here; HA_SECONDS, 25, for the
# Patroni tier) bounds each fault's load.  With INTEGRATION_COUNTS=FILE
# each run appends its counts.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export HISTORY_SECONDS=${HISTORY_SECONDS:-10}
rc=0
# Every server with LessonsDBLeasePeer: a write tells the listed servers
# by INVALIDATE and makes no check (docs/scaling.md, step 3), under the
# faults that meet the servers themselves.
HISTORY_LEASE_PEER=all FAULTS="none stop stall kill storm" \
    "$ROOT/t/history/run.sh" || rc=1
# One server without it (mixed): writes make their check, acknowledged
# by datagram and by NOTIFY, under the faults that meet the database.
FAULTS="terminate pgrestart failover" "$ROOT/t/history/run.sh" || rc=1
# Writes that make no check (one server holds the only lease), as the
# module broken on purpose that serves a new run at once meets them.
STOP_ALONE=all FAULTS=stop HISTORY_SERVERS=2 HISTORY_CLIENTS=10 \
    "$ROOT/t/history/run.sh" || rc=1
for broken in acks expiry run peer hold; do
    BROKEN=$broken "$ROOT/t/history/run.sh" || rc=1
done
# The Patroni tier (issue 58), with its longer loads.
"$ROOT/t/history/ha.sh" || rc=1
exit $rc
