-- baton SQL backend, SQLite schema. One row per mutex, created on first use.
-- SQLite has no server clock: acquired_at, ttl_at and transition_at are milliseconds of the
-- host's monotonic clock (CLOCK_MONOTONIC, the same for every process on the host, moved by no
-- process's wall clock), of the boot that baton_mutex_meta names; baton computes them with the
-- function baton_monotonic_ms() it registers on its connections. History and controls times
-- (written_at) are wall-clock milliseconds since the Unix epoch. `state` holds the
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

-- The file's own shared state about its times (key/value): 'clock' = 'monotonic' once the lease
-- times are on the monotonic clock (a file of an older baton held wall-clock times: baton
-- converts them on first use), 'boot_id' = the boot (/proc/sys/kernel/random/boot_id) they
-- belong to (times of another boot count as long past) and 'wall_minus_mono' (ms, to show a
-- time of that boot as wall-clock time).
CREATE TABLE IF NOT EXISTS baton_mutex_meta (
  key           VARCHAR(64)  NOT NULL PRIMARY KEY,
  value         TEXT         NOT NULL
);

-- An older baton (wall-clock lease times) must not write this file: its writes of the owner
-- records fail with "no such function: baton_monotonic_ms". Upgrade every node on the file.
CREATE TRIGGER IF NOT EXISTS baton_mutex_clock_insert BEFORE INSERT ON baton_mutex
WHEN baton_monotonic_ms() IS NULL
BEGIN
  SELECT RAISE(ABORT, 'baton_monotonic_ms() is NULL');
END;

CREATE TRIGGER IF NOT EXISTS baton_mutex_clock_update BEFORE UPDATE ON baton_mutex
WHEN baton_monotonic_ms() IS NULL
BEGIN
  SELECT RAISE(ABORT, 'baton_monotonic_ms() is NULL');
END;
