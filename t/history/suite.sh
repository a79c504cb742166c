#!/bin/bash
# The history suite as make test-all runs it (issue 56): every fault kind
# with read leases (t/history/run.sh), then the two modules broken on
# purpose (make lease-broken), which the checker must catch: one serves
# from its cache past its lease, one answers writes before the
# acknowledgements.  HISTORY_SECONDS (default 10 here) bounds each fault's
# load.  With INTEGRATION_COUNTS=FILE each run appends its counts.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export HISTORY_SECONDS=${HISTORY_SECONDS:-10}
rc=0
"$ROOT/t/history/run.sh" || rc=1
for broken in acks expiry; do
    BROKEN=$broken "$ROOT/t/history/run.sh" || rc=1
done
exit $rc
