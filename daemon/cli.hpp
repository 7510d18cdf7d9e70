#pragma once
// The `baton` command line: subcommand, options, usage text.
#include <chrono>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace baton::daemon {

/// Exit statuses of the `baton` executable.
enum exit_status : int {
  exit_ok = 0,       ///< normal end (run: stopped by SIGTERM/SIGINT after releasing)
  exit_failure = 1,  ///< runtime failure (backend unreachable for status, setup failed)
  exit_usage = 2,    ///< bad arguments or a bad config file
};

/// A bad command line; the message names the argument.
class usage_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// The parsed command line.
struct command_line {
  /// run, validate, status, calendar, pause, resume, trigger, history, drain; empty with
  /// --help / --version or `help`
  std::string command;
  bool help = false;  ///< --help, or `baton help [CMD]`: print usage() or command_help(command)
  bool version = false;
  bool json = false;       ///< --json (status, history, validate, calendar): one JSON document
  std::string schedule;    ///< pause, resume, trigger, history NAME
  std::string reason;      ///< pause --reason
  std::size_t limit = 20;  ///< history --limit
  std::optional<std::string> log_level;   ///< --log-level, overrides the config's log_level
  std::optional<std::string> log_format;  ///< --log-format text|json, overrides log_format
  std::string config;                     ///< --config FILE (run, validate, status)
  std::string expression;                 ///< calendar EXPR
  std::string time_zone = "UTC";          ///< calendar --time-zone
  std::optional<std::string> from;        ///< calendar --from (RFC 3339)
  unsigned count = 10;                    ///< calendar --count
  /// run --http-listen ADDR (checked by config::parse_listen_address): overrides http.listen.
  std::optional<std::string> http_listen;
  /// drain --node ID (checked by config::node_id_error); empty: the config's node.id.
  std::string node;
  bool undo = false;     ///< drain --undo: cancel the drain
  bool no_wait = false;  ///< drain --no-wait: request and return
  /// drain --timeout: how long to wait for the node to report that it is empty.
  std::chrono::milliseconds timeout = std::chrono::minutes{5};
};

/// Parses argv; throws usage_error.
command_line parse_command_line(const std::vector<std::string>& args);

/// The --help text: every command in a line (ends with backends_help()).
std::string usage();

/// `baton CMD --help` / `baton help CMD`: usage, options and what CMD does. `command` must be a
/// known command (parse_command_line checked it).
std::string command_help(const std::string& command);

/// Every backend type of this build with its parameters, defaults and doc lines, from the
/// backend descriptors (baton::backend_descriptors()).
std::string backends_help();

/// The project version ("0.1.0").
const char* version();

}  // namespace baton::daemon
