#include "metrics_text.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "baton/scheduler/records.hpp"

namespace baton::daemon {

namespace {

/// One label: name and (unescaped) value.
struct label {
  std::string_view name;
  std::string_view value;
};

/// Writes families: HELP and TYPE once, then samples.
class writer {
 public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    for (char c : help) {
      if (c == '\\')
        out_ += "\\\\";
      else if (c == '\n')
        out_ += "\\n";
      else
        out_ += c;
    }
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }

  void sample(std::string_view name, std::initializer_list<label> labels, std::string_view value) {
    out_ += name;
    if (labels.size() != 0) {
      out_ += '{';
      bool first = true;
      for (const auto& l : labels) {
        if (!first) out_ += ',';
        first = false;
        out_ += l.name;
        out_ += "=\"";
        out_ += escape_label_value(l.value);
        out_ += '"';
      }
      out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }
  void sample(std::string_view name, std::initializer_list<label> labels, double value) {
    sample(name, labels, format_value(value));
  }
  void sample(std::string_view name, std::initializer_list<label> labels, std::uint64_t value) {
    sample(name, labels, std::to_string(value));
  }

  /// The _bucket, _sum and _count samples of histogram `name` for one label (`key`=`value`):
  /// buckets cumulative, le="+Inf" equal to _count. A snapshot without bounds gets `fallback`
  /// bounds with zero counts (the same buckets on every scrape).
  void histogram(std::string_view name, label l, const histogram_snapshot& h,
                 const std::vector<double>& fallback) {
    const std::vector<double>& bounds = h.bounds.empty() ? fallback : h.bounds;
    const std::string bucket = std::string(name) + "_bucket";
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < bounds.size(); ++i) {
      if (!h.bounds.empty() && i < h.counts.size()) cumulative += h.counts[i];
      sample(bucket, {l, {"le", format_value(bounds[i])}}, cumulative);
    }
    // The +Inf bucket holds every observation; the counters are read one by one (relaxed), so
    // the total may lag the buckets: take the larger so that +Inf == _count >= every bucket.
    for (std::size_t i = bounds.size(); !h.bounds.empty() && i < h.counts.size(); ++i)
      cumulative += h.counts[i];
    const std::uint64_t total = std::max(cumulative, h.count);
    sample(bucket, {l, {"le", "+Inf"}}, total);
    sample(std::string(name) + "_sum", {l}, h.sum);
    sample(std::string(name) + "_count", {l}, total);
  }

  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

double seconds_since_epoch(std::chrono::system_clock::time_point t) {
  return static_cast<double>(
             std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count()) /
         1000.0;
}

// The configured backend's entry is shown even before it counted anything (zeros).
std::vector<backend_metrics> with_backend(std::vector<backend_metrics> backends,
                                          const std::string& type) {
  if (!type.empty() &&
      std::none_of(backends.begin(), backends.end(), [&](const auto& b) { return b.type == type; }))
    backends.emplace_back().type = type;
  return backends;
}

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0) {
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<long long>(value));
    return ec == std::errc{} ? std::string(buf, end) : std::string("NaN");
  }
  // Plain decimals where they are short (0.0005, 2.5), exponents for the very small or large;
  // either way the shortest text that reads back as the same double.
  const double magnitude = std::fabs(value);
  const auto format = magnitude >= 1e-4 && magnitude < 1e15 ? std::chars_format::fixed
                                                            : std::chars_format::scientific;
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value, format);
  return ec == std::errc{} ? std::string(buf, end) : std::string("NaN");
}

std::optional<process_metrics> read_process_metrics() {
  std::ifstream stat_file("/proc/self/stat");
  std::string stat;
  if (!std::getline(stat_file, stat)) return std::nullopt;
  // Fields after the command name, which is in parentheses and may hold blanks: field 3 (state)
  // is the first after the last ')'.
  const auto paren = stat.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(paren + 1));
  std::vector<std::string> f;  // f[0] is field 3
  for (std::string word; fields >> word && f.size() < 22;) f.push_back(std::move(word));
  if (f.size() < 22) return std::nullopt;
  auto field = [&](int n) {
    return std::strtod(f[static_cast<std::size_t>(n - 3)].c_str(), nullptr);
  };
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  if (ticks <= 0 || page <= 0) return std::nullopt;
  process_metrics p;
  p.cpu_seconds = (field(14) + field(15)) / ticks;  // utime + stime
  p.threads = field(20);
  p.virtual_memory_bytes = field(23);
  p.resident_memory_bytes = field(24) * page;
  // starttime (field 22) counts clock ticks since boot; /proc/stat's btime is the boot time.
  std::ifstream proc_stat("/proc/stat");
  for (std::string line; std::getline(proc_stat, line);) {
    if (line.rfind("btime ", 0) == 0) {
      p.start_time_seconds = std::strtod(line.c_str() + 6, nullptr) + field(22) / ticks;
      break;
    }
  }
  std::error_code ec;
  std::size_t fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec))
    ++fds;
  p.open_fds = static_cast<double>(fds);
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0)
    p.max_fds = limit.rlim_cur == RLIM_INFINITY ? INFINITY : static_cast<double>(limit.rlim_cur);
  return p;
}

std::string metrics_text(const metrics_input& in) {
  writer w;
  const auto& schedules = in.schedules;

  // ------------------------------------------------------------------------------- schedules
  w.family("baton_schedules", "gauge", "Schedules this node runs (contends for).");
  w.sample("baton_schedules", {}, static_cast<std::uint64_t>(schedules.size()));

  auto gauge = [&](std::string_view name, std::string_view help, auto value_of) {
    w.family(name, "gauge", help);
    for (const auto& s : schedules) w.sample(name, {{"schedule", s.name}}, value_of(s));
  };
  gauge("baton_schedule_leader", "1 while this node holds the schedule's lease, else 0.",
        [](const schedule_status& s) { return std::uint64_t{s.leader ? 1u : 0u}; });
  gauge("baton_schedule_fence",
        "The fencing token of this node's leadership of the schedule; 0 when not leader.",
        [](const schedule_status& s) { return s.fence; });
  gauge("baton_schedule_paused", "1 while the schedule is paused cluster-wide (as last read).",
        [](const schedule_status& s) { return std::uint64_t{s.paused ? 1u : 0u}; });
  gauge("baton_schedule_running", "1 while a run of the schedule is in progress on this node.",
        [](const schedule_status& s) { return std::uint64_t{s.running ? 1u : 0u}; });
  gauge("baton_schedule_clock_refused",
        "1 while this node refuses to lead the schedule: its clock is further from the "
        "backend's than max_clock_offset.",
        [](const schedule_status& s) { return std::uint64_t{s.clock_refused ? 1u : 0u}; });
  gauge("baton_schedule_consecutive_failures",
        "Attempts in a row that ended failed, killed or timed_out on this node (0 after a "
        "success).",
        [](const schedule_status& s) { return s.consecutive_failures; });

  w.family("baton_schedule_runs_total", "counter",
           "Attempts and not-run fires of the schedule on this node, by outcome.");
  for (const auto& s : schedules)
    for (std::size_t o = 0; o < run_outcome_count; ++o)
      w.sample("baton_schedule_runs_total",
               {{"schedule", s.name}, {"outcome", to_string(static_cast<run_outcome>(o))}},
               s.outcomes[o]);

  w.family("baton_schedule_run_duration_seconds", "histogram",
           "How long the attempts of the schedule that this node finished took.");
  for (const auto& s : schedules)
    w.histogram("baton_schedule_run_duration_seconds", {"schedule", s.name}, s.run_duration,
                histogram::run_bounds());

  w.family("baton_schedule_last_success_timestamp_seconds", "gauge",
           "When the last successful attempt of the schedule on this node ended (Unix time); "
           "absent until one succeeded.");
  for (const auto& s : schedules)
    if (s.last_success)
      w.sample("baton_schedule_last_success_timestamp_seconds", {{"schedule", s.name}},
               seconds_since_epoch(*s.last_success));

  // --------------------------------------------------------------------------------- balance
  if (in.balance) {
    const auto& b = *in.balance;
    auto flag = [](bool on) { return std::uint64_t{on ? 1u : 0u}; };
    auto one = [&](std::string_view name, std::string_view type, std::string_view help,
                   std::uint64_t value) {
      w.family(name, type, help);
      w.sample(name, {}, value);
    };
    one("baton_balance_enabled", "gauge",
        "1 when this node spreads schedules over the cluster (fair share), 0 for first come.",
        flag(b.enabled));
    one("baton_balance_members_alive", "gauge",
        "Live nodes in this node's view of the cluster (itself included).", b.alive);
    one("baton_balance_assigned_schedules", "gauge",
        "Schedules the current view assigns to this node (its share).", b.assigned);
    one("baton_balance_leading_schedules", "gauge", "Schedules this node leads.", b.leads);
    one("baton_balance_handoffs_total", "counter",
        "Schedules this node handed off to another node (released at a quiet moment).", b.handoffs);
    one("baton_balance_view_changes_total", "counter",
        "Times this node's view of the cluster (live nodes, tags, drains) changed.",
        b.view_changes);
    one("baton_balance_draining", "gauge",
        "1 while this node drains (hands every schedule to the others).", flag(b.draining));
    one("baton_balance_drained", "gauge", "1 while this node drains and leads nothing.",
        flag(b.drained));
    one("baton_balance_mixed_configs", "gauge",
        "1 while the live nodes run different schedule sets (every node contends first come).",
        flag(b.mixed_configs));
    one("baton_balance_record_errors_total", "counter",
        "Failed reads or writes of membership records.", b.record_errors);
  }

  // -------------------------------------------------------------------------------- backends
  const auto backends = with_backend(in.backends, in.configured_backend);
  w.family("baton_backend_requests_total", "counter", "Requests sent to the backend.");
  for (const auto& b : backends)
    w.sample("baton_backend_requests_total", {{"backend", b.type}}, b.requests);
  w.family("baton_backend_request_duration_seconds", "histogram",
           "Backend requests from send to reply.");
  for (const auto& b : backends)
    w.histogram("baton_backend_request_duration_seconds", {"backend", b.type}, b.request_latency,
                histogram::request_bounds());
  w.family("baton_backend_errors_total", "counter",
           "Failed backend requests by kind (connection_lost, timeout, session_expired, ...); "
           "kinds appear once seen.");
  for (const auto& b : backends)
    for (const auto& [kind, count] : b.errors)
      w.sample("baton_backend_errors_total", {{"backend", b.type}, {"kind", kind}}, count);

  struct lease_family {
    lease_event event;
    std::string_view name;
    std::string_view help;
  };
  const lease_family lease_families[] = {
      {lease_event::acquired, "baton_lease_acquisitions_total",
       "Leases this node acquired (handovers to this node; the fence changed)."},
      {lease_event::renewed, "baton_lease_renewals_total", "Lease renewals that succeeded."},
      {lease_event::lost, "baton_lease_losses_total",
       "Leases the backend said this node no longer holds (taken, expired, session gone)."},
      {lease_event::step_down, "baton_lease_step_downs_total",
       "Local step-downs: the local lease deadline passed before a renewal succeeded."},
      {lease_event::released, "baton_lease_releases_total",
       "Leases given up on purpose (stop, schedule removed)."},
  };
  for (const auto& f : lease_families) {
    w.family(f.name, "counter", f.help);
    for (const auto& b : backends)
      w.sample(f.name, {{"backend", b.type}}, b.lease_events[static_cast<std::size_t>(f.event)]);
  }
  w.family("baton_clock_offset_seconds", "gauge",
           "The backend's clock minus this node's wall clock, as last measured (fire times "
           "follow the backend's clock); absent until measured.");
  for (const auto& b : backends)
    if (b.clock_offset)
      w.sample("baton_clock_offset_seconds", {{"backend", b.type}},
               static_cast<double>(b.clock_offset->count()) / 1000.0);

  // ---------------------------------------------------------------------------------- daemon
  w.family("baton_build_info", "gauge", "Always 1; the version of this baton as a label.");
  w.sample("baton_build_info", {{"version", in.version}}, std::uint64_t{1});
  w.family("baton_config_reloads_total", "counter",
           "Config reloads (SIGHUP), by result: applied, or rejected (the running config stays).");
  w.sample("baton_config_reloads_total", {{"result", "applied"}}, in.reloads_applied);
  w.sample("baton_config_reloads_total", {{"result", "rejected"}}, in.reloads_rejected);

  // --------------------------------------------------------------------------------- process
  if (in.process) {
    const auto& p = *in.process;
    auto one = [&](std::string_view name, std::string_view type, std::string_view help,
                   double value) {
      w.family(name, type, help);
      w.sample(name, {}, value);
    };
    one("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
        p.cpu_seconds);
    one("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
        p.resident_memory_bytes);
    one("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
        p.virtual_memory_bytes);
    one("process_start_time_seconds", "gauge",
        "Start time of the process since unix epoch in seconds.", p.start_time_seconds);
    one("process_open_fds", "gauge", "Number of open file descriptors.", p.open_fds);
    one("process_max_fds", "gauge", "Maximum number of open file descriptors.", p.max_fds);
    one("process_threads", "gauge", "Number of OS threads in the process.", p.threads);
  }
  return w.take();
}

}  // namespace baton::daemon
