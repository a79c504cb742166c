#!/bin/bash
# The Patroni tier of the history suite alone (issue 58: t/history/
# patroni.sh's cluster under t/history/run.sh's faults), as
# t/history/suite.sh ends with it, make history-ha runs it, and so does
# make test-release in the other Debian release's root (and make
# history-ha-release there, alone).  HA_SECONDS
# (default 25) bounds each fault's load (it goes on until the fault is
# over): a failover takes about ten seconds with docs/operations.md's
# settings, twenty with Patroni 4's TTL of 20 at least.  With
# INTEGRATION_COUNTS=FILE each fault's run appends its counts.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HISTORY_TIER=patroni HISTORY_SECONDS=${HA_SECONDS:-25} exec "$ROOT/t/history/run.sh"
