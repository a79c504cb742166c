-- mod_lessons upgrade for PostgreSQL: 64-bit lesson ids.
--
-- For a database made with a schema.pgsql.sql older than 64-bit ids
-- (lessons.id INTEGER, identity sequence AS integer, which runs out at
-- 2147483647).  New databases get BIGINT from schema.pgsql.sql and need
-- none of this.  Safe to run twice: on a bigint column both statements
-- change nothing.
--
-- Changing the column type REWRITES THE WHOLE TABLE (and rebuilds its
-- indexes) under an ACCESS EXCLUSIVE lock: every read and write of
-- lessons waits until it commits, so requests may answer 503 or time out
-- meanwhile.  Run it in a quiet moment; on a large table, time it on a
-- copy first.  One transaction: either both changes land or neither.
--
--   psql -h HOST -U lessons -d lessons -v ON_ERROR_STOP=1 \
--        -f /usr/share/mod-lessons/sql/upgrade-bigint-ids.pgsql.sql
--
-- Then reload Apache (apachectl graceful): the module's prepared
-- statements are made per connection, and a reload opens new ones.

BEGIN;

ALTER TABLE lessons ALTER COLUMN id TYPE bigint;

-- The identity's sequence has a type of its own (AS integer, MAXVALUE
-- 2147483647).  PostgreSQL 15 changes it along with the column; saying
-- so makes sure of it.  AS bigint also lifts a MAXVALUE that was the
-- integer default to the bigint one.
DO $$
DECLARE
    seq text := pg_get_serial_sequence('lessons', 'id');
BEGIN
    IF seq IS NULL THEN
        RAISE EXCEPTION 'lessons.id has no identity sequence';
    END IF;
    EXECUTE format('ALTER SEQUENCE %s AS bigint', seq);
END
$$;

COMMIT;
