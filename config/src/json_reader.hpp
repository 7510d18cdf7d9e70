#pragma once
// Reading JSON with errors collected per JSON path: syntax errors with line and column, duplicate
// keys, unknown keys, wrong types, ${NAME} substitution from the environment.
#include <chrono>
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
/// On failure returns nullopt and sets `error` (unset variable, malformed reference).
std::optional<std::string> substitute_env(std::string_view text, const env_lookup& env,
                                          std::string& error);

/// Collects the problems of one file and reads typed values, reporting each mismatch at its path.
class reader {
 public:
  reader(std::string source, env_lookup env);

  /// Records "SOURCE: PATH: message" (PATH "" shows as "/").
  void error(const std::string& path, const std::string& message);
  bool failed() const noexcept { return !errors_.empty(); }
  /// How many errors were recorded so far (to tell whether one part of the file was clean).
  std::size_t error_count() const noexcept { return errors_.size(); }
  /// Throws config_error when anything was recorded.
  void throw_if_failed() const;
  const std::string& source() const noexcept { return source_; }

  /// Parses `text`; a syntax error throws config_error at once (line and column named). Duplicate
  /// keys are recorded as errors (the last value is kept).
  json parse(std::string_view text);

  /// Records an error for every key of `object` outside `allowed` (suggesting a near match).
  void allowed_keys(const json& object, const std::string& path,
                    std::initializer_list<std::string_view> allowed);
  void allowed_keys(const json& object, const std::string& path,
                    const std::vector<std::string_view>& allowed);

  /// True if `value` is an object; else records "expected an object".
  bool expect_object(const json& value, const std::string& path);
  /// The string at `path`, ${NAME} substituted; nullopt (error recorded) if not a string.
  std::optional<std::string> string(const json& value, const std::string& path);
  /// A duration string ("10s"); nullopt (error recorded) if malformed.
  std::optional<std::chrono::milliseconds> duration(const json& value, const std::string& path);
  /// One of `choices`; nullopt (error recorded) otherwise.
  std::optional<std::string> choice(const json& value, const std::string& path,
                                    std::initializer_list<std::string_view> choices);

 private:
  std::string source_;
  env_lookup env_;
  std::vector<std::string> errors_;
};

/// "a string", "a number", "an object", ... for messages.
std::string describe_type(const json& value);

}  // namespace baton::config::detail
