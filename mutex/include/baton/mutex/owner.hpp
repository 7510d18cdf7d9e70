#pragma once
/// The owner record a backend keeps for each mutex, and the mutex_state seen by contenders.
#include <chrono>
#include <cstdint>
#include <string>

namespace baton {

/// Milliseconds on the backend's own clock (SQL now(), Redis TIME). Never compared with a local
/// wall clock; only differences between two backend times are used.
using backend_time = std::chrono::time_point<std::chrono::system_clock, std::chrono::milliseconds>;

/// Who owns a mutex according to the backend. An empty owner_id means nobody owns it.
struct mutex_owner {
  std::string owner_id;          ///< contender id of the owner, empty when free
  backend_time acquired_at{};    ///< when the current ownership began (fence issued)
  backend_time ttl_at{};         ///< from here on the owner renews
  backend_time transition_at{};  ///< before this nobody else may acquire
  std::uint64_t fence = 0;       ///< fencing token: strictly increases with every new ownership

  /// True when no contender owns the mutex.
  bool empty() const noexcept { return owner_id.empty(); }
  /// True when `id` owns the mutex.
  bool is(const std::string& id) const noexcept { return !id.empty() && owner_id == id; }

  friend bool operator==(const mutex_owner&, const mutex_owner&) = default;
};

/// The change a contender is told about: the owner before and after, seen from `self`.
struct mutex_state {
  mutex_owner before;
  mutex_owner after;  ///< empty when ownership was given up locally (lease ran out, stop)
  std::string self;

  /// `self` became owner.
  bool acquired() const noexcept { return after.is(self) && !(before.is(self) && same_term()); }
  /// `self` stopped being owner.
  bool released() const noexcept { return before.is(self) && !(after.is(self) && same_term()); }
  /// Owner or fence differ between before and after.
  bool changed() const noexcept { return !same_term(); }

 private:
  bool same_term() const noexcept {
    return before.owner_id == after.owner_id && before.fence == after.fence;
  }
};

}  // namespace baton
