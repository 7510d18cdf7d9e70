// Balance at start, in one process on the memory backend: nodes that start at the same moment
// register in the membership registry at the same moment; the compare-and-set writes collide,
// and a node whose write lost must still be listed within that heartbeat, or the others (seeing
// themselves alone) contend for every schedule and hand most of them off again at handoff_rate.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "baton/mutex/backend.hpp"
#include "baton/mutex/memory_store.hpp"
#include "baton/mutex/records.hpp"
#include "baton/scheduler/scheduler.hpp"
#include "support/env.hpp"
#include "support/lease.hpp"

namespace baton {
namespace {

using namespace std::chrono_literals;

/// The memory store's records, except that another node registers just before this node's
/// first registry write (same expected version): that write meets errc::conflict.
class colliding_records : public record_store {
 public:
  explicit colliding_records(std::shared_ptr<memory_lease_store> inner)
      : inner_(std::move(inner)) {}

  void async_append_history(const std::string& name, const std::string& owner_id,
                            std::uint64_t fence, std::string bytes, std::size_t keep,
                            append_handler handler) override {
    inner_->async_append_history(name, owner_id, fence, std::move(bytes), keep, std::move(handler));
  }
  void async_read_history(const std::string& name, std::size_t limit,
                          history_handler handler) override {
    inner_->async_read_history(name, limit, std::move(handler));
  }
  void async_read_controls(const std::string& name, controls_handler handler) override {
    inner_->async_read_controls(name, std::move(handler));
  }
  void async_write_controls(const std::string& name, std::uint64_t expected, std::string bytes,
                            controls_handler handler) override {
    if (name == balance_registry_name && !collided_.exchange(true)) {
      inner_->async_write_controls(
          name, expected, R"({"nodes":["other-node"]})",
          [inner = inner_, name, expected, bytes = std::move(bytes), handler = std::move(handler)](
              std::error_code, controls_record) mutable {
            inner->async_write_controls(name, expected, std::move(bytes), std::move(handler));
          });
      return;
    }
    inner_->async_write_controls(name, expected, std::move(bytes), std::move(handler));
  }
  std::uint64_t watch_controls(const std::string& name, std::function<void()> changed) override {
    return inner_->watch_controls(name, std::move(changed));
  }
  void unwatch_controls(std::uint64_t handle) noexcept override {
    inner_->unwatch_controls(handle);
  }

 private:
  std::shared_ptr<memory_lease_store> inner_;
  std::atomic<bool> collided_{false};
};

TEST(balance_start, a_node_whose_registration_collides_is_listed_within_the_same_heartbeat) {
  runtime rt{runtime::options{2, 1}};
  auto store = std::make_shared<memory_lease_store>();
  lease_store_backend backend("memory", rt, store, std::make_shared<colliding_records>(store),
                              test::lease_options(1000ms, 100ms));
  scheduler_options o;
  o.contender_id = "node-a";
  o.balance.enabled = true;
  o.balance.node_id = "node-a";
  o.balance.heartbeat = 10s;  // the next heartbeat is far beyond the wait below
  scheduler s(backend, rt, o);
  s.start();
  const auto registry = [&] { return read_controls(*store, balance_registry_name).bytes; };
  EXPECT_TRUE(test::wait_until([&] { return registry().find("node-a") != std::string::npos; }, 3s))
      << registry();
  EXPECT_NE(registry().find("other-node"), std::string::npos) << registry();
  s.stop(0ms);
}

}  // namespace
}  // namespace baton
