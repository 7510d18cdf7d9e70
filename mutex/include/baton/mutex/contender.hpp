#pragma once
/// What a contender is told by its contend service.
#include <system_error>

#include "baton/mutex/owner.hpp"

namespace baton {

/// Receives ownership changes. Calls are serialized on the service's strand; on_acquired and
/// on_released strictly alternate, starting with on_acquired. They must not block for long and
/// must not throw (an exception is logged and swallowed).
class mutex_contender {
 public:
  virtual ~mutex_contender() = default;
  /// This contender became owner; `state.after.fence` is its fencing token.
  virtual void on_acquired(const mutex_state& state) = 0;
  /// This contender is no longer owner (released, lost, lease ran out, or stopped).
  virtual void on_released(const mutex_state& state) = 0;
  /// After every contend round: the owner as the backend reported it. Optional.
  virtual void on_observed(const mutex_owner& current) {}
  /// After a failed contend round (backend unreachable, timeout, ...). Optional.
  virtual void on_error(std::error_code ec) {}
};

}  // namespace baton
