#pragma once
// The balancer of a scheduler (balance.hpp): keeps this node's membership record, reads the
// others', computes the view and the assignment, tells each schedule whether to contend and
// hands schedules off. Lives on its own strand; talks to the schedules through
// balanced_schedule.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "baton/mutex/records.hpp"
#include "baton/scheduler/balance.hpp"

namespace baton::detail {

/// The node ids of the registry record, sorted ("" or unreadable: none).
std::vector<std::string> registry_nodes(const std::string& bytes);
std::string format_registry(const std::vector<std::string>& ids);

/// A node id made of a contender id ("1:42@host" -> "1-42-host"), at most 100 characters.
std::string node_id_from_contender(const std::string& contender_id);

/// How far a node's lead count may stray from its assigned count before schedules move:
/// max(1, 10% of `assigned`).
std::size_t share_tolerance(std::size_t assigned) noexcept;

/// A live member's counts as it published them (with the same view as ours).
struct member_share {
  std::size_t leads = 0;
  std::size_t assigned = 0;
};

/// How many schedules this node should hand off now (at most leads - assigned): all of them
/// while draining; else only while this node is beyond its tolerance, or another member with the
/// same view is below its own.
std::size_t handoff_quota(std::size_t leads, std::size_t assigned, bool draining,
                          const std::vector<member_share>& others) noexcept;

/// At most `rate` takes per second, with a burst of one second's worth (at least one take).
class token_bucket {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  explicit token_bucket(double rate) : rate_(rate), tokens_(std::max(1.0, rate)) {}
  /// Takes one token if one is there at `now`.
  bool take(time_point now);
  /// Gives back a token taken for nothing.
  void refund();

 private:
  void refill(time_point now);
  double rate_;
  double tokens_;
  std::optional<time_point> last_;
};

/// Whether members are alive, from how their records change on the reader's steady clock: a
/// record whose version has not changed for `timeout` is gone. A record seen for the first time
/// counts as changed now when the wall clock it carries is within `timeout` (+ slack) of ours,
/// else as long unchanged.
class member_tracker {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  explicit member_tracker(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  /// Notes record `m` (its version in m.version) read at `now`; returns whether it is alive.
  bool observe(const balance_member& m, time_point now,
               std::chrono::system_clock::time_point wall_now);
  /// Drops what is known of `id` (no longer in the registry).
  void forget(const std::string& id) { seen_.erase(id); }

 private:
  struct seen {
    std::uint64_t version = 0;
    time_point changed{};
  };
  std::chrono::milliseconds timeout_;
  std::map<std::string, seen> seen_;
};

/// What the balancer needs of a schedule (the scheduler's schedule runner).
class balanced_schedule {
 public:
  virtual ~balanced_schedule() = default;
  virtual const std::string& name() const = 0;
  virtual const std::vector<std::string>& required_tags() const = 0;
  virtual const std::vector<std::string>& preferred_tags() const = 0;
  /// Holds the schedule's mutex now (any thread).
  virtual bool is_owner() const = 0;
  /// Contend (true) or not (false: a waiter leaves the queue; an owner keeps its lease until
  /// handed off).
  virtual void set_wanted(bool wanted) = 0;
  /// Releases the lease if the schedule is quiet now (no run, no fire due within the quiet
  /// margin, history written); `done(true)` once released, `done(false)` if not quiet or not
  /// owner. `done` runs on the schedule's strand.
  virtual void try_handoff(std::function<void(bool)> done) = 0;
};

class balancer : public std::enable_shared_from_this<balancer> {
 public:
  using schedules_fn = std::function<std::vector<std::shared_ptr<balanced_schedule>>()>;

  /// `options` checked already; `member_timeout` and `settle` resolved (non-zero).
  balancer(boost::asio::io_context& io, record_store& records, balance_options options,
           std::string contender_id, schedules_fn schedules);
  /// Begins the heartbeat (the first tick at once).
  void start();
  /// Sets the drain request (written at the next heartbeat, which comes at once).
  void drain(bool on);
  /// Writes a record that says this node is leaving (others drop it at once) and stops
  /// assigning. Blocking up to `timeout`; not on an io thread.
  void leave(std::chrono::milliseconds timeout) noexcept;
  /// Waits (blocking, until `deadline`) until every other live member shows a view without this
  /// node, so that the releases that follow are picked up at once.
  void await_handover(std::chrono::steady_clock::time_point deadline) noexcept;
  /// Stops the heartbeat; no more ticks.
  void stop() noexcept;
  balance_status status() const;

 private:
  using time_point = std::chrono::steady_clock::time_point;
  struct tick_state;

  void tick();
  void arm(std::chrono::milliseconds after);
  void registry_read(std::uint64_t gen, std::error_code ec, const controls_record& rec);
  /// Writes the registry as `current` minus `dropped`, plus this node unless it is leaving
  /// (compare-and-set; retried on a conflict).
  void write_registry(const controls_record& current, std::vector<std::string> dropped,
                      int attempt);
  /// This node may be listed in the registry: not leaving, and its membership record written
  /// (a listed node without a record looks long gone to the others, who drop it).
  bool joinable() const { return !leaving_ && !first_write_; }
  void members_read(std::uint64_t gen, std::shared_ptr<tick_state> t);
  void compute(std::uint64_t gen, std::shared_ptr<tick_state> t);
  void write_record(std::uint64_t gen, int attempt);
  void record_written(std::uint64_t gen, int attempt, std::error_code ec,
                      const controls_record& rec);
  void apply(std::uint64_t gen);
  void finish(std::uint64_t gen);
  balance_member own_record() const;
  void publish_status();
  void note_error(const char* what, std::error_code ec);

  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  boost::asio::steady_timer timer_;
  record_store& records_;
  balance_options options_;
  std::string contender_id_;
  schedules_fn schedules_;
  member_tracker tracker_;
  token_bucket bucket_;

  // strand only
  std::uint64_t gen_ = 0;  // the tick in flight
  bool busy_ = false;
  time_point tick_started_{};
  time_point started_at_{};
  std::uint64_t registry_watch_ = 0;  // watch_controls handle of the registry (0: none)
  bool stopped_ = false;
  bool leaving_ = false;
  bool drain_ = false;
  bool first_write_ = true;
  std::uint64_t version_ = 0;  // of our record, as last written or seen
  std::optional<time_point> last_write_ok_;
  int registered_ticks_ = 0;  // ticks in a row that found us in the registry
  std::string view_;
  time_point view_since_{};
  std::vector<balance_node> view_nodes_;
  bool mixed_ = false;
  bool self_alive_ = false;
  std::map<std::string, balance_member> members_;  // last read, by id
  // Members read without a written record, since when (steady clock).
  std::map<std::string, time_point> unwritten_since_;
  std::map<std::string, bool> alive_;
  // What each schedule was last told (set_wanted), parallel to wanted_list_. By shared_ptr,
  // not address: a schedule removed and another added may reuse the address.
  std::vector<std::shared_ptr<balanced_schedule>> wanted_list_;
  std::vector<char> wanted_;
  // The schedule list compute() last saw, its balance_schedule view and digest (a schedule's
  // tags never change: a changed schedule is a new object), and the assignment, parallel to
  // list_ (schedule i -> node id, "" for none). Rebuilt only when the list or the assigning
  // nodes change: with 10,000 schedules, rebuilding them every heartbeat was most of an idle
  // node's CPU.
  std::vector<std::shared_ptr<balanced_schedule>> list_;
  std::vector<balance_schedule> list_view_;
  std::string list_digest_;
  std::vector<std::string> owners_;
  std::optional<std::vector<balance_node>> owners_nodes_;  // the nodes owners_ is for
  /// The node schedule `s` (at `index` of `list`) is assigned to, "" for none.
  const std::string& assigned_node(const std::vector<std::shared_ptr<balanced_schedule>>& list,
                                   std::size_t index);
  std::map<std::string, std::size_t> list_index_;  // by name; built when a lookup needs it
  std::size_t assigned_ = 0;
  std::size_t leads_ = 0;
  std::size_t rotate_ = 0;
  bool startup_ = true;      // not yet registered for a heartbeat: contend for nothing
  bool tick_again_ = false;  // a tick is wanted as soon as the one in flight ends
  std::string schedules_digest_;
  std::size_t schedule_count_ = 0;
  bool drained_logged_ = false;
  bool error_logged_ = false;
  std::atomic<bool> left_written_{false};  // a record saying "leaving" was written

  mutable std::mutex status_mutex_;
  balance_status status_;
};

}  // namespace baton::detail
