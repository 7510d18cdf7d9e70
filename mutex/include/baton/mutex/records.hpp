#pragma once
/// What a backend keeps per mutex beside the owner record and the lease-guarded state: a bounded
/// history written only by the owner (fence-checked), and a small controls record that anyone may
/// write with compare-and-set. The bytes are opaque here (the scheduler writes JSON into both).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <system_error>
#include <vector>

namespace baton {

/// One history entry as stored.
struct history_entry {
  /// Per mutex, assigned by the backend, from 1, strictly increasing in write order (never
  /// reused, also after pruning).
  std::uint64_t seq = 0;
  std::uint64_t fence = 0;  ///< the fence the entry was written with
  std::string bytes;        ///< opaque

  friend bool operator==(const history_entry&, const history_entry&) = default;
};

/// The controls record of a mutex and its version.
struct controls_record {
  std::string bytes;          ///< opaque; empty when never written
  std::uint64_t version = 0;  ///< 0: never written; each successful write adds 1

  friend bool operator==(const controls_record&, const controls_record&) = default;
};

/// Limits every backend accepts (larger input: errc::invalid_argument, nothing written).
inline constexpr std::size_t max_history_entry_bytes = 64 * 1024;
inline constexpr std::size_t max_history_keep = 10'000;
inline constexpr std::size_t max_controls_bytes = 16 * 1024;

/// History and controls operations. Handlers may run on any thread (also inline); each is called
/// exactly once. Names are already validated (baton::validate_mutex_name). Backend errors are
/// baton::errc codes, as for lease_store.
class record_store {
 public:
  using append_handler = std::function<void(std::error_code)>;
  using history_handler = std::function<void(std::error_code, std::vector<history_entry>)>;
  using controls_handler = std::function<void(std::error_code, controls_record)>;

  virtual ~record_store() = default;

  /// Appends `bytes` to the history of `name` if the backend records `owner_id` as the owner of
  /// the mutex with `fence` (whether or not its ttl has passed: what matters is that no other
  /// ownership began since), else errc::not_owner and nothing is written. In the same atomic
  /// step (or right after it, by the same writer) it deletes all but the newest `keep` entries
  /// (1 <= keep <= max_history_keep). History outlives the ownership that wrote it.
  virtual void async_append_history(const std::string& name, const std::string& owner_id,
                                    std::uint64_t fence, std::string bytes, std::size_t keep,
                                    append_handler handler) = 0;
  /// The newest `limit` entries (or fewer), newest first. A mutex with no history: empty.
  virtual void async_read_history(const std::string& name, std::size_t limit,
                                  history_handler handler) = 0;
  /// The controls record ({"", 0} if never written).
  virtual void async_read_controls(const std::string& name, controls_handler handler) = 0;
  /// Compare-and-set: writes `bytes` if the stored version is `expected` (0: never written) and
  /// replies the new record (version expected + 1). Else errc::conflict, replying the record
  /// that is there now. Not fence-guarded: any process may write.
  virtual void async_write_controls(const std::string& name, std::uint64_t expected,
                                    std::string bytes, controls_handler handler) = 0;
  /// Asks to be told (`changed`, any thread, possibly more often than needed) soon after the
  /// controls of `name` change, by a push from the backend. Returns a handle for
  /// unwatch_controls(); 0: this backend has no push for controls, and the caller polls.
  virtual std::uint64_t watch_controls(const std::string& name, std::function<void()> changed) {
    return 0;
  }
  virtual void unwatch_controls(std::uint64_t handle) noexcept {}
};

/// Blocking forms for tools and embedding services (not on an io thread): wait at most
/// `timeout` for the answer. Throw std::system_error (errc::timeout when no answer came,
/// errc::conflict from write_controls with the current record lost: read again).
std::vector<history_entry> read_history(record_store& store, const std::string& name,
                                        std::size_t limit,
                                        std::chrono::milliseconds timeout = std::chrono::seconds{
                                            30});
controls_record read_controls(record_store& store, const std::string& name,
                              std::chrono::milliseconds timeout = std::chrono::seconds{30});
/// One compare-and-set attempt; std::nullopt-like failure is a std::system_error(errc::conflict).
controls_record write_controls(record_store& store, const std::string& name, std::uint64_t expected,
                               std::string bytes,
                               std::chrono::milliseconds timeout = std::chrono::seconds{30});
/// Read-modify-write until it sticks (at most `attempts` conflicts): `change` gets the current
/// bytes (empty if never written) and returns the new bytes. Returns the record written.
controls_record update_controls(record_store& store, const std::string& name,
                                const std::function<std::string(const std::string&)>& change,
                                int attempts = 20,
                                std::chrono::milliseconds timeout = std::chrono::seconds{30});

}  // namespace baton
