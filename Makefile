# mod_lessons: build, run, test and install.
#   make            build build/mod_lessons.so (every object goes under build/)
#   make deps       install the Debian packages building and running need
#                   (t/tools/deps.sh build); make test-deps adds the test
#                   tools (t/tools/deps.sh test)
#   make run        serve the API on http://127.0.0.1:8080 (SQLite, dev key)
#   make token      print a dev token signed with the dev key
#   make test       this release's tests, in minutes: unit tests, the
#                   house checks, the monitoring checks (the Prometheus
#                   rules and Grafana dashboard the package ships, with
#                   promtool), the Apache::Test suite on SQLite and on a
#                   throw-away PostgreSQL cluster side by side, and the
#                   package test: one line per suite, the details of
#                   failures, and "N passed, N failed"
#   make test-all   everything CI runs (.ci/run): make test's suites, and
#                   the sanitizer runs, fuzzers, generated layouts,
#                   failover and the other Debian release's root
#   make unit, make integration   each half of make test alone
#   make lint       the house checks (no circles between files, each folder
#                   of modules/ uses only those below it, every config
#                   field merged, directives documented), also in make test
#   make install    put the module and a2enmod files where Debian looks
#                   (make also builds build/lessons-token, the package's
#                   token tool, and build/lessons-reference.conf, every
#                   directive commented out, made from the directive table)
#   make clean      remove what was built, not the dev key and database
#   make distclean  remove the dev key and database too
# run and install first install the missing build packages, test also the
# test tools.  deps.sh starts no service, makes no PostgreSQL cluster and
# leaves the system Apache's modules as they were.

# The test targets build (module, unit tests, test tools, broken and
# sanitizer builds) with one job per CPU: one job left half of a 2-core
# CI machine idle for its first four minutes.
BUILD_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
APXS      ?= $(shell command -v apxs 2>/dev/null || echo /usr/bin/apxs)
HTTPD     ?= /usr/sbin/apache2
WARN       = -Wall -Wextra -Werror
# The database engines built in (modules/store/lessons_engine_NAME.c
# each, NAME as apr_dbd calls the driver), with what each links and
# includes.
ENGINES   ?= sqlite3 pgsql
ENGINE_LIBS_sqlite3   = -lsqlite3
ENGINE_LIBS_pgsql     = -lpq
# libpq's header lives in its own directory on Debian.
ENGINE_CFLAGS_pgsql   = -I$(shell pg_config --includedir 2>/dev/null || echo /usr/include/postgresql)
ENGINE_CFLAGS = $(foreach e,$(ENGINES),-DLESSONS_ENGINE_$(shell echo $(e) | tr a-z A-Z) $(ENGINE_CFLAGS_$(e)))
# libssl: the client certificate is read from mod_ssl's SSL
# (modules/httpd/mod_lessons_tls.c).
LIBS       = -lcjose -ljansson -lssl -lcrypto -lcurl $(foreach e,$(ENGINES),$(ENGINE_LIBS_$(e))) -lz

# The module's sources, by concern: mod_lessons.c at the top (module
# record, directive table, hooks, as in mod_ssl), the httpd glue in
# modules/httpd/ (mod_lessons.h, mod_lessons_*.c), and the httpd-free
# units (lessons_*.c) in a folder each: base, ops, keys, store, auth,
# api (t/tools/house.pl says which may use which; make lint checks it).
# The units are compiled once, into build/liblessons.a, which the module
# and every unit test link; they are compiled without httpd's include
# directory, so that a unit that includes an httpd header fails to build.
# Each #include of ours names its folder ("auth/lessons_token.h", from
# -Imodules): the line shows which folder a file leans on.  Objects keep
# the folders (build/obj/auth/lessons_token.o).
ALL_ENGINES = $(patsubst modules/store/lessons_engine_%.c,%,$(wildcard modules/store/lessons_engine_*.c))
UNITS      = $(filter-out $(patsubst %,modules/store/lessons_engine_%.c,$(filter-out $(ENGINES),$(ALL_ENGINES))), \
               $(wildcard modules/*/lessons_*.c))
HEADERS    = $(wildcard modules/*/lessons_*.h)
ENGINE     = mod_lessons.c $(wildcard modules/httpd/mod_lessons_*.c)
ENGINE_H   = modules/httpd/mod_lessons.h
OBJ        = build/obj
UNIT_LIB   = build/liblessons.a
UNIT_OBJS  = $(patsubst modules/%.c,$(OBJ)/%.o,$(UNITS))
ENGINE_OBJS = $(patsubst %.c,$(OBJ)/%.o,$(patsubst modules/%,%,$(ENGINE)))
MODULE     = build/mod_lessons.so

# The package's token tool (support/, as httpd keeps htpasswd there): its
# own files, with build/liblessons.a's key units.  The package build
# (debian/rules, through dpkg-buildpackage's environment) gives CFLAGS,
# CPPFLAGS and LDFLAGS with Debian's hardening.
TOKEN_TOOL  = build/lessons-token
TOOL_OBJ    = build/support
TOOL_OBJS   = $(patsubst support/%.c,$(TOOL_OBJ)/%.o,$(wildcard support/*.c))
TOOL_CFLAGS = -std=gnu99 -D_GNU_SOURCE $(or $(CFLAGS),-g -O2) $(CPPFLAGS) \
              $(WARN) -Imodules -Isupport $(APR_CFLAGS)
TOOL_LIBS   = -lcjose -ljansson -lcrypto -lcurl $(APR_LIBS)

# A commented reference of every directive, made from the directive table
# (LESSONS_TABLE) and the directives' reference (DIRECTIVES_DOC) by
# support/lessons-reference.pl, and checked against the table as it is
# made: the package installs it among its examples.
LESSONS_TABLE  ?= mod_lessons.c
DIRECTIVES_DOC ?= docs/directives.md
REFERENCE_CONF  = build/lessons-reference.conf

# httpd's compiler and flags, as apxs -c uses them (hardening included),
# position-independent for the shared module.
apxs_q      = $(shell $(APXS) -q $(1) 2>/dev/null)
HTTPD_CC   := $(or $(call apxs_q,CC),cc)
MOD_CFLAGS := $(call apxs_q,CFLAGS) $(call apxs_q,CPPFLAGS) \
              $(call apxs_q,EXTRA_CPPFLAGS) -fPIC -std=gnu99 \
              -I$(or $(call apxs_q,APR_INCLUDEDIR),/usr/include/apr-1.0) \
              -I$(or $(call apxs_q,APU_INCLUDEDIR),/usr/include/apr-1.0)
HTTPD_INC  := -I$(or $(call apxs_q,INCLUDEDIR),/usr/include/apache2)
MOD_LDFLAGS = -shared -Wl,-z,relro -Wl,-z,now $(LDFLAGS)

# Unit tests link build/liblessons.a, with APR/apr-util from pkg-config.
APR_CFLAGS = $(shell pkg-config --cflags apr-util-1 2>/dev/null)
APR_LIBS   = $(shell pkg-config --libs apr-util-1 2>/dev/null) \
             $(shell pkg-config --libs apr-1 2>/dev/null)
UNIT_TESTS = $(patsubst t/unit/%.c,build/unit/%,$(wildcard t/unit/test_*.c))
UNIT_CFLAGS = -std=c99 -D_GNU_SOURCE -g -O1 $(WARN) -Imodules $(APR_CFLAGS) $(ENGINE_CFLAGS) \
              -DLESSONS_SQL_DIR='"$(CURDIR)/sql"'

# The dev key and database, made once and kept across runs and make clean.
# Started as root, httpd serves as www-data, which must be able to write
# the SQLite directory (and only that); when it cannot even reach this
# checkout (say /root/...), the database lives in /var/tmp instead.
DEV_DIR      = build/dev
DEV_KEY      = $(DEV_DIR)/jwt.key
DEV_PID      = $(DEV_DIR)/httpd.pid
DEV_DB_LOCAL = $(DEV_DIR)/db
DEV_DB_VAR   = /var/tmp/mod-lessons-dev
DEV_DB_DIR   = $(shell if [ "$$(id -u)" = 0 ] \
                 && ! runuser -u www-data -- test -r $(CURDIR)/Makefile \
                      2>/dev/null; then echo $(DEV_DB_VAR); \
                 else echo $(CURDIR)/$(DEV_DB_LOCAL); fi)

# What the build makes: all of it under build/, which holds the dev key
# and database as well (build/dev).
BUILT      = $(OBJ) $(UNIT_LIB) $(MODULE) build/unit $(TOOL_OBJ) $(TOKEN_TOOL) \
             $(REFERENCE_CONF)

# Run as root (sudo make run) in a checkout that someone else owns, what
# make made goes back to the checkout's owner, all but the dev database.
OWNER     := $(shell stat -c %u:%g . 2>/dev/null)
give_back  = if [ "$$(id -u)" = 0 ] && [ -n "$(OWNER)" ] && [ "$(OWNER)" != 0:0 ]; then \
                 find build $(BUILT) -path $(DEV_DB_LOCAL) -prune \
                     -o -exec chown -h $(OWNER) {} + 2>/dev/null || true; \
             fi

# After an earlier sudo make (before ownership went back), refuse with
# the command that fixes it rather than fail half-way.
define mine
if [ "$$(id -u)" != 0 ]; then \
    for p in build $(DEV_DIR) build/unit $(OBJ); do \
        if [ -e $$p ] && [ ! -w $$p ]; then \
            echo "make: $$p belongs to $$(stat -c %U $$p), from an earlier sudo make." >&2; \
            echo "make: sudo chown -R $$(id -un) build (or sudo make distclean) gives it back" >&2; \
            exit 1; \
        fi; \
    done; \
fi
endef

# Missing packages, named with the command that installs them.
missing_hint = t/tools/deps.sh $(1) --check >/dev/null 2>&1 || { \
                   t/tools/deps.sh $(1) --check; \
                   echo "make: run 'make $(2)' (or t/tools/deps.sh $(1)) to install them"; } >&2

# apxs (apache2-dev) brings httpd's headers and flags.
define need_apxs
if [ ! -x "$(APXS)" ]; then \
    echo "make: apxs not found: it comes with apache2-dev, which 'make deps'" \
         "(or t/tools/deps.sh build) installs" >&2; \
    t/tools/deps.sh build --check >&2; exit 1; \
fi
endef

# A live httpd of another make run owns build/dev: refuse, and leave its
# pid file alone.  A pid file no live httpd answers to is removed.
define not_serving
pid=$$(cat $(DEV_PID) 2>/dev/null); \
if [ -n "$$pid" ]; then \
    case "$$(ps -o comm= -p "$$pid" 2>/dev/null)" in \
    apache2|httpd) \
        echo "make $@: httpd (pid $$pid) of another make run is serving from this checkout" >&2; \
        echo "make $@: stop it first (Ctrl-C where it runs, or kill $$pid); $(DEV_PID) names it" >&2; \
        exit 1 ;; \
    *) rm -f $(DEV_PID) ;; \
    esac; \
fi
endef

# $(call npm_ci,DIR,DEST): the recipe that installs the npm packages
# pinned in DIR/package.json and DIR/package-lock.json into DEST with
# npm ci, then touches the target (the fragments' stamp files).
define npm_ci
@$(mine)
@if ! command -v npm >/dev/null 2>&1; then \
    echo "make: npm not found: 'make test-deps' (or t/tools/deps.sh test) installs it" >&2; \
    exit 1; \
fi
@echo "  NPM   $(2)"
@mkdir -p $(2)
@cp $(1)/package.json $(1)/package-lock.json $(2)/
@cd $(2) && npm ci --no-audit --no-fund --loglevel=error \
    >npm.log 2>&1 || { cat npm.log >&2; exit 1; }
@touch $@
@$(give_back)
endef

# Fragments of the test tools, each owning its files: they add targets to
# TEST_TOOLS (built before the suites) and scripts to FRAGMENT_SUITES.
.DEFAULT_GOAL := all
-include t/idp/idp.mk t/oidcp/oidcp.mk t/openapi/openapi.mk t/package/package.mk t/fuzz/fuzz.mk t/promtool/promtool.mk \
         t/layouts/layouts.mk t/failover/failover.mk t/history/history.mk t/release/release.mk

.PHONY: all deps test-deps dev run token test test-all check test-release unit lint integration asan-test install \
        clean clean-module distclean

all: $(MODULE) $(TOKEN_TOOL) $(REFERENCE_CONF)

# Each source file is compiled once per build, with httpd's flags (and, for
# the httpd-facing files, httpd's headers); the module is replaced, never
# rewritten in place, so that a running make run keeps the copy it loaded.
# $(1): the build's own flags (the sanitizers' for the ASan build).
define compile
@$(mine)
@$(need_apxs)
@mkdir -p $(@D)
@echo "  CC    $@"
@$(HTTPD_CC) $(MOD_CFLAGS) $(1) $(WARN) $(ENGINE_CFLAGS) -Imodules -c -o $@ $< \
    || { $(call missing_hint,build,deps); exit 1; }
endef

# The module again with AddressSanitizer and UBSan (gcc's), for the
# integration suite's sanitizer runs (make asan-test; make test-all runs them).
ASAN_OBJ    = build/asan/obj
ASAN_MODULE = build/asan/mod_lessons.so
ASAN_FLAGS  = -fsanitize=address,undefined -fno-omit-frame-pointer -g -O1

OBJ_FLAGS   =

# The object rules of one build: $(1) its directory, $(2) the name of its
# flags' variable (a name: the flags hold commas, which $(call) splits).
define object_rules
$(1)/%.o: modules/%.c $$(HEADERS)
	$$(call compile,$$($(2)))
$(1)/httpd/%.o: modules/httpd/%.c $$(HEADERS) $$(ENGINE_H)
	$$(call compile,$$($(2)) $$(HTTPD_INC))
$(1)/mod_lessons.o: mod_lessons.c $$(HEADERS) $$(ENGINE_H)
	$$(call compile,$$($(2)) $$(HTTPD_INC))
endef
$(eval $(call object_rules,$(OBJ),OBJ_FLAGS))
$(eval $(call object_rules,$(ASAN_OBJ),ASAN_FLAGS))
$(ASAN_MODULE): $(patsubst $(OBJ)/%,$(ASAN_OBJ)/%,$(ENGINE_OBJS) $(UNIT_OBJS))
	@echo "  LD    $@"
	@$(HTTPD_CC) $(MOD_LDFLAGS) $(ASAN_FLAGS) -o $@ $^ $(LIBS)

# Five modules broken on purpose, for the history checker (t/history):
# one keeps serving from its cache after its lease ended, one answers
# writes without waiting for the acknowledgements, one acknowledges
# datagrams (LessonsDBLeasePeer) without raising its version, one serves
# a new run's lease at once, one answers a HOLD without holding its
# drop.  The checker must catch each.  Never installed.
BROKEN_EXPIRY_FLAGS = -DLESSONS_BREAK_LEASE=1
BROKEN_ACKS_FLAGS   = -DLESSONS_BREAK_LEASE=2
BROKEN_PEER_FLAGS   = -DLESSONS_BREAK_LEASE=3
BROKEN_RUN_FLAGS    = -DLESSONS_BREAK_LEASE=4
BROKEN_HOLD_FLAGS   = -DLESSONS_BREAK_LEASE=5
BROKEN_MODULES = build/broken-expiry/mod_lessons.so build/broken-acks/mod_lessons.so \
                 build/broken-peer/mod_lessons.so build/broken-run/mod_lessons.so \
                 build/broken-hold/mod_lessons.so
$(eval $(call object_rules,build/broken-expiry/obj,BROKEN_EXPIRY_FLAGS))
$(eval $(call object_rules,build/broken-acks/obj,BROKEN_ACKS_FLAGS))
$(eval $(call object_rules,build/broken-peer/obj,BROKEN_PEER_FLAGS))
$(eval $(call object_rules,build/broken-run/obj,BROKEN_RUN_FLAGS))
$(eval $(call object_rules,build/broken-hold/obj,BROKEN_HOLD_FLAGS))
build/broken-expiry/mod_lessons.so: $(patsubst $(OBJ)/%,build/broken-expiry/obj/%,$(ENGINE_OBJS) $(UNIT_OBJS))
	@echo "  LD    $@"
	@$(HTTPD_CC) $(MOD_LDFLAGS) -o $@ $^ $(LIBS)
build/broken-acks/mod_lessons.so: $(patsubst $(OBJ)/%,build/broken-acks/obj/%,$(ENGINE_OBJS) $(UNIT_OBJS))
	@echo "  LD    $@"
	@$(HTTPD_CC) $(MOD_LDFLAGS) -o $@ $^ $(LIBS)
build/broken-peer/mod_lessons.so: $(patsubst $(OBJ)/%,build/broken-peer/obj/%,$(ENGINE_OBJS) $(UNIT_OBJS))
	@echo "  LD    $@"
	@$(HTTPD_CC) $(MOD_LDFLAGS) -o $@ $^ $(LIBS)
build/broken-run/mod_lessons.so: $(patsubst $(OBJ)/%,build/broken-run/obj/%,$(ENGINE_OBJS) $(UNIT_OBJS))
	@echo "  LD    $@"
	@$(HTTPD_CC) $(MOD_LDFLAGS) -o $@ $^ $(LIBS)
build/broken-hold/mod_lessons.so: $(patsubst $(OBJ)/%,build/broken-hold/obj/%,$(ENGINE_OBJS) $(UNIT_OBJS))
	@echo "  LD    $@"
	@$(HTTPD_CC) $(MOD_LDFLAGS) -o $@ $^ $(LIBS)

.PHONY: lease-broken
lease-broken: $(BROKEN_MODULES)

$(UNIT_LIB): $(UNIT_OBJS)
	@echo "  AR    $@"
	@rm -f $@ && ar rcs $@ $^

$(MODULE): $(ENGINE_OBJS) $(UNIT_LIB)
	@$(mine)
	@echo "  LD    $@"
	@$(HTTPD_CC) $(MOD_LDFLAGS) -o $@.new $(ENGINE_OBJS) $(UNIT_LIB) $(LIBS) \
	    && mv -f $@.new $@
	@$(give_back)

$(TOOL_OBJ)/%.o: support/%.c $(wildcard support/*.h) $(HEADERS)
	@$(mine)
	@mkdir -p $(@D)
	@echo "  CC    $@"
	@$(CC) $(TOOL_CFLAGS) -c -o $@ $< \
	    || { $(call missing_hint,build,deps); exit 1; }

$(TOKEN_TOOL): $(TOOL_OBJS) $(UNIT_LIB)
	@$(mine)
	@echo "  LD    $@"
	@$(CC) $(TOOL_CFLAGS) -Wl,-z,relro -Wl,-z,now $(LDFLAGS) -o $@.new \
	    $(TOOL_OBJS) $(UNIT_LIB) -Wl,--as-needed $(TOOL_LIBS) \
	    && mv -f $@.new $@
	@$(give_back)

# Made, then checked (every directive of the table in it, every line a
# comment); a file that fails the check is not kept.
$(REFERENCE_CONF): support/lessons-reference.pl $(LESSONS_TABLE) $(DIRECTIVES_DOC)
	@$(mine)
	@mkdir -p $(@D)
	@echo "  GEN   $@"
	@support/lessons-reference.pl $(LESSONS_TABLE) $(DIRECTIVES_DOC) >$@.new \
	    && { support/lessons-reference.pl --check $(LESSONS_TABLE) $@.new >$@.check \
	         || { grep -v '^ok ' $@.check >&2; rm -f $@.new $@.check; exit 1; }; } \
	    && rm -f $@.check && mv -f $@.new $@
	@$(give_back)

deps:
	@t/tools/deps.sh build

test-deps:
	@t/tools/deps.sh test

# It builds test_flight.c's cases on lessons_flight.c's other bells.
build/unit/test_flight_portable: t/unit/test_flight.c modules/store/lessons_flight.c

# The token tool's unit test links the tool's own unit as well.
build/unit/test_token_tool: t/unit/test_token_tool.c $(wildcard t/unit/*.h) \
        $(TOOL_OBJ)/lessons_token_tool.o $(UNIT_LIB) $(HEADERS)
	@$(mine)
	@mkdir -p $(dir $@)
	@echo "  CC    $@"
	@$(CC) $(UNIT_CFLAGS) -Isupport -o $@ $< $(TOOL_OBJ)/lessons_token_tool.o \
	    $(UNIT_LIB) -lcmocka $(LIBS) $(APR_LIBS) \
	    || { $(call missing_hint,test,test-deps); exit 1; }
	@$(give_back)

build/unit/%: t/unit/%.c $(wildcard t/unit/*.h) $(UNIT_LIB) $(HEADERS)
	@$(mine)
	@mkdir -p $(dir $@)
	@echo "  CC    $@"
	@$(CC) $(UNIT_CFLAGS) -o $@ $< $(UNIT_LIB) -lcmocka $(LIBS) $(APR_LIBS) \
	    || { $(call missing_hint,test,test-deps); exit 1; }
	@$(give_back)

# --- tests ----------------------------------------------------------------
# One line per suite (each unit test program, each integration driver),
# the details of failures only, and last the totals alone on a line.  Each
# suite appends "passed failed [skipped]" to the file $$counts.  Each unit test
# program's whole output stays in build/unit/NAME.log; LESSONS_TEST_KEEP=1
# keeps an integration run's directory, its suite.log included.
SUITE_LINE   = '%-4s  %-24s %5d tests%s\n'
summary      = awk '{ p += $$1; f += $$2; s += $$3 } END { printf "%d passed, %d failed%s\n", p, f, s ? ", " s " skipped" : ""; exit (f > 0) }' $$counts
with_counts  = counts=$$(mktemp) || exit 1; trap 'rm -f "$$counts"' EXIT; \
               trap 'exit 130' INT; trap 'exit 143' TERM
# cmocka's counts, summed over the groups of one program: passed failed skipped.
# (cmocka 1.1.7, Debian 13, names the group: "[  FAILED  ] tests: 1 test(s)".)
cmocka_counts = function n() { match($$0, /[0-9]+ test\(s\)/); return substr($$0, RSTART) + 0 } \
                /^\[  PASSED  \] [0-9]+ test\(s\)\./ { p += n() } \
                /^\[  FAILED  \] ([^ ]+: )?[0-9]+ test\(s\), listed below:/ { f += n() } \
                /^\[  SKIPPED \] ([^ ]+: )?[0-9]+ test\(s\), listed below:/ { s += n() } \
                END { print p + 0, f + 0, s + 0 }
# Each failed case from its RUN line to its FAILED line (messages and
# output between), and errors outside any case (group set-up).
cmocka_failures = /^\[ RUN      \] / { buf = $$0; run = 1; next } \
                  run && /^\[ +(OK|SKIPPED) \] / { run = 0; next } \
                  run && /^\[  FAILED  \] / { print buf; print; run = 0; next } \
                  run { buf = buf "\n" $$0; next } \
                  /^\[  ERROR   \] / { print }

# The unit tests, four at a time (most of their time is spent asleep:
# timeouts, backoffs, leases), their lines in order once all have ended.
# One after another they took 49 s and left the machine idle at the start
# of CI; the release root runs them beside this machine's integration
# suites in every CI run, so they stand a busy machine.
UNIT_JOBS ?= 4
define run_units
rm -f $(addsuffix .rc,$(UNIT_TESTS)); \
printf '%s\n' $(UNIT_TESTS) | xargs -P $(UNIT_JOBS) -I{} \
    sh -c 'stdbuf -oL -eL "$$1" >"$$1.log" 2>&1; echo $$? >"$$1.rc"' _ {}; \
for t in $(UNIT_TESTS); do \
    log=$$t.log; rc=$$(cat $$t.rc 2>/dev/null || echo 1); \
    set -- $$(awk '$(cmocka_counts)' $$log); p=$$1; f=$$2; s=$$3; \
    [ $$rc -ne 0 ] && [ $$f -eq 0 ] && f=1; \
    echo "$$p $$f $$s" >>$$counts; \
    if [ $$f -eq 0 ]; then \
        x=""; [ $$s -gt 0 ] && x=" ($$s skipped)"; \
        printf $(SUITE_LINE) PASS "unit $${t##*/}" $$p "$$x"; \
    else \
        printf $(SUITE_LINE) FAIL "unit $${t##*/}" $$((p + f)) ", $$f failed (exit $$rc; all output in $$log)"; \
        details=$$(awk '$(cmocka_failures)' $$log); \
        [ -n "$$details" ] || details=$$(tail -n 20 $$log); \
        printf '%s\n' "$$details" | head -n 80 | sed 's/^/    /'; \
    fi; \
done
endef

# A script that prints an "ok" or "not ok" line per check and last
# "N passed, N failed": its suite's line, and what failed.  $(1): the
# suite's name; $(2): its log; $(3): the commands (no comma).
define run_checks
log=$(2); \
{ $(3); } >$$log 2>&1; rc=$$?; \
set -- $$(awk '/^[0-9]+ passed, [0-9]+ failed$$/ { print $$1, $$3 }' $$log); \
p=$${1:-0}; f=$${2:-1}; [ $$rc -ne 0 ] && [ $$f -eq 0 ] && f=1; \
echo "$$p $$f" >>$$counts; \
if [ $$f -eq 0 ]; then \
    printf $(SUITE_LINE) PASS "$(1)" $$p ""; \
else \
    printf $(SUITE_LINE) FAIL "$(1)" $$((p + f)) ", $$f failed"; \
    grep -v '^ok \|passed, ' $$log | sed 's/^/    /'; \
fi
endef

# The checks that keep the house standing (t/tools/house.pl): no circles
# between the module's files, the folders of modules/ in their order (no
# httpd in the httpd-free ones), every config field merged, the directive
# table and the reference in step.
run_house = $(call run_checks,house,build/house.log,t/tools/house.pl)

# The suites' free ports (t/tools/ports-check.sh): a port one suite picked
# is not handed to another before its server binds it.
run_ports = $(call run_checks,ports,build/ports.log,t/tools/ports-check.sh)

# integration.sh prints its line and details and appends its counts; one
# that stopped before the suite ran (its error is above) counts as a failure.
# $(1): empty, or LESSONS_SANITIZE=1 for the runs against the ASan build;
# $(2): the drivers (default both).
define run_integration
for d in $(or $(2),sqlite3 pgsql); do \
    n=$$(wc -l <$$counts); \
    $(1) INTEGRATION_COUNTS=$$counts t/tools/integration.sh $$d; \
    if [ "$$(wc -l <$$counts)" -eq "$$n" ]; then \
        echo "0 1" >>$$counts; \
        printf $(SUITE_LINE) FAIL "integration $$d$(if $(1), asan)" 0 " (it did not run: see above)"; \
    fi; \
done
endef

# Each fragment's suite (the package test, the fuzzers) appends its
# counts like integration.sh.
define run_fragment_suites_of
for pt in $(1); do \
    n=$$(wc -l <$$counts); \
    INTEGRATION_COUNTS=$$counts $$pt; \
    if [ "$$(wc -l <$$counts)" -eq "$$n" ]; then \
        echo "0 1" >>$$counts; \
        printf $(SUITE_LINE) FAIL "$${pt##*/}" 0 " (it did not run: see above)"; \
    fi; \
done
endef

run_fragment_suites = $(call run_fragment_suites_of,$(FRAGMENT_SUITES))

# Suites that need one CPU and no server (the fuzzers): in the
# background while the integration suite runs, which leaves a third of
# the machine idle waiting on its servers; their lines are held back
# and shown, counts checked, by finish_background.
BACKGROUND_SUITES ?=
start_background_of = bg_out=$$(mktemp) && bg_counts=$$(mktemp) || exit 1; bg_pid=""; \
    if [ -n "$(strip $(1))" ]; then \
        (counts=$$bg_counts; export FUZZ_JOBS=$${FUZZ_JOBS:-1}; \
         $(call run_fragment_suites_of,$(1))) \
            >$$bg_out 2>&1 </dev/null & \
        bg_pid=$$!; \
    fi
start_background = $(call start_background_of,$(BACKGROUND_SUITES))
finish_background = if [ -n "$$bg_pid" ]; then \
        wait $$bg_pid; cat $$bg_out; \
        if [ -s $$bg_counts ]; then cat $$bg_counts >>$$counts; else echo "0 1" >>$$counts; fi; \
    fi; rm -f $$bg_out $$bg_counts

# The other release's suite in the background: its output in a file,
# shown (and its counts checked) by finish_release.
RELEASE_SUITE ?=
start_release = rel_out=$$(mktemp) && rel_counts=$$(mktemp) || exit 1; rel_pid=""; \
    if [ -n "$(RELEASE_SUITE)" ]; then \
        INTEGRATION_COUNTS=$$rel_counts $(RELEASE_SUITE) >$$rel_out 2>&1 </dev/null & \
        rel_pid=$$!; \
    fi
finish_release = if [ -n "$$rel_pid" ]; then \
        wait $$rel_pid; cat $$rel_out; \
        if [ -s $$rel_counts ]; then cat $$rel_counts >>$$counts; else echo "0 1" >>$$counts; fi; \
    fi; rm -f $$rel_out $$rel_counts

unit: $(UNIT_TESTS)
	@$(mine)
	@$(with_counts); $(run_units); $(summary)

# The package's generated files against their sources: the reference
# conf against the directive table (make all checks it as it makes it),
# and lessons-token's man page against its --help (every option in both);
# and support/local-version, a local build's version without devscripts.
define run_support
log=build/support.log; \
{ support/lessons-reference.pl --check $(LESSONS_TABLE) $(REFERENCE_CONF); \
  t/package/local-version.sh; \
  help=$$($(TOKEN_TOOL) --help | grep -o -- '--[a-z]\+' | sort -u); \
  man=$$(grep -o -- '\\-\\-[a-z]\+' support/lessons-token.1 | tr -d '\\' | sort -u); \
  if [ -n "$$help" ] && [ "$$help" = "$$man" ]; then \
      echo "ok - lessons-token.1 names every option of lessons-token --help"; \
  else \
      echo "not ok - lessons-token.1 names every option of lessons-token --help"; \
      for o in $$help; do echo "$$man" | grep -qx -- "$$o" || echo "    only in --help: $$o"; done; \
      for o in $$man; do echo "$$help" | grep -qx -- "$$o" || echo "    only in the man page: $$o"; done; \
  fi; } >$$log 2>&1; \
p=$$(grep -c '^ok ' $$log); f=$$(grep -c '^not ok ' $$log); \
[ $$((p + f)) -gt 0 ] || f=1; \
echo "$$p $$f" >>$$counts; \
if [ $$f -eq 0 ]; then \
    printf $(SUITE_LINE) PASS "support" $$p ""; \
else \
    printf $(SUITE_LINE) FAIL "support" $$((p + f)) ", $$f failed"; \
    grep -v '^ok \|passed, ' $$log | sed 's/^/    /'; \
fi
endef

# make lint: the house checks alone (make test runs them too), and the
# package's generated files against their sources.
lint: all
	@$(with_counts); $(run_house); $(run_support); $(summary)

# Each integration run makes its own database (a SQLite file, or a
# PostgreSQL cluster in a temp dir) and removes it.
integration: all test-tools
	@$(with_counts); $(call run_integration,); $(summary)

# The integration suite on both databases against the ASan/UBSan build.
asan-test: $(ASAN_MODULE) test-tools
	@$(with_counts); $(call run_integration,LESSONS_SANITIZE=1); $(summary)

# What the suites need from npm (the test identity providers, the OpenAPI
# validator) and the package test: targets in the included fragments.
TEST_TOOLS    ?=
FRAGMENT_SUITES ?=
test-tools: $(TEST_TOOLS)
.PHONY: test-tools

# The integration suite on both databases at once: PostgreSQL's run in
# the background (its lines held back until SQLite's is done), as each
# run alone leaves a third of the machine idle waiting on its servers.
# $(1): empty, or LESSONS_SANITIZE=1.
define run_integration_both
pg_out=$$(mktemp) && pg_counts=$$(mktemp) || exit 1; \
(counts=$$pg_counts; $(call run_integration,$(1),pgsql)) \
    >$$pg_out 2>&1 </dev/null & pg_pid=$$!; \
$(call run_integration,$(1),sqlite3); \
wait $$pg_pid; cat $$pg_out; \
if [ -s $$pg_counts ]; then cat $$pg_counts >>$$counts; else echo "0 1" >>$$counts; fi; \
rm -f $$pg_out $$pg_counts
endef

# make test's integration suite: each driver's files in two shares
# (LESSONS_TEST_SHARD, t/tools/integration-costs), all four at once, then
# the files marked "alone" (the restart storm, which times each request)
# on both drivers.  The suite mostly waits on its servers (load average 2
# to 4 with one run of each driver): one run of each took 950 s, the
# longest share 735 s.  Each share counts into a file of its own; their
# lines are shown in order once all have ended.
INTEGRATION_SHARDS ?= 2
define run_integration_shares
sh_dir=$$(mktemp -d) || exit 1; sh_pids=""; \
for db in sqlite3 pgsql; do for k in $$(seq 1 $(INTEGRATION_SHARDS)); do \
    (counts=$$sh_dir/$$db-$$k.counts; : >$$counts; \
     export LESSONS_TEST_SHARD=$$k/$(INTEGRATION_SHARDS); \
     $(call run_integration,$(1),$$db)) \
        >$$sh_dir/$$db-$$k.out 2>&1 </dev/null & sh_pids="$$sh_pids $$!"; \
done; done; \
wait $$sh_pids; \
for db in sqlite3 pgsql; do for k in $$(seq 1 $(INTEGRATION_SHARDS)); do \
    cat $$sh_dir/$$db-$$k.out; \
    if [ -s $$sh_dir/$$db-$$k.counts ]; then cat $$sh_dir/$$db-$$k.counts >>$$counts; \
    else echo "0 1" >>$$counts; fi; \
done; done; \
rm -rf $$sh_dir; \
$(call run_integration_alone,$(1))
endef

# The files marked "alone" (the restart storm), on both drivers, with
# nothing else of the suite beside them.  $(1) as for run_integration_both.
run_integration_alone = (export LESSONS_TEST_SHARD=alone; $(call run_integration_both,$(1)))

# make test: what a developer runs after a change.  Sub-make, so that
# flags from pkg-config are read after test-deps has installed the
# packages.  The package test (the system apache2, no test server of the
# suites) runs beside the integration suite, its lines held back: sudo
# is asked first, while a terminal can still answer it.
test: test-deps
	@$(MAKE) -s --no-print-directory -j$(BUILD_JOBS) all $(UNIT_TESTS) test-tools
	@$(mine)
	@[ "$$(id -u)" -eq 0 ] || ! command -v sudo >/dev/null || sudo -v
	@$(with_counts); $(run_units); $(run_house); $(run_ports); $(run_monitor); \
	    $(call start_background_of,t/package/package-test.sh); \
	    $(call run_integration_shares,); $(finish_background); $(summary)

# make test-all: everything, what CI runs.
# The other release's run (RELEASE_SUITE, t/release/release.mk), the
# longest single part, starts first, in the background, and holds the
# sanitizer runs: the integration suite on both databases against the
# ASan/UBSan build, in that release's root.  This machine runs the
# integration suite on both databases at once (as make test does), the
# package test and the fuzzers (BACKGROUND_SUITES, one after the other)
# beside it, then the fragments, then (as make test does) the files
# marked "alone": the restart storm, which times each request, ran inside
# SQLite's run beside all that, and there a prefork request waited 6.47 s
# (5 allowed) while one reload of httpd's parent took 4.17 s.  After the
# fragments only the root's last part is beside it.  The suite ran three
# times before (plain here and in the root, sanitized here): CI used both
# CPUs from start to end and took 52 to 60 minutes.  Background lines are
# held back until the rest is done; sudo is asked first, as for make
# test, since the root and the package test need it and run with no
# terminal.
TEST_BUILDS ?=
test-all: test-deps
	@$(MAKE) -s --no-print-directory -j$(BUILD_JOBS) all $(UNIT_TESTS) test-tools $(TEST_BUILDS)
	@$(mine)
	@[ "$$(id -u)" -eq 0 ] || ! command -v sudo >/dev/null || sudo -v
	@$(with_counts); $(run_units); $(run_house); $(run_ports); $(run_monitor); \
	    $(start_release); $(start_background); \
	    (export LESSONS_TEST_SHARD=1/1; $(call run_integration_both,)); \
	    $(run_fragment_suites); \
	    $(call run_integration_alone,); \
	    $(finish_background); $(finish_release); $(summary)

# What make test runs again inside a root of the other Debian release
# (t/release/run.sh): unit tests, the house checks, the monitoring checks
# (with that release's promtool), the integration suite on both databases
# against the ASan/UBSan build (the restart storm with it: issue 57 asks
# for it plain and sanitized, and this machine runs it plain) and the
# package test, which tests the package's own build on that release,
# and the history suite's Patroni tier (that release's Patroni and etcd;
# issue 58 asks for both releases).
test-release:
	@t/tools/deps.sh release
	@$(MAKE) -s --no-print-directory -j$(BUILD_JOBS) all $(UNIT_TESTS) $(ASAN_MODULE) test-tools
	@$(mine)
	@$(with_counts); $(run_units); $(run_house); $(run_ports); $(run_monitor); \
	    $(call run_integration_both,LESSONS_SANITIZE=1); \
	    $(call run_fragment_suites_of,t/package/package-test.sh t/history/ha.sh); $(summary)

# The day-to-day subset (a few minutes): unit tests, the house checks, the
# monitoring checks and the integration suite on SQLite.  make test adds PostgreSQL and the
# package test; make test-all (what CI runs) runs it all.
check: test-deps
	@$(MAKE) -s --no-print-directory -j$(BUILD_JOBS) all $(UNIT_TESTS) test-tools
	@$(mine)
	@$(with_counts); $(run_units); $(run_house); $(run_ports); $(run_monitor); \
	    $(call run_integration,,sqlite3); $(summary)

# Debian layout, as the package has it: the module in apache2's module
# dir, lessons.load (which pulls in mod_dbd) and lessons.conf for a2enmod,
# lessons-api.conf (the API, for a2enconf) in conf-available, the SQL and
# the OpenAPI document under /usr/share.  Existing confs are the admin's:
# they are left alone.
LIBEXECDIR = $(shell $(APXS) -q LIBEXECDIR 2>/dev/null || echo /usr/lib/apache2/modules)
MODS_DIR   = /etc/apache2/mods-available
SHARE_DIR  = /usr/share/mod-lessons

install: deps
	@$(MAKE) -s --no-print-directory all
	install -D -m 644 $(MODULE) $(DESTDIR)$(LIBEXECDIR)/mod_lessons.so
	install -D -m 644 conf/lessons.load $(DESTDIR)$(MODS_DIR)/lessons.load
	@for f in $(MODS_DIR)/lessons.conf /etc/apache2/conf-available/lessons-api.conf; do \
	    if [ -e $(DESTDIR)$$f ]; then \
	        echo "kept existing $(DESTDIR)$$f"; \
	    else \
	        install -D -m 644 conf/$${f##*/} $(DESTDIR)$$f && echo "installed $(DESTDIR)$$f"; \
	    fi || exit 1; \
	done
	install -d $(DESTDIR)$(SHARE_DIR)/sql
	install -m 644 sql/*.sql $(DESTDIR)$(SHARE_DIR)/sql/
	@if [ -f conf/openapi.yaml ]; then \
	    install -m 644 conf/openapi.yaml $(DESTDIR)$(SHARE_DIR)/openapi.yaml; \
	fi
	@echo "next: a2enmod lessons; make the key and the database, then a2enconf lessons-api (docs/operations.md)"

# clean keeps build/dev (the dev key and database, and the pid file of a
# make run that may be serving) and says where the database is.
clean:
	rm -rf $(BUILT) $(filter-out $(DEV_DIR),$(wildcard build/*))
	@for f in $(DEV_DB_LOCAL)/lessons.db $(DEV_DIR)/lessons.db $(DEV_DB_VAR)/lessons.db; do \
	    [ -e $$f ] && echo "kept the dev database $$f (make distclean removes it)"; \
	done; \
	[ -e $(DEV_KEY) ] && echo "kept the dev key $(DEV_KEY) (make distclean removes it)"; true

# What make all builds, and nothing else: the package build's clean
# (debian/rules) uses it, so that dpkg-buildpackage in a checkout leaves
# the test tools (build/idp, build/openapi) and the dev key and database
# where they are.
clean-module:
	rm -rf $(OBJ) $(UNIT_LIB) $(MODULE) $(TOOL_OBJ) $(TOKEN_TOOL) $(REFERENCE_CONF)

distclean:
	@$(not_serving)
	rm -rf $(BUILT) build
	@if [ -e $(DEV_DB_VAR) ]; then \
	    rm -rf $(DEV_DB_VAR) 2>/dev/null || true; \
	    if [ -e $(DEV_DB_VAR) ]; then \
	        echo "make distclean: cannot remove $(DEV_DB_VAR) (sudo make run made it): run sudo make distclean" >&2; \
	        exit 1; \
	    fi; \
	    echo "removed the dev database in $(DEV_DB_VAR)"; \
	fi

$(DEV_KEY):
	@$(mine)
	@mkdir -p $(DEV_DIR)
	@umask 077 && openssl rand -hex 32 | tr -d '\n' > $@
	@echo "made dev key $@"

# An earlier layout kept the database in build/dev itself: it moves to
# build/dev/db.  As root, the database directory goes to www-data with the
# checkout owner's group (setgid, group-writable), so that the owner's own
# make run can use it too; everything else stays the owner's.
dev: $(DEV_KEY)
	@$(mine)
	@set -e; db=$(DEV_DB_DIR); \
	if [ "$$db" = $(CURDIR)/$(DEV_DB_LOCAL) ] && [ ! -e $$db/lessons.db ] \
	    && [ -e $(DEV_DIR)/lessons.db ]; then \
	    mkdir -p $$db; \
	    for f in lessons.db lessons.db-wal lessons.db-shm; do \
	        if [ -e $(DEV_DIR)/$$f ]; then mv $(DEV_DIR)/$$f $$db/; fi; \
	    done; \
	    echo "moved the dev database to $$db/lessons.db"; \
	fi; \
	mkdir -p $$db; \
	if [ ! -s $$db/lessons.db ]; then \
	    sqlite3 -bail $$db/lessons.db < sql/schema.sqlite.sql >/dev/null; \
	    sqlite3 -bail $$db/lessons.db < sql/sample-lessons.sql; \
	    echo "made dev database $$db/lessons.db (schema and sample lessons)"; \
	elif ! sqlite3 $$db/lessons.db 'SELECT version FROM lessons LIMIT 0' >/dev/null 2>&1; then \
	    sqlite3 -bail $$db/lessons.db < sql/upgrade-etags.sqlite.sql; \
	    sqlite3 -bail $$db/lessons.db < sql/schema.sqlite.sql >/dev/null; \
	    echo "upgraded dev database $$db/lessons.db (ETags: sql/upgrade-etags.sqlite.sql)"; \
	fi; \
	if ! sqlite3 $$db/lessons.db 'SELECT 1 FROM lessons_idempotency LIMIT 0' >/dev/null 2>&1; then \
	    sqlite3 -bail $$db/lessons.db < sql/upgrade-idempotency.sqlite.sql; \
	    echo "upgraded dev database $$db/lessons.db (Idempotency-Key: sql/upgrade-idempotency.sqlite.sql)"; \
	fi; \
	if [ "$$(id -u)" = 0 ]; then \
	    $(give_back); \
	    group=$(lastword $(subst :, ,$(OWNER))); \
	    [ -n "$$group" ] && [ "$$group" != 0 ] || group=www-data; \
	    if [ "$$db" = $(CURDIR)/$(DEV_DB_LOCAL) ]; then chmod a+x build $(DEV_DIR); fi; \
	    chown -R www-data:$$group $$db; \
	    chmod 2770 $$db; \
	    find $$db -type f -exec chmod 660 {} +; \
	elif [ ! -w $$db ]; then \
	    echo "make: $$db is not writable by $$(id -un): sudo make distclean removes it" >&2; \
	    exit 1; \
	fi

run:
	@$(not_serving)
	@t/tools/deps.sh build
	@$(MAKE) -s --no-print-directory all dev
	@echo "Serving http://127.0.0.1:8080/api/lessons (make token prints a token; Ctrl-C stops)"
	$(HTTPD) -X -d $(CURDIR) -f conf/httpd.conf -C "Define LESSONS_DB $(DEV_DB_DIR)/lessons.db"

token: $(DEV_KEY)
	@t/tools/token --key $(DEV_KEY) --sub dev --ttl 3600

# make bench: the benchmark behind docs/benchmarks.md (t/bench/bench.mk).
-include t/bench/bench.mk
