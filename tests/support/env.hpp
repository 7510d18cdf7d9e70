#pragma once
// Test environment: the servers the test script started, temp dirs, helper program paths.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "baton/mutex/backend.hpp"

namespace baton::test {

/// The value of environment variable `name`; throws (the test fails, never skips) when unset.
std::string require_env(const char* name);

/// `hint`-PID-N with N counting up in this process: a mutex name no other test (or test process)
/// uses.
std::string unique_name(const std::string& hint);

/// A fresh directory for this test under BATON_TEST_TMPDIR (or /tmp).
std::string temp_dir(const std::string& hint);

/// Backend config for a conformance backend: "sqlite", "postgresql", "mysql", "redis",
/// "zookeeper", "memory". SQLite gets a new file per call in a temp dir.
backend_config backend_config_for(const std::string& type);

/// Path of a helper program built from tests/support/<name>_main.cpp.
std::string program_path(const std::string& name);

/// Requests of backend `type` that failed so far in this process, of every kind (summed from
/// baton::backend_metrics_snapshot()).
std::uint64_t backend_failures(const std::string& type);

/// Polls `condition` every 5 ms until true or `timeout` passes; true if it became true.
bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

/// A port on 127.0.0.1 where nothing listens (bound, then released: bind it again at once).
int unused_loopback_port();
/// The file descriptors of this process's IPv4 TCP connections to `port` (from /proc/self/fd).
std::vector<int> connections_to_port(int port);

/// True when something accepts TCP connections on 127.0.0.1:`port`.
bool accepts_on_loopback(int port);

/// Runs scripts/server-ctl.sh ACTION SERVER; true on success.
bool server_ctl(const std::string& action, const std::string& server);

/// libfaketime's library (Debian's faketime package).
inline constexpr const char* faketime_library =
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// The environment assignments (for `env`) that run a child under libfaketime: LD_PRELOAD, and,
/// for an AddressSanitizer build, ASAN_OPTIONS with verify_asan_link_order=0 (ASan refuses to
/// start when a preloaded library comes before its runtime) after the inherited options.
std::vector<std::string> faketime_env();

}  // namespace baton::test
