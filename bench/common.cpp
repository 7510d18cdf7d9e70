#include "common.hpp"

#include <errno.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace baton::bench {
namespace {

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out + "\"";
}

std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

summary summarize(std::vector<double> v) {
  summary s;
  s.samples = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    // Nearest-rank percentile.
    auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
  };
  s.median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  s.p99 = at(0.99);
  s.min = v.front();
  s.max = v.back();
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return s;
}

void emit(const std::string& figure, const std::string& backend, const std::string& subject,
          const std::string& unit, const summary& s,
          const std::map<std::string, std::string>& extra) {
  std::ostringstream o;
  o << "{\"figure\":" << quote(figure) << ",\"backend\":" << quote(backend)
    << ",\"subject\":" << quote(subject) << ",\"unit\":" << quote(unit)
    << ",\"samples\":" << s.samples << ",\"median\":" << number(s.median)
    << ",\"p99\":" << number(s.p99) << ",\"min\":" << number(s.min) << ",\"max\":" << number(s.max)
    << ",\"mean\":" << number(s.mean);
  for (const auto& [k, v] : extra) o << "," << quote(k) << ":" << quote(v);
  o << "}\n";
  std::cout << o.str() << std::flush;
}

void emit_value(const std::string& figure, const std::string& backend, const std::string& subject,
                const std::string& unit, double value,
                const std::map<std::string, std::string>& extra) {
  summary s;
  s.samples = 1;
  s.median = s.p99 = s.min = s.max = s.mean = value;
  emit(figure, backend, subject, unit, s, extra);
}

std::vector<std::string> backends_to_run() {
  std::vector<std::string> all{"sqlite", "postgresql", "mysql", "redis", "zookeeper"};
  const char* only = std::getenv("BATON_BENCH_BACKENDS");
  if (!only || !*only) return all;
  std::vector<std::string> out;
  std::stringstream ss(only);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

int run_backends(const std::string& program, int quick_samples, int full_samples,
                 const std::function<void(const std::string&, int)>& run) {
  ::signal(SIGPIPE, SIG_IGN);
  const char* quick = std::getenv("BATON_BENCH_QUICK");
  const int samples = quick && std::string(quick) == "1" ? quick_samples : full_samples;
  int failures = 0;
  for (const auto& type : backends_to_run()) {
    try {
      run(type, samples);
    } catch (const std::exception& e) {
      std::cerr << program << ": " << type << ": FAILED: " << e.what() << "\n";
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}

process_usage usage_of(int pid) {
  process_usage u;
  const std::string base = "/proc/" + std::to_string(pid);
  std::ifstream status(base + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Threads:", 0) == 0) u.threads = std::stol(line.substr(8));
    if (line.rfind("VmRSS:", 0) == 0) u.rss_bytes = std::stol(line.substr(6)) * 1024;
  }
  std::ifstream stat(base + "/stat");
  std::string content((std::istreambuf_iterator<char>(stat)), {});
  auto close = content.rfind(')');
  if (close != std::string::npos) {
    std::istringstream rest(content.substr(close + 2));
    std::string field;
    long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14) utime = std::stoll(field);
      if (i == 15) stime = std::stoll(field);
    }
    u.cpu_seconds = static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return u;
}

process_usage self_usage() { return usage_of(static_cast<int>(getpid())); }

std::string expect_line(child_process& child, std::initializer_list<std::string_view> prefixes,
                        std::chrono::milliseconds timeout, const std::string& what) {
  if (auto line = child.wait_line(prefixes, timeout)) return *line;
  std::string last = child.lines().empty() ? "nothing" : "'" + child.lines().back() + "'";
  throw std::runtime_error("no " + what + " from contender " + child.describe() + " within " +
                           std::to_string(timeout.count()) + " ms (its last line: " + last + ")");
}

std::vector<std::string> contender_argv(const backend_config& config, const std::string& mutex,
                                        const std::vector<std::string>& flags) {
  std::vector<std::string> argv{bench_bin_dir() + "/baton_contender_child", "--type", config.type,
                                "--mutex", mutex};
  for (const auto& [key, value] : config.params) {
    argv.push_back("--param");
    argv.push_back(key + "=" + value);
  }
  argv.insert(argv.end(), flags.begin(), flags.end());
  return argv;
}

long long last_field(const std::string& line) {
  auto pos = line.find_last_of(' ');
  try {
    return std::stoll(pos == std::string::npos ? line : line.substr(pos + 1));
  } catch (const std::exception&) {
    throw std::runtime_error("malformed event line from a child: '" + line + "'");
  }
}

std::string field(const std::string& line, std::size_t index) {
  std::istringstream in(line);
  std::string f;
  for (std::size_t i = 0; i <= index; ++i)
    if (!(in >> f)) return {};
  return f;
}

void sleep_until_ns(long long ns) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

std::string bench_bin_dir() {
  if (const char* dir = std::getenv("BATON_BENCH_BIN"); dir && *dir) return dir;
  char path[4096];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw std::runtime_error("BATON_BENCH_BIN is not set and /proc/self/exe unreadable");
  std::string self(path, static_cast<std::size_t>(n));
  return self.substr(0, self.find_last_of('/'));
}

std::string fixed(double v, int digits) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(digits);
  o << v;
  return o.str();
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

double wait_owned(mutex_backend& backend, const std::string& prefix, long count,
                  const std::string& what, std::chrono::seconds limit) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = t0 + limit;
  for (long i = 0; i < count; ++i) {
    while (backend.read_owner(prefix + std::to_string(i)).owner_id.empty()) {
      if (std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error(what + ": " + prefix + std::to_string(i) + " had no owner after " +
                                 std::to_string(limit.count()) + " s");
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace baton::bench
