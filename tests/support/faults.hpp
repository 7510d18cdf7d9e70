#pragma once
// Faults injected into the real servers the test script started.
#include <chrono>
#include <string>

namespace baton::test {

/// Kills every client connection of the backend's server (PostgreSQL pg_terminate_backend,
/// MariaDB KILL, Redis CLIENT KILL). For SQLite: holds an exclusive lock on `sqlite_path` for
/// `duration` in another process (the closest thing to a lost database). Returns true on success.
bool kill_connections(const std::string& type, const std::string& sqlite_path = {},
                      std::chrono::milliseconds duration = std::chrono::seconds{3});

/// Restarts the backend's server (stop, then start on the same port and data). SQLite: same as
/// kill_connections. ZooKeeper restarts are shorter than the session timeout only if fast.
bool restart_server(const std::string& type, const std::string& sqlite_path = {});

}  // namespace baton::test
