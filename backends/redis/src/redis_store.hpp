#pragma once
// The lease_store over Redis: owner records kept by Lua scripts, wake-ups over pub/sub.
#include <boost/asio/io_context.hpp>
#include <memory>

#include "baton/mutex/lease_store.hpp"
#include "redis_config.hpp"

namespace baton::backends::redis::detail {

/// A started store with its command and subscriber connections (connecting in the background).
std::shared_ptr<lease_store> make_store(boost::asio::io_context& io, const settings& config);

}  // namespace baton::backends::redis::detail
