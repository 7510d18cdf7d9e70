-- baton SQL backend, PostgreSQL schema. One row per mutex, created on first use.
-- Times are milliseconds since the Unix epoch on the database clock; `state` holds the
-- lease-guarded state hex-encoded. The backend runs this file (with `baton_mutex` replaced by
-- the configured table name) when the table is missing, unless create_table=false.
CREATE TABLE IF NOT EXISTS baton_mutex (
  name          VARCHAR(128) NOT NULL PRIMARY KEY,
  owner_id      VARCHAR(255) NOT NULL DEFAULT '',
  acquired_at   BIGINT       NOT NULL DEFAULT 0,
  ttl_at        BIGINT       NOT NULL DEFAULT 0,
  transition_at BIGINT       NOT NULL DEFAULT 0,
  fence         BIGINT       NOT NULL DEFAULT 0,
  state         TEXT         NOT NULL DEFAULT ''
);
