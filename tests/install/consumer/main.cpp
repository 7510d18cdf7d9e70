// A program outside the baton tree, built against the installed package.
#include <baton/backends/factory.hpp>
#include <baton/mutex/locker.hpp>
#include <iostream>
#include <mutex>

int main() {
  baton::runtime rt;
  auto backend = baton::make_backend({"memory", {}}, rt);
  baton::locker lock(*backend, "consumer");
  std::unique_lock guard(lock);
  std::cout << "locked with fence " << lock.fence() << "\n";
  return lock.owns_lease() ? 0 : 1;
}
