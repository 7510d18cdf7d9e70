// Balance at start, in one process on the memory backend. Nodes that start together must see
// each other before they choose, or one that sees itself alone contends for every schedule and
// hands most of them off again at handoff_rate: their registrations in the membership registry
// collide (the compare-and-set that loses must be retried at once), and a node listed in the
// registry before its membership record exists looks gone to the others (they drop it).
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

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
  explicit colliding_records(std::shared_ptr<memory_lease_store> inner, bool collide = true)
      : inner_(std::move(inner)), collided_(!collide) {}

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
  /// The registry write met the other node's (it has been tried).
  bool collided() const { return collided_.load(); }

 private:
  std::shared_ptr<memory_lease_store> inner_;
  std::atomic<bool> collided_{false};
};

/// The memory store's records, except that this node's first membership record write is held
/// until release() (a slow backend): meanwhile its record does not exist.
class held_record_write : public colliding_records {
 public:
  held_record_write(std::shared_ptr<memory_lease_store> inner, std::string record)
      : colliding_records(inner, false), inner_(std::move(inner)), record_(std::move(record)) {}
  void async_write_controls(const std::string& name, std::uint64_t expected, std::string bytes,
                            controls_handler handler) override {
    {
      std::lock_guard lock(mutex_);
      if (name == record_ && !held_) {
        held_ = [inner = inner_, name, expected, bytes = std::move(bytes),
                 handler = std::move(handler)]() mutable {
          inner->async_write_controls(name, expected, std::move(bytes), std::move(handler));
        };
        return;
      }
    }
    colliding_records::async_write_controls(name, expected, std::move(bytes), std::move(handler));
  }
  bool holding() {
    std::lock_guard lock(mutex_);
    return static_cast<bool>(held_);
  }
  void release() {
    std::function<void()> call;
    {
      std::lock_guard lock(mutex_);
      call = std::exchange(held_, [] {});
    }
    call();
  }

 private:
  std::shared_ptr<memory_lease_store> inner_;
  std::string record_;
  std::mutex mutex_;
  std::function<void()> held_;
};

TEST(balance_start, a_node_is_listed_only_once_its_membership_record_is_there) {
  runtime rt{runtime::options{2, 1}};
  auto store = std::make_shared<memory_lease_store>();
  auto records = std::make_shared<held_record_write>(store, balance_record_name("node-a"));
  lease_store_backend backend("memory", rt, store, records, test::lease_options(1000ms, 100ms));
  scheduler_options o;
  o.contender_id = "node-a";
  o.balance.enabled = true;
  o.balance.node_id = "node-a";
  o.balance.heartbeat = 200ms;
  scheduler s(backend, rt, o);
  s.start();
  const auto registry = [&] { return read_controls(*store, balance_registry_name).bytes; };
  ASSERT_TRUE(test::wait_until([&] { return records->holding(); }, 3s));
  // Several heartbeats while the record write hangs: not listed (another node would take the
  // listed node without a record for one long gone and drop it from the registry).
  EXPECT_FALSE(test::wait_until([&] { return registry().find("node-a") != std::string::npos; }, 1s))
      << registry();
  records->release();
  EXPECT_TRUE(test::wait_until([&] { return registry().find("node-a") != std::string::npos; }, 3s))
      << registry();
  s.stop(0ms);
}

TEST(balance_start, a_node_whose_registration_collides_is_listed_within_the_same_heartbeat) {
  runtime rt{runtime::options{2, 1}};
  auto store = std::make_shared<memory_lease_store>();
  auto records = std::make_shared<colliding_records>(store);
  lease_store_backend backend("memory", rt, store, records, test::lease_options(1000ms, 100ms));
  scheduler_options o;
  o.contender_id = "node-a";
  o.balance.enabled = true;
  o.balance.node_id = "node-a";
  o.balance.heartbeat = 2s;  // registers at the second heartbeat; the third is 2 s later
  scheduler s(backend, rt, o);
  s.start();
  const auto registry = [&] { return read_controls(*store, balance_registry_name).bytes; };
  ASSERT_TRUE(test::wait_until([&] { return records->collided(); }, 5s));
  EXPECT_TRUE(test::wait_until([&] { return registry().find("node-a") != std::string::npos; }, 1s))
      << registry();
  EXPECT_NE(registry().find("other-node"), std::string::npos) << registry();
  s.stop(0ms);
}

}  // namespace
}  // namespace baton
