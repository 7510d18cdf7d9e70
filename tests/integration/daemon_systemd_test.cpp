// `baton run` under a service manager, without systemd: a fake NOTIFY_SOCKET (an AF_UNIX
// datagram socket in a temp dir) receives what sd_notify sends: READY=1 with MAINPID once the
// schedules contend, WATCHDOG=1 again and again while WATCHDOG_USEC is set, RELOADING=1 (with
// MONOTONIC_USEC) then READY=1 on SIGHUP, STOPPING=1 on SIGTERM.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "support/daemon.hpp"
#include "support/env.hpp"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using baton::test::daemon_path;
using baton::test::process;
using baton::test::read_file;
using baton::test::write_file;
using ::testing::HasSubstr;
using steady = std::chrono::steady_clock;

/// A bound AF_UNIX datagram socket: the service manager's end of NOTIFY_SOCKET.
class notify_socket {
 public:
  explicit notify_socket(fs::path path) : path_(std::move(path)) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string p = path_.string();
    if (p.size() >= sizeof addr.sun_path) throw std::runtime_error("socket path too long: " + p);
    std::memcpy(addr.sun_path, p.c_str(), p.size() + 1);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error("bind " + p + ": " + std::strerror(errno));
  }
  ~notify_socket() {
    ::close(fd_);
    fs::remove(path_);
  }
  const fs::path& path() const { return path_; }

  /// The next message, or "" when none came within `timeout`.
  std::string receive(std::chrono::milliseconds timeout) {
    timeval tv{static_cast<time_t>(timeout.count() / 1000),
               static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return "";
    return std::string(buf, static_cast<std::size_t>(n));
  }

  /// Receives until a message contains `needle` (kept in `seen`), at most `timeout` in all.
  /// Returns that message, or "" at the deadline.
  std::string wait_for(const std::string& needle, std::chrono::milliseconds timeout,
                       std::vector<std::string>& seen) {
    const auto deadline = steady::now() + timeout;
    while (steady::now() < deadline) {  // each receive waits at most until the deadline
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - steady::now());
      std::string m = receive(std::max(left, 1ms));
      if (m.empty()) continue;
      seen.push_back(m);
      if (m.find(needle) != std::string::npos) return m;
    }
    return "";
  }

 private:
  fs::path path_;
  int fd_ = -1;
};

std::string dump(const std::vector<std::string>& seen) {
  std::string out;
  for (const auto& m : seen) out += "  <" + m + ">\n";
  return out;
}

TEST(daemon_systemd, notify_socket_gets_ready_watchdog_reloading_and_stopping) {
  const fs::path dir = baton::test::temp_dir("systemd-notify");
  notify_socket sock(dir / "notify");
  const std::string name = baton::test::unique_name("sd");
  write_file(dir / "baton.json",
             "{\"backend\": {\"type\": \"sqlite\", \"path\": \"" + (dir / "baton.db").string() +
                 "\"},\n \"lease\": {\"ttl\": \"2s\", \"transition\": \"2s\"},\n"
                 " \"schedules\": [{\"name\": \"" +
                 name + "\", \"every\": \"1h\", \"command\": [\"/bin/true\"]}]}\n");
  // env(1) execs baton in place: the daemon's pid is the process's.
  process daemon({"/usr/bin/env", "NOTIFY_SOCKET=" + sock.path().string(), "WATCHDOG_USEC=400000",
                  daemon_path(), "run", "--config", (dir / "baton.json").string()},
                 dir / "out", dir / "err");
  std::vector<std::string> seen;
  auto log = [&] { return read_file(dir / "err") + "notify messages:\n" + dump(seen); };

  const std::string ready = sock.wait_for("READY=1", 20s, seen);
  ASSERT_FALSE(ready.empty()) << log();
  EXPECT_THAT(ready, HasSubstr("MAINPID=" + std::to_string(daemon.pid()))) << log();
  EXPECT_THAT(ready, HasSubstr("STATUS=1 schedule(s), contender ")) << log();

  // WatchdogSec=400ms: a ping every 200 ms; three within 2 s (generous for a loaded machine).
  for (int i = 0; i < 3; ++i)
    ASSERT_FALSE(sock.wait_for("WATCHDOG=1", 2s, seen).empty()) << "ping " << i << "\n" << log();

  daemon.signal(SIGHUP);
  const std::string reloading = sock.wait_for("RELOADING=1", 10s, seen);
  ASSERT_FALSE(reloading.empty()) << log();
  EXPECT_THAT(reloading, HasSubstr("MONOTONIC_USEC=")) << log();
  ASSERT_FALSE(sock.wait_for("READY=1", 10s, seen).empty()) << "no READY=1 after the reload\n"
                                                            << log();
  EXPECT_TRUE(baton::test::wait_until(
      [&] { return read_file(dir / "err").find("reload of") != std::string::npos; }, 10s))
      << log();

  daemon.signal(SIGTERM);
  ASSERT_FALSE(sock.wait_for("STOPPING=1", 10s, seen).empty()) << log();
  EXPECT_EQ(daemon.wait_exit(20s), std::optional<int>(0)) << log();
}

TEST(daemon_systemd, without_notify_socket_run_starts_and_stops_without_notify_errors) {
  // The same daemon with WATCHDOG_USEC but no NOTIFY_SOCKET: a no-op (no thread, no error).
  const fs::path dir = baton::test::temp_dir("systemd-none");
  const std::string name = baton::test::unique_name("sd-none");
  write_file(dir / "baton.json", "{\"backend\": {\"type\": \"sqlite\", \"path\": \"" +
                                     (dir / "baton.db").string() +
                                     "\"},\n \"schedules\": [{\"name\": \"" + name +
                                     "\", \"every\": \"1h\", \"command\": [\"/bin/true\"]}]}\n");
  process daemon({"/usr/bin/env", "-u", "NOTIFY_SOCKET", "WATCHDOG_USEC=400000", daemon_path(),
                  "run", "--config", (dir / "baton.json").string()},
                 dir / "out", dir / "err");
  ASSERT_TRUE(baton::test::wait_until(
      [&] { return read_file(dir / "err").find("running as contender") != std::string::npos; },
      20s))
      << read_file(dir / "err");
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_exit(20s), std::optional<int>(0)) << read_file(dir / "err");
  EXPECT_EQ(read_file(dir / "err").find("sd_notify"), std::string::npos) << read_file(dir / "err");
  EXPECT_EQ(read_file(dir / "err").find("watchdog"), std::string::npos) << read_file(dir / "err");
}

}  // namespace
