# The other Debian release (issue 22): make test-all runs the core suites
# again inside a Debian 13 root on Debian 12, or a Debian 12 root on 13
# (t/release/run.sh says how), beside its own sanitizer runs and
# fragments.  make release-test runs it alone.
RELEASE_SUITE = t/release/run.sh

.PHONY: release-test
release-test:
	@t/release/run.sh
