// The config file format: backend, lease, kill_grace, stop_timeout, log_level, log_format,
// http, node, balance, schedules.
#include "baton/config/config.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "baton/backends/factory.hpp"
#include "baton/config/duration.hpp"
#include "baton/jobs/command_job.hpp"
#include "baton/mutex/names.hpp"
#include "baton/scheduler/cron.hpp"
#include "baton/scheduler/detail/schedule_plan.hpp"
#include "file_read.hpp"
#include "json_reader.hpp"

namespace baton::config {

using detail::child;
using detail::json;
using detail::library_message;
using detail::reader;
using std::chrono::milliseconds;

namespace {

// A value quoted in a message: shortened, invalid UTF-8 shown as U+FFFD (detail::quote).
std::string in_quotes(std::string_view s) { return detail::quote(s); }
std::string show(milliseconds d) { return format_duration(d); }

// Runs `read`; an exception from a library (nlohmann's type_error or out_of_range, a conversion's
// std::invalid_argument) becomes an error at `path` instead of ending the load with a message
// that names no place (and exit status 1).
template <typename Read>
void guarded(reader& r, const std::string& path, Read&& read) {
  try {
    read();
  } catch (const config_error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    r.error(path, "cannot read this value: " + library_message(e));
  }
}

// ---------------------------------------------------------------------------------------------
// backend

// Every backend type baton has; a build may lack some (BATON_WITH_*). Only for telling "not in
// this build" from "unknown": what a type takes is in its descriptor (baton::find_backend).
const std::initializer_list<std::string_view> all_backend_types{"memory", "sqlite", "postgresql",
                                                                "mysql",  "redis",  "zookeeper"};

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

// A relative path resolved against the config file's directory.
std::string resolve(const std::filesystem::path& base_dir, const std::string& path) {
  std::filesystem::path p(path);
  if (p.is_absolute() || base_dir.empty()) return path;
  return (base_dir / p).lexically_normal().string();
}

// Reads `backend` by its type's descriptor; `descriptor` is set when the type is known and built.
backend_config read_backend(reader& r, const json& root, const std::filesystem::path& base_dir,
                            const backend_descriptor*& descriptor) {
  backend_config config;
  descriptor = nullptr;
  const std::string path = "/backend";
  auto it = root.find("backend");
  if (it == root.end()) {
    r.error(path,
            "missing: say where the mutexes live, e.g. \"backend\": {\"type\": \"sqlite\", "
            "\"path\": \"baton.db\"}");
    return config;
  }
  if (!r.expect_object(*it, path)) return config;
  const json& b = *it;
  auto type_it = b.find("type");
  if (type_it == b.end()) {
    r.error(child(path, "type"), "missing (one of: " + join(available_backends()) + ")");
    return config;
  }
  auto type = r.string(*type_it, child(path, "type"));
  if (!type) return config;
  const backend_descriptor* d = find_backend(*type);
  if (d == nullptr) {
    if (std::find(all_backend_types.begin(), all_backend_types.end(), *type) !=
        all_backend_types.end())
      r.error(child(path, "type"), "backend type " + in_quotes(*type) +
                                       " is not available in this build (built with: " +
                                       join(available_backends()) + ")");
    else
      r.error(child(path, "type"), "unknown backend type " + in_quotes(*type) +
                                       " (one of: " + join(available_backends()) + ")");
    return config;
  }
  config.type = *type;

  // The unknown-key policy of every backend (baton::check_param_names).
  std::vector<std::string> keys;
  for (const auto& [key, value] : b.items())
    if (key != "type") keys.push_back(key);
  for (const auto& p : check_param_names(*d, keys)) r.error(child(path, p.field), p.message);

  for (const auto& p : d->params) {
    const std::string& key = p.name;
    const std::string at = child(path, key);
    auto v = b.find(key);
    if (v == b.end()) {
      if (p.required) r.error(at, "missing: a " + *type + " backend needs " + in_quotes(key));
      continue;
    }
    std::optional<std::string> value;
    switch (p.kind) {
      case param_kind::text:
        value = r.string(*v, at);
        if (value && value->empty()) {
          r.error(at, "must not be empty");
          value.reset();
        }
        break;
      case param_kind::duration:
        if (auto d = r.duration(*v, at)) {
          if (*d <= milliseconds::zero())
            r.error(at, "must be greater than 0s");
          else
            value = show(*d);
        }
        break;
      case param_kind::boolean:
        if (v->is_boolean())
          value = v->get<bool>() ? "true" : "false";
        else
          r.error(at, "expected true or false, found " + detail::describe_type(*v));
        break;
      case param_kind::count:
        if (v->is_number_unsigned() && v->get<std::uint64_t>() > 0)
          value = std::to_string(v->get<std::uint64_t>());
        else
          r.error(at, "expected a positive whole number, found " + detail::show(*v));
        break;
    }
    if (!value) continue;
    if (*type == "sqlite" && key == "path" && *value != ":memory:" && value->rfind("file:", 0) != 0)
      *value = resolve(base_dir, *value);
    config.params[key] = *value;
  }
  descriptor = d;
  return config;
}

// ---------------------------------------------------------------------------------------------
// http

// `http`: {"listen": "HOST:PORT", "console": bool, "allow_control": bool, "token_env": NAME,
// "token_file": PATH}; unknown keys are errors. The console's rules: allow_control needs console
// and exactly one token source; the token is never read from the config itself.
void read_http(reader& r, const json& value, daemon_config& config) {
  if (!r.expect_object(value, "/http")) return;
  r.allowed_keys(value, "/http", {"listen", "console", "allow_control", "token_env", "token_file"});
  if (auto it = value.find("listen"); it != value.end()) {
    if (auto text = r.string(*it, "/http/listen")) {
      try {
        config.http_listen = parse_listen_address(*text);
      } catch (const std::invalid_argument& e) {
        r.error("/http/listen", e.what());
      }
    }
  }
  auto flag = [&](const char* key, bool& out) {
    auto it = value.find(key);
    if (it == value.end()) return;
    if (it->is_boolean())
      out = it->get<bool>();
    else
      r.error(child("/http", key), "expected true or false, found " + detail::describe_type(*it));
  };
  auto& console = config.console;
  flag("console", console.enabled);
  flag("allow_control", console.allow_control);
  if (auto it = value.find("token_env"); it != value.end()) {
    if (auto name = r.string(*it, "/http/token_env")) {
      const bool valid =
          !name->empty() &&
          (std::isalpha(static_cast<unsigned char>(name->front())) != 0 || name->front() == '_') &&
          std::all_of(name->begin(), name->end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
          });
      if (valid)
        console.token_env = *name;
      else
        r.error("/http/token_env",
                "expected the name of an environment variable ([A-Za-z_][A-Za-z0-9_]*), found " +
                    in_quotes(*name) + " (the variable holds the token; the config never does)");
    }
  }
  if (auto it = value.find("token_file"); it != value.end()) {
    if (auto path = r.string(*it, "/http/token_file")) {
      if (path->empty())
        r.error("/http/token_file", "must not be empty");
      else
        console.token_file = resolve(config.base_dir, *path);
    }
  }
  if (!console.token_env.empty() && !console.token_file.empty())
    r.error("/http/token_file", "set one of token_env and token_file, not both");
  if (console.allow_control && !console.enabled)
    r.error("/http/allow_control", "needs \"console\": true (the controls are the console's)");
  if (console.allow_control && console.token_env.empty() && console.token_file.empty() &&
      value.find("token_env") == value.end() && value.find("token_file") == value.end())
    r.error("/http/allow_control",
            "needs a token: set /http/token_env (a variable's name) or /http/token_file (a file "
            "only the daemon's user may read)");
}

// ---------------------------------------------------------------------------------------------
// lease

const std::initializer_list<std::string_view> lease_keys{
    "ttl",         "transition", "retry_period",     "poll_interval", "drift_margin",
    "max_backoff", "stop_grace", "max_clock_offset", "lapse_jitter"};

lease_config read_lease(reader& r, const json& value, const std::string& path) {
  lease_config lease;
  if (!r.expect_object(value, path)) return lease;
  r.allowed_keys(value, path, lease_keys);
  auto field = [&](const char* key, std::optional<milliseconds>& out) {
    if (auto it = value.find(key); it != value.end()) out = r.duration(*it, child(path, key));
  };
  field("ttl", lease.ttl);
  field("transition", lease.transition);
  field("retry_period", lease.retry_period);
  field("poll_interval", lease.poll_interval);
  field("drift_margin", lease.drift_margin);
  field("max_backoff", lease.max_backoff);
  field("stop_grace", lease.stop_grace);
  field("max_clock_offset", lease.max_clock_offset);
  field("lapse_jitter", lease.lapse_jitter);
  return lease;
}

// The JSON path of a lease `problem` of schedule `s` (nullptr: the top-level lease alone): the
// first field of the rule that the schedule's `lease` sets, else one the top-level `lease` sets,
// else the innermost lease object there is (else /backend: the values are its defaults).
std::string lease_problem_path(const setting_problem& problem, const lease_config& global,
                               bool global_present, const schedule_config* s) {
  std::vector<std::string> fields{problem.field};
  fields.insert(fields.end(), problem.also.begin(), problem.also.end());
  auto sets = [](const lease_config& l, const std::string& f) {
    if (f == "ttl") return l.ttl.has_value();
    if (f == "transition") return l.transition.has_value();
    if (f == "retry_period") return l.retry_period.has_value();
    if (f == "poll_interval") return l.poll_interval.has_value();
    if (f == "drift_margin") return l.drift_margin.has_value();
    if (f == "max_backoff") return l.max_backoff.has_value();
    if (f == "stop_grace") return l.stop_grace.has_value();
    if (f == "max_clock_offset") return l.max_clock_offset.has_value();
    if (f == "lapse_jitter") return l.lapse_jitter.has_value();
    return false;
  };
  if (s != nullptr)
    for (const auto& f : fields)
      if (sets(s->lease, f)) return child(s->path + "/lease", f);
  for (const auto& f : fields)
    if (sets(global, f)) return child("/lease", f);
  if (s != nullptr && s->lease_present) return s->path + "/lease";
  return global_present ? "/lease" : "/backend";
}

// ---------------------------------------------------------------------------------------------
// schedules

const std::initializer_list<std::string_view> schedule_keys{
    "name",          "every",      "cron",    "mode",           "initial_delay",
    "time_zone",     "command",    "env",     "timeout",        "kill_grace",
    "misfire",       "lease",      "user",    "group",          "working_directory",
    "inherit_env",   "log_output", "history", "history_output", "retries",
    "retry_backoff", "requires",   "prefers"};

// ---------------------------------------------------------------------------------------------
// job environment and output: inherit_env, log_output (top level and per schedule)

// Sizes are a whole number and one unit, as durations are.
constexpr std::string_view size_hint = "use 0B, 512B, 64KiB, 1MiB, 1GiB";

std::optional<std::uint64_t> parse_size(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 15) return std::nullopt;
  const std::string_view unit = text.substr(digits);
  const int shift = unit == "B"     ? 0
                    : unit == "KiB" ? 10
                    : unit == "MiB" ? 20
                    : unit == "GiB" ? 30
                                    : -1;
  const std::uint64_t n = std::stoull(std::string(text.substr(0, digits)));
  if (shift < 0 || n > (std::numeric_limits<std::uint64_t>::max() >> shift)) return std::nullopt;
  return n << shift;
}

std::optional<std::uint64_t> read_size(reader& r, const json& value, const std::string& path) {
  if (value.is_number()) {
    r.error(path, "expected a size string, found the number " + value.dump() + " (" +
                      std::string(size_hint) + ")");
    return std::nullopt;
  }
  auto text = r.string(value, path);
  if (!text) return std::nullopt;
  auto size = parse_size(*text);
  if (!size)
    r.error(path, "invalid size " + in_quotes(*text) + " (" + std::string(size_hint) + ")");
  return size;
}

std::optional<bool> read_bool(reader& r, const json& value, const std::string& path) {
  if (value.is_boolean()) return value.get<bool>();
  r.error(path, "expected true or false, found " + detail::describe_type(value));
  return std::nullopt;
}

// `inherit_env` and `log_output` of `object` (the top level or a schedule) into `inherit_env`
// and `log_output`, left as they are when absent or malformed.
template <typename Bool, typename Size>
void read_job_output_and_env(reader& r, const json& object, const std::string& path,
                             Bool& inherit_env, Size& log_output) {
  if (auto it = object.find("inherit_env"); it != object.end())
    if (auto b = read_bool(r, *it, child(path, "inherit_env"))) inherit_env = *b;
  if (auto it = object.find("log_output"); it != object.end())
    if (auto size = read_size(r, *it, child(path, "log_output"))) log_output = *size;
}

// A whole number in [0, max] (JSON integer).
template <typename Int>
std::optional<Int> read_count(reader& r, const json& value, const std::string& path,
                              std::uint64_t max, const char* unit) {
  if (!value.is_number_integer() ||
      (value.is_number_integer() && !value.is_number_unsigned() && value.get<std::int64_t>() < 0)) {
    r.error(path, "expected a whole number of " + std::string(unit) + " from 0 to " +
                      std::to_string(max) + ", found " +
                      (value.is_number() ? value.dump() : detail::describe_type(value)));
    return std::nullopt;
  }
  const auto n = value.get<std::uint64_t>();
  if (n > max) {
    r.error(path,
            "must be at most " + std::to_string(max) + " " + unit + ", found " + std::to_string(n));
    return std::nullopt;
  }
  return static_cast<Int>(n);
}

// `history`, `history_output`, `retries` and `retry_backoff` of `object` (the top level or a
// schedule), left as they are when absent or malformed.
template <typename History, typename Output, typename Retries, typename Backoff>
void read_run_records(reader& r, const json& object, const std::string& path, History& history,
                      Output& history_output, Retries& retries, Backoff& retry_backoff) {
  if (auto it = object.find("history"); it != object.end())
    if (auto n =
            read_count<std::size_t>(r, *it, child(path, "history"), max_history_keep, "records"))
      history = *n;
  if (auto it = object.find("history_output"); it != object.end())
    if (auto size = read_size(r, *it, child(path, "history_output"))) {
      if (*size > max_history_output)
        r.error(child(path, "history_output"),
                "must be at most 8KiB (a history record is at most 64KiB), found " +
                    std::to_string(*size) + " bytes");
      else
        history_output = *size;
    }
  if (auto it = object.find("retries"); it != object.end())
    if (auto n = read_count<unsigned>(r, *it, child(path, "retries"), 100, "retries")) retries = *n;
  if (auto it = object.find("retry_backoff"); it != object.end())
    if (auto d = r.duration(*it, child(path, "retry_backoff"))) {
      if (*d <= milliseconds::zero())
        r.error(child(path, "retry_backoff"), "must be greater than 0s");
      else
        retry_backoff = *d;
    }
}

// ---------------------------------------------------------------------------------------------
// node, balance; a schedule's requires and prefers

// The characters of node ids and tags.
bool is_tag_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// Empty when `text` is 1 to `max` of [A-Za-z0-9._-]; else why not.
std::string name_error(std::string_view text, std::size_t max) {
  if (text.empty()) return "must not be empty";
  if (text.size() > max)
    return "is " + std::to_string(text.size()) + " characters long, at most " +
           std::to_string(max) + " are allowed";
  if (!std::all_of(text.begin(), text.end(), is_tag_char))
    return "may hold only letters, digits, '.', '_' and '-'";
  return {};
}

// Most tags a node may have, or a schedule may require or prefer.
constexpr std::size_t max_tags = 64;

// An array of tags at `path` (node.tags, a schedule's requires and prefers): at most 64 strings of
// 1 to 64 of [A-Za-z0-9._-], no duplicates. Sorted; nullopt when any is wrong (errors recorded).
std::optional<std::vector<std::string>> read_tags(reader& r, const json& value,
                                                  const std::string& path) {
  if (!value.is_array()) {
    r.error(path, "expected an array of tags, e.g. [\"gpu\", \"eu-west\"], found " +
                      detail::describe_type(value));
    return std::nullopt;
  }
  if (value.size() > max_tags) {
    r.error(path, "has " + std::to_string(value.size()) + " tags, at most " +
                      std::to_string(max_tags) + " are allowed");
    return std::nullopt;
  }
  std::map<std::string, std::string> seen;  // tag -> its path
  bool ok = true;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const std::string at = child(path, i);
    auto tag = r.string(value[i], at);
    if (!tag) {
      ok = false;
      continue;
    }
    if (auto why = tag_error(*tag); !why.empty()) {
      r.error(at, "invalid tag " + in_quotes(*tag) + ": " + why);
      ok = false;
      continue;
    }
    if (auto [first, inserted] = seen.emplace(*tag, at); !inserted) {
      r.error(at, "duplicate tag " + in_quotes(*tag) + " (also at " + first->second + ")");
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  std::vector<std::string> tags;
  for (const auto& [tag, at] : seen) tags.push_back(tag);  // sorted
  return tags;
}

// `node`: {"id": "web-1", "tags": ["gpu"]}, both optional.
void read_node(reader& r, const json& value, balance_options& balance) {
  if (!r.expect_object(value, "/node")) return;
  r.allowed_keys(value, "/node", {"id", "tags"});
  if (auto it = value.find("id"); it != value.end()) {
    if (auto id = r.string(*it, "/node/id")) {
      if (auto why = node_id_error(*id); !why.empty())
        r.error("/node/id", "invalid node id " + in_quotes(*id) + ": " + why +
                                (id->empty() ? " (omit it: the node is then a new member at "
                                               "every start)"
                                             : ""));
      else
        balance.node_id = *id;
    }
  }
  if (auto it = value.find("tags"); it != value.end())
    if (auto tags = read_tags(r, *it, "/node/tags")) balance.tags = std::move(*tags);
}

// `balance`: true, false, or {"enabled", "heartbeat", "member_timeout", "settle",
// "handoff_rate"} (enabled defaults to true).
void read_balance(reader& r, const json& value, balance_options& balance) {
  if (value.is_boolean()) {
    balance.enabled = value.get<bool>();
    return;
  }
  if (!value.is_object()) {
    r.error("/balance",
            "expected true, false or an object such as {\"enabled\": true, \"heartbeat\": "
            "\"1s\"}, found " +
                detail::describe_type(value));
    return;
  }
  r.allowed_keys(value, "/balance",
                 {"enabled", "heartbeat", "member_timeout", "settle", "handoff_rate"});
  if (auto it = value.find("enabled"); it != value.end())
    if (auto b = read_bool(r, *it, "/balance/enabled")) balance.enabled = *b;
  auto duration = [&](const char* key, milliseconds& out) {
    if (auto it = value.find(key); it != value.end())
      if (auto d = r.duration(*it, child("/balance", key))) out = *d;
  };
  duration("heartbeat", balance.heartbeat);
  duration("member_timeout", balance.member_timeout);
  duration("settle", balance.settle);
  if (auto it = value.find("handoff_rate"); it != value.end()) {
    if (it->is_number() && it->get<double>() > 0)
      balance.handoff_rate = it->get<double>();
    else
      r.error("/balance/handoff_rate",
              "expected a positive number of schedules per second (e.g. 5 or 0.5), found " +
                  (it->is_number() ? detail::show(*it) : detail::describe_type(*it)));
  }
}

// The JSON path of a problem baton::check(balance_options) found.
std::string balance_problem_path(const setting_problem& p, bool balance_object) {
  if (p.field == "node_id") return "/node/id";
  if (p.field == "tags") return "/node/tags";
  return balance_object ? child("/balance", p.field) : "/balance";
}

// Variables the command job sets itself.
const std::initializer_list<std::string_view> reserved_env{"BATON_SCHEDULE", "BATON_MUTEX",
                                                           "BATON_FENCING_TOKEN",
                                                           "BATON_CONTENDER_ID", "BATON_FIRE_TIME"};

std::optional<trigger> read_trigger(reader& r, const json& s, const std::string& path) {
  const auto every_it = s.find("every");
  const auto cron_it = s.find("cron");
  const bool every = every_it != s.end();
  const bool cron = cron_it != s.end();
  std::optional<trigger> result;
  if (every && cron) {
    r.error(path,
            "both \"every\" and \"cron\" are set: a schedule has exactly one trigger, "
            "remove one");
    return std::nullopt;
  }
  if (!every && !cron) {
    r.error(path, "missing trigger: set \"every\" (e.g. \"5m\") or \"cron\" (e.g. \"0 3 * * *\")");
    return std::nullopt;
  }
  const char* only_every[] = {"mode", "initial_delay"};
  const char* only_cron[] = {"time_zone"};
  if (every) {
    for (const char* key : only_cron)
      if (s.contains(key))
        r.error(child(path, key), in_quotes(key) +
                                      " applies only to \"cron\" schedules (an \"every\" schedule "
                                      "has no wall-clock times): remove it");
    every_trigger t;
    auto period = r.duration(*every_it, child(path, "every"));
    if (period && *period <= milliseconds::zero()) {
      r.error(child(path, "every"), "must be greater than 0s");
      period.reset();
    }
    if (auto it = s.find("mode"); it != s.end()) {
      auto mode = r.choice(*it, child(path, "mode"), {"fixed_rate", "fixed_delay"});
      if (!mode) return std::nullopt;
      t.mode = *mode == "fixed_delay" ? every_mode::fixed_delay : every_mode::fixed_rate;
    }
    if (auto it = s.find("initial_delay"); it != s.end()) {
      auto delay = r.duration(*it, child(path, "initial_delay"));
      if (!delay) return std::nullopt;
      t.initial_delay = *delay;
    }
    if (!period) return std::nullopt;
    t.period = *period;
    return trigger{t};
  }
  for (const char* key : only_every)
    if (s.contains(key))
      r.error(child(path, key), in_quotes(key) + " applies only to \"every\" schedules: remove it");
  std::string zone = "UTC";
  bool zone_ok = true;
  if (auto it = s.find("time_zone"); it != s.end()) {
    auto z = r.string(*it, child(path, "time_zone"));
    zone_ok = false;
    if (z) {
      try {
        (void)cron_expression::parse("* * * * *", *z);
        zone = *z;
        zone_ok = true;
      } catch (const cron_error& e) {
        r.error(child(path, "time_zone"),
                std::string(e.what()) + " (use an IANA name such as \"Europe/Berlin\" or \"UTC\")");
      }
    }
  }
  auto expr = r.string(*cron_it, child(path, "cron"));
  if (!expr) return std::nullopt;
  try {
    auto parsed = cron_expression::parse(*expr, zone_ok ? zone : "UTC");
    if (!zone_ok) return std::nullopt;
    return trigger{cron_trigger{parsed}};
  } catch (const cron_error& e) {
    r.error(child(path, "cron"), std::string(e.what()));
  }
  return std::nullopt;
}

std::vector<std::string> read_command(reader& r, const json& s, const std::string& path,
                                      const std::filesystem::path& base_dir) {
  const std::string at = child(path, "command");
  auto it = s.find("command");
  if (it == s.end()) {
    r.error(at,
            "missing: the program and its arguments, e.g. [\"/usr/local/bin/report.sh\", "
            "\"--full\"]");
    return {};
  }
  if (!it->is_array()) {
    r.error(at, "expected an array of strings (program and arguments, no shell), found " +
                    detail::describe_type(*it));
    return {};
  }
  if (it->empty()) {
    r.error(at, "is empty: give at least the program to run");
    return {};
  }
  std::vector<std::string> argv;
  bool ok = true;
  for (std::size_t i = 0; i < it->size(); ++i) {
    auto arg = r.string((*it)[i], child(at, i));
    if (!arg) {
      ok = false;
      continue;
    }
    argv.push_back(*arg);
  }
  if (!ok) return {};
  if (argv[0].empty()) {
    r.error(child(at, std::size_t{0}), "the program must not be empty");
    return {};
  }
  if (argv[0].find('/') != std::string::npos) argv[0] = resolve(base_dir, argv[0]);
  return argv;
}

std::map<std::string, std::string> read_env(reader& r, const json& value, const std::string& path) {
  std::map<std::string, std::string> env;
  if (!r.expect_object(value, path)) return env;
  for (const auto& [key, v] : value.items()) {
    const std::string at = child(path, key);
    if (key.empty() || key.find('=') != std::string::npos || key.find('\0') != std::string::npos) {
      r.error(at, "invalid environment variable name " + in_quotes(key));
      continue;
    }
    if (std::find(reserved_env.begin(), reserved_env.end(), key) != reserved_env.end()) {
      r.error(at, in_quotes(key) + " is set by baton for every run and cannot be configured");
      continue;
    }
    if (!v.is_string()) {
      r.error(at, "expected a string, found " + detail::describe_type(v) +
                      (v.is_number() ? " (quote it: \"" + detail::show(v) + "\")" : ""));
      continue;
    }
    if (auto s = r.string(v, at)) env[key] = *s;
  }
  return env;
}

// `user` and `group`: looked up in the system's user database, as the command job will.
void read_identity(reader& r, const json& s, const std::string& path, schedule_config& out) {
  bool ok = true;
  for (const char* key : {"user", "group"}) {
    auto it = s.find(key);
    if (it == s.end()) continue;
    auto value = r.string(*it, child(path, key));
    if (!value) {
      ok = false;
      continue;
    }
    (std::string_view(key) == "user" ? out.user : out.group) = *value;
  }
  if (!ok || (!out.user && !out.group)) return;
  try {
    (void)resolve_identity(out.user, out.group);
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    r.error(child(path, what.rfind("group", 0) == 0 ? "group" : "user"), what);
  }
}

// Reads one schedule; `lease_ok` tells whether its `lease` object (if any) was well-formed.
std::optional<schedule_config> read_schedule(reader& r, const json& s, const std::string& path,
                                             const std::filesystem::path& base_dir,
                                             bool& lease_ok) {
  lease_ok = true;
  if (!r.expect_object(s, path)) return std::nullopt;
  r.allowed_keys(s, path, schedule_keys);
  schedule_config out;
  out.path = path;
  bool ok = true;
  if (auto it = s.find("name"); it == s.end()) {
    r.error(child(path, "name"), "missing: every schedule needs a name (its mutex name)");
    ok = false;
  } else if (auto name = r.string(*it, child(path, "name"))) {
    if (auto why = mutex_name_error(*name); !why.empty()) {
      r.error(child(path, "name"), "invalid schedule name " + in_quotes(*name) + ": " + why);
      ok = false;
    } else if (is_balance_record_name(*name)) {
      r.error(child(path, "name"), "schedule name " + in_quotes(*name) +
                                       " is reserved: the nodes' membership records are " +
                                       balance_registry_name +
                                       " and baton.node.<id>; rename the schedule");
      ok = false;
    }
    out.name = *name;
  } else {
    ok = false;
  }
  auto when = read_trigger(r, s, path);
  if (when)
    out.when = *when;
  else
    ok = false;
  out.command = read_command(r, s, path, base_dir);
  if (out.command.empty()) ok = false;
  if (auto it = s.find("env"); it != s.end()) out.env = read_env(r, *it, child(path, "env"));
  if (auto it = s.find("timeout"); it != s.end()) {
    if (auto t = r.duration(*it, child(path, "timeout"))) {
      if (*t <= milliseconds::zero())
        r.error(child(path, "timeout"), "must be greater than 0s (omit it for no timeout)");
      else
        out.timeout = *t;
    }
  }
  if (auto it = s.find("kill_grace"); it != s.end())
    out.kill_grace = r.duration(*it, child(path, "kill_grace"));
  if (s.contains("time_zone") && when && std::holds_alternative<cron_trigger>(*when))
    out.time_zone = std::get<cron_trigger>(*when).expression.time_zone();  // ${NAME} substituted
  read_job_output_and_env(r, s, path, out.inherit_env, out.log_output);
  read_run_records(r, s, path, out.history, out.history_output, out.retries, out.retry_backoff);
  read_identity(r, s, path, out);
  if (auto it = s.find("working_directory"); it != s.end()) {
    const std::string at = child(path, "working_directory");
    if (auto dir = r.string(*it, at)) {
      std::error_code ec;
      if (dir->empty())
        r.error(at, "must not be empty (omit it to keep the daemon's working directory)");
      else if (out.working_directory = resolve(base_dir, *dir);
               !std::filesystem::is_directory(out.working_directory, ec))
        r.error(at, in_quotes(out.working_directory) + " is not an existing directory");
    }
  }
  if (auto it = s.find("misfire"); it != s.end()) {
    if (auto m = r.choice(*it, child(path, "misfire"), {"run_once", "skip"}))
      out.misfire = *m == "skip" ? misfire_policy::skip : misfire_policy::run_once;
  }
  if (auto it = s.find("requires"); it != s.end())
    if (auto tags = read_tags(r, *it, child(path, "requires"))) out.required_tags = *tags;
  if (auto it = s.find("prefers"); it != s.end())
    if (auto tags = read_tags(r, *it, child(path, "prefers"))) out.preferred_tags = *tags;
  if (auto it = s.find("lease"); it != s.end()) {
    const auto before = r.error_count();
    out.lease_present = true;
    out.lease = read_lease(r, *it, child(path, "lease"));
    lease_ok = r.error_count() == before;
  }
  if (!ok) return std::nullopt;
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

config_error::config_error(std::vector<std::string> errors, std::size_t count)
    : std::invalid_argument([&] {
        std::string all;
        for (const auto& e : errors) all += (all.empty() ? "" : "\n") + e;
        return all;
      }()),
      errors_(std::move(errors)),
      count_(count != 0 ? count : errors_.size()) {}

contend_options lease_config::apply(contend_options base) const {
  if (ttl) base.ttl = *ttl;
  if (transition) base.transition = *transition;
  if (retry_period) base.retry_period = *retry_period;
  if (poll_interval) base.poll_interval = *poll_interval;
  if (drift_margin) base.drift_margin = *drift_margin;
  if (max_backoff) base.max_backoff = *max_backoff;
  if (max_clock_offset) base.max_clock_offset = *max_clock_offset;
  if (lapse_jitter) base.lapse_jitter = *lapse_jitter;
  return base;
}

lease_config lease_config::overlaid(const lease_config& over) const {
  lease_config out = *this;
  auto pick = [](auto& mine, const auto& theirs) {
    if (theirs) mine = theirs;
  };
  pick(out.ttl, over.ttl);
  pick(out.transition, over.transition);
  pick(out.retry_period, over.retry_period);
  pick(out.poll_interval, over.poll_interval);
  pick(out.drift_margin, over.drift_margin);
  pick(out.max_backoff, over.max_backoff);
  pick(out.stop_grace, over.stop_grace);
  pick(out.max_clock_offset, over.max_clock_offset);
  pick(out.lapse_jitter, over.lapse_jitter);
  return out;
}

contend_options daemon_config::lease_for(const schedule_config& s,
                                         const contend_options& backend_defaults) const {
  return lease.overlaid(s.lease).apply(backend_defaults);
}

milliseconds daemon_config::stop_grace_for(const schedule_config& s,
                                           const contend_options& backend_defaults) const {
  if (auto configured = lease.overlaid(s.lease).stop_grace) return *configured;
  return baton::detail::default_stop_grace(lease_for(s, backend_defaults));
}

milliseconds daemon_config::kill_grace_for(const schedule_config& s,
                                           const contend_options& backend_defaults) const {
  if (s.kill_grace) return *s.kill_grace;
  if (kill_grace) return *kill_grace;
  return stop_grace_for(s, backend_defaults);
}

namespace {
// How long a graceful stop waits for the jobs before it releases (daemon/run.cpp stop_wait).
milliseconds longest_job_wait(const daemon_config& config, const contend_options& defaults) {
  milliseconds longest{0};
  for (const auto& s : config.schedules)
    longest = std::max(longest, config.kill_grace_for(s, defaults));
  return longest + std::chrono::seconds{1};
}
}  // namespace

milliseconds daemon_config::stop_timeout_for(const contend_options& backend_defaults) const {
  if (stop_timeout) return *stop_timeout;
  return longest_job_wait(*this, backend_defaults) + std::chrono::seconds{9};
}

milliseconds daemon_config::member_timeout_for(const contend_options& backend_defaults) const {
  return resolve(balance, lease.apply(backend_defaults), "node").member_timeout;
}

milliseconds daemon_config::settle_for(const contend_options& backend_defaults) const {
  return balance_for(backend_defaults).settle;
}

balance_options daemon_config::balance_for(const contend_options& backend_defaults) const {
  auto b = resolve(balance, lease.apply(backend_defaults), "node");
  b.node_id = balance.node_id;
  return b;
}

std::string tag_error(std::string_view tag) { return name_error(tag, 64); }
std::string node_id_error(std::string_view id) { return name_error(id, 100); }

std::optional<std::string> process_env(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::set<std::string> daemon_config::withheld_env_for(const schedule_config& s) const {
  if (s.inherit_env.value_or(inherit_env)) return {};
  std::set<std::string> withheld = referenced_env;
  withheld.erase("TZ");  // not a secret, and the job's clock should be the daemon's
  return withheld;
}

std::uint64_t daemon_config::log_output_for(const schedule_config& s) const {
  return s.log_output.value_or(log_output);
}

namespace {

daemon_config read_config(reader& r, std::string_view text, const std::string& source,
                          const std::filesystem::path& base_dir) {
  json root = r.parse(text);
  daemon_config config;
  config.source = source;
  config.base_dir = base_dir;
  if (!root.is_object()) {
    r.error("", "expected a JSON object with \"backend\" and \"schedules\", found " +
                    detail::describe_type(root));
    r.throw_if_failed();
  }
  r.allowed_keys(root, "",
                 {"backend", "lease", "kill_grace", "stop_timeout", "log_level", "log_format",
                  "http", "inherit_env", "log_output", "history", "history_output", "retries",
                  "retry_backoff", "node", "balance", "schedules"});
  const auto errors_before_backend = r.error_count();
  const backend_descriptor* descriptor = nullptr;
  guarded(r, "/backend", [&] { config.backend = read_backend(r, root, base_dir, descriptor); });
  // The lease defaults `run` gets from the backend, computed from its parameters without
  // connecting: a ZooKeeper lease follows session_timeout.
  if (descriptor != nullptr && r.error_count() == errors_before_backend) {
    try {
      config.backend_defaults = descriptor->default_lease(config.backend);
    } catch (const backend_param_error& e) {
      r.error(child("/backend", e.param()), e.what());
    } catch (const std::invalid_argument& e) {
      r.error("/backend", e.what());
    }
  }
  const auto errors_before_lease = r.error_count();
  if (auto it = root.find("lease"); it != root.end())
    guarded(r, "/lease", [&] { config.lease = read_lease(r, *it, "/lease"); });
  if (auto it = root.find("kill_grace"); it != root.end())
    guarded(r, "/kill_grace", [&] { config.kill_grace = r.duration(*it, "/kill_grace"); });
  if (auto it = root.find("stop_timeout"); it != root.end())
    guarded(r, "/stop_timeout", [&] { config.stop_timeout = r.duration(*it, "/stop_timeout"); });
  // Cross-field rules run only on well-formed values (a bad one would be replaced by a default).
  const bool lease_ok = r.error_count() == errors_before_lease;
  if (auto it = root.find("log_level"); it != root.end()) {
    guarded(r, "/log_level", [&] {
      // "warning" is taken as "warn" (the name spdlog prints and many tools write).
      if (auto level =
              r.choice(*it, "/log_level", {"trace", "debug", "info", "warn", "warning", "error"}))
        config.log_level = *level == "warning" ? "warn" : *level;
    });
  }
  if (auto it = root.find("log_format"); it != root.end()) {
    guarded(r, "/log_format", [&] {
      if (auto format = r.choice(*it, "/log_format", {"text", "json"})) config.log_format = *format;
    });
  }
  if (auto it = root.find("http"); it != root.end())
    guarded(r, "/http", [&] { read_http(r, *it, config); });
  read_job_output_and_env(r, root, "", config.inherit_env, config.log_output);
  read_run_records(r, root, "", config.history, config.history_output, config.retries,
                   config.retry_backoff);
  {
    const auto errors_before_balance = r.error_count();
    if (auto it = root.find("node"); it != root.end())
      guarded(r, "/node", [&] { read_node(r, *it, config.balance); });
    const auto balance_it = root.find("balance");
    if (balance_it != root.end())
      guarded(r, "/balance", [&] { read_balance(r, *balance_it, config.balance); });
    // The scheduler's own rules (baton::check), on well-formed values only.
    if (r.error_count() == errors_before_balance) {
      const bool object = balance_it != root.end() && balance_it->is_object();
      for (const auto& p : baton::check(config.balance))
        r.error(balance_problem_path(p, object), p.message);
    }
  }

  std::map<std::string, std::string> names;  // name -> path of its first schedule
  std::set<std::string> lease_unchecked;     // schedules whose lease object had errors
  if (auto it = root.find("schedules"); it == root.end()) {
    r.error("/schedules",
            "missing: add at least one schedule, e.g. [{\"name\": \"heartbeat\", "
            "\"every\": \"5s\", \"command\": [\"/bin/true\"]}]");
  } else if (!it->is_array()) {
    r.error("/schedules", "expected an array of schedules, found " + detail::describe_type(*it));
  } else if (it->empty()) {
    r.error("/schedules", "is empty: add at least one schedule");
  } else {
    for (std::size_t i = 0; i < it->size(); ++i) {
      const std::string path = child("/schedules", i);
      bool schedule_lease_ok = true;
      std::optional<schedule_config> s;
      guarded(r, path, [&] { s = read_schedule(r, (*it)[i], path, base_dir, schedule_lease_ok); });
      if (!s) continue;
      if (!schedule_lease_ok) lease_unchecked.insert(s->name);
      if (auto [first, inserted] = names.emplace(s->name, path + "/name"); !inserted) {
        r.error(path + "/name", "duplicate schedule name " + in_quotes(s->name) + " (also at " +
                                    first->second + ")");
        continue;
      }
      config.schedules.push_back(std::move(*s));
    }
  }

  // Cross-field rules, once the single fields are known to be well-formed: the scheduler's own
  // (baton::check_lease, baton::check), on the lease the backend would give, errors deduplicated
  // (a rule broken by the top-level lease is reported once, at /lease).
  const contend_options& defaults = config.backend_defaults;
  const bool global_present = root.contains("lease");
  std::set<std::string> reported;
  auto report = [&](const std::string& path, const std::string& message) {
    if (reported.insert(path + "\n" + message).second) r.error(path, message);
  };
  const contend_options global_lease = config.lease.apply(defaults);
  if (lease_ok)
    for (const auto& p : baton::check_lease(global_lease, config.lease.stop_grace).problems)
      report(lease_problem_path(p, config.lease, global_present, nullptr), p.message);
  bool global_kill_grace_reported = false;
  for (const auto& s : config.schedules) {
    if (!lease_ok || lease_unchecked.count(s.name) != 0) continue;
    const auto lease_path = s.path + "/lease";
    const lease_config merged = config.lease.overlaid(s.lease);
    std::optional<schedule_options> opts;
    try {
      opts = make_schedule_options(config, s, defaults);
    } catch (const std::invalid_argument& e) {
      // The command job refuses what reading the schedule reported (an unknown user, say).
      if (!r.failed()) r.error(s.path, e.what());
      continue;
    }
    const auto checked = baton::check(*opts, global_lease);
    for (const auto& p : checked.problems) {
      if (p.field == "name" || p.field == "every" || p.field == "initial_delay" ||
          p.field == "timeout")
        report(child(s.path, p.field), p.message);
      else if (p.field == "required_tags")
        report(child(s.path, "requires"), p.message);
      else if (p.field == "preferred_tags")
        report(child(s.path, "prefers"), p.message);
      else if (p.field == "history" || p.field == "history_output" ||
               p.field == "retry_backoff")  // checked when read; here for completeness
        report(child(s.has_own(p.field) ? s.path : std::string(), p.field), p.message);
      else if (p.field == "job")
        report(child(s.path, "command"), p.message);
      else
        report(lease_problem_path(p, config.lease, global_present, &s), p.message);
    }
    if (!checked.problems.empty()) continue;  // reported above
    const auto o = checked.lease;
    const auto stop_grace = checked.stop_grace;
    const auto kill_grace = config.kill_grace_for(s, defaults);
    if (kill_grace <= stop_grace) continue;
    std::string where;
    if (s.kill_grace)
      where = s.path + "/kill_grace";
    else if (s.lease.stop_grace)
      where = lease_path + "/stop_grace";
    else if (global_kill_grace_reported)
      continue;
    else
      where = "/kill_grace", global_kill_grace_reported = true;
    r.error(where, "kill_grace (" + show(kill_grace) +
                       ") must not exceed the lease's stop_grace (" + show(stop_grace) +
                       (merged.stop_grace ? "" : ", the default for this lease") +
                       "): a command that ignores SIGTERM must be killed before its lease ends "
                       "and another node may start it. Lower kill_grace, or raise "
                       "lease.stop_grace (it must stay below transition - drift margin = " +
                       show(baton::detail::stop_grace_limit(o)) + ")");
  }
  if (config.stop_timeout && !r.failed()) {
    const auto job_wait = longest_job_wait(config, defaults);
    if (*config.stop_timeout <= job_wait)
      r.error("/stop_timeout", "stop_timeout (" + show(*config.stop_timeout) +
                                   ") must be longer than the longest kill_grace + 1s (" +
                                   show(job_wait) +
                                   "): a graceful stop waits that long for the jobs before it "
                                   "releases the mutexes");
  }
  r.throw_if_failed();
  return config;
}

}  // namespace

std::string listen_address::text() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

listen_address parse_listen_address(std::string_view text) {
  const std::string forms =
      " (use HOST:PORT with an IPv4 address or localhost, or [IPv6]:PORT; "
      "e.g. 127.0.0.1:9464, [::1]:9464, localhost:9464; port 0 = any free port)";
  const std::string shown = detail::quote(text);
  if (text.find('\0') != std::string_view::npos)
    throw std::invalid_argument(shown + ": contains a NUL character" + forms);
  listen_address a;
  std::string_view host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos)
      throw std::invalid_argument(shown + ": missing ']' after the IPv6 address" + forms);
    host = text.substr(1, close - 1);
    if (close + 1 >= text.size() || text[close + 1] != ':')
      throw std::invalid_argument(shown + ": missing ':PORT' after ']'" + forms);
    port = text.substr(close + 2);
    in6_addr v6{};
    const std::string h(host);
    if (h.empty() || ::inet_pton(AF_INET6, h.c_str(), &v6) != 1)
      throw std::invalid_argument(shown + ": " + detail::quote(host) + " is not an IPv6 address" +
                                  forms);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos)
      throw std::invalid_argument(shown + ": missing ':PORT'" + forms);
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos)
      throw std::invalid_argument(shown + ": an IPv6 address needs brackets: [" +
                                  std::string(host) + "]:" + std::string(port) + forms);
    in_addr v4{};
    const std::string h(host);
    if (h.empty())
      throw std::invalid_argument(shown +
                                  ": missing the host (0.0.0.0 listens on every IPv4 "
                                  "address)" +
                                  forms);
    if (h != "localhost" && ::inet_pton(AF_INET, h.c_str(), &v4) != 1)
      throw std::invalid_argument(shown + ": " + detail::quote(host) +
                                  " is not an IPv4 address or localhost (host names are not "
                                  "resolved)" +
                                  forms);
  }
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  const bool digits =
      !port.empty() && port.size() <= 5 &&
      std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || ec != std::errc{} || end != port.data() + port.size() || value > 65535)
    throw std::invalid_argument(shown + ": port " + detail::quote(port) +
                                " is not a number from 0 to 65535" + forms);
  a.host = std::string(host);
  a.port = static_cast<std::uint16_t>(value);
  return a;
}

daemon_config parse_config(std::string_view text, const std::string& source,
                           const std::filesystem::path& base_dir, const env_lookup& env,
                           const config_limits& limits) {
  // Every ${NAME} the file references, wherever it is (the jobs do not get these variables).
  std::set<std::string> referenced;
  reader r(
      source,
      [&referenced, lookup = env ? env : env_lookup(process_env)](const std::string& name) {
        referenced.insert(name);
        return lookup(name);
      },
      limits);
  try {
    auto config = read_config(r, text, source, base_dir);
    config.referenced_env = std::move(referenced);
    return config;
  } catch (const config_error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    // The last resort: what the guards around each part of the file did not catch.
    r.error("", "cannot read the config: " + library_message(e));
    r.throw_if_failed();
    throw;
  }
}

daemon_config load_config(const std::filesystem::path& file, const env_lookup& env,
                          const config_limits& limits) {
  const std::string text = detail::read_config_file(file, limits);
  std::error_code ec;
  auto dir = std::filesystem::absolute(file, ec).parent_path();
  return parse_config(text, file.string(), dir, env, limits);
}

}  // namespace baton::config
