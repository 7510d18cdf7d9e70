#include "conninfo.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <memory>

namespace baton::backends::sql::detail {
namespace {

[[noreturn]] void bad_connection(dialect d, const std::string& why) {
  throw backend_param_error("connection",
                            std::string(to_string(d)) + " backend: parameter 'connection': " + why);
}

constexpr auto npos = std::string_view::npos;

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// True when `word` is a plain name written as a key in `text` ("word =" somewhere).
bool written_as_key(std::string_view text, std::string_view word) {
  if (word.empty() || !std::all_of(word.begin(), word.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
      }))
    return false;
  for (auto at = text.find(word); at != std::string_view::npos; at = text.find(word, at + 1)) {
    auto i = at + word.size();
    while (i < text.size() && is_space(text[i])) ++i;
    if (i < text.size() && text[i] == '=') return true;
  }
  return false;
}

// A libpq parse error with every "quoted" fragment masked, unless it is a key written in the
// string (`invalid connection option "passwrd"`) or one punctuation character (`missing "="`):
// libpq quotes values too (`missing "=" after "secret"`, and whole URIs).
std::string masked_libpq_error(std::string message, std::string_view text) {
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  std::string out;
  std::size_t i = 0;
  while (i < message.size()) {
    const auto open = message.find('"', i);
    const auto close = open == std::string::npos ? open : message.find('"', open + 1);
    if (close == std::string::npos) {
      out += message.substr(i);
      break;
    }
    const auto fragment = std::string_view(message).substr(open + 1, close - open - 1);
    out += message.substr(i, open + 1 - i);
    const bool syntax =
        fragment.size() == 1 && std::ispunct(static_cast<unsigned char>(fragment[0]));
    out += syntax || written_as_key(text, fragment) ? std::string(fragment) : "***";
    out += '"';
    i = close + 1;
  }
  return out;
}

std::vector<conn_option> parse_postgresql(std::string_view text) {
  char* error = nullptr;
  const std::string copy(text);
  std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> options(
      PQconninfoParse(copy.c_str(), &error), &PQconninfoFree);
  if (!options) {
    std::string message = error != nullptr ? error : "out of memory";
    PQfreemem(error);
    bad_connection(dialect::postgresql,
                   "not a libpq connection string: " + masked_libpq_error(message, text));
  }
  std::vector<conn_option> out;
  for (const PQconninfoOption* o = options.get(); o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    // libpq's own mark of a password field ("*": hide the value).
    const bool secret = o->dispchar != nullptr && o->dispchar[0] == '*';
    // libpq ends a URI's user info at the first '@': "postgresql://u:p@ss@h" means password "p"
    // and host "ss@h", which would show part of the intended password and cannot connect.
    if (std::string_view(o->keyword) == "host" && std::string_view(o->val).find('@') != npos)
      bad_connection(
          dialect::postgresql,
          "a host name contains '@' (in a URI, write an '@' of the user name or password "
          "as %40)");
    out.push_back({o->keyword, o->val, secret});
  }
  return out;
}

// The keys SOCI 4.0's MySQL backend takes (any other is "Malformed connection string.").
constexpr std::string_view mysql_keys[] = {
    "host",         "port",         "user",      "pass",
    "password",     "db",           "dbname",    "service",
    "unix_socket",  "sslca",        "sslcert",   "sslkey",
    "local_infile", "charset",      "reconnect", "connect_timeout",
    "read_timeout", "write_timeout"};

// SOCI's MySQL parser (soci/src/backends/mysql/session.cpp, parse_connect_string): keys are
// letters and '_'; spaces may surround '='; a value is 'quoted' or runs to the next space; a
// backslash takes the next character as is, quoted or not; a quote inside an unquoted value is
// an error. The first occurrence of a key counts (pass and password are one key).
std::vector<conn_option> parse_mysql(std::string_view s) {
  auto fail = [](const std::string& why) { bad_connection(dialect::mysql, why); };
  std::vector<conn_option> out;
  std::size_t i = 0;
  auto skip = [&] {
    while (i < s.size() && is_space(s[i])) ++i;
  };
  for (skip(); i < s.size(); skip()) {
    const std::size_t start = i;
    while (i < s.size() && (std::isalpha(static_cast<unsigned char>(s[i])) != 0 || s[i] == '_'))
      ++i;
    std::string key(s.substr(start, i - start));
    skip();
    if (key.empty() || i >= s.size() || s[i] != '=')
      fail("expected key=value at offset " + std::to_string(start));
    ++i;
    skip();
    if (i >= s.size()) fail("'" + key + "' has no value");
    std::string value;
    const bool quoted = i < s.size() && s[i] == '\'';
    if (quoted) ++i;
    for (;; ++i) {
      if (i >= s.size()) {
        if (quoted) fail("unterminated quote in the value of '" + key + "'");
        break;
      }
      if (s[i] == '\'') {
        if (!quoted)
          fail("a quote inside the unquoted value of '" + key + "' (quote the value: " + key +
               "='...', with \\' for a quote)");
        ++i;
        break;
      }
      if (!quoted && is_space(s[i])) break;
      if (s[i] == '\\' && ++i >= s.size()) fail("a '\\' ends the value of '" + key + "'");
      value += s[i];
    }
    if (std::find(std::begin(mysql_keys), std::end(mysql_keys), key) == std::end(mysql_keys)) {
      std::string known;
      for (auto k : mysql_keys) known += (known.empty() ? "" : ", ") + std::string(k);
      fail("unknown key '" + key + "' (SOCI's MySQL backend takes: " + known + ")");
    }
    const bool secret = key == "pass" || key == "password";
    out.push_back({std::move(key), std::move(value), secret});
  }
  return out;
}

// A value as both syntaxes read it: bare when it has no space, quote or backslash, else quoted
// with \' and \\.
std::string render_value(const std::string& value) {
  const bool plain = !value.empty() && std::none_of(value.begin(), value.end(), [](char c) {
    return is_space(c) || c == '\'' || c == '\\' || c == '"';
  });
  if (plain) return value;
  std::string out = "'";
  for (char c : value) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

}  // namespace

std::vector<conn_option> parse_connection(dialect d, std::string_view text) {
  return d == dialect::postgresql ? parse_postgresql(text) : parse_mysql(text);
}

masked_value mask_connection(dialect d, const std::string& text) {
  masked_value out;
  std::vector<conn_option> options;
  try {
    options = parse_connection(d, text);
  } catch (const std::invalid_argument&) {
    return {"***", {text}};  // the driver would not read it either: nothing is known to be safe
  }
  for (const auto& o : options) {
    out.text +=
        (out.text.empty() ? "" : " ") + o.key + "=" + (o.secret ? "***" : render_value(o.value));
    if (o.secret && !o.value.empty()) out.secrets.push_back(o.value);
  }
  return out;
}

}  // namespace baton::backends::sql::detail
