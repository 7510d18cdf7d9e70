-- baton SQL backend, MySQL/MariaDB schema. One row per mutex, created on first use.
-- Times are milliseconds since the Unix epoch on the database clock; `state` holds the
-- lease-guarded state hex-encoded. Names and owner ids compare byte-wise (binary collations).
-- The backend runs this file (with `baton_mutex` replaced by the configured table name) when
-- the table is missing, unless create_table=false.
CREATE TABLE IF NOT EXISTS baton_mutex (
  name          VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
  owner_id      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
  acquired_at   BIGINT       NOT NULL DEFAULT 0,
  ttl_at        BIGINT       NOT NULL DEFAULT 0,
  transition_at BIGINT       NOT NULL DEFAULT 0,
  fence         BIGINT       NOT NULL DEFAULT 0,
  state         TEXT         CHARACTER SET ascii NOT NULL
) ENGINE = InnoDB;
