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

std::string in_quotes(std::string_view s) { return json(std::string(s)).dump(); }

// One open object or array while parsing, to name the path of a duplicate key.
struct frame {
  bool array = false;
  std::size_t index = 0;  // arrays: the element being read
  std::string key;        // objects: the key being read
  std::set<std::string> keys;
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
                                          std::string& error) {
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
    out += *value;
    i = close;
  }
  return out;
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

reader::reader(std::string source, env_lookup env)
    : source_(std::move(source)), env_(std::move(env)) {}

void reader::error(const std::string& path, const std::string& message) {
  errors_.push_back(source_ + ": " + (path.empty() ? std::string("/") : path) + ": " + message);
}

void reader::throw_if_failed() const {
  if (!errors_.empty()) throw config_error(errors_);
}

json reader::parse(std::string_view text) {
  std::vector<frame> stack;
  auto path_to_top = [&stack] {
    std::string path;
    for (std::size_t i = 0; i + 1 < stack.size(); ++i)
      path = stack[i].array ? child(path, stack[i].index) : child(path, stack[i].key);
    return path;
  };
  auto element_done = [&stack] {
    if (!stack.empty() && stack.back().array) ++stack.back().index;
  };
  json::parser_callback_t callback = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        stack.emplace_back();
        break;
      case json::parse_event_t::array_start:
        stack.emplace_back();
        stack.back().array = true;
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!stack.empty()) stack.pop_back();
        element_done();
        break;
      case json::parse_event_t::key:
        if (!stack.empty() && parsed.is_string()) {
          auto& top = stack.back();
          top.key = parsed.get<std::string>();
          if (!top.keys.insert(top.key).second)
            error(child(path_to_top(), top.key),
                  "duplicate key " + in_quotes(top.key) + " (each key may appear once per object)");
        }
        break;
      case json::parse_event_t::value:
        element_done();
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback);
  } catch (const json::parse_error& e) {
    // what() is "[json.exception.parse_error.101] parse error at line 3, column 5: ...".
    std::string what = e.what();
    if (auto pos = what.find("] ");
        what.rfind("[json.exception", 0) == 0 && pos != std::string::npos)
      what = what.substr(pos + 2);
    std::vector<std::string> all = errors_;
    all.push_back(source_ + ": invalid JSON: " + what);
    throw config_error(std::move(all));
  }
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
    std::string message = "unknown key " + in_quotes(key);
    if (const auto best = nearest_name(key, allowed); !best.empty())
      message += " (did you mean " + in_quotes(best) + "?)";
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
  std::string why;
  auto result = substitute_env(value.get_ref<const std::string&>(), env_, why);
  if (!result) error(path, why);
  return result;
}

std::optional<std::chrono::milliseconds> reader::duration(const json& value,
                                                          const std::string& path) {
  if (value.is_number()) {
    error(path, "expected a duration string, found the number " + value.dump() + " (" +
                    std::string(duration_hint) + ")");
    return std::nullopt;
  }
  auto text = string(value, path);
  if (!text) return std::nullopt;
  auto parsed = parse_duration(*text);
  if (!parsed)
    error(path, "invalid duration " + in_quotes(*text) + " (" + std::string(duration_hint) + ")");
  return parsed;
}

std::optional<std::string> reader::choice(const json& value, const std::string& path,
                                          std::initializer_list<std::string_view> choices) {
  auto text = string(value, path);
  if (!text) return std::nullopt;
  if (std::find(choices.begin(), choices.end(), *text) != choices.end()) return text;
  std::string list;
  for (auto c : choices) list += (list.empty() ? "" : ", ") + in_quotes(c);
  error(path, "invalid value " + in_quotes(*text) + " (expected one of " + list + ")");
  return std::nullopt;
}

}  // namespace baton::config::detail
