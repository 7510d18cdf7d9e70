#pragma once
/// A backend that keeps owner records and answers conditional updates (SQL, Redis, in-memory).
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <system_error>

#include <boost/asio/io_context.hpp>

#include "baton/mutex/contend_period.hpp"
#include "baton/mutex/contend_service.hpp"
#include "baton/mutex/owner.hpp"

namespace baton {

/// The owner record after a request, and the backend's clock read in the same transaction.
struct lease_grant {
  mutex_owner owner;
  backend_time now{};
};

/// Asynchronous owner-record operations. Handlers may run on any thread; each is called once.
/// Names are already validated. Backends translate native errors to baton::errc in one place.
class lease_store {
 public:
  using grant_handler = std::function<void(std::error_code, lease_grant)>;
  using done_handler = std::function<void(std::error_code)>;
  using state_handler = std::function<void(std::error_code, std::string)>;

  virtual ~lease_store() = default;

  /// One atomic conditional update: `owner_id` takes the mutex if its transition_at has passed
  /// (fence + 1, acquired_at = now) or renews it if it owns it with a live lease (fence kept);
  /// either way ttl_at = now + ttl, transition_at = now + ttl + transition. Replies the record
  /// after the update. A lost race is not an error: the reply names the other owner.
  virtual void async_acquire(const std::string& name, const std::string& owner_id,
                             std::chrono::milliseconds ttl, std::chrono::milliseconds transition,
                             grant_handler handler) = 0;
  /// Gives the mutex up if `owner_id` owns it (else nothing) and leaves any wait queue; wakes the
  /// next waiter where the backend can.
  virtual void async_release(const std::string& name, const std::string& owner_id,
                             done_handler handler) = 0;
  /// Optional blocking path for callers that wait anyway (baton::locker), never called on an io
  /// thread: the same request as async_acquire, sent and answered on the calling thread. False
  /// when the store has no such path now (then `ec` and `grant` are untouched and the caller
  /// uses async_acquire); true when it was tried, with its error or grant.
  virtual bool acquire_blocking(const std::string& name, const std::string& owner_id,
                                std::chrono::milliseconds ttl, std::chrono::milliseconds transition,
                                std::error_code& ec, lease_grant& grant) {
    return false;
  }
  /// Likewise for async_release: true when it was tried, with `released` set when `owner_id`
  /// owned the mutex (false: it had lost it, or only left the queue).
  virtual bool release_blocking(const std::string& name, const std::string& owner_id,
                                std::error_code& ec, bool& released) {
    return false;
  }
  /// Reads the owner record without contending.
  virtual void async_read(const std::string& name, grant_handler handler) = 0;
  /// Reads the lease-guarded state (empty when never written).
  virtual void async_read_state(const std::string& name, state_handler handler) = 0;
  /// Writes the lease-guarded state only if `owner_id` owns the mutex with `fence` and a live
  /// lease; else errc::not_owner.
  virtual void async_write_state(const std::string& name, const std::string& owner_id,
                                 std::uint64_t fence, std::string bytes, done_handler handler) = 0;
  /// Asks to be told (`wake`, any thread) when the mutex may have become free. `poll_interval`
  /// is the waiter's own: a store that finds free mutexes by polling for its waiters does so at
  /// least that often. Returns a handle for unwatch(); 0 means the store has no wake-ups and
  /// waiters only poll.
  virtual std::uint64_t watch(const std::string& name, const std::string& owner_id,
                              std::chrono::milliseconds poll_interval, std::function<void()> wake) {
    return 0;
  }
  virtual void unwatch(std::uint64_t handle) noexcept {}
  /// What watch() wake-ups cover now; asked before each reply is planned, only when watch()
  /// returned a handle.
  virtual wakeup_coverage wakeups() const noexcept { return wakeup_coverage::release; }
};

/// The generic contend service over a lease_store: renews from ttl_at, retries every
/// retry_period, keeps the local lease, polls or waits for wake-ups. Its lease events are counted
/// under `backend_type` (the backend's type(); "other" when not given).
std::shared_ptr<contend_service> make_lease_contend_service(
    boost::asio::io_context& io, std::shared_ptr<lease_store> store, std::string name,
    std::string contender_id, std::shared_ptr<mutex_contender> contender, contend_options options,
    random_source random = default_random_source(), std::string backend_type = "other");

}  // namespace baton
