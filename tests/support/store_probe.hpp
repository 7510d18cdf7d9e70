#pragma once
// What a backend's server holds, looked at behind baton's back with the native clients: for
// tests that check a command (`baton status`) creates and changes nothing.
#include <string>

#include "baton/mutex/backend.hpp"

namespace baton::test {

/// A line describing what `config`'s store holds, to compare before and after: SQLite: whether
/// the file (or its -wal/-journal) exists and its size; PostgreSQL/MySQL: whether `table`
/// exists and its row count; Redis: DBSIZE of the URL's database (no password); ZooKeeper: whether
/// `root` (default /baton) exists. Throws when the server cannot be asked.
std::string store_footprint(const backend_config& config);

}  // namespace baton::test
