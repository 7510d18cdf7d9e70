// A program outside the baton tree that uses the SQL backend only: built against the installed
// package with find_package(baton COMPONENTS sql), and with pkg-config baton-sql.
#include <baton/backends/sql/sql_backend.hpp>
#include <baton/mutex/locker.hpp>
#include <iostream>
#include <mutex>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: consumer_sql SQLITE_FILE\n";
    return 2;
  }
  baton::runtime rt;
  auto backend = baton::backends::sql::make_backend({"sqlite", {{"path", argv[1]}}}, rt);
  baton::locker lock(*backend, "consumer-sql");
  std::unique_lock guard(lock);
  std::cout << "sqlite locked with fence " << lock.fence() << "\n";
  return lock.owns_lease() ? 0 : 1;
}
