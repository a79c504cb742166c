-- mod_lessons upgrade for PostgreSQL: read leases (LessonsDBLease).
--
-- For a database made with a schema.pgsql.sql older than read leases (no
-- lessons_leases table, or one without lessons_lease_fence, made by a
-- build of this release before 2026-12-03).  Until it has them, a server with
-- LessonsDBLease logs LESSONS00792 and serves as without the directive.
-- It adds the tables and the sequence exactly as schema.pgsql.sql makes
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
    renewed   TIMESTAMPTZ NOT NULL DEFAULT now(),
    peer      TEXT        NOT NULL DEFAULT ''
);
-- Where the server hears other servers' writes (LessonsDBLeasePeer),
-- and the key of its datagrams: "ADDRESS:PORT KEY", or '' (it hears of
-- them by NOTIFY).  A table made before 2026-12-05 lacks it.
ALTER TABLE lessons_leases ADD COLUMN IF NOT EXISTS peer TEXT NOT NULL DEFAULT '';
CREATE SEQUENCE IF NOT EXISTS lessons_lease_terms;
-- The leases' fence: one logged row that each renewal, and each
-- catalogue version read of a server without a lease, updates.  A
-- commit that wrote WAL waits for the synchronous standbys (one that
-- wrote none, as on the unlogged table above, does not): a primary
-- deposed while it was frozen, whose standbys follow another now, never
-- confirms one, so it neither grants a lease nor answers such a read
-- (docs/operations.md, "High availability with Patroni").
CREATE TABLE IF NOT EXISTS lessons_lease_fence (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n  BIGINT  NOT NULL
);
INSERT INTO lessons_lease_fence (id, n) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;

COMMIT;
