#pragma once
/// Internals of the ZooKeeper backend that tests need: settings parsing, lock node names, error
/// translation, counters and fault injection (test hooks such as expire_session). Not a stable
/// API and not installed: internal/ is on the include path of this module and of the test-only
/// target baton_backend_zookeeper_internal.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "baton/mutex/backend.hpp"
#include "baton/mutex/options.hpp"

namespace baton::backends::zookeeper::detail {

/// A parsed and validated backend_config.
struct settings {
  std::string hosts;   ///< "host:port,host:port" as handed to the client (chroot removed)
  std::string chroot;  ///< "" or "/a/b": we prefix it to every path ourselves
  std::string root;    ///< "/baton"
  std::chrono::milliseconds session_timeout{6'000};  ///< requested; the server may clamp it
  std::string username;                              ///< digest ACL user, empty for open ACLs
  std::string password;

  /// Absolute path of the folder holding one child per mutex: chroot + root.
  std::string base() const { return chroot + root; }
  /// Where the mutex `name` lives: base()/name. Its data is the lease-guarded state.
  std::string mutex_dir(const std::string& name) const { return base() + "/" + name; }
};

/// Parses and checks the `hosts`, `session_timeout`, `root`, `username` and `password`
/// parameters. Throws backend_param_error naming the parameter (an unknown one too).
settings parse_settings(const backend_config& config);

/// The backend's default_options(): the session timeout governs the lease, ttl + transition =
/// the requested timeout (ttl a third of it), so locker waits and unlock bounds match it. Only
/// retry_period (a quarter of the timeout within 50ms..1s, and below ttl) and max_backoff are
/// used by the contend service.
contend_options lease_defaults(const settings& s);

/// The margin the local lease keeps before the session could end on the server (clock drift,
/// scheduling delays): max(50 ms, timeout / 50).
std::chrono::milliseconds session_drift_margin(std::chrono::milliseconds negotiated_timeout);

/// The local lease of a ZooKeeper owner (steady clock): the server cannot end the session before
/// `negotiated_timeout` after it last heard from us, and the latest we know it heard from us is
/// the send time of the latest answered request, `last_answer_sent`. Deadline = that +
/// negotiated timeout - session_drift_margin(). It holds through a disconnect (CONNECTING): a
/// reconnect within the session moves it on, else the owner steps down at it. Time zero when
/// nothing was answered yet or no timeout was negotiated.
std::chrono::steady_clock::time_point session_lease_deadline(
    std::chrono::steady_clock::time_point last_answer_sent,
    std::chrono::milliseconds negotiated_timeout);

/// Empty when `path` is a valid absolute ZooKeeper path other than "/", else why not.
std::string path_error(std::string_view path);

/// The protection prefix of a contender's lock nodes: "_c_<guid>-lock-".
std::string lock_prefix(std::string_view guid);

/// The sequence number of lock node `node` ("_c_<guid>-lock-0000000042" -> 42), or -1 when
/// `node` is not a lock node.
std::int64_t lock_sequence(std::string_view node);

/// The lock nodes among `children`, lowest sequence first (other names are dropped).
std::vector<std::string> sorted_locks(std::vector<std::string> children);

/// A fresh random GUID (32 hex digits) for a protection prefix.
std::string make_guid();

/// The one translation of ZooKeeper C client return codes (ZOK, ZCONNECTIONLOSS, ...) into
/// baton::errc. ZOK gives an empty error_code.
std::error_code translate(int zoo_rc);

/// Counters of one backend instance (for tests and metrics).
struct stats {
  std::uint64_t sessions = 0;          ///< zookeeper handles created (1 + every rebuild)
  std::uint64_t local_expiries = 0;    ///< sessions given up by the local timer while disconnected
  std::uint64_t disconnects = 0;       ///< CONNECTING events seen while connected
  std::uint64_t watch_events = 0;      ///< predecessor watch events delivered to contenders
  std::uint64_t nodes_created = 0;     ///< lock nodes created
  std::uint64_t nodes_adopted = 0;     ///< lock nodes found by protection prefix after a lost reply
  std::uint64_t ghosts_deleted = 0;    ///< nodes of abandoned sessions deleted by us
  std::uint64_t heartbeats = 0;        ///< answered session heartbeats
  std::uint64_t heartbeat_events = 0;  ///< heartbeat events handed to contenders (owners, mostly)
  std::uint64_t lapses = 0;            ///< times the session's local lease ran out
  std::uint64_t max_in_flight = 0;     ///< the flow bound: requests in the client at once
  std::uint64_t peak_in_flight = 0;    ///< most requests in the client at once so far
  std::uint64_t peak_waiting = 0;      ///< most requests waiting for a flow slot so far
};

/// Counters of `backend`; throws std::invalid_argument if it is not a ZooKeeper backend.
stats get_stats(mutex_backend& backend);

/// Fault injection: the next `count` lock-node creates succeed on the server, but their replies
/// are reported as ZCONNECTIONLOSS (as when the connection breaks just before the reply).
void inject_lost_create_replies(mutex_backend& backend, unsigned count);

/// Fault injection: while `on`, answers do not prove the session alive (its local lease is not
/// extended), as if the server had stopped answering while the connection stays up.
void inject_unproven_answers(mutex_backend& backend, bool on);

/// The current session id (0 while there is none).
std::int64_t session_id(mutex_backend& backend);

/// Expires the current session on the server, the way tests do it: a second client attaches to
/// the same session and closes it. Blocking; true once the server closed the session.
bool expire_session(mutex_backend& backend, std::chrono::milliseconds timeout);

}  // namespace baton::backends::zookeeper::detail
