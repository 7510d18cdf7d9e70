// The documents `baton status`, `baton history` and the web console's /api/v1 share (one code
// path for `--json` and the API), and the control actions of `baton pause|resume|trigger` and
// POST /api/v1/schedules/NAME/ACTION.
#include "report.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include "baton/config/duration.hpp"
#include "baton/scheduler/balance.hpp"
#include "baton/scheduler/detail/schedule_plan.hpp"
#include "commands.hpp"
#include "output.hpp"

namespace baton::daemon {

using std::chrono::milliseconds;
using std::chrono::system_clock;

namespace {

nlohmann::json time_or_null(const std::optional<system_clock::time_point>& t) {
  return t ? nlohmann::json(utc(*t)) : nlohmann::json(nullptr);
}

// Outcomes that count as failures in a row (status "consecutive failures"); skipped fires and
// runs stopped because their leader lost the lease neither count nor end a streak.
bool is_failure(run_outcome o) {
  return o == run_outcome::failed || o == run_outcome::killed || o == run_outcome::timed_out;
}

// What status shows of one schedule's records.
struct records_view {
  std::optional<std::vector<std::string>> waiting;  // nullopt: not tracked by this backend
  std::string waiting_error;                        // set when reading them failed
  schedule_controls controls;
  std::optional<run_record> last_run;  // the newest record of a run that started
  std::optional<run_record> last_record;
  std::size_t consecutive_failures = 0;
  bool failures_capped = false;  // the whole history read is failures
  std::string error;             // set when the history or controls could not be read
};

// `limit`: the records the schedule keeps (its `history`): reading more finds nothing more, and
// status reads every schedule's.
records_view read_records(mutex_backend& backend, const std::string& name, std::size_t limit,
                          bool nothing_stored) {
  records_view v;
  if (nothing_stored) {
    v.waiting = std::vector<std::string>{};
    return v;
  }
  try {
    v.waiting = backend.read_waiters(name);
  } catch (const std::exception& e) {
    v.waiting_error = e.what();
  }
  try {
    v.controls = read_schedule_controls(backend, name);
    const auto history = read_run_history(backend, name, std::max<std::size_t>(limit, 1));
    if (!history.empty()) v.last_record = history.front();
    bool streak = true;
    for (const auto& r : history) {
      if (r.started && !v.last_run) v.last_run = r;
      if (!streak) continue;
      if (r.outcome == run_outcome::succeeded)
        streak = false;
      else if (is_failure(r.outcome))
        ++v.consecutive_failures;
    }
    v.failures_capped = streak && history.size() >= std::max<std::size_t>(limit, 1);
  } catch (const store_missing&) {
  } catch (const std::exception& e) {
    v.error = e.what();
  }
  return v;
}

// The next planned fire by the config's trigger and the recorded last fire, as a leader taking
// the schedule over now would plan it (nullopt: none, e.g. a cron expression that never fires).
std::optional<system_clock::time_point> next_fire(const config::schedule_config& s,
                                                  const std::optional<detail::recorded_fire>& r,
                                                  system_clock::time_point now) {
  detail::schedule_plan plan(s.when, s.misfire);
  const auto at = std::chrono::time_point_cast<milliseconds>(now);
  plan.start(r, at);
  return plan.next_fire();
}

std::string run_summary(const run_record& r, system_clock::time_point now) {
  std::string out(to_string(r.outcome));
  if (r.exit_status) out += " (exit status " + std::to_string(*r.exit_status) + ")";
  if (r.signal) out += " (" + signal_text(*r.signal) + ")";
  const auto at = r.ended ? *r.ended : r.started.value_or(r.planned);
  out += ", " + relative(at, now) + " (" + utc(at) + ")";
  out += ", " + std::string(to_string(r.trigger));
  if (r.attempt > 1) out += " attempt " + std::to_string(r.attempt);
  out += ", on " + r.node + " (fence " + std::to_string(r.fence) + ")";
  return out;
}

// The nodes' membership records (balance): a table in the text, a list in the JSON. With no
// registry yet (no node has run with this version, or the store is missing) the list is empty.
void show_nodes(std::ostream& out, nlohmann::json& doc, const config::daemon_config& config,
                mutex_backend& backend, std::vector<std::string>& warnings) {
  const auto timeout = config.member_timeout_for(config.backend_defaults);
  std::vector<balance_member> members;
  doc["nodes"] = nlohmann::json::array();
  try {
    members = read_members(backend, timeout);
  } catch (const store_missing&) {
  } catch (const std::exception& e) {
    const auto why = scrub_secrets(config.backend, e.what());
    out << "\nnodes: cannot read the membership records (" << why << ")\n";
    warnings.push_back("cannot read the nodes' membership records: " + why);
    doc["nodes"] = nullptr;
    doc["nodes_error"] = why;
    return;
  }
  const auto now = system_clock::now();
  const auto alive = static_cast<std::size_t>(
      std::count_if(members.begin(), members.end(), [](const auto& m) { return m.alive; }));
  out << "\nnodes: " << members.size() << " known, " << alive << " alive (a record younger than "
      << config::format_duration(timeout) << ", by this host's clock)\n";
  if (members.empty()) out << "  none yet (no node has written a membership record)\n";
  std::vector<std::vector<std::string>> rows{
      {"NODE", "ALIVE", "LEADS", "ASSIGNED", "STATE", "TAGS", "WRITTEN"}};
  std::set<std::string> digests;  // the schedule sets of the live balanced nodes
  for (const auto& m : members) {
    std::string state = m.leaving        ? "left"
                        : m.drained      ? "drained"
                        : m.drain        ? "draining"
                        : !m.balance     ? "first-come"
                        : m.view.empty() ? "starting"
                                         : "active";
    if (m.alive && m.balance && !m.schedules.empty()) digests.insert(m.schedules);
    const std::string written = m.written_at ? relative(*m.written_at, now) : "unreadable";
    rows.push_back({m.node_id, m.alive ? "yes" : "no", std::to_string(m.leads),
                    m.balance ? std::to_string(m.assigned) : "-", state,
                    m.tags.empty() ? "-" : join(m.tags, ","), written});
    doc["nodes"].push_back(
        {{"id", m.node_id},
         {"contender_id", m.contender_id},
         {"alive", m.alive},
         {"state", state},
         {"tags", m.tags},
         {"balance", m.balance},
         {"leads", m.leads},
         {"assigned", m.assigned},
         {"schedule_count", m.schedule_count},
         {"drain", m.drain},
         {"drained", m.drained},
         {"leaving", m.leaving},
         {"view", m.view},
         {"schedules_digest", m.schedules},
         {"written_at", time_or_null(m.written_at)},
         {"written_age_ms",
          m.written_at ? nlohmann::json(
                             std::chrono::duration_cast<milliseconds>(now - *m.written_at).count())
                       : nlohmann::json(nullptr)}});
  }
  if (!members.empty()) {
    std::vector<std::size_t> width(rows.front().size(), 0);
    for (const auto& r : rows)
      for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
    for (const auto& r : rows) {
      std::string line = " ";
      for (std::size_t i = 0; i < r.size(); ++i) {
        line += " " + r[i];
        if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 1, ' ');
      }
      out << line << "\n";
    }
  }
  doc["mixed_configs"] = digests.size() > 1;
  if (digests.size() > 1)
    out << "  warning: the live nodes run different schedule sets: every node contends first "
           "come until their configs agree\n";
}

}  // namespace

status_report build_status(const config::daemon_config& config, mutex_backend& backend) {
  status_report report;
  std::ostringstream text;
  std::ostream& out = text;
  nlohmann::json& doc = report.doc;
  doc = {{"schema", 1},
         {"config", config.source},
         {"backend", backend_json(config.backend)},
         {"store_missing", nullptr},
         {"schedules", nlohmann::json::array()}};
  out << "backend: " << describe_backend(config.backend)
      << " (lease times are the backend's clock; runs, the nodes' wall clocks)\n";
  {
    show_nodes(out, doc, config, backend, report.warnings);
    bool nothing_stored = false;
    for (const auto& s : config.schedules) {
      mutex_owner owner;
      std::string state;
      try {
        if (!nothing_stored) {
          owner = backend.read_owner(s.name);
          state = backend.read_state(s.name);
        }
      } catch (const store_missing& e) {
        // Not an error: no node has run on this store yet, and looking did not create it.
        out << e.what() << "; every schedule is unowned\n";
        doc["store_missing"] = e.what();
        nothing_stored = true;
      } catch (const std::exception& e) {
        report.error = "cannot read schedule '" + s.name + "' from the " + config.backend.type +
                       " backend: " + scrub_secrets(config.backend, e.what());
        return report;
      }
      const auto records =
          read_records(backend, s.name, s.history.value_or(config.history), nothing_stored);
      const auto now = system_clock::now();
      nlohmann::json js{{"name", s.name}, {"trigger", config::describe(s.when)}};

      out << "\n" << s.name << ": " << config::describe(s.when) << "\n";
      if (!owner.empty()) {
        out << "  owner:      " << owner.owner_id << " (fence " << owner.fence << ")\n";
        out << "  acquired:   " << utc(owner.acquired_at) << "\n";
        out << "  ttl_at:     " << utc(owner.ttl_at) << "  (the owner renews from here)\n";
        out << "  transition: " << utc(owner.transition_at)
            << "  (others may take over after this)\n";
        js["owner"] = {{"id", owner.owner_id},
                       {"fence", owner.fence},
                       {"acquired_at", utc(owner.acquired_at)},
                       {"ttl_at", utc(owner.ttl_at)},
                       {"transition_at", utc(owner.transition_at)}};
      } else if (owner.fence > 0) {
        out << "  owner:      none (last fence " << owner.fence << ")\n";
        js["owner"] = nullptr;
      } else {
        out << "  owner:      none (never held)\n";
        js["owner"] = nullptr;
      }
      js["fence"] = owner.fence;

      if (!records.waiting_error.empty()) {
        out << "  waiting:    cannot read (" << scrub_secrets(config.backend, records.waiting_error)
            << ")\n";
        js["waiting"] = nullptr;
        js["waiting_tracked"] = false;
      } else if (!records.waiting) {
        out << "  waiting:    not tracked by this backend\n";
        js["waiting"] = nullptr;
        js["waiting_tracked"] = false;
      } else {
        out << "  waiting:    "
            << (records.waiting->empty() ? std::string("none") : join(*records.waiting, ", "))
            << "\n";
        js["waiting"] = *records.waiting;
        js["waiting_tracked"] = true;
      }

      const auto& c = records.controls;
      if (c.paused) {
        out << "  paused:     yes, since " << (c.changed_at ? utc(*c.changed_at) : "?") << " by "
            << c.changed_by << (c.reason.empty() ? "" : ": " + c.reason) << "\n";
      } else {
        out << "  paused:     no\n";
      }
      js["paused"] = c.paused;
      js["controls"] = nlohmann::json::parse(to_json(c));
      js["controls"]["version"] = c.version;

      // v1 (last fire) or v2 (also the manual runs taken).
      const auto parsed = baton::detail::parse_state(state);
      const auto recorded = parsed ? parsed->fire : std::nullopt;
      js["manual_runs_taken"] = parsed ? nlohmann::json(parsed->manual_runs) : nullptr;
      if (recorded) {
        out << "  last fire:  " << utc(recorded->last_fire) << " (fence " << recorded->fence << ")";
        if (recorded->last_end) out << ", run ended " << utc(*recorded->last_end);
        out << "\n";
        js["last_fire"] = {{"planned", utc(recorded->last_fire)},
                           {"fence", recorded->fence},
                           {"ended", time_or_null(recorded->last_end)}};
      } else if (parsed) {
        out << "  last fire:  none recorded\n";
        js["last_fire"] = nullptr;
      } else {
        out << "  state:      " << state << " (unrecognized)\n";
        js["last_fire"] = nullptr;
      }

      const auto next = next_fire(s, recorded, now);
      out << "  next fire:  ";
      if (!next)
        out << "none";
      else if (*next <= now)
        out << "due now (" << utc(*next) << ")";
      else
        out << utc(*next) << " (" << relative(*next, now) << ")";
      if (c.paused) out << ", skipped while paused";
      if (owner.empty()) out << ", when a node leads it";
      out << "\n";
      js["next_fire"] = time_or_null(next);

      if (!records.error.empty()) {
        const auto why = scrub_secrets(config.backend, records.error);
        out << "  last run:   unknown (history not readable: " << why << ")\n";
        report.warnings.push_back("cannot read the history or controls of '" + s.name +
                                  "': " + why);
        js["records_error"] = why;
      } else if (records.last_run) {
        out << "  last run:   " << run_summary(*records.last_run, now) << "\n";
        if (records.last_record && records.last_record->seq != records.last_run->seq)
          out << "  newest:     " << to_string(records.last_record->outcome) << " (planned "
              << utc(records.last_record->planned) << ")\n";
      } else {
        out << "  last run:   none recorded\n";
      }
      js["last_run"] = records.last_run ? nlohmann::json::parse(to_json(*records.last_run))
                                        : nlohmann::json(nullptr);
      js["last_record"] = records.last_record ? nlohmann::json::parse(to_json(*records.last_record))
                                              : nlohmann::json(nullptr);
      out << "  failures:   " << records.consecutive_failures
          << (records.failures_capped ? "+" : "") << " in a row\n";
      js["consecutive_failures"] = records.consecutive_failures;
      doc["schedules"].push_back(std::move(js));
    }
  }
  report.text = text.str();
  return report;
}

nlohmann::json history_document(const std::string& schedule, std::size_t limit,
                                const std::vector<run_record>& records) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : records) list.push_back(nlohmann::json::parse(to_json(r)));
  return {{"schema", 1}, {"schedule", schedule}, {"limit", limit}, {"records", std::move(list)}};
}

bool is_control_action(const std::string& action) {
  return action == "pause" || action == "resume" || action == "trigger";
}

control_result apply_control(mutex_backend& backend, const std::string& schedule,
                             const std::string& action, const std::string& reason,
                             const std::string& by) {
  control_result r;
  r.owner = backend.read_owner(schedule);
  r.before = read_schedule_controls(backend, schedule);
  if (action == "pause")
    r.after = pause_schedule(backend, schedule, reason, by);
  else if (action == "resume")
    r.after = resume_schedule(backend, schedule, by);
  else
    r.after = trigger_schedule(backend, schedule, by);
  return r;
}

}  // namespace baton::daemon
