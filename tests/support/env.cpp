#include "support/env.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "baton/mutex/metrics.hpp"

namespace baton::test {

std::string require_env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0')
    throw std::runtime_error(std::string("environment variable ") + name +
                             " is not set: run the tests through scripts/test.sh, which starts "
                             "the servers");
  return value;
}

std::string unique_name(const std::string& hint) {
  static std::atomic<int> n{0};
  return hint + "-" + std::to_string(::getpid()) + "-" + std::to_string(++n);
}

std::string temp_dir(const std::string& hint) {
  static std::atomic<int> counter{0};
  const char* base = std::getenv("BATON_TEST_TMPDIR");
  std::filesystem::path dir = base ? base : std::filesystem::temp_directory_path().string();
  dir /= hint + "-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
  std::filesystem::create_directories(dir);
  return dir.string();
}

backend_config backend_config_for(const std::string& type) {
  backend_config config;
  config.type = type;
  if (type == "sqlite") {
    config.params["path"] = temp_dir("sqlite") + "/baton.db";
  } else if (type == "postgresql") {
    config.params["connection"] = require_env("BATON_TEST_POSTGRES");
  } else if (type == "mysql") {
    config.params["connection"] = require_env("BATON_TEST_MYSQL");
  } else if (type == "redis") {
    config.params["url"] = require_env("BATON_TEST_REDIS_URL");
  } else if (type == "zookeeper") {
    config.params["hosts"] = require_env("BATON_TEST_ZOOKEEPER");
    config.params["session_timeout"] = "2s";
  }
  return config;
}

std::uint64_t backend_failures(const std::string& type) {
  std::uint64_t n = 0;
  for (const auto& m : backend_metrics_snapshot())
    if (m.type == type)
      for (const auto& [kind, count] : m.errors) n += count;
  return n;
}

std::string program_path(const std::string& name) {
  return std::string(BATON_BINARY_DIR) + "/tests/baton_" + name;
}

bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return condition();
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  return true;
}

bool server_ctl(const std::string& action, const std::string& server) {
  std::string cmd =
      std::string(BATON_SOURCE_DIR) + "/scripts/server-ctl.sh " + action + " " + server;
  return std::system(cmd.c_str()) == 0;
}

namespace {
sockaddr_in loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  return addr;
}
}  // namespace

std::vector<int> connections_to_port(int port) {
  std::vector<int> fds;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    int fd = 0;
    try {
      fd = std::stoi(entry.path().filename().string());
    } catch (...) {
      continue;
    }
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) continue;
    if (addr.ss_family == AF_INET && ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port) == port)
      fds.push_back(fd);
  }
  return fds;
}

int unused_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = loopback(0);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool accepts_on_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const sockaddr_in addr = loopback(port);
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

std::vector<std::string> faketime_env() {
  const char* inherited = std::getenv("ASAN_OPTIONS");
  std::string asan = "ASAN_OPTIONS=";
  if (inherited != nullptr && *inherited != '\0') asan += std::string(inherited) + ":";
  asan += "verify_asan_link_order=0";
  return {std::string("LD_PRELOAD=") + faketime_library, asan};
}

}  // namespace baton::test
