#pragma once
/// The daemon's JSON configuration as typed options. Every error names the file and the JSON
/// path ("baton.json: /schedules/1/every: invalid duration \"5x\" (use 250ms, 10s, 5m, 2h, 1d)"),
/// and all errors of a file are reported together.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "baton/mutex/backend.hpp"
#include "baton/mutex/options.hpp"
#include "baton/scheduler/balance.hpp"
#include "baton/scheduler/scheduler.hpp"
#include "baton/scheduler/trigger.hpp"

namespace baton::config {

/// Everything wrong with one config file: one "FILE: /json/path: message" line per problem.
/// what() joins them with newlines.
class config_error : public std::invalid_argument {
 public:
  /// `count`: how many problems there are in all when `errors` lists only the first ones (its
  /// last line then says how many more there are); 0 means errors.size().
  explicit config_error(std::vector<std::string> errors, std::size_t count = 0);
  /// The messages, in file order.
  const std::vector<std::string>& errors() const noexcept { return errors_; }
  /// How many problems the file has (a file with thousands lists only the first ones).
  std::size_t count() const noexcept { return count_; }

 private:
  std::vector<std::string> errors_;
  std::size_t count_;
};

/// A `lease` object: the lease options it sets; unset fields keep the value underneath (the
/// global `lease` over the backend's defaults, a schedule's `lease` over the global one).
struct lease_config {
  std::optional<std::chrono::milliseconds> ttl;
  std::optional<std::chrono::milliseconds> transition;
  std::optional<std::chrono::milliseconds> retry_period;
  std::optional<std::chrono::milliseconds> poll_interval;
  std::optional<std::chrono::milliseconds> drift_margin;
  std::optional<std::chrono::milliseconds> max_backoff;
  /// Refuse to lead while this host's clock is further than this from the backend's (0: no
  /// limit; contend_options::max_clock_offset).
  std::optional<std::chrono::milliseconds> max_clock_offset;
  /// Waiters ask for a lapsing lease within this window after it lapses (contend_options::
  /// lapse_jitter).
  std::optional<std::chrono::milliseconds> lapse_jitter;
  /// Jobs are asked to stop this long before the local lease ends (scheduler stop_grace).
  std::optional<std::chrono::milliseconds> stop_grace;

  /// `base` with the fields set here replaced (stop_grace is not part of contend_options).
  contend_options apply(contend_options base) const;
  /// These settings with the ones set in `over` replacing them.
  lease_config overlaid(const lease_config& over) const;
};

/// One entry of `schedules`.
struct schedule_config {
  std::string name;  ///< also the mutex name
  trigger when;      ///< `every` (+ mode, initial_delay) or `cron` (+ time_zone)
  /// Program and arguments. A relative program path with a '/' is resolved against the config
  /// file's directory; a bare name ("date") is looked up in PATH when the job runs.
  std::vector<std::string> command;
  std::map<std::string, std::string> env;  ///< extra environment of the command
  /// The command's working directory (absolute; a relative one in the file resolves against the
  /// config file's directory); empty: the daemon's.
  std::string working_directory;
  std::optional<std::string> user;   ///< run as this user (root only, unless it is the daemon's)
  std::optional<std::string> group;  ///< run with this primary group (same)
  /// The cron schedule's `time_zone` as written (empty when not given): the command's TZ.
  std::string time_zone;
  std::chrono::milliseconds timeout{0};                 ///< 0 = no timeout
  std::optional<std::chrono::milliseconds> kill_grace;  ///< overrides the top-level kill_grace
  misfire_policy misfire = misfire_policy::run_once;
  std::optional<bool> inherit_env;              ///< overrides the top-level inherit_env
  std::optional<std::uint64_t> log_output;      ///< overrides the top-level log_output (bytes)
  std::optional<std::size_t> history;           ///< overrides the top-level history
  std::optional<std::uint64_t> history_output;  ///< overrides the top-level history_output
  std::optional<unsigned> retries;              ///< overrides the top-level retries
  std::optional<std::chrono::milliseconds> retry_backoff;  ///< overrides the top-level one
  lease_config lease;  ///< this schedule's `lease` object only (see daemon_config::lease_for)
  /// `requires`: only nodes with all these tags contend for it (sorted, unique).
  std::vector<std::string> required_tags;
  /// `prefers`: with balance on, nodes with all these tags are chosen first (sorted, unique).
  std::vector<std::string> preferred_tags;
  bool lease_present = false;  ///< the schedule has a `lease` object (even an empty one)
  std::string path;            ///< JSON path of the entry, "/schedules/3", for messages

  /// True when the schedule sets `field` (history, history_output, retries, retry_backoff)
  /// itself instead of taking the top-level value.
  bool has_own(std::string_view field) const {
    return (field == "history" && history) || (field == "history_output" && history_output) ||
           (field == "retries" && retries) || (field == "retry_backoff" && retry_backoff);
  }
};

/// Where the daemon serves /metrics, /healthz and /readyz over HTTP (`http.listen`,
/// `baton run --http-listen`): an IP literal or `localhost`, and a port.
struct listen_address {
  /// "127.0.0.1", "::1" (no brackets) or "localhost" (bound as 127.0.0.1), as written.
  std::string host;
  std::uint16_t port = 0;  ///< 0: any free port (the daemon logs the one it got)

  /// "127.0.0.1:9464", "[::1]:9464", "localhost:9464": the form parse_listen_address() reads.
  std::string text() const;
  friend bool operator==(const listen_address&, const listen_address&) = default;
};

/// Reads "HOST:PORT" with HOST an IPv4 literal or `localhost`, or "[IPv6]:PORT"; PORT 0..65535.
/// Host names are not resolved. Throws std::invalid_argument saying what is wrong and which
/// forms are accepted.
listen_address parse_listen_address(std::string_view text);

/// The web console on the HTTP listener (`http.console` and what goes with it; daemon/README.md,
/// "Web console"). The token itself is never in the config: read_console_token() reads it.
struct console_config {
  bool enabled = false;        ///< http.console: the page at / and the read-only /api/v1
  bool allow_control = false;  ///< http.allow_control: POST pause/resume/trigger with the token
  /// http.token_env: the environment variable that holds the token (empty: not set).
  std::string token_env;
  /// http.token_file: the file that holds the token, resolved against the config's directory
  /// (empty: not set). At most one of token_env and token_file is set.
  std::string token_file;
  friend bool operator==(const console_config&, const console_config&) = default;
};

/// Shortest control token accepted, in bytes.
inline constexpr std::size_t min_console_token_bytes = 16;

/// The daemon's balance options when the file says nothing: the library's defaults with balance
/// on (fair share).
inline balance_options daemon_balance_defaults() {
  balance_options b;
  b.enabled = true;
  return b;
}

/// A whole config file.
struct daemon_config {
  std::string source;              ///< the file name as given (prefix of messages)
  std::filesystem::path base_dir;  ///< the config file's directory (relative paths resolve here)
  /// `backend`: type and parameters as strings (a relative sqlite `path` already resolved).
  backend_config backend;
  /// The lease options the backend uses by default (baton::default_lease of `backend`, the
  /// descriptor's, without connecting): what `run`'s backend->default_options() returns. The
  /// checks of the file ran against these.
  contend_options backend_defaults;
  lease_config lease;  ///< the top-level `lease`
  /// Between SIGTERM and SIGKILL for a command asked to stop; unset: the schedule's stop_grace,
  /// so that a command ignoring SIGTERM is gone before the lease ends.
  std::optional<std::chrono::milliseconds> kill_grace;
  /// `run`: the most a graceful stop may take, from the first SIGTERM/SIGINT (jobs ended,
  /// mutexes released, backend closed); then the daemon gives up and exits 1. Unset:
  /// stop_timeout_for() computes it.
  std::optional<std::chrono::milliseconds> stop_timeout;
  std::string log_level = "info";  ///< trace, debug, info, warn or error ("warning" read as warn)
  /// `run`'s stderr log lines: "text" ("TIME LEVEL [schedule] message") or "json" (one object
  /// per line); --log-format overrides it.
  std::string log_format = "text";
  /// `http.listen`: serve /metrics, /healthz and /readyz there; unset: no HTTP (the default).
  std::optional<listen_address> http_listen;
  /// `http.console`, `http.allow_control`, `http.token_env`, `http.token_file`.
  console_config console;
  /// Jobs get the daemon's whole environment (true), or without the variables in `referenced_env`.
  bool inherit_env = false;
  /// Most bytes of each output stream of a run that go to the log.
  std::uint64_t log_output = 64 * 1024;
  /// History records kept per schedule in the backend (0: none); schedule_options::history.
  std::size_t history = 50;
  /// Most bytes of a run's stderr kept in its history record (0: none).
  std::uint64_t history_output = 4096;
  unsigned retries = 0;  ///< retries of a failed, killed or timed-out attempt
  std::chrono::milliseconds retry_backoff{10'000};  ///< wait before retry 1, doubling
  /// Every variable name the file referenced as `${NAME}`, anywhere (backend included).
  std::set<std::string> referenced_env;
  /// `node` (id, tags: sorted) and `balance` (`true`/`false`, or enabled, heartbeat,
  /// member_timeout, settle, handoff_rate) as the scheduler takes them. Balance is on by default
  /// in the daemon (the library's default is off).
  balance_options balance = daemon_balance_defaults();
  std::vector<schedule_config> schedules;

  /// The names the jobs of `s` do not get from the daemon's environment: `referenced_env`
  /// except TZ, or none when `s` (else the top level) has inherit_env.
  std::set<std::string> withheld_env_for(const schedule_config& s) const;
  /// The log_output of `s`: its own, else the top-level one.
  std::uint64_t log_output_for(const schedule_config& s) const;

  /// The lease of `s`: `backend_defaults` overlaid with `lease` and then `s.lease`.
  contend_options lease_for(const schedule_config& s,
                            const contend_options& backend_defaults) const;
  /// The stop_grace of `s`: configured, else the scheduler's default for its lease.
  std::chrono::milliseconds stop_grace_for(const schedule_config& s,
                                           const contend_options& backend_defaults) const;
  /// The kill_grace of `s`: its own, else the top-level one, else stop_grace_for().
  std::chrono::milliseconds kill_grace_for(const schedule_config& s,
                                           const contend_options& backend_defaults) const;
  /// The stop_timeout: configured, else the longest kill_grace_for() of the schedules + 10 s
  /// (the stop's job wait, kill_grace + 1 s, then up to 5 s for the releases, with room).
  std::chrono::milliseconds stop_timeout_for(const contend_options& backend_defaults) const;
  /// How long a member's record may stay unchanged before it counts as gone:
  /// balance.member_timeout, else the top-level lease's transition, at least 3 heartbeats.
  std::chrono::milliseconds member_timeout_for(const contend_options& backend_defaults) const;
  /// How long a new view must hold before this node hands schedules off: balance.settle, else
  /// 2 heartbeats (heartbeat: a third of the transition, 100 ms to 1 s, unless set).
  std::chrono::milliseconds settle_for(const contend_options& backend_defaults) const;
  /// `balance` with its defaults resolved against the top-level lease (baton::resolve; the node
  /// id stays as configured).
  balance_options balance_for(const contend_options& backend_defaults) const;
};

/// What a config may be, so that no input makes the loader crash, hang or run out of memory.
/// Beyond a limit the file is refused with a config_error naming the file and the place.
struct config_limits {
  /// The default max_bytes: 4 MiB, about 20,000 schedules.
  static constexpr std::size_t default_max_bytes = std::size_t{4} << 20;
  /// The default max_depth: the format itself nests 4 levels (/schedules/0/env/NAME).
  static constexpr std::size_t default_max_depth = 64;

  /// Largest config text accepted, in bytes. Also bounds what `${NAME}` references may add to
  /// the file in all (a variable referenced a million times is refused, not expanded).
  std::size_t max_bytes = default_max_bytes;
  /// Deepest nesting of arrays and objects (the top-level object is level 1).
  std::size_t max_depth = default_max_depth;
  /// How long load_config() waits for a pipe or device (`--config <(...)`, a FIFO) to deliver
  /// the whole file.
  std::chrono::milliseconds read_timeout{10000};
};

/// Looks up an environment variable for `${NAME}`; nullopt when unset.
using env_lookup = std::function<std::optional<std::string>(const std::string& name)>;

/// The process environment (getenv).
std::optional<std::string> process_env(const std::string& name);

/// Parses config text. `source` prefixes every message (normally the file name), `base_dir`
/// resolves relative paths, `env` serves `${NAME}` (null: the process environment). Throws
/// config_error with every problem found, whatever the text (no other exception but
/// std::bad_alloc): a text beyond `limits` is refused, each problem names its JSON path (or line
/// and column), and values quoted in messages are shortened and shown as valid UTF-8.
daemon_config parse_config(std::string_view text, const std::string& source,
                           const std::filesystem::path& base_dir, const env_lookup& env = {},
                           const config_limits& limits = {});

/// Reads and parses `file`; relative paths in it resolve against its directory. Reads at most
/// limits.max_bytes + 1 bytes (a longer file, or /dev/zero, is an error naming the limit) and
/// waits at most limits.read_timeout for a pipe. Throws config_error (also when the file cannot
/// be read, or is a directory or a socket).
daemon_config load_config(const std::filesystem::path& file, const env_lookup& env = {},
                          const config_limits& limits = {});

/// Most job-pool threads of the daemon's scheduler: the CPUs, at least 2. Its jobs are
/// asynchronous command jobs: a pool thread only starts a run (its supervisor), one thread watches
/// every running command, so a few threads serve any number of schedules and runs at once; more
/// threads than CPUs would only take CPU from the io threads that renew the leases.
unsigned daemon_job_threads();

/// The scheduler-wide options: the global lease over `backend_defaults`, `contender_id` as given;
/// job_threads: min(schedules, daemon_job_threads()).
scheduler_options make_scheduler_options(const daemon_config& config,
                                         const contend_options& backend_defaults,
                                         std::string contender_id = {});

/// The scheduler options of `s`, with a command job running its command: `async_job` (what the
/// scheduler runs, make_async_command_job) and the same as the synchronous `job`
/// (make_command_job).
schedule_options make_schedule_options(const daemon_config& config, const schedule_config& s,
                                       const contend_options& backend_defaults);

/// A canonical text of everything that decides how `s` runs (trigger, command, environment,
/// identity, effective lease and graces, required and preferred tags): equal texts mean an
/// unchanged schedule on reload.
/// Binary (CBOR), exact for values of any bytes; for comparing, not for showing.
std::string fingerprint(const daemon_config& config, const schedule_config& s,
                        const contend_options& backend_defaults);

/// The console's control token when `config.console.allow_control` (else ""): the value of the
/// variable `token_env` names (`env`; null: the process environment), or the first line of
/// `token_file`, which must be a regular file that neither group nor others may read, write or
/// execute (mode 0600 or 0400). Throws config_error naming the file and /http/token_env or
/// /http/token_file when it is unset, unreadable, too open, or shorter than
/// min_console_token_bytes. Never puts the token in a message.
std::string read_console_token(const daemon_config& config, const env_lookup& env = {});

/// Empty when `tag` is a valid node tag (1 to 64 of [A-Za-z0-9._-]), else why it is not.
std::string tag_error(std::string_view tag);
/// Empty when `id` is a valid node id (1 to 100 of [A-Za-z0-9._-]), else why it is not.
std::string node_id_error(std::string_view id);

/// Describes a trigger for people: "every 5s (fixed_rate)", "cron \"0 3 * * *\" in Europe/Berlin".
std::string describe(const trigger& when);

}  // namespace baton::config
