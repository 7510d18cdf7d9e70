-- baton SQL backend, PostgreSQL schema. One row per mutex, created on first use.
-- Times are milliseconds since the Unix epoch on the database clock; `state` holds the
-- lease-guarded state hex-encoded. The backend runs this file (with `baton_mutex` replaced by
-- the configured table name) when a table is missing, unless create_table=false.
CREATE TABLE IF NOT EXISTS baton_mutex (
  name          VARCHAR(128) NOT NULL PRIMARY KEY,
  owner_id      VARCHAR(255) NOT NULL DEFAULT '',
  acquired_at   BIGINT       NOT NULL DEFAULT 0,
  ttl_at        BIGINT       NOT NULL DEFAULT 0,
  transition_at BIGINT       NOT NULL DEFAULT 0,
  fence         BIGINT       NOT NULL DEFAULT 0,
  state         TEXT         NOT NULL DEFAULT ''
);

-- Run history: the newest entries per mutex (the writer prunes the older ones). Written only by
-- the owner with its fence; seq counts per mutex and is never reused. bytes is UTF-8 text (the
-- scheduler writes JSON); written_at is the database clock.
CREATE TABLE IF NOT EXISTS baton_mutex_history (
  name          VARCHAR(128) NOT NULL,
  seq           BIGINT       NOT NULL,
  fence         BIGINT       NOT NULL,
  written_at    BIGINT       NOT NULL,
  bytes         TEXT         NOT NULL,
  PRIMARY KEY (name, seq)
);

-- Controls (pause, trigger requests): one row per mutex, written by anyone with compare-and-set
-- on version (1 for the first write, + 1 for each one after).
CREATE TABLE IF NOT EXISTS baton_mutex_controls (
  name          VARCHAR(128) NOT NULL PRIMARY KEY,
  version       BIGINT       NOT NULL,
  written_at    BIGINT       NOT NULL,
  bytes         TEXT         NOT NULL
);
