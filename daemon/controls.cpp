// baton history, pause, resume and trigger: one schedule's records in the backend; baton drain:
// one node's membership record.
#include <algorithm>
#include <iostream>
#include <sstream>
#include <thread>

#include "baton/config/duration.hpp"
#include "baton/scheduler/balance.hpp"
#include "baton/scheduler/records.hpp"
#include "commands.hpp"
#include "output.hpp"
#include "report.hpp"

namespace baton::daemon {

using std::chrono::system_clock;

namespace {

// How long a command may wait for an unresponsive backend.
constexpr std::chrono::seconds backend_deadline{30};

// The config's schedule `cl.schedule`; null (after "FILE: no schedule 'x' (known: a, b)" on
// stderr) when the config has none of that name.
const config::schedule_config* schedule_named(const config::daemon_config& config,
                                              const command_line& cl) {
  for (const auto& s : config.schedules)
    if (s.name == cl.schedule) return &s;
  std::string known;
  for (const auto& s : config.schedules) known += (known.empty() ? "" : ", ") + s.name;
  std::cerr << "baton " << cl.command << ": NAME: no schedule '" << cl.schedule << "' in "
            << config.source << " (its schedules: " << known << ")\n";
  return nullptr;
}

// "failed (exit status 3)", "killed (SIGKILL)", "succeeded".
std::string outcome_text(const run_record& r) {
  std::string out(to_string(r.outcome));
  if (r.exit_status && r.outcome != run_outcome::succeeded)
    out += " (exit status " + std::to_string(*r.exit_status) + ")";
  else if (r.signal)
    out += " (" + signal_text(*r.signal) + ")";
  return out;
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.resize(width, ' ');
  return s + "  ";
}

// The record's lines after its first: the error and the stderr tail, indented.
void print_details(std::ostream& out, const run_record& r) {
  const std::string indent = "      ";
  if (!r.error.empty()) out << indent << "error: " << r.error << "\n";
  if (r.output.empty()) return;
  out << indent << "stderr" << (r.output_truncated ? " (last bytes)" : "") << ":\n";
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) out << indent << "  " << line << "\n";
}

// The common start of the schedule commands: the config, a NAME it has, logging, the backend
// (read-only for `history`). nullptr with `failed` set to the exit status when one is missing.
std::shared_ptr<mutex_backend> open_backend(const command_line& cl, runtime& rt, bool read_only,
                                            std::optional<config::daemon_config>& config,
                                            int& failed) {
  failed = exit_usage;
  config = load_or_report(cl);
  if (!config || !schedule_named(*config, cl)) return nullptr;
  configure_logging(cl.log_level.value_or("warn"), cl.log_format.value_or(config->log_format));
  failed = exit_ok;
  const std::string& command = cl.command;
  return make_configured_backend(
      *config, rt, failed,
      [&](const std::string& why) { std::cerr << "baton " << command << ": " << why << "\n"; },
      read_only);
}

}  // namespace

int history(const command_line& cl) {
  runtime rt;
  std::optional<config::daemon_config> config;
  int failed = exit_ok;
  // Read-only, as status: looking creates and changes nothing.
  auto backend = open_backend(cl, rt, true, config, failed);
  if (!backend) return failed;
  std::vector<run_record> records;
  {
    watchdog guard(backend_deadline, "history", "the " + config->backend.type + " backend");
    try {
      records = read_run_history(*backend, cl.schedule, cl.limit);
    } catch (const store_missing&) {
      // Nothing has run on this store yet: no history.
    } catch (const std::exception& e) {
      std::cerr << "baton history: cannot read the history of '" << cl.schedule << "' from the "
                << config->backend.type << " backend: " << scrub_secrets(config->backend, e.what())
                << "\n";
      return exit_failure;
    }
  }
  std::ostream& out = std::cout;
  if (cl.json) {
    out << dump_json(history_document(cl.schedule, cl.limit, records));
    return exit_ok;
  }
  if (records.empty()) {
    out << "no runs recorded for '" << cl.schedule << "'\n";
    return exit_ok;
  }
  out << pad("SEQ", 5) << pad("PLANNED (UTC)", 24) << pad("TRIGGER", 8) << pad("TRY", 3)
      << pad("OUTCOME", 26) << pad("DURATION", 8) << pad("FENCE", 5) << "NODE\n";
  for (const auto& r : records) {
    out << pad(std::to_string(r.seq), 5) << pad(utc(r.planned), 24)
        << pad(std::string(to_string(r.trigger)), 8) << pad(std::to_string(r.attempt), 3)
        << pad(outcome_text(r), 26) << pad(r.started ? format_elapsed(r.duration) : "-", 8)
        << pad(std::to_string(r.fence), 5) << r.node << "\n";
    print_details(out, r);
  }
  return exit_ok;
}

int control(const command_line& cl) {
  runtime rt;
  std::optional<config::daemon_config> config;
  int failed = exit_ok;
  auto backend = open_backend(cl, rt, false, config, failed);
  if (!backend) return failed;
  const std::string& command = cl.command;
  const std::string by = caller_identity();
  control_result result;
  {
    watchdog guard(backend_deadline, command, "the " + config->backend.type + " backend");
    try {
      result = apply_control(*backend, cl.schedule, command, cl.reason, by);
    } catch (const std::exception& e) {
      std::cerr << "baton " << command << ": cannot change '" << cl.schedule << "' on the "
                << config->backend.type << " backend: " << scrub_secrets(config->backend, e.what())
                << "\n";
      return exit_failure;
    }
  }
  const auto& [owner, before, after] = result;
  if (owner.empty())
    std::cerr << "baton " << command << ": warning: no node leads '" << cl.schedule
              << "' now; it applies when one does\n";
  std::ostream& out = std::cout;
  const std::string when = after.changed_at ? utc(*after.changed_at) : std::string("?");
  if (command == "pause") {
    out << "'" << cl.schedule << "' " << (before.paused ? "was already paused; now " : "")
        << "paused by " << after.changed_by << " at " << when
        << (after.reason.empty() ? "" : " (reason: " + after.reason + ")")
        << ": it keeps its leader but does not fire until `baton resume " << cl.schedule << "`\n";
  } else if (command == "resume") {
    out << "'" << cl.schedule << "' " << (before.paused ? "resumed" : "was not paused; resumed")
        << " by " << after.changed_by << " at " << when
        << ": it fires again (fires missed while paused follow its misfire policy)\n";
  } else {
    out << "'" << cl.schedule << "': manual run requested (request " << after.trigger_requests
        << ", by " << by << "); "
        << (owner.empty() ? "whoever leads it next runs it"
                          : "its leader " + owner.owner_id + " runs it at its next wake-up")
        << (after.paused ? " (note: the schedule is paused)" : "") << "\n";
  }
  return exit_ok;
}

// ---------------------------------------------------------------------------------------------
// drain

namespace {

// How often `drain` reads the node's record while it waits.
constexpr std::chrono::milliseconds drain_poll{500};

const balance_member* member_named(const std::vector<balance_member>& members,
                                   const std::string& id) {
  for (const auto& m : members)
    if (m.node_id == id) return &m;
  return nullptr;
}

// "web-1 (alive), web-2 (gone)", or "none".
std::string known_nodes(const std::vector<balance_member>& members) {
  std::string out;
  for (const auto& m : members)
    out += (out.empty() ? "" : ", ") + m.node_id + (m.alive ? " (alive)" : " (gone)");
  return out.empty() ? std::string("none") : out;
}

// The schedules of the config whose lease `contender` holds now (read from the backend); nullopt
// when they cannot be read.
std::optional<std::vector<const config::schedule_config*>> led_by(
    mutex_backend& backend, const config::daemon_config& config, const std::string& contender) {
  std::vector<const config::schedule_config*> led;
  if (contender.empty()) return std::nullopt;
  try {
    for (const auto& s : config.schedules)
      if (backend.read_owner(s.name).owner_id == contender) led.push_back(&s);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return led;
}

// True when some live member other than `node` has every tag `s` requires.
bool another_may_run(const std::vector<balance_member>& members, const std::string& node,
                     const config::schedule_config& s) {
  return std::any_of(members.begin(), members.end(), [&](const balance_member& m) {
    return m.node_id != node && m.alive && !m.drain && has_tags(m.tags, s.required_tags);
  });
}

std::string schedules_text(std::uint64_t n) {
  return std::to_string(n) + (n == 1 ? " schedule" : " schedules");
}

}  // namespace

int drain(const command_line& cl) {
  auto config = load_or_report(cl);
  if (!config) return exit_usage;
  const std::string node = !cl.node.empty() ? cl.node : config->balance.node_id;
  if (node.empty()) {
    std::cerr << "baton drain: which node? pass --node ID, or set /node/id in " << config->source
              << " (`baton status` lists the nodes)\n";
    return exit_usage;
  }
  configure_logging(cl.log_level.value_or("warn"), cl.log_format.value_or(config->log_format));
  runtime rt;
  int failed = exit_ok;
  // Writable: the request is written into the node's membership record.
  auto backend = make_configured_backend(*config, rt, failed, [](const std::string& why) {
    std::cerr << "baton drain: " << why << "\n";
  });
  if (!backend) return failed;
  const std::string where = "the " + config->backend.type + " backend";
  const auto timeout = config->member_timeout_for(config->backend_defaults);
  auto failure = [&](const std::string& doing, const std::exception& e) {
    std::cerr << "baton drain: cannot " << doing << " on " << where << ": "
              << scrub_secrets(config->backend, e.what()) << "\n";
    return exit_failure;
  };
  auto unknown = [&](const std::vector<balance_member>& members) {
    std::cerr << "baton drain: no node '" << node << "' in the cluster's membership on " << where
              << " (known: " << known_nodes(members)
              << "); a node's id is its config's /node/id (`baton status` lists them)\n";
    return exit_failure;
  };

  std::vector<balance_member> members;
  balance_member written;
  {
    watchdog guard(backend_deadline, "drain", where);
    try {
      members = read_members(*backend, timeout);
    } catch (const store_missing&) {
      // No node has run on this store yet: the node is unknown.
    } catch (const std::exception& e) {
      return failure("read the nodes' membership records", e);
    }
    const balance_member* m = member_named(members, node);
    if (m == nullptr) return unknown(members);
    if (!m->balance && !cl.undo) {
      std::cerr << "baton drain: node '" << node
                << "' runs with balance off (\"balance\": false in its config): it contends first "
                   "come and cannot drain; turn balance on there, or stop it (its schedules move "
                   "when its leases end)\n";
      return exit_failure;
    }
    try {
      written = request_drain(*backend, node, !cl.undo);
    } catch (const std::invalid_argument&) {
      return unknown(members);
    } catch (const std::exception& e) {
      return failure(
          std::string(cl.undo ? "cancel the drain of '" : "request the drain of '") + node + "'",
          e);
    }
    if (!m->alive)
      std::cerr << "baton drain: warning: node '" << node << "' looks gone (its record is "
                << (m->written_at ? relative(*m->written_at, system_clock::now())
                                  : std::string("unreadable"))
                << "; member_timeout " << config::format_duration(timeout)
                << "): a process that starts under this id later starts undrained\n";
  }
  std::ostream& out = std::cout;
  if (cl.undo) {
    out << "node " << node << ": drain cancelled; it takes a fair share again at its next "
        << "heartbeat\n";
    return exit_ok;
  }
  out << "node " << node << ": drain requested; it hands its " << schedules_text(written.leads)
      << " to the other nodes, at most a few per second, starting at its next heartbeat\n";
  if (cl.no_wait) {
    out << "not waiting (--no-wait): `baton status` shows when it is drained\n";
    return exit_ok;
  }

  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + cl.timeout;
  std::optional<std::uint64_t> shown_leads;
  std::string last_error;
  balance_member last = written;
  while (true) {
    std::optional<balance_member> now;
    {
      watchdog guard(backend_deadline, "drain", where);
      try {
        members = read_members(*backend, timeout);
        if (const auto* m = member_named(members, node)) now = *m;
        last_error.clear();
      } catch (const std::exception& e) {
        // Keep trying until the timeout: the backend may be failing over.
        last_error = scrub_secrets(config->backend, e.what());
      }
    }
    if (now) {
      last = *now;
      if (now->drained) {
        out << "node " << node << " drained: leads " << now->leads << " schedules\n";
        return exit_ok;
      }
      if (now->leaving) {
        out << "node " << node << " stopped (left the cluster): it leads nothing\n";
        return exit_ok;
      }
      if (!now->drain) {
        std::cerr << "baton drain: the drain of node '" << node
                  << "' was cancelled (baton drain --undo, or SIGUSR2) before it finished; it "
                     "leads "
                  << schedules_text(now->leads) << "\n";
        return exit_failure;
      }
      if (shown_leads != now->leads) {
        if (shown_leads) out << "node " << node << ": leads " << now->leads << "\n";
        shown_leads = now->leads;
      }
    }
    if (clock::now() + drain_poll > deadline) break;
    std::this_thread::sleep_for(drain_poll);
  }
  std::optional<std::vector<const config::schedule_config*>> led;
  {
    watchdog guard(backend_deadline, "drain", where);
    led = led_by(*backend, *config, last.contender_id);
  }
  std::cerr << "baton drain: node " << node << " not drained after "
            << config::format_duration(cl.timeout) << ": it still leads "
            << schedules_text(led ? led->size() : last.leads);
  if (led && !led->empty()) {
    std::string list;
    std::string stuck;  // schedules only this node may run (their required tags)
    for (const auto* s : *led) {
      list += (list.empty() ? "" : ", ") + s->name;
      if (!another_may_run(members, node, *s))
        stuck += (stuck.empty() ? "" : ", ") + s->name + " (requires " +
                 tags_text(s->required_tags) + ")";
    }
    std::cerr << " (" << list << ")";
    if (!stuck.empty())
      std::cerr << "; no other live node has the tags of " << stuck
                << ", so a draining node keeps them: start a node with those tags, or stop this "
                   "one when they may pause";
  }
  std::cerr << "; the request stays: it goes on handing them over";
  if (!last.alive) std::cerr << " (but its record is not being refreshed: is it down?)";
  if (!last_error.empty()) std::cerr << "; last backend error: " << last_error;
  std::cerr << "\n";
  return exit_failure;
}

}  // namespace baton::daemon
