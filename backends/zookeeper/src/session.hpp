#pragma once
// One ZooKeeper session (one zhandle_t) shared by every contender of a backend instance.
//
// Threads: the client's I/O and completion threads never touch session or contender state; they
// only post onto the session strand (session events) or hand results to handlers that post onto
// the contender strands. The completion thread also hands requests waiting for a flow slot to the
// client (handle_ctx::release_slot, under the handle's flow mutex only). Nothing the client threads
// own holds a strong reference to the session or a contender, so zookeeper_close() never runs on a
// client thread.
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "baton/backends/zookeeper/detail.hpp"
#include "baton/mutex/owner.hpp"
#include "baton/mutex/runtime.hpp"

namespace baton::backends::zookeeper::detail {

using steady = std::chrono::steady_clock;

/// The result of one asynchronous client call, copied out of the client's buffers.
struct op_result {
  int rc = ZOK;
  std::string path;                   // create: the created path
  std::string data;                   // get: the node's data
  struct Stat stat {};                // create, exists, get
  std::vector<std::string> children;  // get_children
  int failed_op = -1;                 // multi: the index of the operation that failed
};
using op_handler = std::function<void(op_result)>;

/// Counters shared with the client threads.
struct stats_block {
  std::atomic<std::uint64_t> sessions{0}, local_expiries{0}, disconnects{0}, watch_events{0},
      nodes_created{0}, nodes_adopted{0}, ghosts_deleted{0}, heartbeats{0}, heartbeat_events{0},
      lapses{0};
  std::atomic<std::uint64_t> peak_in_flight{0}, peak_waiting{0};  // flow control
  std::atomic<unsigned> lost_create_replies{0};                   // fault injection
  std::atomic<bool> unproven_answers{false};                      // fault injection
};

/// Predecessor watches by path; fired from the client's completion thread.
class watch_table {
 public:
  explicit watch_table(std::shared_ptr<stats_block> stats) : stats_(std::move(stats)) {}
  /// Calls `wake` (on the client thread; it must only post) when `path` changes in session `gen`.
  std::uint64_t add(std::uint64_t gen, std::string path, std::function<void()> wake);
  void remove(std::uint64_t token) noexcept;
  void fire(std::uint64_t gen, const std::string& path);
  void drop_older(std::uint64_t gen);

 private:
  struct entry {
    std::uint64_t gen;
    std::string path;
    std::function<void()> wake;
  };
  std::shared_ptr<stats_block> stats_;
  std::mutex mutex_;
  std::map<std::uint64_t, entry> entries_;
  std::uint64_t next_ = 1;
};

/// What a contender is told about the session.
struct session_event {
  // lapsed: the local lease of generation `gen` (lease_deadline()) has passed without an answer
  // (sent, like heartbeats, to the listeners that want heartbeats: the owners).
  enum kind_type { connected, disconnected, expired, heartbeat, lapsed } kind = heartbeat;
  std::uint64_t gen = 0;  // session generation (one per zhandle)
  std::uint64_t seq = 0;  // orders state events; heartbeats and lapses carry the current value
};

/// A contender's view of the session at subscription time.
struct session_snapshot {
  std::uint64_t gen = 0;
  std::uint64_t seq = 0;
  bool connected = false;
};

/// Receives session events; called on the session strand, must only post.
class session_listener {
 public:
  virtual ~session_listener() = default;
  virtual void on_session_event(const session_event& event) = 0;
  /// Whether a heartbeat or lapse event is wanted at `now` by a listener that asked for them
  /// (session::want_heartbeats(): an owner publishes its renewal with a heartbeat now and then
  /// and steps down at a lapse, a contender waiting for proof of the session goes on with a
  /// heartbeat); state events always come. Any thread.
  virtual bool wants(session_event::kind_type kind,
                     std::chrono::steady_clock::time_point now) const noexcept {
    (void)kind;
    (void)now;
    return true;
  }
};

/// One reading of the server's clock: the mtime of <base>/@clock after a write to it, between
/// `sent` and `received` on this host's wall clock.
struct clock_reading {
  int rc = ZOK;
  std::int64_t mtime_ms = 0;
  std::chrono::system_clock::time_point sent, received;
};
using clock_handler = std::function<void(const clock_reading&)>;

struct handle_ctx;
struct zk_request;

/// Requests a session keeps in the client at once (sent, not yet answered); more wait in the
/// session, in order. Below the server's default globalOutstandingLimit (1,000), so that the
/// server keeps reading our socket, and small enough that the heartbeat, which skips the queue,
/// is answered within milliseconds whatever the backlog.
inline constexpr unsigned max_requests_in_flight = 256;

class session : public std::enable_shared_from_this<session> {
 public:
  using strand_type = boost::asio::strand<boost::asio::io_context::executor_type>;

  /// Creates the session and its first handle; throws std::runtime_error if the client cannot
  /// be created.
  static std::shared_ptr<session> create(settings config, runtime& rt);
  session(settings config, runtime& rt);
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  const settings& config() const noexcept { return settings_; }
  runtime& rt() noexcept { return rt_; }
  stats_block& counters() noexcept { return *stats_; }
  /// Waits up to `timeout` until connected (not on an io thread). True if connected.
  bool wait_connected(std::chrono::milliseconds timeout);
  bool connected() const;
  /// The session generation now (changes when a new handle replaces an expired one).
  std::uint64_t generation() const;
  /// The negotiated session timeout (the requested one until first connected).
  std::chrono::milliseconds session_timeout() const;
  /// The session id of generation `gen`, 0 if unknown.
  std::int64_t client_id(std::uint64_t gen) const;
  /// Local lease of generation `gen`: send time of the latest answered request plus the
  /// negotiated session timeout minus a margin. Past for another generation.
  steady::time_point lease_deadline(std::uint64_t gen) const;

  /// Registers `listener` under `key` and returns the state it starts from.
  session_snapshot subscribe(std::uint64_t key, std::weak_ptr<session_listener> listener);
  void unsubscribe(std::uint64_t key) noexcept;
  /// Whether the listener under `key` gets heartbeat and lapse events too (those its wants()
  /// takes; off after subscribe()). Only the few that need them are visited for each one.
  void want_heartbeats(std::uint64_t key, bool on);

  // Asynchronous calls on generation `gen` (0: whatever is current). A call on another
  // generation fails with ZSESSIONEXPIRED. Handlers run on a client thread (or inline) and must
  // only post. Paths are absolute (the chroot is already in them).
  void create_lock(std::uint64_t gen, const std::string& path, const std::string& data,
                   op_handler handler);
  void ensure_path(std::uint64_t gen, const std::string& path, op_handler handler);
  void get_children(std::uint64_t gen, const std::string& path, op_handler handler);
  /// `urgent`: skips the flow queue (the heartbeat).
  void exists(std::uint64_t gen, const std::string& path, op_handler handler, bool urgent = false);
  /// Reads a node; with `watch_it` leaves a data watch that fires the watch table.
  void get(std::uint64_t gen, const std::string& path, bool watch_it, op_handler handler);
  void remove(std::uint64_t gen, const std::string& path, op_handler handler);
  /// Creates a node with `flags` (ZOO_PERSISTENT, ZOO_PERSISTENT_SEQUENTIAL, ...); the result's
  /// path is the created one. A missing parent is ZNONODE.
  void create(std::uint64_t gen, const std::string& path, const std::string& data, int flags,
              op_handler handler);
  /// Sets the data of `path` if its data version is `version` (-1: any); the result's stat is
  /// the node's new one. ZBADVERSION when another version is there.
  void set(std::uint64_t gen, const std::string& path, const std::string& data, int version,
           op_handler handler);
  /// exists() that leaves a watch on `path` whether or not it exists: its creation, change or
  /// deletion fires the watch table.
  void exists_watch(std::uint64_t gen, const std::string& path, op_handler handler);
  /// One transaction: `check_path` exists and `create_path` is created with `data` and `flags`.
  /// On failure the result's failed_op says which (0: the checked node is gone).
  void check_and_create(std::uint64_t gen, const std::string& check_path,
                        const std::string& create_path, std::string data, int flags,
                        op_handler handler);
  /// One transaction: `check_path` exists, and `set_path`'s data becomes `data`.
  void check_and_set(std::uint64_t gen, const std::string& check_path, const std::string& set_path,
                     std::string data, op_handler handler);

  /// Reads the server's clock for a contender (a write of <base>/@clock). Readings are shared:
  /// one younger than clock_reading_reuse is handed out again, and callers that come while a
  /// read is out wait for it, so 100,000 contenders probing once a minute cost about one write
  /// a second, not 1,700. `handler` runs on the session strand (or a client thread, or inline)
  /// and must only post.
  void read_clock(std::uint64_t gen, clock_handler handler);
  static constexpr std::chrono::milliseconds clock_reading_reuse{1'000};

  watch_table& watches() noexcept { return *watches_; }
  /// Forgets the cached existence of `dir` (after ZNONODE under it).
  void forget_dir(const std::string& dir);
  /// Deletes, once connected, any node under `dir` carrying `guid`'s protection prefix: a node a
  /// contender abandoned with an old session (ghost cleanup).
  void delete_abandoned(const std::string& dir, const std::string& guid);

  /// Test hook: closes the session on the server through a second client. Blocking.
  bool expire_for_test(std::chrono::milliseconds timeout);

 private:
  static void session_watcher(zhandle_t* zh, int type, int state, const char* path, void* ctx);

  void open_handle();  // on the strand (or in create)
  void on_state(std::uint64_t gen, int state);
  void rebuild(const char* why);
  void broadcast(session_event::kind_type kind);
  void heartbeat(std::uint64_t gen);
  void on_heartbeat(std::uint64_t gen, int rc);
  // The lapse timer: one per session, at lease_deadline() (owners need no timer of their own).
  void arm_lapse(std::uint64_t gen);
  // Between heartbeats: a third of the session timeout (at least 10 ms).
  std::chrono::milliseconds heartbeat_period() const {
    return std::max(session_timeout() / 3, std::chrono::milliseconds{10});
  }
  void mark_known(const std::string& dir);
  void arm_local_expiry(std::uint64_t gen);
  void clean_abandoned();
  void clock_read(clock_reading reading);  // on the strand
  std::string clock_path() const { return settings_.base() + "/@clock"; }
  // Sends (or queues, see handle_ctx) `call` on the handle of generation `gen`; fails `handler`
  // with ZSESSIONEXPIRED when `gen` is not current. `urgent` requests skip the flow queue.
  using send_call = std::function<int(zhandle_t*, zk_request*)>;
  void submit(std::uint64_t gen, op_handler handler, send_call call, bool urgent = false);

  settings settings_;
  runtime& rt_;
  strand_type strand_;
  std::shared_ptr<stats_block> stats_;
  std::shared_ptr<watch_table> watches_;

  mutable std::shared_mutex handle_mutex_;  // guards zh_ and ctx_ (shared: calls, unique: swap)
  zhandle_t* zh_ = nullptr;
  std::shared_ptr<handle_ctx> ctx_;

  mutable std::mutex state_mutex_;  // guards the fields below
  std::condition_variable connected_cv_;
  std::uint64_t gen_ = 0;
  std::uint64_t seq_ = 0;
  bool connected_ = false;
  std::map<std::uint64_t, std::weak_ptr<session_listener>> listeners_;
  std::unordered_map<std::uint64_t, std::weak_ptr<session_listener>> heartbeat_listeners_;
  std::set<std::string> known_dirs_;
  std::atomic<int> last_negotiated_ms_{0};
  std::vector<std::pair<std::string, std::string>> abandoned_;  // (dir, guid)
  // Clock readings (guarded by state_mutex_).
  std::optional<clock_reading> clock_;
  steady::time_point clock_at_{};
  bool clock_reading_out_ = false;
  std::vector<clock_handler> clock_waiters_;

  // Strand only.
  boost::asio::steady_timer heartbeat_timer_;
  boost::asio::steady_timer expiry_timer_;
  boost::asio::steady_timer connect_timer_;
  boost::asio::steady_timer rebuild_timer_;
  std::uint64_t heartbeat_seq_ = 0;
  boost::asio::steady_timer lapse_timer_;
  std::uint64_t lapse_seq_ = 0;
  bool ever_connected_ = false;      // in this generation
  bool warned_unreachable_ = false;  // once per outage
  unsigned rebuild_failures_ = 0;
};

/// Builds the owner record of a lock node: owner_id = its data (the contender id), fence =
/// czxid, acquired_at = ctime. ZooKeeper keeps no lease times, so ttl_at and transition_at are
/// estimates on the local clock: ttl_at = now + timeout/3 (the owner's session is proven alive
/// at least that often), transition_at = now + timeout (if the owner vanished now, its session
/// and node end no sooner than that).
mutex_owner owner_record(const std::string& owner_id, const struct Stat& stat,
                         std::chrono::milliseconds session_timeout);

/// True for return codes that are answers of the server (the request reached it).
bool server_answered(int rc) noexcept;
/// True for connection trouble that a reconnect within the session may cure.
bool connection_trouble(int rc) noexcept;
/// True when the session (or handle) is gone.
bool session_gone(int rc) noexcept;

}  // namespace baton::backends::zookeeper::detail
