-- mod_lessons upgrade for PostgreSQL: read leases (LessonsDBLease).
--
-- For a database made with a schema.pgsql.sql older than read leases (no
-- lessons_leases table).  Until it has the table, a server with
-- LessonsDBLease logs LESSONS00792 and serves as without the directive.
-- It adds the table and the sequence exactly as schema.pgsql.sql makes
-- them (loading that file again does the same).  Safe to run twice; one
-- transaction.
--
--   psql -h HOST -U lessons -d lessons -v ON_ERROR_STOP=1 \
--        -f /usr/share/mod-lessons/sql/upgrade-leases.pgsql.sql
--
-- Run it as the role that owns the other tables, before any server
-- turns LessonsDBLease on.  No reload is needed.
BEGIN;

CREATE UNLOGGED TABLE IF NOT EXISTS lessons_leases (
    server    TEXT        PRIMARY KEY,
    term      BIGINT      NOT NULL,
    length_ms INTEGER     NOT NULL CHECK (length_ms > 0),
    epoch     TEXT        NOT NULL DEFAULT '',
    acked     BIGINT      NOT NULL DEFAULT -1,
    renewed   TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE SEQUENCE IF NOT EXISTS lessons_lease_terms;

COMMIT;
