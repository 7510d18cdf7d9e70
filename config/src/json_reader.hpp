#pragma once
// Reading JSON with errors collected per JSON path: syntax errors with line and column, duplicate
// keys, unknown keys, wrong types, ${NAME} substitution from the environment. Hostile input is
// bounded: config_limits (size, nesting, what ${NAME} may add), at most max_listed_errors
// messages, values in messages shortened and shown as valid UTF-8.
#include <chrono>
#include <exception>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/config/config.hpp"

namespace baton::config::detail {

using json = nlohmann::json;

/// `path` + "/" + `key`, escaped as a JSON pointer token (~ -> ~0, / -> ~1).
std::string child(const std::string& path, std::string_view key);
/// `path` + "/" + `index`.
std::string child(const std::string& path, std::size_t index);

/// Replaces every `${NAME}` in `text` with the variable's value; `$${` is a literal `${`.
/// On failure returns nullopt and sets `error` (unset variable, malformed reference, a result
/// longer than `max_size` bytes).
std::optional<std::string> substitute_env(std::string_view text, const env_lookup& env,
                                          std::string& error,
                                          std::size_t max_size = config_limits::default_max_bytes);

/// `text` as a JSON string literal for messages: invalid UTF-8 shown as U+FFFD, and a text longer
/// than `max_shown` bytes cut there, with its length: "abc..." (1048576 bytes).
std::string quote(std::string_view text, std::size_t max_shown = 64);
/// A value as shown in messages: compact JSON, invalid UTF-8 replaced, shortened like quote().
std::string show(const json& value, std::size_t max_shown = 64);
/// `text` with every invalid UTF-8 sequence replaced by U+FFFD (for messages).
std::string valid_utf8(std::string_view text);
/// "4 MiB", "64 KiB" or "1000 bytes", for messages about limits.
std::string size_text(std::size_t bytes);
/// An exception's message without nlohmann's "[json.exception.type_error.316] " prefix.
std::string library_message(const std::exception& e);

/// At most this many messages are listed per file; the rest are counted (config_error::count).
inline constexpr std::size_t max_listed_errors = 1000;

/// Collects the problems of one file and reads typed values, reporting each mismatch at its path.
class reader {
 public:
  reader(std::string source, env_lookup env, config_limits limits = {});

  /// Records "SOURCE: PATH: message" (PATH "" shows as "/"; a very long one is shortened).
  void error(const std::string& path, const std::string& message);
  bool failed() const noexcept { return count_ != 0; }
  /// How many errors were recorded so far (to tell whether one part of the file was clean).
  std::size_t error_count() const noexcept { return count_; }
  /// Throws config_error when anything was recorded.
  void throw_if_failed() const;
  const std::string& source() const noexcept { return source_; }

  /// Parses `text`. A syntax error, a number beyond a double, nesting deeper than
  /// limits.max_depth or a text longer than limits.max_bytes throws config_error at once (line
  /// and column or the JSON path named). Duplicate keys are recorded as errors (the last value
  /// is kept). Never recurses per nesting level, and takes time linear in the text.
  json parse(std::string_view text);

  /// Records an error for every key of `object` outside `allowed` (suggesting a near match).
  void allowed_keys(const json& object, const std::string& path,
                    std::initializer_list<std::string_view> allowed);
  void allowed_keys(const json& object, const std::string& path,
                    const std::vector<std::string_view>& allowed);

  /// True if `value` is an object; else records "expected an object".
  bool expect_object(const json& value, const std::string& path);
  /// The string at `path`, ${NAME} substituted; nullopt (error recorded) if not a string, or
  /// when the substitutions of the file add more than limits.max_bytes in all.
  std::optional<std::string> string(const json& value, const std::string& path);
  /// A duration string ("10s"); nullopt (error recorded) if malformed.
  std::optional<std::chrono::milliseconds> duration(const json& value, const std::string& path);
  /// One of `choices`; nullopt (error recorded) otherwise.
  std::optional<std::string> choice(const json& value, const std::string& path,
                                    std::initializer_list<std::string_view> choices);

 private:
  // Counts an error and lists it (shortened, as valid UTF-8) while fewer than max_listed_errors.
  void record(std::string line);

  std::string source_;
  env_lookup env_;
  config_limits limits_;
  std::vector<std::string> errors_;  // the first max_listed_errors
  std::size_t count_ = 0;            // all of them
  std::size_t expansion_ = 0;        // bytes ${NAME} references added so far
};

/// "a string", "a number", "an object", ... for messages.
std::string describe_type(const json& value);

}  // namespace baton::config::detail
