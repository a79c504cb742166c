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

# Once a section needs a token, nothing inside it can stop needing one
# (issue 40): 300 layouts over every Lessons directive, nested in every
# section kind, with static files, CGI, ProxyPass and [PT] rewrites
# behind them; no gated request gets 2xx/3xx or reaches a backend, and
# ungated URLs still serve (t/layouts/grammar.pl says what is checked);
# make test-all runs it.
# make layouts-grammar runs it alone (GRAMMAR_ARGS="--count N --seed S
# --keep" to vary it).
FRAGMENT_SUITES += t/layouts/grammar.pl

.PHONY: layouts-grammar
layouts-grammar: test-deps
	@$(MAKE) -s --no-print-directory all
	@t/layouts/grammar.pl $(GRAMMAR_ARGS)

# Tenants of one server naming one keys URL with other CAs and proxies
# (issue 55): 24 servers of generated virtual hosts against a provider
# and an attacker (its own CA, its proxy, its key under the provider's
# kid); a token passes exactly where the tenant's own trust reaches its
# signer (t/layouts/tenants.pl says what is checked); make test-all
# runs it.  make layouts-tenants runs it alone (TENANTS_ARGS="--count N
# --seed S --keep" to vary it).
FRAGMENT_SUITES += t/layouts/tenants.pl

.PHONY: layouts-tenants
layouts-tenants: test-deps
	@$(MAKE) -s --no-print-directory all
	@t/layouts/tenants.pl $(TENANTS_ARGS)
