-- mod_lessons schema for SQLite (the embedded default).
-- Safe to run twice: every statement is idempotent.
-- WAL lets readers in other Apache processes proceed while one writes;
-- the setting is stored in the database file.
--
-- Foreign keys: PRAGMA foreign_keys is per connection, and it cannot be
-- set through mod_dbd's DBDInitSQL: that runs after mod_dbd has prepared
-- the module's statements, the pragma expires them, and apr_dbd_sqlite3
-- (legacy sqlite3_prepare) never re-prepares, so every query would fail.
-- The triggers at the end enforce lessons.level_id -> levels.id on every
-- connection whatever its pragma; this session turns the pragma on too.
PRAGMA journal_mode = WAL;
PRAGMA foreign_keys = ON;

CREATE TABLE IF NOT EXISTS levels (
    id   INTEGER PRIMARY KEY,
    code TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL
);

INSERT OR IGNORE INTO levels (id, code, name) VALUES
    (1, 'A1', 'Beginner'),
    (2, 'A2', 'Elementary'),
    (3, 'B1', 'Intermediate'),
    (4, 'B2', 'Upper Intermediate'),
    (5, 'C1', 'Advanced'),
    (6, 'C2', 'Proficiency');

-- AUTOINCREMENT: a deleted lesson's id is never handed out again, so a
-- stale Location or bookmark can never point at somebody else's lesson.
CREATE TABLE IF NOT EXISTS lessons (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    level_id    INTEGER NOT NULL REFERENCES levels (id),
    title       TEXT    NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
    sort_order  INTEGER NOT NULL,
    topic       TEXT    NOT NULL DEFAULT '' CHECK (length(topic) <= 100),
    description TEXT    NOT NULL DEFAULT '' CHECK (length(description) <= 4000),
    is_active   INTEGER NOT NULL DEFAULT 1 CHECK (is_active IN (0, 1)),
    version     INTEGER NOT NULL DEFAULT 1
);

-- Serves level, beginner and advanced lists in their sort order.
CREATE INDEX IF NOT EXISTS lessons_level_order
    ON lessons (level_id, sort_order, id);

-- Referential integrity that holds on every connection (see the top).
CREATE TRIGGER IF NOT EXISTS lessons_level_exists_insert
BEFORE INSERT ON lessons
WHEN NOT EXISTS (SELECT 1 FROM levels WHERE id = NEW.level_id)
BEGIN
    SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed');
END;

CREATE TRIGGER IF NOT EXISTS lessons_level_exists_update
BEFORE UPDATE OF level_id ON lessons
WHEN NOT EXISTS (SELECT 1 FROM levels WHERE id = NEW.level_id)
BEGIN
    SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed');
END;

CREATE TRIGGER IF NOT EXISTS levels_keep_referenced
BEFORE DELETE ON levels
WHEN EXISTS (SELECT 1 FROM lessons WHERE level_id = OLD.id)
BEGIN
    SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed');
END;

-- ETags and the response cache (see docs/api.md, "ETags, conditional
-- requests and caching").
-- lessons.version moves on every change of a lesson, and of its level's
-- name or code: a lesson's ETag and If-Match come from it.  The catalog
-- counter moves in the same transaction as any change of lessons or
-- levels, whoever makes it (the module, sqlite3, a migration): every
-- Apache process compares it before serving a cached list or lesson.
-- A database made before these lines: sql/upgrade-etags.sqlite.sql.
CREATE TABLE IF NOT EXISTS lessons_catalog (
    stripe  INTEGER PRIMARY KEY,
    changes INTEGER NOT NULL DEFAULT 0
);
-- SQLite has one writer at a time: one stripe is enough.
INSERT OR IGNORE INTO lessons_catalog (stripe, changes) VALUES (0, 0);

-- This database's identity, random at creation, part of every ETag:
-- a tag from another (or a re-created) database never matches.
CREATE TABLE IF NOT EXISTS lessons_database (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    epoch TEXT NOT NULL
);
INSERT OR IGNORE INTO lessons_database (id, epoch)
VALUES (1, lower(hex(randomblob(8))));

-- SQLite triggers cannot change NEW: bump the row after the update,
-- unless the update set the version itself (recursive triggers are off
-- by default, and the WHEN stops them when they are on).
CREATE TRIGGER IF NOT EXISTS lessons_version_update
AFTER UPDATE ON lessons
WHEN NEW.version = OLD.version
BEGIN
    UPDATE lessons SET version = OLD.version + 1 WHERE id = NEW.id;
END;

-- A level's name and code are in each of its lessons' documents.
CREATE TRIGGER IF NOT EXISTS levels_version_update
AFTER UPDATE OF name, code ON levels
WHEN NEW.name IS NOT OLD.name OR NEW.code IS NOT OLD.code
BEGIN
    UPDATE lessons SET version = version + 1 WHERE level_id = NEW.id;
END;

CREATE TRIGGER IF NOT EXISTS lessons_catalog_insert AFTER INSERT ON lessons
BEGIN UPDATE lessons_catalog SET changes = changes + 1 WHERE stripe = 0; END;
CREATE TRIGGER IF NOT EXISTS lessons_catalog_update AFTER UPDATE ON lessons
BEGIN UPDATE lessons_catalog SET changes = changes + 1 WHERE stripe = 0; END;
CREATE TRIGGER IF NOT EXISTS lessons_catalog_delete AFTER DELETE ON lessons
BEGIN UPDATE lessons_catalog SET changes = changes + 1 WHERE stripe = 0; END;
CREATE TRIGGER IF NOT EXISTS levels_catalog_insert AFTER INSERT ON levels
BEGIN UPDATE lessons_catalog SET changes = changes + 1 WHERE stripe = 0; END;
CREATE TRIGGER IF NOT EXISTS levels_catalog_update AFTER UPDATE ON levels
BEGIN UPDATE lessons_catalog SET changes = changes + 1 WHERE stripe = 0; END;
CREATE TRIGGER IF NOT EXISTS levels_catalog_delete AFTER DELETE ON levels
BEGIN UPDATE lessons_catalog SET changes = changes + 1 WHERE stripe = 0; END;

-- Retry-safe creates (docs/api.md, "Retry-safe creates: Idempotency-Key"):
-- each key a caller sent with a create, the fingerprint of that request
-- and the answer it got, stored in the create's own transaction and
-- given again to a retry.  caller is a digest of the token's issuer and
-- subject; times are seconds since 1970 (datetime(expires_at,
-- 'unixepoch') reads one).  No trigger: a key is not part of the
-- catalogue, so storing one never moves the catalogue version.  Past
-- expires_at a key is forgotten; each create that stores a key removes
-- a few expired ones.  A database made before these lines:
-- sql/upgrade-idempotency.sqlite.sql (the same table), or load this
-- file again.
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
