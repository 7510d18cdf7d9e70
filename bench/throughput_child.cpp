// baton_throughput_child: one of the processes of the contended throughput figure.
//
//   baton_throughput_child --type T [--param k=v]... --mutex M --out FILE
//
// Connects (backend default_options()), prints "READY", then waits (at most 60 s) for one line
// "GO <end_ns>" on stdin. Until CLOCK_MONOTONIC reaches end_ns it loops lock -> tiny critical
// section -> unlock with no pause, and at the end writes one line per critical section to FILE:
// "<fence> <locked_ns> <unlocking_ns>" (locked_ns: lock returned; unlocking_ns: just before
// unlock()). Prints "DONE <sections>" and exits 0; any failure: a message on stderr, exit 2.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "baton/backends/factory.hpp"
#include "baton/mutex/locker.hpp"
#include "common.hpp"

namespace {

struct arguments {
  baton::backend_config backend;
  std::string mutex;
  std::string out;
};

arguments parse(int argc, char** argv) {
  arguments a;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument("missing value for " + key);
    const std::string value = argv[++i];
    if (key == "--type") {
      a.backend.type = value;
    } else if (key == "--param") {
      const auto eq = value.find('=');
      if (eq == std::string::npos) throw std::invalid_argument("--param needs key=value");
      a.backend.params[value.substr(0, eq)] = value.substr(eq + 1);
    } else if (key == "--mutex") {
      a.mutex = value;
    } else if (key == "--out") {
      a.out = value;
    } else {
      throw std::invalid_argument("unknown argument " + key);
    }
  }
  if (a.backend.type.empty() || a.mutex.empty() || a.out.empty())
    throw std::invalid_argument(
        "usage: baton_throughput_child --type T [--param k=v]... --mutex M --out FILE");
  return a;
}

void say(const std::string& line) {
  const std::string out = line + "\n";
  if (::write(STDOUT_FILENO, out.data(), out.size()) != static_cast<ssize_t>(out.size()))
    throw std::runtime_error("cannot write to stdout");
}

// Reads one line from stdin, waiting at most `timeout_ms`.
std::string read_line(int timeout_ms) {
  std::string line;
  const auto deadline = baton::bench::mono_ns() + std::int64_t{timeout_ms} * 1'000'000;
  for (;;) {
    const auto left_ms = (deadline - baton::bench::mono_ns()) / 1'000'000;
    if (left_ms <= 0) throw std::runtime_error("no GO from the parent within the deadline");
    pollfd p{STDIN_FILENO, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left_ms)) <= 0) continue;
    char c = 0;
    const auto n = ::read(STDIN_FILENO, &c, 1);
    if (n <= 0) throw std::runtime_error("the parent closed stdin before GO");
    if (c == '\n') return line;
    line += c;
  }
}

struct section {
  std::uint64_t fence;
  std::int64_t locked_ns;
  std::int64_t unlocking_ns;
};

int run(const arguments& a) {
  baton::runtime rt;
  auto backend = baton::make_backend(a.backend, rt);
  baton::locker lock(*backend, a.mutex, backend->default_options());
  // Connect before the start: a status query opens the backend's connection or session.
  (void)backend->read_owner(a.mutex);
  say("READY");

  const auto go = read_line(60'000);
  if (go.rfind("GO ", 0) != 0) throw std::runtime_error("expected 'GO <end_ns>', got '" + go + "'");
  const std::int64_t end_ns = std::stoll(go.substr(3));
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::nanoseconds{end_ns - baton::bench::mono_ns()};

  std::vector<section> sections;
  sections.reserve(1 << 16);
  while (baton::bench::mono_ns() < end_ns) {
    if (!lock.try_lock_until(end)) break;
    const auto locked = baton::bench::mono_ns();
    // The critical section: check the lease and read the fence, as a real one would.
    const auto fence = lock.owns_lease() ? lock.fence() : 0;
    const auto unlocking = baton::bench::mono_ns();
    lock.unlock();
    if (fence != 0) sections.push_back({fence, locked, unlocking});
  }

  std::ofstream out(a.out, std::ios::trunc);
  for (const auto& s : sections)
    out << s.fence << ' ' << s.locked_ns << ' ' << s.unlocking_ns << '\n';
  out.close();
  if (!out) throw std::runtime_error("cannot write " + a.out);
  say("DONE " + std::to_string(sections.size()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "baton_throughput_child[" << ::getpid() << "]: " << e.what() << "\n";
    return 2;
  }
}
