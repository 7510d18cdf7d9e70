#pragma once
// Blocking acquire/read over a backend's lease_store, for tests that look at single requests.
#include <chrono>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "baton/mutex/backend.hpp"
#include "baton/mutex/runtime.hpp"

namespace baton::test {

/// A backend of its own (and a runtime) built from `config`, whose lease_store is asked one
/// request at a time. Throws std::logic_error when the backend is not a lease_store_backend,
/// std::runtime_error when a reply does not come within the timeout.
class blocking_store {
 public:
  using reply = std::pair<std::error_code, lease_grant>;

  explicit blocking_store(const backend_config& config,
                          std::chrono::milliseconds timeout = std::chrono::seconds{20});

  reply acquire(const std::string& name, const std::string& owner_id,
                std::chrono::milliseconds ttl = std::chrono::seconds{1},
                std::chrono::milliseconds transition = std::chrono::seconds{1});
  reply read(const std::string& name);

 private:
  std::shared_ptr<runtime> runtime_;
  std::shared_ptr<mutex_backend> backend_;
  std::shared_ptr<lease_store> store_;
  std::chrono::milliseconds timeout_;
};

}  // namespace baton::test
