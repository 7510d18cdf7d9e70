#include "json_reader.hpp"

#include <algorithm>
#include <set>
#include <utility>

#include "baton/config/duration.hpp"
#include "baton/mutex/backend_descriptor.hpp"

namespace baton::config::detail {

namespace {

bool is_name_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }

// A message line longer than this is cut (values from other modules' messages may be long).
constexpr std::size_t max_message = 1024;
// A path longer than this is shown as its start and end (keys may be long).
constexpr std::size_t max_path = 200;

bool continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// `text` cut to at most `size` bytes, not inside a UTF-8 sequence.
std::string_view cut(std::string_view text, std::size_t size) {
  if (text.size() <= size) return text;
  std::size_t end = size;
  for (int back = 0; back < 3 && end > 0 && continuation(text[end]); ++back) --end;
  return text.substr(0, end);
}

// "line L, column C" of the byte at `index` of `text` (both counted from 1).
std::string line_and_column(std::string_view text, std::size_t index) {
  const auto before = text.substr(0, std::min(index, text.size()));
  const auto lines = std::count(before.begin(), before.end(), '\n');
  const auto last = before.rfind('\n');
  const auto column = last == std::string_view::npos ? before.size() : before.size() - last - 1;
  return "line " + std::to_string(lines + 1) + ", column " + std::to_string(column + 1);
}

// One open object or array while parsing: where the value being read sits, and the keys seen.
struct frame {
  bool array = false;
  std::size_t index = 0;  // arrays: the element being read
  std::string key;        // objects: the key being read
  std::set<std::string> keys;
};

// Builds the document from nlohmann's SAX events with its own stack (no recursion per level),
// knows the JSON path of every event, records duplicate keys and stops at the nesting limit.
// (nlohmann's parser callback is not used: its DOM builder rescans the enclosing array after
// every object or array, quadratic in the array's length.)
class builder final : public json::json_sax_t {
 public:
  builder(reader& r, std::string_view text, std::size_t max_depth)
      : r_(r), text_(text), max_depth_(max_depth) {}

  json take() { return std::move(root_); }
  /// Set when parsing stopped: the whole message, or the path and message for reader::error.
  std::string failure_path, failure;
  bool failure_has_path = false;

  bool null() override { return add(json(nullptr)); }
  bool boolean(bool value) override { return add(json(value)); }
  bool number_integer(number_integer_t value) override { return add(json(value)); }
  bool number_unsigned(number_unsigned_t value) override { return add(json(value)); }
  bool number_float(number_float_t value, const string_t&) override { return add(json(value)); }
  bool string(string_t& value) override { return add(json(std::move(value))); }
  bool binary(binary_t& value) override { return add(json::binary(std::move(value))); }
  bool start_object(std::size_t) override { return open(json::value_t::object); }
  bool start_array(std::size_t) override { return open(json::value_t::array); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& name) override {
    auto& top = frames_.back();
    top.key = name;
    if (!top.keys.insert(name).second)
      r_.error(path(), "duplicate key " + quote(name) + " (each key may appear once per object)");
    return true;
  }

  bool parse_error(std::size_t position, const std::string& last_token,
                   const json::exception& e) override {
    if (e.id == 406) {  // out_of_range: "number overflow parsing '1e400'"
      failure_has_path = true;
      failure_path = path();
      // `position` is just past the number.
      const auto start = position - std::min(position, last_token.size());
      failure = "number out of range: " + std::string(cut(last_token, 64)) +
                (last_token.size() > 64 ? "..." : "") + " at " + line_and_column(text_, start) +
                " (a number must fit a double, at most about 1.8e308)";
      return false;
    }
    // "parse error at line 3, column 5: ...; last read: '<token>'", the token as long as it is
    // (a whole unterminated string).
    std::string what = library_message(e);
    const std::string marker = "; last read: '";
    if (auto pos = what.find(marker);
        pos != std::string::npos && what.size() - pos - marker.size() > 80) {
      const auto token = std::string_view(what).substr(pos + marker.size());
      what = what.substr(0, pos + marker.size()) + std::string(cut(token, 64)) + "...' (" +
             std::to_string(token.size() - 1) + " bytes)";
    }
    failure = "invalid JSON: " + what;
    return false;
  }

 private:
  // Puts a complete value where the parser is: the root, the next array element or the current
  // key's value (a duplicate key's last value wins).
  json* place(json&& value) {
    if (refs_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& parent = *refs_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      return &parent.back();
    }
    json& slot = parent[frames_.back().key];
    slot = std::move(value);
    return &slot;
  }

  bool add(json&& value) {
    place(std::move(value));
    element_done();
    return true;
  }

  bool open(json::value_t type) {
    if (frames_.size() >= max_depth_) {
      failure_has_path = true;
      failure_path = path();
      failure = "nested deeper than " + std::to_string(max_depth_) +
                " levels of arrays and objects (the limit for a config file)";
      return false;
    }
    refs_.push_back(place(json(type)));
    frames_.emplace_back();
    frames_.back().array = type == json::value_t::array;
    return true;
  }

  bool close() {
    refs_.pop_back();
    frames_.pop_back();
    element_done();
    return true;
  }

  void element_done() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }

  // The JSON path of the value being read.
  std::string path() const {
    std::string out;
    for (const auto& f : frames_) out = f.array ? child(out, f.index) : child(out, f.key);
    return out;
  }

  reader& r_;
  std::string_view text_;
  std::size_t max_depth_;
  json root_;
  std::vector<json*> refs_;  // the open arrays and objects, innermost last
  std::vector<frame> frames_;
};

}  // namespace

std::string child(const std::string& path, std::string_view key) {
  std::string out = path + "/";
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string child(const std::string& path, std::size_t index) {
  return path + "/" + std::to_string(index);
}

std::optional<std::string> substitute_env(std::string_view text, const env_lookup& env,
                                          std::string& error, std::size_t max_size) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '$') {
      out += text[i];
      continue;
    }
    if (text.substr(i, 3) == "$${") {  // escaped: a literal "${"
      out += "${";
      i += 2;
      continue;
    }
    if (text.substr(i, 2) != "${") {
      out += '$';
      continue;
    }
    const auto close = text.find('}', i + 2);
    if (close == std::string_view::npos) {
      error = "unterminated \"${\" (write ${NAME}, or $${ for a literal \"${\")";
      return std::nullopt;
    }
    const std::string name(text.substr(i + 2, close - i - 2));
    if (name.empty() || !is_name_start(name[0]) ||
        !std::all_of(name.begin(), name.end(), is_name_char)) {
      error = "\"${" + name +
              "}\" is not a variable reference (names are [A-Za-z_][A-Za-z0-9_]*; " +
              "write $${ for a literal \"${\")";
      return std::nullopt;
    }
    auto value = env(name);
    if (!value) {
      error = "environment variable " + name + " is not set (referenced as ${" + name + "})";
      return std::nullopt;
    }
    if (value->size() > max_size || out.size() > max_size - value->size()) {
      error = "with ${" + name + "} replaced, the value is longer than " + size_text(max_size) +
              " (the limit)";
      return std::nullopt;
    }
    out += *value;
    i = close;
  }
  return out;
}

std::string size_text(std::size_t bytes) {
  if (bytes != 0 && bytes % (std::size_t{1} << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  if (bytes != 0 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

std::string library_message(const std::exception& e) {
  std::string what = e.what();
  if (auto pos = what.find("] "); what.rfind("[json.exception", 0) == 0 && pos != std::string::npos)
    what = what.substr(pos + 2);
  return what;
}

std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t size = c < 0x80           ? 1
                             : (c >> 5) == 0x6  ? 2
                             : (c >> 4) == 0xE  ? 3
                             : (c >> 3) == 0x1E ? 4
                                                : 0;
    bool ok = size != 0 && i + size <= text.size();
    char32_t code = size == 1 ? c : size == 2 ? c & 0x1F : size == 3 ? c & 0x0F : c & 0x07;
    for (std::size_t k = 1; ok && k < size; ++k) {
      ok = continuation(text[i + k]);
      code = (code << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and code points beyond U+10FFFF are invalid too.
    if (ok &&
        ((size == 2 && code < 0x80) || (size == 3 && code < 0x800) ||
         (size == 4 && (code < 0x10000 || code > 0x10FFFF)) || (code >= 0xD800 && code <= 0xDFFF)))
      ok = false;
    if (ok) {
      out.append(text.substr(i, size));
      i += size;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    }
  }
  return out;
}

std::string quote(std::string_view text, std::size_t max_shown) {
  const auto shown = cut(text, max_shown);
  std::string out = json(std::string(shown)).dump(-1, ' ', false, json::error_handler_t::replace);
  if (shown.size() == text.size()) return out;
  out.insert(out.size() - 1, "...");
  return out + " (" + std::to_string(text.size()) + " bytes)";
}

std::string show(const json& value, std::size_t max_shown) {
  if (value.is_string()) return quote(value.get_ref<const std::string&>(), max_shown);
  // The parser nests at most config_limits::max_depth levels, so dump() recurses that deep.
  const std::string all = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (all.size() <= max_shown) return all;
  return std::string(cut(all, max_shown)) + "... (" + std::to_string(all.size()) +
         " bytes of JSON)";
}

std::string describe_type(const json& value) {
  switch (value.type()) {
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::null:
      return "null";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return "a number";
    default:
      return "an unexpected value";
  }
}

reader::reader(std::string source, env_lookup env, config_limits limits)
    : source_(std::move(source)), env_(std::move(env)), limits_(limits) {}

void reader::error(const std::string& path, const std::string& message) {
  std::string shown = path.empty() ? std::string("/") : path;
  if (shown.size() > max_path)
    shown = std::string(cut(shown, max_path / 2)) + "..." +
            std::string(shown.substr(shown.size() - max_path / 2));
  record(source_ + ": " + shown + ": " + message);
}

void reader::record(std::string line) {
  ++count_;
  if (errors_.size() >= max_listed_errors) return;
  if (line.size() > max_message) line = std::string(cut(line, max_message)) + "... (shortened)";
  errors_.push_back(valid_utf8(line));
}

void reader::throw_if_failed() const {
  if (count_ == 0) return;
  if (count_ == errors_.size()) throw config_error(errors_);
  auto listed = errors_;
  listed.push_back(source_ + ": " + std::to_string(count_ - errors_.size()) +
                   " more errors not listed (only the first " + std::to_string(errors_.size()) +
                   " are)");
  throw config_error(std::move(listed), count_);
}

json reader::parse(std::string_view text) {
  if (text.size() > limits_.max_bytes) {
    record(source_ + ": is " + std::to_string(text.size()) + " bytes, larger than " +
           size_text(limits_.max_bytes) + ", the limit for a config file");
    throw_if_failed();
  }
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    record(source_ + ": is empty: expected a JSON object with \"backend\" and \"schedules\"");
    throw_if_failed();
  }
  builder b(*this, text, limits_.max_depth);
  if (json::sax_parse(text.begin(), text.end(), &b)) return b.take();
  if (b.failure_has_path)
    error(b.failure_path, b.failure);
  else
    record(source_ + ": " + b.failure);
  throw_if_failed();
  return {};  // not reached: an error was recorded
}

void reader::allowed_keys(const json& object, const std::string& path,
                          std::initializer_list<std::string_view> allowed) {
  allowed_keys(object, path, std::vector<std::string_view>(allowed));
}

void reader::allowed_keys(const json& object, const std::string& path,
                          const std::vector<std::string_view>& allowed) {
  if (!object.is_object()) return;
  for (const auto& [key, value] : object.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::string message = "unknown key " + quote(key);
    if (const auto best = nearest_name(key, allowed); !best.empty())
      message += " (did you mean " + quote(best) + "?)";
    std::string list;
    for (auto candidate : allowed) list += (list.empty() ? "" : ", ") + std::string(candidate);
    error(child(path, key), message + "; allowed here: " + list);
  }
}

bool reader::expect_object(const json& value, const std::string& path) {
  if (value.is_object()) return true;
  error(path, "expected an object, found " + describe_type(value));
  return false;
}

std::optional<std::string> reader::string(const json& value, const std::string& path) {
  if (!value.is_string()) {
    error(path, "expected a string, found " + describe_type(value));
    return std::nullopt;
  }
  const auto& text = value.get_ref<const std::string&>();
  if (expansion_ > limits_.max_bytes) return std::nullopt;  // reported once, below
  std::string why;
  auto result = substitute_env(text, env_, why, limits_.max_bytes);
  if (!result) {
    error(path, why);
    return std::nullopt;
  }
  if (result->size() > text.size()) expansion_ += result->size() - text.size();
  if (expansion_ > limits_.max_bytes) {
    error(path, "the ${NAME} references of this file add more than " +
                    size_text(limits_.max_bytes) + " to it in all (the limit)");
    return std::nullopt;
  }
  return result;
}

std::optional<std::chrono::milliseconds> reader::duration(const json& value,
                                                          const std::string& path) {
  if (value.is_number()) {
    error(path, "expected a duration string, found the number " + show(value) + " (" +
                    std::string(duration_hint) + ")");
    return std::nullopt;
  }
  auto text = string(value, path);
  if (!text) return std::nullopt;
  auto parsed = parse_duration(*text);
  if (!parsed)
    error(path, "invalid duration " + quote(*text) + " (" + std::string(duration_hint) + ")");
  return parsed;
}

std::optional<std::string> reader::choice(const json& value, const std::string& path,
                                          std::initializer_list<std::string_view> choices) {
  auto text = string(value, path);
  if (!text) return std::nullopt;
  if (std::find(choices.begin(), choices.end(), *text) != choices.end()) return text;
  std::string list;
  for (auto c : choices) list += (list.empty() ? "" : ", ") + quote(c);
  error(path, "invalid value " + quote(*text) + " (expected one of " + list + ")");
  return std::nullopt;
}

}  // namespace baton::config::detail
