#pragma once
// The daemon's /metrics body: the Prometheus text exposition format 0.0.4, written from the
// library's snapshots (scheduler::status(), baton::backend_metrics_snapshot()) and /proc/self.
// A pure function of its input, so that the format is unit-tested without a server.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "baton/mutex/metrics.hpp"
#include "baton/scheduler/balance.hpp"
#include "baton/scheduler/scheduler.hpp"

namespace baton::daemon {

/// The Content-Type of metrics_text(): the Prometheus text format 0.0.4.
inline constexpr std::string_view metrics_content_type = "text/plain; version=0.0.4; charset=utf-8";

/// The standard process metrics (as the Prometheus client libraries name them), from /proc/self.
struct process_metrics {
  double cpu_seconds = 0;  ///< user + system CPU time
  double resident_memory_bytes = 0;
  double virtual_memory_bytes = 0;
  double start_time_seconds = 0;  ///< since the Unix epoch
  double open_fds = 0;
  double max_fds = 0;  ///< the soft RLIMIT_NOFILE
  double threads = 0;
};

/// Reads this process's metrics from /proc/self (stat, fd) and /proc/stat; nullopt when /proc
/// cannot be read (the family is then left out of /metrics).
std::optional<process_metrics> read_process_metrics();

/// Everything /metrics shows, read at one moment.
struct metrics_input {
  std::string version;                     ///< baton_build_info{version}
  std::vector<schedule_status> schedules;  ///< scheduler::status(); empty before it runs
  std::vector<backend_metrics> backends;   ///< baton::backend_metrics_snapshot()
  /// The configured backend type: shown (with zeros) even before it counted anything.
  std::string configured_backend;
  std::optional<process_metrics> process;  ///< read_process_metrics()
  std::uint64_t reloads_applied = 0;       ///< SIGHUP reloads applied
  std::uint64_t reloads_rejected = 0;      ///< SIGHUP reloads refused (bad config, backend)
  /// scheduler::balance(); unset before the scheduler runs (the baton_balance_* families are
  /// then left out).
  std::optional<balance_status> balance;
};

/// The exposition text: HELP and TYPE before every family, one sample per line, label values
/// escaped, histogram buckets cumulative with le="+Inf" equal to _count. Labels are schedule
/// names, backend types, outcomes, error kinds and the version only (bounded cardinality).
std::string metrics_text(const metrics_input& in);

/// A label value escaped for the text format: backslash, double quote and newline become
/// \\, \" and \n.
std::string escape_label_value(std::string_view value);

/// A sample value: "+Inf", "-Inf", "NaN", an integer without a fraction when the value is one
/// (below 2^53), else the shortest decimal that reads back as the same double.
std::string format_value(double value);

}  // namespace baton::daemon
