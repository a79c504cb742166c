# mod_lessons: build, run, test and install.
#   make          build modules/mod_lessons.so with apxs
#   make run      serve the API on http://127.0.0.1:8080 (SQLite, dev key)
#   make token    print a dev token signed with the dev key
#   make test     unit tests, then the Apache::Test suite on SQLite and
#                 on a throw-away PostgreSQL cluster
#   make install  put the module and a2enmod files where Debian looks
# run, test and install first install missing Debian packages.

APXS      ?= $(shell command -v apxs 2>/dev/null || echo /usr/bin/apxs)
HTTPD     ?= /usr/sbin/apache2
WARN       = -Wall -Wextra -Werror
LIBS       = -ljansson -ljwt -lcrypto

UNITS      = $(wildcard modules/lessons_*.c)
HEADERS    = $(wildcard modules/lessons_*.h)
MODULE     = modules/mod_lessons.so

# Unit tests link the units directly, with APR/apr-util from pkg-config.
APR_CFLAGS = $(shell pkg-config --cflags apr-util-1 2>/dev/null)
APR_LIBS   = $(shell pkg-config --libs apr-util-1 2>/dev/null) \
             $(shell pkg-config --libs apr-1 2>/dev/null)
UNIT_TESTS = $(patsubst t/unit/%.c,build/unit/%,$(wildcard t/unit/test_*.c))
UNIT_CFLAGS = -std=c99 -D_GNU_SOURCE -g -O1 $(WARN) -Imodules $(APR_CFLAGS) \
              -DLESSONS_SQL_DIR='"$(CURDIR)/sql"'

DEV_DIR    = build/dev
DEV_KEY    = $(DEV_DIR)/jwt.key
DEV_DB     = $(DEV_DIR)/lessons.db

.PHONY: all deps dev run token test unit integration install clean

all: $(MODULE)

$(MODULE): mod_lessons.c $(UNITS) $(HEADERS)
	$(APXS) -c -o mod_lessons.la -Wc,"$(WARN)" -Wc,-std=gnu99 -Imodules \
	    mod_lessons.c $(UNITS) $(LIBS)
	cp .libs/mod_lessons.so $@

deps:
	@t/tools/deps.sh

unit: $(UNIT_TESTS)
	@set -e; for t in $(UNIT_TESTS); do echo "== $$t"; $$t; done

build/unit/%: t/unit/%.c $(UNITS) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(UNIT_CFLAGS) -o $@ $< $(UNITS) -lcmocka $(LIBS) $(APR_LIBS)

clean:
	rm -rf build .libs modules/.libs mod_lessons.la mod_lessons.lo \
	    mod_lessons.slo modules/*.lo modules/*.slo modules/*.o $(MODULE)

# The dev database and key: made once, kept across runs (make clean
# removes them).  As root, httpd serves as www-data, which must own
# the SQLite directory.
$(DEV_KEY):
	@mkdir -p $(DEV_DIR)
	@umask 077 && openssl rand -hex 32 | tr -d '\n' > $@
	@echo "made dev key $@"

$(DEV_DB): sql/schema.sqlite.sql sql/sample-lessons.sql
	@mkdir -p $(DEV_DIR)
	@sqlite3 -bail $@ < sql/schema.sqlite.sql >/dev/null
	@sqlite3 -bail $@ < sql/sample-lessons.sql
	@echo "made dev database $@ (schema and sample lessons)"

dev: $(DEV_KEY) $(DEV_DB)
	@if [ "$$(id -u)" = 0 ]; then chown -R www-data:www-data $(DEV_DIR); fi

run: deps all dev
	@rm -f $(DEV_DIR)/httpd.pid
	@echo "Serving http://127.0.0.1:8080/api/lessons (make token prints a token; Ctrl-C stops)"
	$(HTTPD) -X -d $(CURDIR) -f conf/httpd.conf -C "Define LESSONS_ROOT $(CURDIR)"

token: $(DEV_KEY)
	@t/tools/token --key $(DEV_KEY) --sub dev --ttl 3600
