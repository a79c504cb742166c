# The Debian package test (issue 9): builds libapache2-mod-lessons out of
# tree, installs it into this machine's apache2, serves the API through
# it, purges it and leaves the system Apache as it was found.  make test
# and make test-all run it beside the integration suites (in make
# test-all before the fuzzers, in the background); make package-test runs
# it alone.  As root, or through sudo.
BACKGROUND_SUITES += t/package/package-test.sh

.PHONY: package-test
package-test: test-deps
	@t/package/package-test.sh
