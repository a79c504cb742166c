-- mod_lessons upgrade for PostgreSQL: retry-safe creates (Idempotency-Key).
--
-- For a database made with a schema.pgsql.sql older than Idempotency-Key
-- (no lessons_idempotency table).  Until it has the table, creates that
-- send the header answer 500 and the error log names this file
-- (LESSONS00311); every other request is served as before.  It adds the
-- table and its index exactly as schema.pgsql.sql makes them (loading
-- that file again does the same).  Safe to run twice; one transaction;
-- it locks nothing the module's requests use.
--
--   psql -h HOST -U lessons -d lessons -v ON_ERROR_STOP=1 \
--        -f /usr/share/mod-lessons/sql/upgrade-idempotency.pgsql.sql
--
-- Run it as the role that owns the other tables (the one the module
-- connects as).  No reload is needed: the module prepares the
-- statements of Idempotency-Key on each connection the first time a
-- create sends the header, and again after a refusal, so the next such
-- create finds the table.

BEGIN;

CREATE TABLE IF NOT EXISTS lessons_idempotency (
    caller      VARCHAR(64)  NOT NULL,
    idem_key    VARCHAR(255) NOT NULL CHECK (length(idem_key) >= 1),
    fingerprint VARCHAR(64)  NOT NULL,
    lesson_id   BIGINT       NOT NULL,
    status      INTEGER      NOT NULL,
    location    TEXT         NOT NULL,
    etag        TEXT         NOT NULL,
    body        TEXT         NOT NULL,
    created_at  BIGINT       NOT NULL,
    expires_at  BIGINT       NOT NULL,
    PRIMARY KEY (caller, idem_key)
);
CREATE INDEX IF NOT EXISTS lessons_idempotency_expiry
    ON lessons_idempotency (expires_at);

COMMIT;
