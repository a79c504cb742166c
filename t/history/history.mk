# The history suite (issue 56): clients against three Apache servers on
# one PostgreSQL database under faults (a server stopped past its lease,
# listeners terminated, PostgreSQL restarted, a standby promoted, a write
# storm, a server killed), each history checked by t/history/check.pl
# (t/history/run.sh says what), then the modules broken on purpose,
# which the checker must catch, then the Patroni tier (issue 58: a
# primary killed, a primary frozen past its leader key's TTL, an etcd
# member lost, a planned switchover; t/history/patroni.sh)
# (t/history/suite.sh).  make test-all runs it; make history runs it
# alone (FAULTS=, LEASE=, BROKEN=expiry|acks|run|peer|hold,
# HISTORY_SECONDS=), and
# make history-ha only the Patroni tier (FAULTS=, HA_SECONDS=).
FRAGMENT_SUITES += t/history/suite.sh
TEST_BUILDS += $(BROKEN_MODULES)

.PHONY: history
history: test-deps
	@$(MAKE) -s --no-print-directory all $(BROKEN_MODULES)
	@t/history/suite.sh

.PHONY: history-ha
history-ha: test-deps
	@$(MAKE) -s --no-print-directory all
	@t/history/ha.sh

# The same in the other release's root, with its packages:
# LESSONS_RELEASE_TARGET=history-ha-release t/release/run.sh.  Patroni
# 4.0 (Debian 13) raises a ttl under 20 to 20: the tier writes the block
# with 20 there and allows each fault that much longer (t/history/
# patroni.sh, run.sh).  make test-release runs it too (the Makefile).
# FAULTS= and HA_SECONDS= reach the root (t/release/run.sh).
.PHONY: history-ha-release
history-ha-release:
	@t/tools/deps.sh release
	@$(MAKE) -s --no-print-directory all
	@t/history/ha.sh
