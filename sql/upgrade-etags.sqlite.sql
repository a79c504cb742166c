-- mod_lessons upgrade for SQLite: ETags and the response cache.
--
-- For a database made with a schema.sqlite.sql older than ETags (no
-- lessons.version column).  Adds the column, then load schema.sqlite.sql
-- again for the catalog counter, the database identity and the
-- triggers:
--
--   sqlite3 -bail /var/lib/lessons/lessons.db \
--       < /usr/share/mod-lessons/sql/upgrade-etags.sqlite.sql
--   sqlite3 -bail /var/lib/lessons/lessons.db \
--       < /usr/share/mod-lessons/sql/schema.sqlite.sql
--
-- Run it once: SQLite has no ADD COLUMN IF NOT EXISTS, and a second run
-- stops at "duplicate column name: version" having changed nothing.
-- Then reload Apache (apachectl graceful).  PostgreSQL needs no upgrade
-- file: loading schema.pgsql.sql again adds what is missing.

ALTER TABLE lessons ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
