# promtool, Prometheus's own checker, for t/api/metrics.t (issue 21): the
# lessons-metrics handler's answer must pass `promtool check metrics`.
# Only the program is taken, from Debian's prometheus package, unpacked
# into build/promtool: installing the package would install and enable a
# Prometheus server on the machine.  t/tools/integration.sh copies it
# where the suite's user can run it and names it in LESSONS_TEST_PROMTOOL.
PROMTOOL_DIR = build/promtool
PROMTOOL     = $(PROMTOOL_DIR)/usr/bin/promtool

promtool-deps: $(PROMTOOL)
.PHONY: promtool-deps
TEST_TOOLS += promtool-deps

$(PROMTOOL):
	@$(mine)
	@echo "  GET   $@ (apt-get download prometheus)"
	@rm -rf $(PROMTOOL_DIR) && mkdir -p $(PROMTOOL_DIR)
	@cd $(PROMTOOL_DIR) && { apt-get download prometheus >download.log 2>&1 \
	    && dpkg-deb -x prometheus_*.deb . && rm -f prometheus_*.deb; } \
	    || { cat download.log >&2; echo "make: could not unpack promtool" \
	         "from Debian's prometheus package" >&2; exit 1; }
	@test -x $@
	@$(give_back)
