#include "cli.hpp"

#include <algorithm>
#include <charconv>

#include "baton/backends/factory.hpp"

namespace baton::daemon {

namespace {

const std::vector<std::string> commands{"run", "validate", "status", "calendar"};
const std::vector<std::string> levels{"trace", "debug", "info", "warn", "error"};

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
  return R"(baton - singleton periodic jobs across a cluster (a cluster-wide cron)

Usage:
  baton run      --config FILE   contend for every schedule and fire the ones this node leads;
                                 SIGTERM/SIGINT: stop firing, stop jobs, release, exit 0;
                                 SIGHUP: reload the config (unchanged schedules keep leases)
  baton validate --config FILE   check the config; print each schedule and its next fire times
  baton status   --config FILE   who owns each schedule, fence, lease times, last fire
  baton calendar [--time-zone TZ] [--from TIME] [--count N] [--] EXPR
                                 the next N (default 10) fire times of a cron expression after
                                 TIME (RFC 3339, default now), in UTC and in zone TZ, as ISC
                                 cron (Debian's cron) would run it; warns if it never fires
  baton --help | --version

Options:
  --config FILE        the JSON config (relative paths in it resolve against its directory)
  --log-level LEVEL    trace, debug, info, warn or error (overrides the config's log_level)

Exit status: 0 normal, 1 runtime failure, 2 bad arguments or config (the message names the
file and JSON path). During `run`'s graceful stop a repeated SIGTERM is ignored (GNU timeout
and systemd may send two) until stop_timeout, then it exits 1; a SIGINT (Ctrl-C again) exits
at once with 130, without waiting for jobs or releasing (each job's supervisor ends its whole
process tree within kill_grace; other nodes take over when the lease expires). `status` only
reads: it creates nothing on the backend.

)" + backends_help();
}

command_line parse_command_line(const std::vector<std::string>& args) {
  command_line cl;
  std::vector<std::string> positional;
  bool calendar_option = false;
  auto value_of = [&](std::size_t& i, const std::string& option) -> std::string {
    const auto& arg = args[i];
    if (auto eq = arg.find('='); eq != std::string::npos) return arg.substr(eq + 1);
    if (i + 1 >= args.size()) throw usage_error(option + " needs a value");
    return args[++i];
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
                          "' (trace, debug, info, warn, error)");
      cl.log_level = level;
    } else if (name == "--config" || name == "-c") {
      cl.config = value_of(i, name);
      if (cl.config.empty()) throw usage_error(name + ": empty file name");
    } else if (name == "--time-zone") {
      cl.time_zone = value_of(i, name);
      calendar_option = true;
    } else if (name == "--from") {
      cl.from = value_of(i, name);
      calendar_option = true;
    } else if (name == "--count") {
      calendar_option = true;
      auto text = value_of(i, name);
      unsigned n = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
      if (ec != std::errc{} || end != text.data() + text.size() || n == 0 || n > 100000)
        throw usage_error("--count: '" + text + "' is not a number from 1 to 100000");
      cl.count = n;
    } else if (arg.size() > 1 && arg[0] == '-' && !(expression_slot && looks_like_expression)) {
      throw usage_error(
          "unknown option '" + arg + "'" +
          (expression_slot ? " (put -- before an expression that begins with '-')" : ""));
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.empty()) {
    if (cl.help || cl.version) return cl;
    throw usage_error("no command given (run, validate, status or calendar)");
  }
  cl.command = positional[0];
  if (std::find(commands.begin(), commands.end(), cl.command) == commands.end())
    throw usage_error("unknown command '" + cl.command + "' (run, validate, status or calendar)");
  if (cl.help) return cl;
  const bool is_calendar = cl.command == "calendar";
  if (is_calendar) {
    if (positional.size() < 2)
      throw usage_error("calendar: missing the cron expression, e.g. baton calendar '0 3 * * *'");
    if (positional.size() > 2)
      throw usage_error("calendar: unexpected argument '" + positional[2] +
                        "' (quote the expression: baton calendar '0 3 * * *')");
    cl.expression = positional[1];
    if (!cl.config.empty()) throw usage_error("calendar: --config is not used here");
  } else {
    if (positional.size() > 1)
      throw usage_error(cl.command + ": unexpected argument '" + positional[1] + "'");
    if (cl.config.empty()) throw usage_error(cl.command + ": --config FILE is required");
    if (calendar_option)
      throw usage_error(cl.command + ": --time-zone, --from and --count belong to calendar");
  }
  return cl;
}

}  // namespace baton::daemon
