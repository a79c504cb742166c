# Failover without serving the past as current (issue 18): a PostgreSQL
# primary and a streaming standby, the standby promoted under load after
# missing the primary's last commit (t/failover/run.sh says what is
# checked).  make test-all runs it; make failover runs it alone.
FRAGMENT_SUITES += t/failover/run.sh

.PHONY: failover
failover: test-deps
	@$(MAKE) -s --no-print-directory all
	@t/failover/run.sh
