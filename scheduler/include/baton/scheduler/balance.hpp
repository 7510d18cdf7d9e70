#pragma once
/// Spreading a cluster's schedules over its nodes ("balance"): who the live nodes are (each node
/// keeps a membership record in the backend's controls store and reads the others'), which node
/// each schedule is assigned to (a pure, deterministic function of the live nodes and the
/// schedules: every node computes the same answer), and drain.
///
/// The mutex stays the only guard: an assignment decides who *contends* for a schedule, never
/// who may run it. A node contends only for the schedules assigned to it; a node that leads a
/// schedule assigned to another hands it off (releases it) at a quiet moment, once the assignee
/// shows the same view, at most `handoff_rate` per second.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "baton/mutex/backend.hpp"

namespace baton {

/// How a scheduler spreads its schedules over the nodes of its cluster.
struct balance_options {
  /// true: fair share (each live node leads about S/N of the schedules it may run); false:
  /// first come (every node contends for every schedule it may run; whichever asks first wins,
  /// which keeps one "primary" node leading everything while it lives).
  bool enabled = false;
  /// This node's name in the cluster, stable across restarts ([A-Za-z0-9._-]{1,100}); a node
  /// that comes back under the same id before its record times out is the same member (nothing
  /// moves). Empty: the scheduler's contender id (a new member at every start).
  std::string node_id;
  /// This node's tags (same characters as a node id); schedules may require or prefer them.
  /// Tags decide which schedules a node contends for also when balance is off.
  std::vector<std::string> tags;
  /// How often this node writes its membership record and reads the others'. 0: a third of
  /// the scheduler's lease transition, between 100 ms and 1 s (the others notice a crashed node
  /// within about the time its leases take to lapse).
  std::chrono::milliseconds heartbeat{0};
  /// A member whose record has not changed for this long (on the reader's steady clock) is gone.
  /// 0: the scheduler's lease transition, at least 3 heartbeats.
  std::chrono::milliseconds member_timeout{0};
  /// A new view must hold this long before this node hands schedules off (a node that flaps
  /// does not move work back and forth). 0: 2 heartbeats.
  std::chrono::milliseconds settle{0};
  /// Most schedules this node hands off per second (a token bucket with a burst of 1 second).
  double handoff_rate = 5.0;
};

/// Checks `o` (node id and tag characters, positive heartbeat, rate, timeouts); each problem's
/// field is "node_id", "tags", "heartbeat", "member_timeout", "settle" or "handoff_rate".
std::vector<setting_problem> check(const balance_options& o);

/// `o` with its defaults filled in the way the scheduler runs it: an empty node_id from
/// `contender_id` (characters outside the node id set become '-'), heartbeat 0 ->
/// lease.transition / 3 clamped to [100 ms, 1 s], member_timeout 0 -> max(lease.transition, 3
/// heartbeats), settle 0 -> 2 heartbeats.
balance_options resolve(balance_options o, const contend_options& lease,
                        const std::string& contender_id);

/// A node as the assignment sees it.
struct balance_node {
  std::string id;
  std::vector<std::string> tags;  ///< sorted, unique
  bool draining = false;          ///< gets a schedule only when no other node may run it

  friend bool operator==(const balance_node&, const balance_node&) = default;
};

/// A schedule as the assignment sees it.
struct balance_schedule {
  std::string name;
  std::vector<std::string> required_tags;   ///< a node must have all of them to contend
  std::vector<std::string> preferred_tags;  ///< nodes with all of them come first

  friend bool operator==(const balance_schedule&, const balance_schedule&) = default;
};

/// True when `node` has every tag of `required`.
bool has_tags(const std::vector<std::string>& node_tags, const std::vector<std::string>& required);

/// The node id each schedule is assigned to (same order as `schedules`; "" when no node has its
/// required tags). Deterministic: depends only on the sets given, not their order. Bounded-load
/// rendezvous hashing: each schedule ranks the nodes it may run on (preferred first, then by a
/// hash of schedule and node), the most constrained schedules choose first, and a node takes at
/// most floor(S/N) (S mod N of them one more) while another eligible node has room; draining
/// nodes only take what nobody else may run. When one node joins or leaves, about S/N schedules
/// move.
std::vector<std::string> assign_schedules(const std::vector<balance_node>& nodes,
                                          const std::vector<balance_schedule>& schedules);

/// A short hex digest of a schedule set (names and tags; order does not matter). Nodes with
/// different digests run different configs: the scheduler then falls back to first come.
std::string schedules_digest(const std::vector<balance_schedule>& schedules);

/// A short hex digest of a view: the live nodes (ids, tags, draining) and the schedules digest.
std::string view_digest(const std::vector<balance_node>& nodes, const std::string& schedules);

/// One node's membership record as published in the backend (controls of
/// balance_record_name(node_id)), and as seen by a reader.
struct balance_member {
  std::string node_id;
  std::string contender_id;  ///< the process that wrote it last
  std::vector<std::string> tags;
  bool drain = false;       ///< asked to drain (by SIGUSR1, scheduler::drain or `baton drain`)
  bool drained = false;     ///< draining and leads nothing any more
  bool leaving = false;     ///< stopped on purpose: gone at once, without waiting for the timeout
  bool balance = true;      ///< false: the node contends first come (it is shown, not assigned)
  std::uint64_t leads = 0;  ///< schedules it leads
  std::uint64_t assigned = 0;        ///< schedules its view assigns to it
  std::uint64_t schedule_count = 0;  ///< schedules in its config
  std::string view;                  ///< view_digest() of its current view ("" before it has one)
  std::string schedules;             ///< schedules_digest() of its config
  /// Its wall clock when it wrote the record (display, and a hint for records long dead).
  std::optional<std::chrono::system_clock::time_point> written_at;
  std::uint64_t version = 0;  ///< the controls record's version
  /// Reader's verdict: the record changed within member_timeout and is not `leaving` (a one-shot
  /// reader, such as `baton status`, goes by written_at instead).
  bool alive = false;
};

/// The controls record name of a node's membership record: "baton.node.<node_id>".
std::string balance_record_name(const std::string& node_id);
/// The controls record that lists every node id: "baton.nodes".
inline constexpr const char* balance_registry_name = "baton.nodes";
/// True for names the membership records use (a schedule may not have one).
bool is_balance_record_name(const std::string& name);

/// JSON of a membership record, and back (nullopt when unreadable).
std::string format_member(const balance_member& m);
std::optional<balance_member> parse_member(const std::string& bytes);

/// What a scheduler's balancer knows now (scheduler::balance()).
struct balance_status {
  bool enabled = false;
  std::string node_id;
  std::vector<std::string> tags;
  bool draining = false;
  bool drained = false;     ///< draining, and leads nothing
  bool view_ready = false;  ///< a view has been read from the backend
  /// Members run different schedule sets: every node contends first come until they agree.
  bool mixed_configs = false;
  std::string view;  ///< view_digest() of the current view
  /// Every member of the registry as last read, alive or not, by node id.
  std::vector<balance_member> members;
  std::size_t alive = 0;            ///< members alive (this node included)
  std::size_t assigned = 0;         ///< schedules assigned to this node by the current view
  std::size_t leads = 0;            ///< schedules this node leads
  std::uint64_t handoffs = 0;       ///< schedules handed off to another node
  std::uint64_t view_changes = 0;   ///< times the view changed
  std::uint64_t record_errors = 0;  ///< failed reads or writes of membership records
};

/// Blocking tools (not on an io thread; `baton status`, `baton drain`). Throw std::system_error.
/// Every membership record listed in the registry, by node id; `alive` from written_at: within
/// `timeout` of this host's wall clock and not leaving.
std::vector<balance_member> read_members(mutex_backend& backend, std::chrono::milliseconds timeout);
/// Sets (or clears) the drain request of `node_id`'s membership record (compare-and-set).
/// Throws std::invalid_argument when the registry has no such node. Returns the record written.
balance_member request_drain(mutex_backend& backend, const std::string& node_id, bool drain);

}  // namespace baton
