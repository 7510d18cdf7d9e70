#pragma once
// The SQL text of each dialect, with the table name filled in. Every statement is parameterized;
// only the (validated) table name is spliced into the text.
#include <string>
#include <string_view>
#include <vector>

#include "baton/backends/sql/sql_backend.hpp"

namespace baton::backends::sql::detail {

/// The statements one dialect runs. Placeholders are named and each is used once (SOCI's
/// PostgreSQL backend binds a repeated name only once).
struct dialect_sql {
  dialect kind = dialect::sqlite;
  std::string table;
  std::string now_ms;   ///< lease clock in ms: the database's (since the epoch, fixed within a
                        ///< statement); SQLite: the host's monotonic clock (sqlite_clock.hpp)
  std::string wall_ms;  ///< record times (written_at): wall clock, ms since the epoch
  std::string begin;    ///< starts the acquire transaction (SQLite: BEGIN IMMEDIATE)
  std::string commit;
  std::string insert_missing;  ///< :name; a free row (owner '', times 0, fence 0) if missing
  std::string acquire;         ///< :me1 :me2 :me3 :ttl :lease :name :me4
  std::string select_owner;  ///< :name -> owner_id, acquired_at, ttl_at, transition_at, fence, now
  std::string select_now;    ///< -> now
  std::string release;       ///< :name :me

  // Batches: one statement for many mutexes, each row for its own owner. PostgreSQL and SQLite
  // bind the names (and owners) as array parameters (a text array, a JSON array) and keep one
  // prepared statement; MySQL has the quoted names and hex owners spliced in (its client sends
  // the text anyway). Mutex names are validated (A-Z a-z 0-9 . _ -), so they are safe quoted.
  bool returning = false;    ///< acquire_many returns the rows it changed (not MySQL)
  std::string acquire_many;  ///< :ttl :lease and the (name, owner) pairs (PostgreSQL :names
                             ///< :mes, SQLite :pairs, MySQL {names} {me}): the conditional UPDATE
                             ///< of acquire on each row for its own owner; PostgreSQL, SQLite:
                             ///< RETURNING name and the owner record with now of each row it
                             ///< took or renewed
  std::string select_many;   ///< :names -> name, owner record, now of each row there
  std::string insert_many;   ///< :names; a free row for each missing name
  std::string release_many;  ///< the (name, owner) pairs as in acquire_many; PostgreSQL:
                             ///< :channel too, NOTIFYs each released
                             ///< name and returns how many
  std::string poll_many;     ///< :names -> PostgreSQL, SQLite: the names that are free (released,
                             ///< lapsed or without a row); MySQL: those that are not
  std::string write_state;   ///< :state :name :me :fence
  std::string read_state;    ///< :name -> state (hex)
  std::string notify;        ///< PostgreSQL: :channel :name, wakes LISTENers; else empty
  std::string channel;       ///< PostgreSQL: the NOTIFY channel of the table
  std::string check_table;   ///< fails when the table or one of its columns is missing
  std::string find_table;    ///< :t -> 'yes' when the table exists, else 'no' (read only)
  std::string find_table_t;  ///< what :t of find_table binds

  // History and controls (record_store): tables <table>_history and <table>_controls.
  std::string history_table;
  std::string controls_table;
  std::string rollback;
  std::string lock_owner;      ///< :name :me :fence -> fence; locks the row (PG/MySQL FOR UPDATE)
  std::string max_seq;         ///< :name -> the highest seq of the history (0 when empty)
  std::string insert_history;  ///< :name :seq :fence :bytes
  std::string prune_history;   ///< :name :cut; deletes entries with seq <= cut
  std::string read_history;    ///< :name :limit -> seq, fence, bytes, newest first
  std::string read_controls;   ///< :name -> version, bytes
  std::string controls_versions;  ///< -> name, version of every controls row
  std::string insert_controls;    ///< :name :bytes; version 1, affects no row when one exists
  std::string update_controls;    ///< :bytes :name :expected; version + 1 where version = expected
  std::string check_history;      ///< fails when the history table or a column is missing
  std::string check_controls;     ///< fails when the controls table or a column is missing
  std::string find_history_t;     ///< what :t of find_table binds for the history table
  std::string find_controls_t;    ///< what :t of find_table binds for the controls table
  /// PostgreSQL: the NOTIFY payload of a controls change of `name` (on `channel`); releases
  /// notify the bare name, and mutex names have no ':'.
  static std::string controls_payload(const std::string& name) { return "controls:" + name; }
  std::vector<std::string> schema;  ///< the statements of schema/<dialect>.sql

  // SQLite only: the meta table (key, value) that names the clock of the lease times.
  std::string meta_table;
  std::string read_meta;    ///< :key -> value
  std::string write_meta;   ///< :key :value (insert or replace)
  std::string check_meta;   ///< fails when the meta table or a column is missing
  std::string find_meta_t;  ///< what :t of find_table binds for the meta table
};

/// What :names binds (PostgreSQL, SQLite), or what replaces {names} (MySQL), for `names`.
std::string names_param(dialect d, const std::vector<std::string>& names);
/// PostgreSQL: a text array literal of any `items` (what :mes binds).
std::string text_array(const std::vector<std::string>& items);
/// SQLite: a JSON array of [name, owner] pairs (what :pairs binds).
std::string json_pairs(const std::vector<std::string>& names, const std::vector<std::string>& mes);
/// MySQL: `text` with {names} replaced by the list of `names`, {values} by a free row of each and
/// {me} by the owner of each (mes[i] asks for names[i]).
std::string with_names(const std::string& text, const std::vector<std::string>& names,
                       const std::vector<std::string>& mes = {});

/// The statements of dialect `d` on table `table` (already validated).
dialect_sql make_dialect_sql(dialect d, const std::string& table);

/// The embedded schema/<dialect>.sql file as shipped.
std::string_view schema_file(dialect d) noexcept;

/// Splits an SQL script into statements: drops `--` comments, splits at `;` outside quotes.
std::vector<std::string> split_sql(std::string_view script);

/// Suffixes of the tables derived from the configured table name.
inline constexpr std::string_view history_suffix = "_history";
inline constexpr std::string_view controls_suffix = "_controls";
/// SQLite: the meta table and the triggers that keep an older baton from writing the file.
inline constexpr std::string_view meta_suffix = "_meta";
inline constexpr std::string_view clock_insert_suffix = "_clock_insert";
inline constexpr std::string_view clock_update_suffix = "_clock_update";

/// SQLite: the SQL functions each connection registers: the host's monotonic clock (lease
/// times) and its wall clock (record times), in ms, both read with the raw system call.
inline constexpr std::string_view sqlite_monotonic_function = "baton_monotonic_ms";
inline constexpr std::string_view sqlite_wall_function = "baton_wall_ms";

/// Replaces the identifier `baton_mutex` (whole word, also as the stem of `baton_mutex_history`,
/// `baton_mutex_controls`, `baton_mutex_meta` and the clock triggers) by `table`.
std::string with_table(std::string_view text, std::string_view table);

}  // namespace baton::backends::sql::detail
