# make bench: the benchmark behind docs/benchmarks.md (issue 7), included
# by the Makefile.  Nothing in make test depends on it.
#   make bench                 the full run (about 10 minutes), writes
#                              docs/benchmarks.md and its figures
#                              (docs/images/bench-*.png) and prints it
#   make bench BENCH_QUICK=1   a smoke run: one round of 1 s, fewer
#                              callgrind and memory requests
#   BENCH_DBS=sqlite3 (or pgsql) runs one database only; BENCH_KEEP=1 keeps
#   the run's temp dir; BENCH_OUT=FILE writes the report elsewhere.
#   make bench BENCH_ONLY=tokens  only the certificate-bound and introspected
#                              rows (t/bench/token-rows.sh), on the first
#                              database; prints the report, writes it only
#                              to BENCH_OUT
#   make bench BENCH_ONLY=shipped only the shipped-configuration rows, on
#                              each database; printed as for tokens
#                              (BENCH_ONLY=shipped-writes: the writes only)
#   BENCH_ROUNDS=N              N alternating rounds instead of 3
#   BENCH_DUR=S                 S seconds a run instead of 3 (1 quick)
#   make bench BENCH_ONLY=lease   only the read-lease rows (issue 56,
#                              t/bench/lease-rows.sh), on PostgreSQL,
#                              LessonsDBLease off against on; printed as
#                              for tokens.  BENCH_LEASE=SECONDS the lease
#                              (default 2; 0: no lease rows in the full
#                              run), BENCH_SERVERS="1 4 8" the servers;
#                              BENCH_ONLY=lease-writes: the writes only;
#                              BENCH_LEASE_PEER=1: the lease on with
#                              LessonsDBLeasePeer (datagrams)
# It installs what it needs first (t/tools/deps.sh bench: wrk, siege,
# valgrind, curl, gnuplot, the PostgreSQL server binaries and pgbench), builds the
# module and, where node and npm are, the test provider's modules (make
# idp-deps: the introspected row; without them it is skipped), and runs
# t/bench/bench.sh, which stops everything it started on any exit.

.PHONY: bench bench-deps

bench-deps:
	@t/tools/deps.sh bench

# Sub-make, as make test does, so that a first run builds after the
# packages are in.
bench: bench-deps
	@$(MAKE) -s --no-print-directory all build/bench/statement build/bench/sqlite-loop \
	    build/bench/tls-load
	@# The read-lease rows alone need no test provider.
	@if [ '$(filter lease lease-writes,$(BENCH_ONLY))' = '' ] && command -v node >/dev/null && command -v npm >/dev/null; then \
	    $(MAKE) -s --no-print-directory idp-deps \
	        || echo "bench: make idp-deps failed: the introspected row will be skipped" >&2; \
	fi
	@MODULE='$(CURDIR)/$(MODULE)' HTTPD='$(HTTPD)' BENCH_QUICK='$(BENCH_QUICK)' BENCH_ONLY='$(BENCH_ONLY)' \
	    BENCH_COMMAND='make bench$(if $(BENCH_QUICK), BENCH_QUICK=$(BENCH_QUICK))$(if $(BENCH_DBS), BENCH_DBS="$(BENCH_DBS)")$(if $(BENCH_ONLY), BENCH_ONLY=$(BENCH_ONLY))$(if $(BENCH_ROUNDS), BENCH_ROUNDS=$(BENCH_ROUNDS))$(if $(BENCH_DUR), BENCH_DUR=$(BENCH_DUR))$(if $(BENCH_LEASE), BENCH_LEASE=$(BENCH_LEASE))$(if $(BENCH_SERVERS), BENCH_SERVERS="$(BENCH_SERVERS)")$(if $(BENCH_LEASE_PEER), BENCH_LEASE_PEER=$(BENCH_LEASE_PEER))' \
	    t/bench/bench.sh

# make auth-cost: the token gate's cost per request by where the key comes
# from (a key file, a keys URL, a discovered issuer, issuer blocks, DPoP),
# in instructions as make bench counts them (t/bench/auth-cost.sh).
.PHONY: auth-cost
auth-cost: bench-deps
	@$(MAKE) -s --no-print-directory all idp-deps build/bench/verify-cost
	@t/bench/auth-cost.sh

# make conn-cost: what a connection costs (issue 45): instructions of a
# connection's first, later and closing requests and system calls per
# request, keep-alive or a connection each, module against its static
# twin (t/bench/conn-cost.sh).
.PHONY: conn-cost
conn-cost: bench-deps
	@$(MAKE) -s --no-print-directory all
	@t/bench/conn-cost.sh

# Its last rows: a token's verification alone, uncached, per algorithm.
build/bench/verify-cost: t/bench/verify-cost.c $(UNIT_LIB) $(HEADERS)
	@mkdir -p $(dir $@)
	@echo "  CC    $@"
	@$(CC) $(UNIT_CFLAGS) -O2 -o $@ $< $(UNIT_LIB) $(LIBS) $(APR_LIBS)

# The baselines' statements (pgbench's scripts, SQLite's INSERT loop):
# printed from the module's own tables, so that they cannot drift.
build/bench/statement: t/bench/statement.c $(UNIT_LIB) $(HEADERS)
	@mkdir -p $(dir $@)
	@echo "  CC    $@"
	@$(CC) $(UNIT_CFLAGS) -O2 -o $@ $< $(UNIT_LIB) $(LIBS) $(APR_LIBS)

# The certificate-bound row's client: wrk's measurement with a TLS client
# certificate, which wrk cannot send (t/bench/token-rows.sh says why not
# another tool).
build/bench/tls-load: t/bench/tls-load.c
	@mkdir -p $(dir $@)
	@echo "  CC    $@"
	@$(CC) -Wall -Wextra -Werror -O2 -o $@ $< -lssl -lcrypto

# SQLite's bare-loop baseline: the printed create in WRITERS threads.
build/bench/sqlite-loop: t/bench/sqlite-loop.c
	@mkdir -p $(dir $@)
	@echo "  CC    $@"
	@$(CC) -Wall -Wextra -Werror -O2 -o $@ $< -lsqlite3 -lpthread
