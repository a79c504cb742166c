# The token gate under generated httpd.conf layouts (issue 18): 520
# layouts of sections, pairs, Require lines, Satisfy Any and <If>, each
# asked with a pool of good, mixed and forged tokens (t/layouts/layouts.pl
# says what is checked).  make test runs it; make layouts runs it alone
# (LAYOUTS_ARGS="--count N --seed S --keep" to vary it).
FRAGMENT_SUITES += t/layouts/layouts.pl

.PHONY: layouts
layouts: test-deps
	@$(MAKE) -s --no-print-directory all
	@t/layouts/layouts.pl $(LAYOUTS_ARGS)
