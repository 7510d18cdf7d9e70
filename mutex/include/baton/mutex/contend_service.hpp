#pragma once
/// The contend service: one contender on one mutex, with the lifecycle shared by all backends.
///
/// Three words that sound alike, one meaning each (across mutex/ and the backends):
/// - status (service_status, contend_service::status()): where the service is in its
///   lifecycle, INITIAL -> STARTING -> RUNNING -> STOPPING (Simba's "status").
/// - mutex_state (owner.hpp): one ownership change, the owner before and after, handed to
///   on_acquired/on_released.
/// - state (read_state/write_state, async_read_state/async_write_state): the lease-guarded
///   bytes per mutex that only the current fence may write and the next owner reads.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>

#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>

#include "baton/mutex/clock.hpp"
#include "baton/mutex/contender.hpp"
#include "baton/mutex/options.hpp"
#include "baton/mutex/owner.hpp"

namespace baton {

/// Lifecycle status of a contend service: INITIAL -> STARTING -> RUNNING -> STOPPING -> INITIAL.
enum class service_status { initial, starting, running, stopping };

/// Why an owner stopped being owner (counted as lease events in metrics.hpp).
enum class release_reason {
  released,   ///< given up on purpose: stop(), unlock
  lost,       ///< the backend said so: another owner, no record, the session expired
  step_down,  ///< a local decision: the local lease ran out before a renewal succeeded (or,
              ///< ZooKeeper, the connection dropped)
};

/// Contends for one mutex on behalf of one contender. The base class owns the lifecycle and the
/// notification rules (serialized on the strand, on_acquired/on_released alternate, completions of
/// an earlier start are ignored); each backend fills in start_contend() and stop_contend().
class contend_service : public std::enable_shared_from_this<contend_service> {
 public:
  using executor_type = boost::asio::strand<boost::asio::io_context::executor_type>;
  using steady_time = std::chrono::steady_clock::time_point;
  using state_handler = std::function<void(std::error_code, std::string)>;
  using done_handler = std::function<void(std::error_code)>;

  virtual ~contend_service();
  contend_service(const contend_service&) = delete;
  contend_service& operator=(const contend_service&) = delete;

  /// INITIAL -> STARTING -> RUNNING and begins contending. False if not INITIAL.
  bool start();
  /// Stops contending: fires on_released if owner, releases the mutex on the backend, and calls
  /// `done` (on the strand) once released or given up. Never throws; safe from any thread.
  void stop(std::function<void()> done = {}) noexcept;
  /// stop() and wait up to `timeout` for the release. Must not be called on an io thread.
  bool stop_and_wait(std::chrono::milliseconds timeout) noexcept;
  /// What start_blocking() did.
  enum class start_result {
    owner,      ///< started, and owner already (is_owner() is true; on_acquired follows)
    started,    ///< started as start() does; the first round's outcome comes as usual
    not_owner,  ///< (one_round) the first round named another owner; not started, not queued
    refused,    ///< not INITIAL
  };
  /// For callers that block anyway (baton::locker), never on an io thread: start() whose first
  /// acquire goes from the calling thread when the backend has a blocking path, so an
  /// uncontended owner is owner when this returns, without waiting for an io thread; the strand
  /// takes the lease over (renewals, on_acquired) a moment later, unless stop_blocking() gave it
  /// up first (then the contender hears of neither). Otherwise (and when that round did not
  /// make it owner, unless `one_round`) it starts as start() does.
  virtual start_result start_blocking(bool one_round = false);
  /// stop_and_wait() whose release goes from the calling thread when the backend has a blocking
  /// path and no request is on the wire (else stop_and_wait()). Then on_released and the
  /// cleanup follow on the strand without being waited for. Never throws.
  virtual bool stop_blocking(std::chrono::milliseconds timeout) noexcept;
  /// stop() then start() once stopped.
  void restart() noexcept;

  /// Where the service is in its lifecycle (any thread).
  service_status status() const noexcept { return status_.load(); }
  const std::string& mutex_name() const noexcept { return name_; }
  const std::string& contender_id() const noexcept { return id_; }
  const contend_options& options() const noexcept { return options_; }
  executor_type get_executor() const noexcept { return strand_; }
  /// The backend type its lease events are counted under (metrics.hpp): "sqlite", "redis", ...
  const std::string& backend_type() const noexcept { return backend_type_; }

  /// Owner now: holds the lease and its local deadline has not passed.
  bool is_owner() const noexcept;
  /// Fencing token of the current ownership, 0 when not owner.
  std::uint64_t fence() const noexcept;
  /// Local lease deadline (steady clock); meaningful while is_owner().
  steady_time lease_deadline() const noexcept;
  /// The owner record last reported by the backend.
  mutex_owner last_observed() const;
  /// The backend's clock minus this host's wall clock, from the latest request that read the
  /// backend's clock (any thread); nullopt before the first such reply.
  std::optional<clock_sample> clock_offset() const;
  /// True while options().max_clock_offset is set and the latest offset is surely beyond it:
  /// the service does not acquire (and an owner steps down).
  bool clock_refused() const;

  /// Reads the lease-guarded state (empty if never written). Handler runs on the strand.
  virtual void async_read_state(state_handler handler) = 0;
  /// Writes the lease-guarded state if still owner with the current fence, else errc::not_owner.
  virtual void async_write_state(std::string bytes, done_handler handler) = 0;

 protected:
  /// `backend_type` labels the lease events of this service (backend_metrics_snapshot()).
  contend_service(boost::asio::io_context& io, std::string name, std::string contender_id,
                  std::shared_ptr<mutex_contender> contender, contend_options options,
                  std::string backend_type = "other");

  /// On the strand, after start(): begin contending for `generation`.
  virtual void start_contend(std::uint64_t generation) = 0;
  /// On the strand, after stop(): give up (release if owner) and call `done` exactly once.
  virtual void stop_contend(std::uint64_t generation, std::function<void()> done) noexcept = 0;

  /// On the strand: true while `generation` is the running one.
  bool current(std::uint64_t generation) const noexcept {
    return generation == generation_ && status_.load() == service_status::running;
  }
  std::uint64_t generation() const noexcept { return generation_; }

  /// On the strand: tell the contender it owns the mutex until `deadline` (ignored if already).
  /// Counts lease_event::acquired unless `counted` (a lease won by start_blocking(), counted
  /// there).
  void notify_acquired(const mutex_state& state, steady_time deadline, bool counted = false);
  /// On the strand: extend the local lease of the current ownership after a renewal succeeded
  /// (ignored if not owner). Counts lease_event::renewed: call it for renewals only.
  void extend_lease(steady_time deadline);
  /// On the strand: tell the contender it lost the mutex (ignored if not owner). Counts the
  /// lease event `why` stands for (released, lost or step_down).
  void notify_released(const mutex_state& state, release_reason why);
  /// On the strand: the owner as reported by the backend.
  void notify_observed(const mutex_owner& owner);
  /// On the strand: a backend request failed (the contender may count or log it).
  void notify_error(std::error_code ec);
  /// On the strand: a reply carried the backend's clock, `backend_now`, read between `sent`
  /// and `received` (this host's wall clock). Updates clock_offset(); logs `clock.offset` when
  /// the offset first exceeds 1 s or moves by more than 1 s, and `clock.refused` /
  /// `clock.accepted` when clock_refused() changes.
  void note_backend_clock(backend_time backend_now, std::chrono::system_clock::time_point sent,
                          std::chrono::system_clock::time_point received);
  /// On the strand: true between notify_acquired and notify_released.
  bool leader() const noexcept { return leader_; }

  /// start_blocking()/stop_blocking() of a derived service (any thread): INITIAL -> STARTING
  /// without start()'s strand step (the caller calls start_claimed() once ready).
  bool claim_start() noexcept;
  /// How many times the service was started (claim_start() succeeded); any thread.
  std::uint64_t starts() const noexcept { return starts_.load(); }
  /// Posts start()'s strand step after claim_start().
  void start_claimed();
  /// STARTING -> INITIAL without any strand step (a start that the strand never heard of, given
  /// up on the caller's thread); false when not STARTING.
  bool unclaim_start() noexcept;
  /// STARTING or RUNNING -> STOPPING, as stop() does; false when neither.
  bool claim_stop() noexcept;
  /// Posts stop()'s strand step after claim_stop(): on_released if owner, stop_contend(), then
  /// INITIAL and `done`.
  void stop_claimed(std::function<void()> done, release_reason why = release_reason::released);
  /// Blocks until the service is INITIAL again, at most `timeout`; true when it is.
  bool wait_initial(std::chrono::milliseconds timeout);
  /// Any thread: the owner snapshot (is_owner(), fence(), lease_deadline()) before the strand
  /// hears of it (a lease won on the calling thread), or cleared (given up there).
  void set_owner_snapshot(const mutex_owner& owner, steady_time deadline);
  void clear_owner_snapshot();
  /// In a derived service's constructor only (before another thread can see it): while owner,
  /// is_owner() and lease_deadline() take the local deadline from `source` (called on any
  /// thread; must not call back into this service) instead of the one notify_acquired() and
  /// extend_lease() last gave. For a backend whose owners' leases all end with one thing it
  /// tracks anyway (ZooKeeper: the session's), so that an owner need not be told each time
  /// that thing is renewed.
  void set_deadline_source(std::function<steady_time()> source);

 private:
  executor_type strand_;
  std::string name_;
  std::string id_;
  std::weak_ptr<mutex_contender> contender_;
  contend_options options_;
  std::string backend_type_;
  std::atomic<service_status> status_{service_status::initial};
  std::uint64_t generation_ = 0;  // strand only
  std::atomic<std::uint64_t> starts_{0};
  bool leader_ = false;  // strand only

  std::mutex initial_mutex_;  // with initial_: wait_initial()
  std::condition_variable initial_;
  mutable std::mutex snapshot_mutex_;  // guards the fields below, read from any thread
  bool owner_ = false;
  std::uint64_t fence_ = 0;
  steady_time deadline_{};
  std::function<steady_time()> deadline_source_;  // set before the service is shared
  mutex_owner observed_;
  std::optional<clock_sample> clock_;
  bool clock_refused_ = false;
  std::chrono::milliseconds clock_logged_{0};  // strand only: the offset last logged
};

}  // namespace baton
