#include "cli.hpp"

#include <algorithm>
#include <charconv>

#include "baton/backends/factory.hpp"
#include "baton/config/config.hpp"
#include "baton/config/duration.hpp"

namespace baton::daemon {

namespace {

/// One option of the command line, as `help` shows it.
struct option_doc {
  std::string name;  ///< "--config"
  std::string text;  ///< "--config FILE"
  std::string doc;
};

const option_doc opt_config{"--config", "--config FILE",
                            "the JSON config (relative paths in it resolve against its directory)"};
const option_doc opt_log_level{
    "--log-level", "--log-level LEVEL",
    "trace, debug, info, warn (or warning) or error (overrides the config's)"};
const option_doc opt_log_format{
    "--log-format", "--log-format FMT",
    "text or json: one JSON object per log line (overrides the config's log_format)"};
const option_doc opt_http_listen{
    "--http-listen", "--http-listen ADDR",
    "serve /metrics, /healthz and /readyz (and the web console with\n"
    "                      http.console) over HTTP on ADDR: 127.0.0.1:9464, [::1]:9464,\n"
    "                      localhost:0 (any free port); overrides the config's http.listen"};
const option_doc opt_json{"--json", "--json",
                          "one JSON document on stdout (\"schema\": 1; see daemon/README.md)"};

/// One subcommand: its synopsis, what it does, its options.
struct command_doc {
  std::string name;
  std::string synopsis;  ///< after "baton "
  std::string summary;   ///< one line for `baton --help`
  std::string details;   ///< more lines for `baton help CMD`
  std::vector<option_doc> options;
};

const std::vector<command_doc>& command_docs() {
  static const std::vector<command_doc> docs{
      {"run",
       "run --config FILE",
       "contend for every schedule and fire the ones this node leads",
       "SIGTERM/SIGINT: stop firing, stop jobs, release, exit 0; SIGHUP: reload the config\n"
       "(unchanged schedules keep their leases); SIGUSR1: drain (hand every schedule to the\n"
       "other nodes, then contend for none); SIGUSR2: end the drain. With balance on (the\n"
       "default) each live node leads a fair share of the schedules. Runs until stopped.",
       {opt_config, opt_log_level, opt_log_format, opt_http_listen}},
      {"validate",
       "validate --config FILE [--json]",
       "check the config; print each schedule and its next fire times",
       "Does not contact the backend. Warns (stderr, exit status 0) about programs not found on\n"
       "this host, cron expressions that can never fire and schedules that require tags this\n"
       "node lacks (it never runs them). Shows the node id, tags and balance mode.",
       {opt_config, opt_json, opt_log_level, opt_log_format}},
      {"status",
       "status --config FILE [--json]",
       "the nodes (tags, share, drain); per schedule: leader, fence, lease, paused, last outcome",
       "Reads the backend only (creates and changes nothing there); times are the backend's\n"
       "clock for the lease, the nodes' wall clocks for runs and membership records. A node\n"
       "is alive while its record is younger than member_timeout. Consecutive failures count\n"
       "the runs since the last success in the history.",
       {opt_config, opt_json, opt_log_level, opt_log_format}},
      {"history",
       "history NAME --config FILE [--limit N] [--json]",
       "the recorded runs of schedule NAME, newest first",
       "One line per run (or skipped fire): seq, planned time, trigger, attempt, outcome (exit\n"
       "status or signal), duration, fence, node; then the tail of its stderr, indented.\n"
       "Reads the backend only.",
       {opt_config,
        {"--limit", "--limit N", "show at most N records (1-10000, default 20)"},
        opt_json,
        opt_log_level,
        opt_log_format}},
      {"pause",
       "pause NAME --config FILE [--reason TEXT]",
       "pause schedule NAME on every node: it keeps its leader but does not fire",
       "Fires while paused are recorded as skipped_paused. Persisted in the backend: survives\n"
       "restarts and leader changes. Allowed (with a warning) when no node leads NAME now.",
       {opt_config,
        {"--reason", "--reason TEXT", "why (shown by status)"},
        opt_log_level,
        opt_log_format}},
      {"resume",
       "resume NAME --config FILE",
       "resume a paused schedule (its misfire policy decides about the fires it missed)",
       "",
       {opt_config, opt_log_level, opt_log_format}},
      {"trigger",
       "trigger NAME --config FILE",
       "run schedule NAME once now, on its leader (no leader: on whoever leads next)",
       "Recorded as trigger \"manual\"; runs exactly once per request, even across a leader\n"
       "change; does not shift the schedule's cadence.",
       {opt_config, opt_log_level, opt_log_format}},
      {"drain",
       "drain --config FILE [--node ID] [--undo] [--no-wait] [--timeout DURATION]",
       "make a node hand all its schedules to the others and stop contending (rolling deploys)",
       "Writes the request into the node's membership record in the backend (works from any\n"
       "host; the node acts on it at its next heartbeat), then waits until the node reports\n"
       "that it leads nothing (exit 0) or the timeout passes (exit 1, naming what it still\n"
       "leads). On the node itself, SIGUSR1 does the same and SIGUSR2 undoes it. A node\n"
       "stays drained until --undo or a restart (a new process takes its share). Needs balance\n"
       "on in that node's config.",
       {opt_config,
        {"--node", "--node ID", "the node to drain (default: the config's node.id)"},
        {"--undo", "--undo", "cancel the drain: the node takes a fair share again"},
        {"--no-wait", "--no-wait", "request the drain and return at once"},
        {"--timeout", "--timeout DURATION", "how long to wait for the node to empty (default 5m)"},
        opt_log_level,
        opt_log_format}},
      {"calendar",
       "calendar [--time-zone TZ] [--from TIME] [--count N] [--json] [--] EXPR",
       "the next fire times of a cron expression",
       "The next N (default 10) fire times after TIME (RFC 3339, default now), in UTC and in\n"
       "zone TZ, as ISC cron (Debian's cron) would run it. Warns (stderr, exit status 0) when\n"
       "the expression can never fire. Put -- before an expression that begins with '-'.",
       {{"--time-zone", "--time-zone TZ", "IANA time zone of the expression (default UTC)"},
        {"--from", "--from TIME", "start after this RFC 3339 time (default now)"},
        {"--count", "--count N", "how many fire times (1-100000, default 10)"},
        opt_json,
        opt_log_level,
        opt_log_format}},
      {"help", "help [CMD]", "this text, or what CMD does and its options", "", {}},
  };
  return docs;
}

const command_doc* find_command(const std::string& name) {
  for (const auto& d : command_docs())
    if (d.name == name) return &d;
  return nullptr;
}

std::string command_names() {
  std::string out;
  for (const auto& d : command_docs()) out += (out.empty() ? "" : ", ") + d.name;
  return out;
}

const std::vector<std::string> levels{"trace", "debug", "info", "warn", "warning", "error"};

}  // namespace

const char* version() { return BATON_VERSION; }

std::string backends_help() {
  constexpr std::size_t doc_column = 30;
  std::string out =
      "Backends of this build (the config's \"backend\": {\"type\": TYPE, PARAMETER: VALUE, "
      "...}):\n";
  for (const auto* d : backend_descriptors()) {
    out += "  " + d->type + ": " + d->doc + "\n";
    if (d->params.empty()) out += "    (no parameters)\n";
    for (const auto& p : d->params) {
      std::string head = "    " + p.name;
      if (p.required)
        head += " (required)";
      else if (!p.default_value.empty())
        head += " = " + p.default_value;
      if (p.secret) head += " (secret)";
      head.resize(std::max<std::size_t>(head.size() + 2, doc_column), ' ');
      // The doc line, wrapped at 100 columns under its own column.
      std::string line = head;
      std::size_t start = 0;
      while (start < p.doc.size()) {
        std::size_t end = p.doc.size();
        if (line.size() + (end - start) > 100) {
          end = p.doc.rfind(' ', start + (100 - line.size()));
          if (end == std::string::npos || end <= start) end = p.doc.size();
        }
        out += line + p.doc.substr(start, end - start) + "\n";
        line.assign(doc_column, ' ');
        start = end < p.doc.size() ? end + 1 : end;
      }
    }
  }
  out +=
      "Durations are a whole number and a unit: 250ms, 10s, 5m, 2h, 1d. Unknown parameters are "
      "errors.\n";
  return out;
}

std::string usage() {
  std::string out =
      "baton - singleton periodic jobs across a cluster (a cluster-wide cron)\n\nUsage:\n";
  for (const auto& d : command_docs())
    out += "  baton " + d.synopsis + "\n      " + d.summary + "\n";
  out += R"(  baton --help | --version
      `baton CMD --help` (or `baton help CMD`) shows what CMD does and its options

Exit status: 0 normal, 1 runtime failure, 2 bad arguments or config (the message names the
file and JSON path). During `run`'s graceful stop a repeated SIGTERM is ignored (GNU timeout
and systemd may send two) until stop_timeout, then it exits 1; a SIGINT (Ctrl-C again) exits
at once with 130, without waiting for jobs or releasing (each job's supervisor ends its whole
process tree within kill_grace; other nodes take over when the lease expires). `status` and
`history` only read: they create nothing on the backend.

)";
  return out + backends_help();
}

std::string command_help(const std::string& command) {
  const command_doc* d = find_command(command);
  if (d == nullptr) return usage();
  std::string out = "Usage: baton " + d->synopsis + "\n\n" + d->summary + ".\n";
  if (!d->details.empty()) out += d->details + "\n";
  if (!d->options.empty()) {
    out += "\nOptions:\n";
    for (const auto& o : d->options) {
      std::string line = "  " + o.text;
      line.resize(std::max<std::size_t>(line.size() + 2, 22), ' ');
      out += line + o.doc + "\n";
    }
  }
  out += "\nExit status: 0 ok, 1 runtime failure, 2 bad arguments or config.\n";
  return out;
}

command_line parse_command_line(const std::vector<std::string>& args) {
  command_line cl;
  std::vector<std::string> positional;
  std::vector<std::string> given;  // the options given, by name (--config, not -c)
  auto value_of = [&](std::size_t& i, const std::string& option) -> std::string {
    const auto& arg = args[i];
    if (auto eq = arg.find('='); eq != std::string::npos) return arg.substr(eq + 1);
    if (i + 1 >= args.size()) throw usage_error(option + " needs a value");
    return args[++i];
  };
  auto number_of = [&](std::size_t& i, const std::string& option, unsigned max) {
    auto text = value_of(i, option);
    unsigned n = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc{} || end != text.data() + text.size() || n == 0 || n > max)
      throw usage_error(option + ": '" + text + "' is not a number from 1 to " +
                        std::to_string(max));
    return n;
  };
  bool options_done = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const std::string name = arg.substr(0, arg.find('='));
    // The expression slot of `calendar`: a cron expression may begin with '-' ("-1 * * * *" is
    // a cron error, not an option); a word with a blank or starting "-<digit>" is taken as one.
    const bool expression_slot = positional.size() == 1 && positional[0] == "calendar";
    const bool looks_like_expression =
        arg.find_first_of(" \t") != std::string::npos ||
        (arg.size() > 1 && arg[0] == '-' && arg[1] >= '0' && arg[1] <= '9');
    const bool is_option = !options_done && arg.size() > 1 && arg[0] == '-' && arg != "--";
    if (is_option && name != "--help" && name != "-h" && name != "--version")
      given.push_back(name == "-c" ? "--config" : name);
    if (options_done) {
      positional.push_back(arg);
    } else if (arg == "--") {
      options_done = true;  // everything after "--" is positional: baton calendar -- EXPR
    } else if (arg == "--help" || arg == "-h") {
      cl.help = true;
    } else if (arg == "--version") {
      cl.version = true;
    } else if (name == "--log-level") {
      auto level = value_of(i, name);
      if (std::find(levels.begin(), levels.end(), level) == levels.end())
        throw usage_error("--log-level: unknown level '" + level +
                          "' (trace, debug, info, warn or warning, error)");
      cl.log_level = level == "warning" ? "warn" : level;
    } else if (name == "--log-format") {
      auto format = value_of(i, name);
      if (format != "text" && format != "json")
        throw usage_error("--log-format: unknown format '" + format + "' (text, json)");
      cl.log_format = format;
    } else if (name == "--http-listen") {
      auto address = value_of(i, name);
      try {
        config::parse_listen_address(address);
      } catch (const std::invalid_argument& e) {
        throw usage_error("--http-listen: " + std::string(e.what()));
      }
      cl.http_listen = address;
    } else if (name == "--config" || name == "-c") {
      cl.config = value_of(i, name);
      if (cl.config.empty()) throw usage_error(name + ": empty file name");
    } else if (name == "--time-zone") {
      cl.time_zone = value_of(i, name);
    } else if (name == "--from") {
      cl.from = value_of(i, name);
    } else if (name == "--count") {
      cl.count = number_of(i, name, 100000);
    } else if (name == "--limit") {
      cl.limit = number_of(i, name, 10000);
    } else if (name == "--reason") {
      cl.reason = value_of(i, name);
    } else if (name == "--node") {
      cl.node = value_of(i, name);
      if (auto why = config::node_id_error(cl.node); !why.empty())
        throw usage_error("--node: '" + cl.node + "' is not a node id: " + why);
    } else if (name == "--timeout") {
      auto text = value_of(i, name);
      auto d = config::parse_duration(text);
      if (!d || *d <= std::chrono::milliseconds::zero())
        throw usage_error("--timeout: '" + text + "' is not a positive duration (" +
                          std::string(config::duration_hint) + ")");
      cl.timeout = *d;
    } else if (arg == "--undo") {
      cl.undo = true;
    } else if (arg == "--no-wait") {
      cl.no_wait = true;
    } else if (arg == "--json") {
      cl.json = true;
    } else if (arg.size() > 1 && arg[0] == '-' && !(expression_slot && looks_like_expression)) {
      throw usage_error(
          "unknown option '" + arg + "'" +
          (expression_slot ? " (put -- before an expression that begins with '-')" : ""));
    } else {
      if (is_option) given.pop_back();  // an expression beginning with '-'
      positional.push_back(arg);
    }
  }
  if (positional.empty()) {
    if (cl.help || cl.version) return cl;
    throw usage_error("no command given (" + command_names() + ")");
  }
  cl.command = positional[0];
  const command_doc* doc = find_command(cl.command);
  if (doc == nullptr)
    throw usage_error("unknown command '" + cl.command + "' (" + command_names() + ")");
  if (cl.command == "help") {
    // baton help [CMD]: the same text as --help and CMD --help.
    if (positional.size() > 2)
      throw usage_error("help: unexpected argument '" + positional[2] + "'");
    cl.help = true;
    cl.command.clear();
    if (positional.size() == 2) {
      if (find_command(positional[1]) == nullptr)
        throw usage_error("help: unknown command '" + positional[1] + "' (" + command_names() +
                          ")");
      cl.command = positional[1] == "help" ? "" : positional[1];
    }
    return cl;
  }
  if (cl.help) return cl;
  // Every option given must be one of this command's.
  for (const auto& option : given) {
    const bool known = std::any_of(doc->options.begin(), doc->options.end(),
                                   [&](const option_doc& o) { return o.name == option; });
    if (known) continue;
    if (option == "--time-zone" || option == "--from" || option == "--count")
      throw usage_error(cl.command + ": --time-zone, --from and --count belong to calendar");
    if (option == "--config") throw usage_error(cl.command + ": --config is not used here");
    throw usage_error(cl.command + ": " + option + " is not an option of " + cl.command +
                      " (see 'baton help " + cl.command + "')");
  }
  const bool takes_name = cl.command == "pause" || cl.command == "resume" ||
                          cl.command == "trigger" || cl.command == "history";
  if (cl.command == "calendar") {
    if (positional.size() < 2)
      throw usage_error("calendar: missing the cron expression, e.g. baton calendar '0 3 * * *'");
    if (positional.size() > 2)
      throw usage_error("calendar: unexpected argument '" + positional[2] +
                        "' (quote the expression: baton calendar '0 3 * * *')");
    cl.expression = positional[1];
    return cl;
  }
  if (takes_name) {
    if (positional.size() < 2)
      throw usage_error(cl.command + ": missing the schedule name: baton " + doc->synopsis);
    cl.schedule = positional[1];
    if (cl.schedule.empty()) throw usage_error(cl.command + ": empty schedule name");
  }
  if (cl.command == "drain") {
    const bool timeout_given = std::find(given.begin(), given.end(), "--timeout") != given.end();
    if (timeout_given && (cl.undo || cl.no_wait))
      throw usage_error(std::string("drain: --timeout is how long to wait for the drain; ") +
                        (cl.undo ? "--undo" : "--no-wait") + " does not wait");
  }
  const std::size_t expected = takes_name ? 2 : 1;
  if (positional.size() > expected)
    throw usage_error(cl.command + ": unexpected argument '" + positional[expected] + "'");
  if (cl.config.empty()) throw usage_error(cl.command + ": --config FILE is required");
  return cl;
}

}  // namespace baton::daemon
