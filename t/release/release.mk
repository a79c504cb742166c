# The other Debian release (issue 22): make test-all runs the core suites
# again inside a Debian 13 root on Debian 12, or a Debian 12 root on 13
# (t/release/run.sh says how), beside its own sanitizer runs and
# fragments.  make release-test runs it alone.
RELEASE_SUITE = t/release/run.sh

# libjwt's GnuTLS build, which verifies PS* where Debian's OpenSSL build
# does not (t/release/flavor.sh): in make test-all, and in the other
# release's root (make test-release); a SKIP line where libjwt is older
# than 1.16.
FRAGMENT_SUITES += t/release/flavor.sh
JWT_FLAVOR_SUITE = t/release/flavor.sh

.PHONY: jwt-flavor-test
jwt-flavor-test:
	@t/tools/deps.sh release
	@$(MAKE) -s --no-print-directory all $(UNIT_TESTS) test-tools
	@$(with_counts); $(call run_fragment_suites_of,$(JWT_FLAVOR_SUITE)); $(summary)

.PHONY: release-test
release-test:
	@t/release/run.sh
