#include "support/run_log.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <sstream>
#include <tuple>

#include "support/daemon.hpp"

namespace baton::test {

namespace fs = std::filesystem;

fs::path write_run_recorder(const fs::path& dir) {
  const auto path = dir / "record_run.sh";
  write_file(path,
             "#!/bin/sh\n"
             "# record_run.sh LOG NODE SECONDS: logs start, sleeps, logs end (also on SIGTERM)\n"
             "log=\"$1\"; node=\"$2\"\n"
             "start=$(date +%s%N)\n"
             "trap 'echo \"end $BATON_FENCING_TOKEN $start $(date +%s%N) $node\" >> \"$log\"; "
             "exit 143' TERM\n"
             "echo \"start $BATON_FENCING_TOKEN $start $node\" >> \"$log\"\n"
             "sleep \"$3\" & wait $!\n"
             "echo \"end $BATON_FENCING_TOKEN $start $(date +%s%N) $node\" >> \"$log\"\n",
             true);
  return path;
}

std::string run_recorder_command(const fs::path& recorder, const fs::path& log,
                                 const std::string& node, const std::string& seconds) {
  return "[\"/usr/bin/env\", \"-u\", \"LD_PRELOAD\", \"-u\", \"FAKETIME\", \"/bin/sh\", " +
         json_string(recorder.string()) + ", " + json_string(log.string()) + ", " +
         json_string(node) + ", " + json_string(seconds) + "]";
}

std::vector<job_run> read_runs(const fs::path& log) {
  std::map<std::tuple<std::uint64_t, long long, std::string>, job_run> runs;
  std::istringstream in(read_file(log));
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string kind, node;
    std::uint64_t fence = 0;
    long long start = 0, end = -1;
    words >> kind >> fence >> start;
    if (kind == "end") words >> end;
    words >> node;
    if (!words && !words.eof()) continue;  // a line cut short while being written
    if (node.empty()) continue;
    auto& r = runs[{fence, start, node}];
    r.fence = fence;
    r.start_ns = start;
    r.node = node;
    if (kind == "end") r.end_ns = end;
  }
  std::vector<job_run> out;
  for (auto& [key, r] : runs) out.push_back(r);
  std::sort(out.begin(), out.end(),
            [](const job_run& a, const job_run& b) { return a.start_ns < b.start_ns; });
  return out;
}

run_check check_runs(const std::vector<job_run>& runs, long long open_end_ns) {
  run_check out;
  auto end_of = [&](const job_run& r) { return r.end_ns < 0 ? open_end_ns : r.end_ns; };
  auto describe = [&](const job_run& r) {
    return r.node + " fence " + std::to_string(r.fence) + " [" + std::to_string(r.start_ns) + ", " +
           (r.end_ns < 0 ? std::string("?") : std::to_string(r.end_ns)) + "]";
  };
  for (std::size_t i = 0; i < runs.size(); ++i) {
    for (std::size_t j = i + 1; j < runs.size(); ++j) {
      const auto& a = runs[i];
      const auto& b = runs[j];
      if (b.start_ns >= end_of(a)) break;  // sorted by start: no later run overlaps a either
      ++out.overlaps;
      out.details += "overlap: " + describe(a) + " and " + describe(b) + "\n";
    }
    if (i > 0) {
      const auto& a = runs[i - 1];
      const auto& b = runs[i];
      if (b.fence < a.fence || (a.node != b.node && b.fence == a.fence)) {
        ++out.fence_regressions;
        out.details += "fence: " + describe(a) + " then " + describe(b) + "\n";
      }
    }
  }
  return out;
}

std::string backend_json(const backend_config& config) {
  std::string out = "{\"type\": " + json_string(config.type);
  for (const auto& [k, v] : config.params) out += ", " + json_string(k) + ": " + json_string(v);
  return out + "}";
}

long long wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace baton::test
