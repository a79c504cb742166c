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
LIBS       = -ljansson -ljwt -lcrypto -lpq -lsqlite3
# libpq's header lives in its own directory on Debian.
PQ_CFLAGS  = -I$(shell pg_config --includedir 2>/dev/null || echo /usr/include/postgresql)

UNITS      = $(wildcard modules/lessons_*.c)
HEADERS    = $(wildcard modules/lessons_*.h)
MODULE     = modules/mod_lessons.so

# Unit tests link the units directly, with APR/apr-util from pkg-config.
APR_CFLAGS = $(shell pkg-config --cflags apr-util-1 2>/dev/null)
APR_LIBS   = $(shell pkg-config --libs apr-util-1 2>/dev/null) \
             $(shell pkg-config --libs apr-1 2>/dev/null)
UNIT_TESTS = $(patsubst t/unit/%.c,build/unit/%,$(wildcard t/unit/test_*.c))
UNIT_CFLAGS = -std=c99 -D_GNU_SOURCE -g -O1 $(WARN) -Imodules $(APR_CFLAGS) $(PQ_CFLAGS) \
              -DLESSONS_SQL_DIR='"$(CURDIR)/sql"'

DEV_DIR    = build/dev
DEV_KEY    = $(DEV_DIR)/jwt.key

.PHONY: all deps dev run token test unit integration install clean

all: $(MODULE)

# apxs/libtool echo every command; show their output only on failure.
$(MODULE): mod_lessons.c $(UNITS) $(HEADERS)
	@echo "  APXS  $@"
	@mkdir -p build
	@$(APXS) -c -o mod_lessons.la -Wc,"$(WARN)" -Wc,-std=gnu99 -Imodules $(PQ_CFLAGS) \
	    mod_lessons.c $(UNITS) $(LIBS) >build/apxs.log 2>&1 \
	    || { cat build/apxs.log; exit 1; }
	@cp .libs/mod_lessons.so $@

deps:
	@t/tools/deps.sh

unit: $(UNIT_TESTS)
	@set -e; for t in $(UNIT_TESTS); do echo "== unit: $$t"; $$t; done

build/unit/%: t/unit/%.c $(UNITS) $(HEADERS)
	@mkdir -p $(dir $@)
	@echo "  CC    $@"
	@$(CC) $(UNIT_CFLAGS) -o $@ $< $(UNITS) -lcmocka $(LIBS) $(APR_LIBS)

# Each integration run makes its own database (a SQLite file, or a
# PostgreSQL cluster in a temp dir) and removes it.  Sub-makes, so that
# flags from pkg-config are read after deps has installed the packages.
integration: all
	@t/tools/integration.sh sqlite3
	@t/tools/integration.sh pgsql

test: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory integration
	@echo "make test: unit and integration suites passed on sqlite3 and pgsql"

# Debian layout: the module in apache2's module dir, lessons.load (which
# pulls in mod_dbd) and lessons.conf for a2enmod, the SQL under /usr/share.
# An existing lessons.conf is the admin's: it is left alone.
LIBEXECDIR = $(shell $(APXS) -q LIBEXECDIR 2>/dev/null || echo /usr/lib/apache2/modules)
MODS_DIR   = /etc/apache2/mods-available
SHARE_DIR  = /usr/share/mod-lessons

install: deps
	@$(MAKE) --no-print-directory all
	install -D -m 644 $(MODULE) $(DESTDIR)$(LIBEXECDIR)/mod_lessons.so
	install -D -m 644 conf/lessons.load $(DESTDIR)$(MODS_DIR)/lessons.load
	@if [ -e $(DESTDIR)$(MODS_DIR)/lessons.conf ]; then \
	    echo "kept existing $(DESTDIR)$(MODS_DIR)/lessons.conf"; \
	else \
	    install -D -m 644 conf/lessons.conf $(DESTDIR)$(MODS_DIR)/lessons.conf; \
	fi
	install -d $(DESTDIR)$(SHARE_DIR)/sql
	install -m 644 sql/*.sql $(DESTDIR)$(SHARE_DIR)/sql/
	@echo "next: a2enmod lessons && apachectl configtest && systemctl reload apache2"

clean:
	rm -rf build .libs modules/.libs mod_lessons.la mod_lessons.lo \
	    mod_lessons.slo modules/*.lo modules/*.slo modules/*.o $(MODULE)

# The dev key and database: made once, kept across runs.  Started as
# root, httpd serves as www-data, which must be able to write the SQLite
# directory; when it cannot even reach this checkout (say /root/...),
# the database lives in /var/tmp/mod-lessons-dev instead.  make clean
# removes build/dev; that directory is left alone.
DEV_DB_DIR = $(shell if [ "$$(id -u)" = 0 ] \
               && ! runuser -u www-data -- test -r $(CURDIR)/Makefile \
                    2>/dev/null; then echo /var/tmp/mod-lessons-dev; \
               else echo $(CURDIR)/$(DEV_DIR); fi)

$(DEV_KEY):
	@mkdir -p $(DEV_DIR)
	@umask 077 && openssl rand -hex 32 | tr -d '\n' > $@
	@echo "made dev key $@"

dev: $(DEV_KEY)
	@mkdir -p $(DEV_DB_DIR)
	@if [ ! -s $(DEV_DB_DIR)/lessons.db ]; then \
	    sqlite3 -bail $(DEV_DB_DIR)/lessons.db < sql/schema.sqlite.sql >/dev/null \
	    && sqlite3 -bail $(DEV_DB_DIR)/lessons.db < sql/sample-lessons.sql \
	    && echo "made dev database $(DEV_DB_DIR)/lessons.db (schema and sample lessons)"; \
	fi
	@if [ "$$(id -u)" = 0 ]; then chown -R www-data:www-data $(DEV_DB_DIR); fi

run: deps
	@$(MAKE) --no-print-directory all dev
	@rm -f $(DEV_DIR)/httpd.pid
	@echo "Serving http://127.0.0.1:8080/api/lessons (make token prints a token; Ctrl-C stops)"
	$(HTTPD) -X -d $(CURDIR) -f conf/httpd.conf -C "Define LESSONS_DB $(DEV_DB_DIR)/lessons.db"

token: $(DEV_KEY)
	@t/tools/token --key $(DEV_KEY) --sub dev --ttl 3600
