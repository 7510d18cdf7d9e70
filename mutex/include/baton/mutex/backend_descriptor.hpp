#pragma once
/// How a backend type describes itself, once: its parameters, the lease options it uses by
/// default and its constructor. The factory registers one descriptor per type; the config, the
/// daemon's validate/run/status, `baton --help` and the README table all read from it.
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "baton/mutex/backend.hpp"
#include "baton/mutex/options.hpp"
#include "baton/mutex/runtime.hpp"

namespace baton {

/// What a parameter's value looks like in a config file (every value reaches the backend as a
/// string in backend_config::params).
enum class param_kind {
  text,      ///< a non-empty string
  duration,  ///< a positive duration: "250ms", "10s" (baton::parse_duration)
  boolean,   ///< "true" or "false" (JSON true/false in a config file)
  count,     ///< a positive whole number
};

/// "text", "duration", "boolean" or "count".
std::string_view to_string(param_kind kind) noexcept;

/// A parameter value made fit for output (see param_descriptor::mask).
struct masked_value {
  std::string text;                  ///< the value with every secret in it replaced by ***
  std::vector<std::string> secrets;  ///< the secrets it holds, decoded and as written
};

/// One parameter of a backend type.
struct param_descriptor {
  std::string name;
  param_kind kind = param_kind::text;
  bool required = false;
  std::string default_value;  ///< as written in a config ("500ms"); empty: none
  bool secret = false;        ///< the whole value is a secret: shown as *** in output
  std::string doc;            ///< one line for `baton --help` and the README
  /// For a value with secrets inside (a connection string, a URL): parses it with the code the
  /// backend connects with and masks the secret parts; a value it cannot parse is masked whole.
  /// Unset: the value is shown as it is (*** when `secret`).
  std::function<masked_value(const std::string& value)> mask = nullptr;
};

/// One backend type.
struct backend_descriptor {
  std::string type;  ///< "sqlite", "redis", ...
  std::string doc;   ///< one line
  std::vector<param_descriptor> params;
  /// The lease options a backend with these parameters uses (its default_options()), computed
  /// without connecting. Throws backend_param_error (or std::invalid_argument) for a bad
  /// parameter.
  std::function<contend_options(const backend_config&)> default_lease;
  /// Builds the backend. Throws std::invalid_argument for bad parameters, std::runtime_error
  /// when it cannot be set up.
  std::function<std::shared_ptr<mutex_backend>(const backend_config&, runtime&)> make;
  /// Non-empty for a backend whose leases live in one process (the memory backend): why it
  /// gives no exclusion between processes. `validate` and `run` warn with it. Settings of the
  /// other backends that would do the same are refused as bad parameters instead.
  std::string process_local;

  /// The parameter `name`, or nullptr.
  const param_descriptor* find(std::string_view name) const noexcept;
};

/// A bad backend parameter: what() is the whole message, param() the parameter it concerns.
class backend_param_error : public std::invalid_argument {
 public:
  backend_param_error(std::string param, const std::string& message)
      : std::invalid_argument(message), param_(std::move(param)) {}
  const std::string& param() const noexcept { return param_; }

 private:
  std::string param_;
};

/// The name among `candidates` nearest to `key` (edit distance at most 2), for "did you mean";
/// empty when none is that near. Used for every unknown key, backend parameters and config keys.
std::string_view nearest_name(std::string_view key,
                              const std::vector<std::string_view>& candidates);

/// The unknown-key policy, the same for every backend: each name in `names` that `d` does not
/// take is a problem (field: the name) saying so, with the nearest known name as a suggestion
/// and the list of known ones.
std::vector<setting_problem> check_param_names(const backend_descriptor& d,
                                               const std::vector<std::string>& names);

/// The value of parameter `name` of a backend of type `d` (nullptr: unknown type), fit for
/// output: *** for a secret parameter and for one `d` does not know, the parameter's mask for a
/// value with secrets inside, else the value.
masked_value mask_param(const backend_descriptor* d, const std::string& name,
                        const std::string& value);

/// "<type> <name>=<value> ..." with every secret masked (mask_param): the one description of a
/// backend config that validate, status and run's log print.
std::string describe(const backend_descriptor* d, const backend_config& config);

/// Every secret `config` holds (mask_param), for scrub().
std::vector<std::string> secrets_of(const backend_descriptor* d, const backend_config& config);

/// `text` with each of `secrets` replaced by ***: for native error messages (libpq, MariaDB,
/// hiredis) that might echo what they were given. An occurrence is replaced where it stands on
/// its own: not inside a longer run of letters, digits and '_' ("baton" in "baton_mutex" is not a
/// password echoed).
std::string scrub(std::string text, const std::vector<std::string>& secrets);

/// Throws backend_param_error ("<type> backend: parameter '<name>': ...") for the first unknown
/// parameter of `config` (check_param_names) or missing required one.
void check_params(const backend_descriptor& d, const backend_config& config);

}  // namespace baton
