-- mod_lessons upgrade for SQLite: retry-safe creates (Idempotency-Key).
--
-- For a database made with a schema.sqlite.sql older than Idempotency-Key
-- (no lessons_idempotency table).  Until it has the table, creates that
-- send the header answer 500 and the error log names this file
-- (LESSONS00311); every other request is served as before.  It adds the
-- table and its index exactly as schema.sqlite.sql makes them (loading
-- that file again does the same).  Safe to run twice; one transaction,
-- which holds the write lock only while it makes an empty table.
--
--   sqlite3 -bail /var/lib/lessons/lessons.db \
--       < /usr/share/mod-lessons/sql/upgrade-idempotency.sqlite.sql
--
-- Then reload Apache (apachectl graceful): a schema change expires the
-- statements SQLite has prepared for a running server, and each pooled
-- connection would answer one request 503 (LESSONS00308) before
-- preparing them again.

BEGIN IMMEDIATE;

CREATE TABLE IF NOT EXISTS lessons_idempotency (
    caller      TEXT    NOT NULL,
    idem_key    TEXT    NOT NULL CHECK (length(idem_key) BETWEEN 1 AND 255),
    fingerprint TEXT    NOT NULL,
    lesson_id   INTEGER NOT NULL,
    status      INTEGER NOT NULL,
    location    TEXT    NOT NULL,
    etag        TEXT    NOT NULL,
    body        TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    PRIMARY KEY (caller, idem_key)
);
CREATE INDEX IF NOT EXISTS lessons_idempotency_expiry
    ON lessons_idempotency (expires_at);

COMMIT;
