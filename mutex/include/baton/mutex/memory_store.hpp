#pragma once
/// An in-process lease_store: the same semantics as the real backends, for tests and for
/// single-process use. Its clock is injectable.
#include <deque>
#include <functional>
#include <map>
#include <mutex>

#include "baton/mutex/lease_store.hpp"
#include "baton/mutex/records.hpp"

namespace baton {

/// Owner records, history and controls kept in memory; every operation completes synchronously
/// (inline). Controls changes are pushed to watch_controls() callers.
class memory_lease_store : public lease_store, public record_store {
 public:
  using clock_function = std::function<backend_time()>;
  /// `clock` defaults to system_clock.
  explicit memory_lease_store(clock_function clock = {});

  void async_acquire(const std::string& name, const std::string& owner_id,
                     std::chrono::milliseconds ttl, std::chrono::milliseconds transition,
                     grant_handler handler) override;
  void async_release(const std::string& name, const std::string& owner_id,
                     done_handler handler) override;
  void async_read(const std::string& name, grant_handler handler) override;
  void async_read_state(const std::string& name, state_handler handler) override;
  void async_write_state(const std::string& name, const std::string& owner_id, std::uint64_t fence,
                         std::string bytes, done_handler handler) override;
  std::uint64_t watch(const std::string& name, const std::string& owner_id,
                      std::chrono::milliseconds poll_interval, std::function<void()> wake) override;
  void unwatch(std::uint64_t handle) noexcept override;

  void async_append_history(const std::string& name, const std::string& owner_id,
                            std::uint64_t fence, std::string bytes, std::size_t keep,
                            append_handler handler) override;
  void async_read_history(const std::string& name, std::size_t limit,
                          history_handler handler) override;
  void async_read_controls(const std::string& name, controls_handler handler) override;
  void async_write_controls(const std::string& name, std::uint64_t expected, std::string bytes,
                            controls_handler handler) override;
  std::uint64_t watch_controls(const std::string& name, std::function<void()> changed) override;
  void unwatch_controls(std::uint64_t handle) noexcept override;

 private:
  struct record {
    mutex_owner owner;
    std::string state;
    std::deque<history_entry> history;  // oldest first
    std::uint64_t history_seq = 0;
    controls_record controls;
  };
  struct watcher {
    std::string name;
    std::function<void()> wake;
  };
  clock_function clock_;
  std::mutex mutex_;
  std::map<std::string, record> records_;
  std::map<std::uint64_t, watcher> watchers_;
  std::map<std::uint64_t, watcher> controls_watchers_;
  std::uint64_t next_watch_ = 1;
};

}  // namespace baton
