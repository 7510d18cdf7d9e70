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
  std::string now_ms;  ///< database clock, ms since the epoch, fixed within a statement
  std::string begin;   ///< starts the acquire transaction (SQLite: BEGIN IMMEDIATE)
  std::string commit;
  std::string insert_missing;  ///< :name; a free row (owner '', times 0, fence 0) if missing
  std::string acquire;         ///< :me1 :me2 :me3 :ttl :lease :name :me4
  std::string select_owner;  ///< :name -> owner_id, acquired_at, ttl_at, transition_at, fence, now
  std::string select_now;    ///< -> now
  std::string release;       ///< :name :me
  std::string write_state;   ///< :state :name :me :fence
  std::string read_state;    ///< :name -> state (hex)
  std::string notify;        ///< PostgreSQL: :channel :name, wakes LISTENers; else empty
  std::string channel;       ///< PostgreSQL: the NOTIFY channel of the table
  std::string check_table;   ///< fails when the table or one of its columns is missing
  std::string find_table;    ///< :t -> 'yes' when the table exists, else 'no' (read only)
  std::string find_table_t;  ///< what :t of find_table binds
  std::vector<std::string> schema;  ///< the statements of schema/<dialect>.sql
};

/// The statements of dialect `d` on table `table` (already validated).
dialect_sql make_dialect_sql(dialect d, const std::string& table);

/// The embedded schema/<dialect>.sql file as shipped.
std::string_view schema_file(dialect d) noexcept;

/// Splits an SQL script into statements: drops `--` comments, splits at `;` outside quotes.
std::vector<std::string> split_sql(std::string_view script);

/// Replaces the identifier `baton_mutex` (whole word) by `table`.
std::string with_table(std::string_view text, std::string_view table);

}  // namespace baton::backends::sql::detail
