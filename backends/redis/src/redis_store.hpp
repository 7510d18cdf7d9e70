#pragma once
// The lease_store and record_store over Redis: owner records, history and controls kept by Lua
// scripts, wake-ups and controls changes over pub/sub.
#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "baton/mutex/lease_store.hpp"
#include "baton/mutex/records.hpp"
#include "redis_config.hpp"

namespace baton::backends::redis::detail {

/// One store serving both interfaces (the backend passes it twice), plus the wait queue.
class store : public lease_store, public record_store {
 public:
  using waiters_handler = std::function<void(std::error_code, std::vector<std::string>)>;
  /// The contenders waiting for `name`, first in line first (read_waiters.lua).
  virtual void async_read_waiters(const std::string& name, waiters_handler handler) = 0;
};

/// A started store with its command and subscriber connections (connecting in the background).
std::shared_ptr<store> make_store(boost::asio::io_context& io, const settings& config);

}  // namespace baton::backends::redis::detail
