# promtool, Prometheus's own checker, for t/api/metrics.t (issue 21): the
# lessons-metrics handler's answer must pass `promtool check metrics`.
# Only the program is taken, from Debian's package (promtool on Debian
# 13; on Debian 12 it is part of prometheus), unpacked into
# build/promtool: installing prometheus would install and enable a
# Prometheus server on the machine.  t/tools/integration.sh copies it
# where the suite's user can run it and names it in LESSONS_TEST_PROMTOOL.
PROMTOOL_DIR = build/promtool
PROMTOOL     = $(PROMTOOL_DIR)/usr/bin/promtool

promtool-deps: $(PROMTOOL)
.PHONY: promtool-deps
TEST_TOOLS += promtool-deps

$(PROMTOOL):
	@$(mine)
	@rm -rf $(PROMTOOL_DIR) && mkdir -p $(PROMTOOL_DIR)
	@cd $(PROMTOOL_DIR) && pkg=promtool \
	    && { apt-cache show promtool >/dev/null 2>&1 || pkg=prometheus; } \
	    && echo "  GET   $@ (apt-get download $$pkg)" \
	    && { apt-get download $$pkg >download.log 2>&1 \
	         && dpkg-deb -x $${pkg}_*.deb . && rm -f $${pkg}_*.deb \
	         && test -x usr/bin/promtool; } \
	    || { cat download.log >&2; echo "make: could not unpack promtool" \
	         "from Debian's $$pkg package" >&2; exit 1; }
	@$(give_back)

# The monitoring the package ships (issue 57 §4): the alerting rules
# (conf/prometheus/lessons-alerts.yml), their unit tests
# (t/promtool/lessons-alerts.test.yml) and the Grafana dashboard
# (conf/grafana/lessons-dashboard.json), checked by t/promtool/check.pl
# with this promtool against the module's own exposition, which
# build/monitor/exposition prints from the code the lessons-metrics
# handler runs (build/liblessons.a).  make test, make check and the
# other release's run call run_monitor: one line, "monitor", in seconds.
EXPOSITION = build/monitor/exposition

$(EXPOSITION): t/promtool/exposition.c $(UNIT_LIB) $(HEADERS)
	@$(mine)
	@mkdir -p $(@D)
	@echo "  CC    $@"
	@$(CC) $(UNIT_CFLAGS) -o $@ $< $(UNIT_LIB) $(LIBS) $(APR_LIBS)
	@$(give_back)

TEST_TOOLS += $(EXPOSITION)

run_monitor = $(call run_checks,monitor,build/monitor/check.log,\
    $(EXPOSITION) >build/monitor/exposition.txt \
    && t/promtool/check.pl $(PROMTOOL) build/monitor/exposition.txt)

# make monitor-check: the monitoring's checks alone.
monitor-check: $(EXPOSITION) $(PROMTOOL)
	@$(with_counts); $(run_monitor); $(summary)
.PHONY: monitor-check
