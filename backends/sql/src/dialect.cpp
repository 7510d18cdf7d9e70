#include "dialect.hpp"

#include <cctype>

#include "schema_files.hpp"

namespace baton::backends::sql::detail {
namespace {

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  for (auto pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size()))
    text.replace(pos, from.size(), to);
}

bool identifier_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

// The conditional UPDATE that acquires or renews, one row or a batch. A renewal (same owner, live
// lease) keeps the fence and acquired_at; any new ownership increments the fence. MySQL assigns
// SET columns left to right using the values already assigned, so fence and acquired_at, which
// read owner_id and transition_at, come before those two are changed.
// Batch forms: {set}: "name is one of the batch's names"; {me}: the owner asking for the row
// (PostgreSQL, SQLite: v.me of the joined list of (name, owner) pairs; MySQL: a CASE on the
// name); {from}: that list; {row}: the row's pair. One row: single_row().
constexpr std::string_view acquire_many_template =
    "UPDATE {t} SET "
    "fence = CASE WHEN owner_id = {me} AND transition_at >= {now} THEN fence ELSE fence + 1 END, "
    "acquired_at = CASE WHEN owner_id = {me} AND transition_at >= {now} THEN acquired_at "
    "ELSE {now} END, "
    "owner_id = {me}, ttl_at = {now} + :ttl, transition_at = {now} + :lease{from} "
    "WHERE {row} AND (transition_at < {now} OR owner_id = {me})";
// The one-row form of a batch template: :me1, :me2, ... for {me}, :name for the row.
std::string single_row(std::string_view text) {
  std::string out(text);
  int n = 0;
  for (auto pos = out.find("{me}"); pos != std::string::npos; pos = out.find("{me}", pos))
    out.replace(pos, 4, ":me" + std::to_string(++n));
  replace_all(out, "{from}", "");
  replace_all(out, "{row}", "name = :name");
  return out;
}

constexpr std::string_view returning_owner =
    " RETURNING name, owner_id, acquired_at, ttl_at, transition_at, fence, {now}";
constexpr std::string_view select_many_template =
    "SELECT name, owner_id, acquired_at, ttl_at, transition_at, fence, {now} FROM {t} WHERE {set}";
constexpr std::string_view release_many_template =
    "UPDATE {t} SET owner_id = '', ttl_at = {now}, transition_at = {now} - 1{from} "
    "WHERE {row} AND owner_id = {me}";

constexpr std::string_view select_owner_template =
    "SELECT owner_id, acquired_at, ttl_at, transition_at, fence, {now} FROM {t} WHERE name = :name";

constexpr std::string_view release_template =
    "UPDATE {t} SET owner_id = '', ttl_at = {now}, transition_at = {now} - 1 "
    "WHERE name = :name AND owner_id = :me";

constexpr std::string_view write_state_template =
    "UPDATE {t} SET state = :state "
    "WHERE name = :name AND owner_id = :me AND fence = :fence AND transition_at >= {now}";

constexpr std::string_view columns =
    "(name, owner_id, acquired_at, ttl_at, transition_at, fence, state) "
    "VALUES (:name, '', 0, 0, 0, 0, '')";

std::string expand(std::string_view text, const dialect_sql& sql) {
  std::string out(text);
  replace_all(out, "{now}", sql.now_ms);
  replace_all(out, "{wall}", sql.wall_ms);
  replace_all(out, "{m}", sql.meta_table);
  replace_all(out, "{h}", sql.history_table);
  replace_all(out, "{c}", sql.controls_table);
  replace_all(out, "{t}", sql.table);
  return out;
}

// Whether the identifier `baton_mutex` that ends at `end` of `text` is a whole word, or the stem
// of one of the derived table names.
bool stem_ends(std::string_view text, std::size_t end) {
  auto word_ends_at = [&](std::size_t at) {
    return at == text.size() || !identifier_char(text[at]);
  };
  if (word_ends_at(end)) return true;
  for (auto suffix :
       {history_suffix, controls_suffix, meta_suffix, clock_insert_suffix, clock_update_suffix})
    if (text.compare(end, suffix.size(), suffix) == 0 && word_ends_at(end + suffix.size()))
      return true;
  return false;
}

// History append, step by step in one transaction (connection::append_history): lock the owner
// row if `me` owns it with `fence`, then the next seq, the entry, and the pruning.
constexpr std::string_view lock_owner_template =
    "SELECT fence FROM {t} WHERE name = :name AND owner_id = :me AND fence = :fence";
constexpr std::string_view max_seq_template =
    "SELECT COALESCE(MAX(seq), 0) FROM {h} WHERE name = :name";
constexpr std::string_view insert_history_template =
    "INSERT INTO {h} (name, seq, fence, written_at, bytes) "
    "VALUES (:name, :seq, :fence, {wall}, :bytes)";
constexpr std::string_view prune_history_template =
    "DELETE FROM {h} WHERE name = :name AND seq <= :cut";
constexpr std::string_view read_history_template =
    "SELECT seq, fence, bytes FROM {h} WHERE name = :name ORDER BY seq DESC LIMIT :limit";
constexpr std::string_view controls_columns =
    "(name, version, bytes, written_at) VALUES (:name, 1, :bytes, {wall})";
constexpr std::string_view update_controls_template =
    "UPDATE {c} SET version = version + 1, bytes = :bytes, written_at = {wall} "
    "WHERE name = :name AND version = :expected";

// Whether `statement` (up to a ';') is a CREATE TRIGGER whose BEGIN ... END body is still
// open: its statements end with ';' too.
bool inside_trigger_body(const std::string& statement) {
  std::string words;  // upper case, runs of white space as one blank
  for (char c : statement) {
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      if (!words.empty() && words.back() != ' ') words += ' ';
    } else {
      words += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
  }
  if (!words.empty() && words.back() == ' ') words.pop_back();
  if (words.rfind("CREATE TRIGGER ", 0) != 0 && words.rfind("CREATE TEMP TRIGGER ", 0) != 0)
    return false;
  const bool ends_with_end = words.size() >= 4 && words.compare(words.size() - 4, 4, " END") == 0;
  return !ends_with_end;
}

}  // namespace

std::string names_param(dialect d, const std::vector<std::string>& names) {
  std::string out;
  out.reserve(names.size() * 24 + 2);
  const char quote = d == dialect::mysql ? '\'' : '"';
  if (d == dialect::postgresql) out += '{';
  if (d == dialect::sqlite) out += '[';
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i != 0) out += ',';
    out += quote;
    out += names[i];
    out += quote;
  }
  if (d == dialect::postgresql) out += '}';
  if (d == dialect::sqlite) out += ']';
  return out;
}

std::string text_array(const std::vector<std::string>& items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i != 0) out += ',';
    out += '"';
    for (char c : items[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

namespace {

void json_string(std::string& out, const std::string& text) {
  static constexpr char digits[] = "0123456789abcdef";
  out += '"';
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      out += "\\u00";
      out += digits[u >> 4];
      out += digits[u & 0xf];
    } else {
      out += c;
    }
  }
  out += '"';
}

}  // namespace

std::string json_pairs(const std::vector<std::string>& names, const std::vector<std::string>& mes) {
  std::string out = "[";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i != 0) out += ',';
    out += '[';
    json_string(out, names[i]);
    out += ',';
    json_string(out, mes[i]);
    out += ']';
  }
  out += ']';
  return out;
}

std::string with_names(const std::string& text, const std::vector<std::string>& names,
                       const std::vector<std::string>& mes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out = text;
  if (out.find("{values}") != std::string::npos) {
    std::string values;
    values.reserve(names.size() * 40);
    for (std::size_t i = 0; i < names.size(); ++i)
      values += (i == 0 ? "('" : ",('") + names[i] + "', '', 0, 0, 0, 0, '')";
    replace_all(out, "{values}", values);
  }
  if (out.find("{me}") != std::string::npos) {
    // Owner ids are any text: as hex literals they need no escaping.
    std::string me = "CASE name";
    for (std::size_t i = 0; i < names.size() && i < mes.size(); ++i) {
      me += " WHEN '" + names[i] + "' THEN _utf8mb4 X'";
      for (char c : mes[i]) {
        const auto u = static_cast<unsigned char>(c);
        me += digits[u >> 4];
        me += digits[u & 0xf];
      }
      me += '\'';
    }
    me += " END";
    replace_all(out, "{me}", me);
  }
  replace_all(out, "{names}", names_param(dialect::mysql, names));
  return out;
}

std::string_view schema_file(dialect d) noexcept {
  switch (d) {
    case dialect::sqlite:
      return sqlite_schema_file;
    case dialect::postgresql:
      return postgresql_schema_file;
    case dialect::mysql:
      return mysql_schema_file;
  }
  return {};
}

std::vector<std::string> split_sql(std::string_view script) {
  std::vector<std::string> out;
  std::string current;
  char quote = 0;
  for (std::size_t i = 0; i < script.size(); ++i) {
    const char c = script[i];
    if (quote != 0) {
      current += c;
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"' || c == '`') {
      quote = c;
      current += c;
    } else if (c == '-' && i + 1 < script.size() && script[i + 1] == '-') {
      while (i < script.size() && script[i] != '\n') ++i;
      current += '\n';
    } else if (c == ';' && !inside_trigger_body(current)) {
      out.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  out.push_back(current);
  std::vector<std::string> statements;
  for (auto& s : out) {
    auto first = s.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) continue;
    auto last = s.find_last_not_of(" \t\r\n");
    statements.push_back(s.substr(first, last - first + 1));
  }
  return statements;
}

std::string with_table(std::string_view text, std::string_view table) {
  constexpr std::string_view word = "baton_mutex";
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, word.size(), word) == 0 && (i == 0 || !identifier_char(text[i - 1])) &&
        stem_ends(text, i + word.size())) {
      out += table;
      i += word.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

dialect_sql make_dialect_sql(dialect d, const std::string& table) {
  dialect_sql sql;
  sql.kind = d;
  sql.table = table;
  sql.history_table = table + std::string(history_suffix);
  sql.controls_table = table + std::string(controls_suffix);
  sql.meta_table = table + std::string(meta_suffix);
  switch (d) {
    case dialect::sqlite:
      // No server clock: the host's monotonic clock for lease times, its wall clock for record
      // times, both read by functions each connection registers (sqlite_clock.hpp).
      // As a scalar subquery it is read once per statement (not per row and use): one clock
      // for the whole statement, as PostgreSQL's statement_timestamp(), and a poll of 2,000
      // names costs one clock reading instead of 2,000.
      sql.now_ms = "(SELECT " + std::string(sqlite_monotonic_function) + "())";
      sql.wall_ms = std::string(sqlite_wall_function) + "()";
      sql.read_meta = expand("SELECT value FROM {m} WHERE key = :key", sql);
      sql.write_meta = expand("INSERT OR REPLACE INTO {m} (key, value) VALUES (:key, :value)", sql);
      sql.check_meta = expand("SELECT key, value FROM {m} WHERE 1 = 0", sql);
      sql.begin = "BEGIN IMMEDIATE";
      sql.insert_missing = expand("INSERT OR IGNORE INTO {t} ", sql) + std::string(columns);
      sql.insert_controls =
          expand("INSERT OR IGNORE INTO {c} " + std::string(controls_columns), sql);
      break;
    case dialect::postgresql:
      sql.now_ms = "CAST(FLOOR(EXTRACT(EPOCH FROM statement_timestamp()) * 1000) AS BIGINT)";
      sql.wall_ms = sql.now_ms;
      sql.begin = "BEGIN";
      sql.channel = ("baton:" + table).substr(0, 63);  // at most 63 bytes, as LISTEN cuts it
      sql.notify = "SELECT pg_notify(:channel, :name)";
      sql.insert_missing =
          expand("INSERT INTO {t} ", sql) + std::string(columns) + " ON CONFLICT (name) DO NOTHING";
      sql.insert_controls = expand(
          "INSERT INTO {c} " + std::string(controls_columns) + " ON CONFLICT (name) DO NOTHING",
          sql);
      break;
    case dialect::mysql:
      // Needs the session time zone '+00:00' (set on connect) to be free of DST jumps.
      sql.now_ms = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)";
      sql.wall_ms = sql.now_ms;
      sql.begin = "START TRANSACTION";
      sql.insert_missing = expand("INSERT IGNORE INTO {t} ", sql) + std::string(columns);
      sql.insert_controls = expand("INSERT IGNORE INTO {c} " + std::string(controls_columns), sql);
      break;
  }
  sql.commit = "COMMIT";
  sql.acquire = expand(single_row(acquire_many_template), sql);
  sql.select_owner = expand(select_owner_template, sql);
  sql.select_now = "SELECT " + sql.now_ms;
  sql.release = expand(release_template, sql);
  {
    std::string set, insert_many;
    const std::string columns_list =
        "(name, owner_id, acquired_at, ttl_at, transition_at, fence, state) ";
    switch (d) {
      case dialect::sqlite:
        set = "name IN (SELECT value FROM json_each(:names))";
        insert_many = "INSERT OR IGNORE INTO {t} " + columns_list +
                      "SELECT value, '', 0, 0, 0, 0, '' FROM json_each(:names)";
        break;
      case dialect::postgresql:
        set = "name = ANY(CAST(:names AS TEXT[]))";
        insert_many = "INSERT INTO {t} " + columns_list +
                      "SELECT n, '', 0, 0, 0, 0, '' FROM unnest(CAST(:names AS TEXT[])) AS n "
                      "ON CONFLICT (name) DO NOTHING";
        break;
      case dialect::mysql:
        set = "name IN ({names})";
        insert_many = "INSERT IGNORE INTO {t} " + columns_list + "VALUES {values}";
        break;
    }
    std::string from, row = "name = v.n", me = "v.me";
    switch (d) {
      case dialect::sqlite:
        from =
            " FROM (SELECT json_extract(j.value, '$[0]') AS n, json_extract(j.value, '$[1]') AS me "
            "FROM json_each(:pairs) AS j) AS v";
        break;
      case dialect::postgresql:
        from = " FROM unnest(CAST(:names AS TEXT[]), CAST(:mes AS TEXT[])) AS v(n, me)";
        break;
      case dialect::mysql:
        row = "name IN ({names})";
        me = "{me}";  // filled in per batch
        break;
    }
    auto with_set = [&](std::string_view text) {
      std::string out(text);
      replace_all(out, "{set}", set);
      replace_all(out, "{from}", from);
      replace_all(out, "{row}", row);
      if (d != dialect::mysql) replace_all(out, "{me}", me);
      return expand(out, sql);
    };
    sql.returning = d != dialect::mysql;
    sql.acquire_many = with_set(acquire_many_template);
    if (sql.returning) sql.acquire_many += expand(returning_owner, sql);
    sql.select_many = with_set(select_many_template);
    sql.insert_many = expand(insert_many, sql);
    sql.release_many = with_set(release_many_template);
    // The waiters' poll: PostgreSQL and SQLite answer with the few free names only.
    const std::string busy = "owner_id <> '' AND transition_at >= {now}";
    switch (d) {
      case dialect::sqlite:
        sql.poll_many = expand(
            "SELECT j.value FROM json_each(:names) AS j WHERE NOT EXISTS (SELECT 1 FROM {t} "
            "WHERE {t}.name = j.value AND " +
                busy + ")",
            sql);
        break;
      case dialect::postgresql:
        sql.poll_many = expand(
            "SELECT u.n FROM unnest(CAST(:names AS TEXT[])) AS u(n) WHERE NOT EXISTS (SELECT 1 "
            "FROM {t} WHERE {t}.name = u.n AND " +
                busy + ")",
            sql);
        break;
      case dialect::mysql:
        sql.poll_many = with_set("SELECT name FROM {t} WHERE {set} AND " + busy);
        break;
    }
    if (d == dialect::postgresql)
      sql.release_many = "WITH r AS (" + sql.release_many +
                         " RETURNING name) SELECT COUNT(*) FROM (SELECT pg_notify(:channel, name) "
                         "FROM r) AS n";
  }
  sql.write_state = expand(write_state_template, sql);
  sql.read_state = expand("SELECT state FROM {t} WHERE name = :name", sql);
  sql.rollback = "ROLLBACK";
  sql.lock_owner = expand(lock_owner_template, sql);
  if (d != dialect::sqlite) sql.lock_owner += " FOR UPDATE";  // SQLite: BEGIN IMMEDIATE locks
  sql.max_seq = expand(max_seq_template, sql);
  sql.insert_history = expand(insert_history_template, sql);
  sql.prune_history = expand(prune_history_template, sql);
  sql.read_history = expand(read_history_template, sql);
  sql.read_controls = expand("SELECT version, bytes FROM {c} WHERE name = :name", sql);
  sql.controls_versions = expand("SELECT name, version FROM {c}", sql);
  sql.update_controls = expand(update_controls_template, sql);
  sql.check_history =
      expand("SELECT name, seq, fence, written_at, bytes FROM {h} WHERE 1 = 0", sql);
  sql.check_controls = expand("SELECT name, version, bytes, written_at FROM {c} WHERE 1 = 0", sql);
  sql.check_table = expand(
      "SELECT name, owner_id, acquired_at, ttl_at, transition_at, fence, state FROM {t} "
      "WHERE 1 = 0",
      sql);
  // Whether the table exists, without touching it (read-only inspection). The schema part of a
  // qualified name is a validated identifier, so it is safe in the text.
  const auto dot = table.find('.');
  const std::string schema = dot == std::string::npos ? "" : table.substr(0, dot);
  sql.find_table_t = dot == std::string::npos ? table : table.substr(dot + 1);
  switch (d) {
    case dialect::sqlite:
      sql.find_table = "SELECT CASE WHEN EXISTS (SELECT 1 FROM " +
                       (schema.empty() ? "" : schema + ".") +
                       "sqlite_master WHERE type = 'table' AND name = :t COLLATE NOCASE) THEN "
                       "'yes' ELSE 'no' END";
      break;
    case dialect::postgresql:
      sql.find_table_t = table;  // to_regclass resolves a qualified name and the search_path
      sql.find_table = "SELECT CASE WHEN to_regclass(:t) IS NULL THEN 'no' ELSE 'yes' END";
      break;
    case dialect::mysql:
      sql.find_table =
          "SELECT CASE WHEN EXISTS (SELECT 1 FROM information_schema.tables WHERE "
          "table_schema = " +
          (schema.empty() ? std::string("DATABASE()") : "'" + schema + "'") +
          " AND table_name = :t) THEN 'yes' ELSE 'no' END";
      break;
  }
  sql.find_history_t = sql.find_table_t + std::string(history_suffix);
  sql.find_controls_t = sql.find_table_t + std::string(controls_suffix);
  sql.find_meta_t = sql.find_table_t + std::string(meta_suffix);
  sql.schema = split_sql(with_table(schema_file(d), table));
  return sql;
}

}  // namespace baton::backends::sql::detail
