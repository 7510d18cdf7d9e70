// baton_contender: a separate process contending for one mutex, for multi-process tests.
//   baton_contender cs   --type T [--param k=v]... --mutex M --log FILE --duration-ms N
//                        [--hold-ms H] [--ttl-ms] [--transition-ms] [--poll-ms]
//     Repeats lock -> critical section -> unlock for N ms; after each section appends one line
//     "pid fence start_ns end_ns" (CLOCK_MONOTONIC) to FILE with a single O_APPEND write.
//   baton_contender hold --type T [--param k=v]... --mutex M [...]
//     Contends and holds; prints "ACQUIRED fence ns" and "LOST ns" as they happen; on SIGTERM
//     prints "RELEASING ns", releases, prints "RELEASED ns" and exits 0.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <thread>

#include "baton/backends/factory.hpp"
#include "baton/mutex/locker.hpp"
#include "support/process.hpp"

using namespace std::chrono_literals;

namespace {

struct arguments {
  std::string mode;
  baton::backend_config backend;
  std::string mutex = "conformance";
  std::string log;
  long long duration_ms = 5000;
  long long hold_ms = 10;
  baton::contend_options options;
};

arguments parse(int argc, char** argv) {
  arguments a;
  if (argc < 2) throw std::invalid_argument("usage: baton_contender cs|hold --type T ...");
  a.mode = argv[1];
  a.options.ttl = 1000ms;
  a.options.transition = 1000ms;
  a.options.retry_period = 100ms;
  a.options.poll_interval = 100ms;
  for (int i = 2; i < argc; ++i) {
    std::string key = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument("missing value for " + key);
    std::string value = argv[++i];
    if (key == "--type")
      a.backend.type = value;
    else if (key == "--param") {
      auto eq = value.find('=');
      if (eq == std::string::npos) throw std::invalid_argument("--param needs key=value");
      a.backend.params[value.substr(0, eq)] = value.substr(eq + 1);
    } else if (key == "--mutex")
      a.mutex = value;
    else if (key == "--log")
      a.log = value;
    else if (key == "--duration-ms")
      a.duration_ms = std::stoll(value);
    else if (key == "--hold-ms")
      a.hold_ms = std::stoll(value);
    else if (key == "--ttl-ms")
      a.options.ttl = std::chrono::milliseconds{std::stoll(value)};
    else if (key == "--transition-ms")
      a.options.transition = std::chrono::milliseconds{std::stoll(value)};
    else if (key == "--poll-ms")
      a.options.poll_interval = std::chrono::milliseconds{std::stoll(value)};
    else
      throw std::invalid_argument("unknown argument " + key);
  }
  return a;
}

void say(const std::string& line) {
  std::string out = line + "\n";
  (void)!::write(STDOUT_FILENO, out.data(), out.size());
}

int critical_sections(const arguments& a, baton::mutex_backend& backend) {
  int fd = ::open(a.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot open " + a.log);
  baton::locker lock(backend, a.mutex, a.options);
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds{a.duration_ms};
  const auto hold = std::chrono::milliseconds{a.hold_ms};
  int sections = 0;
  while (std::chrono::steady_clock::now() < end) {
    if (!lock.try_lock_until(end)) break;
    // Enter only with enough lease left to finish the section well before it runs out.
    if (lock.owns_lease() &&
        std::chrono::steady_clock::now() + hold + 100ms < lock.lease_deadline()) {
      long long start = baton::test::mono_ns();
      auto fence = lock.fence();
      std::this_thread::sleep_for(hold);
      long long stop = baton::test::mono_ns();
      std::string line = std::to_string(::getpid()) + " " + std::to_string(fence) + " " +
                         std::to_string(start) + " " + std::to_string(stop) + "\n";
      (void)!::write(fd, line.data(), line.size());
      ++sections;
    }
    lock.unlock();
    // Leave the mutex free for half a poll interval (plus a per-process few ms): SQL waiters
    // only poll, and a releaser that re-locked at once could keep them out for the whole run.
    std::this_thread::sleep_for(a.options.poll_interval / 2 +
                                std::chrono::milliseconds{::getpid() % 7});
  }
  ::close(fd);
  say("DONE " + std::to_string(sections));
  return 0;
}

struct holder final : baton::mutex_contender {
  void on_acquired(const baton::mutex_state& s) override {
    say("ACQUIRED " + std::to_string(s.after.fence) + " " + std::to_string(baton::test::mono_ns()));
  }
  void on_released(const baton::mutex_state&) override {
    say("LOST " + std::to_string(baton::test::mono_ns()));
  }
};

int hold(const arguments& a, baton::mutex_backend& backend) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  auto who = std::make_shared<holder>();
  auto service = backend.make_contend_service(a.mutex, who, a.options);
  service->start();
  say("STARTED " + std::to_string(baton::test::mono_ns()));
  int sig = 0;
  sigwait(&set, &sig);
  say("RELEASING " + std::to_string(baton::test::mono_ns()));
  bool done = service->stop_and_wait(10s);
  say(std::string(done ? "RELEASED " : "RELEASE-TIMEOUT ") +
      std::to_string(baton::test::mono_ns()));
  return done ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Block the stop signals in every thread; hold() waits for them with sigwait.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  try {
    auto a = parse(argc, argv);
    baton::runtime rt;
    auto backend = baton::make_backend(a.backend, rt);
    if (a.mode == "cs") return critical_sections(a, *backend);
    if (a.mode == "hold") return hold(a, *backend);
    throw std::invalid_argument("unknown mode " + a.mode);
  } catch (const std::exception& e) {
    std::cerr << "baton_contender: " << e.what() << "\n";
    return 2;
  }
}
