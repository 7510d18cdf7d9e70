#pragma once
/// The ZooKeeper backend: each contender owns an ephemeral sequential node under
/// `<chroot><root>/<name>/`; the lowest node owns the mutex, every other contender watches only
/// its predecessor, and the owner node's czxid is the fencing token.
#include <memory>

#include "baton/mutex/backend.hpp"
#include "baton/mutex/backend_descriptor.hpp"
#include "baton/mutex/runtime.hpp"

namespace baton::backends::zookeeper {

/// Builds a ZooKeeper backend with one session shared by every mutex. Parameters of `config`:
/// `hosts` ("127.0.0.1:2181[,host:port...][/chroot]", required), `session_timeout` (duration,
/// default "6s"), `root` (default "/baton"), optional `username` and `password` (digest ACLs).
/// Throws std::invalid_argument naming the parameter when one is malformed, and
/// std::runtime_error when the client cannot be created. Waits a bounded time (at most the
/// session timeout) for the first connection; an unreachable server is logged, not fatal:
/// operations then fail with errc::connection_lost until it can be reached.
std::shared_ptr<mutex_backend> make_backend(const backend_config& config, runtime& rt);

/// The "zookeeper" type: its parameters (above), its default lease (derived from
/// session_timeout, detail::lease_defaults) and make_backend().
const backend_descriptor& descriptor();

}  // namespace baton::backends::zookeeper
