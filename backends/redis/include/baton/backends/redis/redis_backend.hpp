#pragma once
/// The Redis backend: owner records kept by Lua scripts, FIFO wake-ups over pub/sub.
#include <memory>

#include "baton/mutex/backend.hpp"
#include "baton/mutex/backend_descriptor.hpp"
#include "baton/mutex/runtime.hpp"

namespace baton::backends::redis {

/// Builds a Redis backend with one command connection and one subscriber connection, shared by
/// every mutex of the backend. Parameters of `config.params`:
///   `url`             redis://[[user]:password@]host[:port][/db] (port 6379, db 0), or:
///   `sentinels`       host[:port],... of Redis Sentinels (port 26379) with `master`, the name
///                     they monitor: the master is resolved through them on every connect and
///                     followed on +switch-master; `user`/`password` log in to the master,
///                     `sentinel_user`/`sentinel_password` to the sentinels
///   `key_prefix`      prefix of every key and channel (default "baton:"; no '{' or '}')
///   `poll_interval`   default_options().poll_interval: how often waiters re-check (default 1s)
///   `connect_timeout` connect + AUTH/SELECT deadline (default 2s)
///   `command_timeout` per-command deadline; a late reply drops the connection (default 2s)
///   `handoff_window`  how long a released mutex is reserved for the longest waiter (500ms)
/// Durations are integers with a unit (`250ms`, `2s`, `1m`). Throws std::invalid_argument
/// naming the parameter (and the URL, password masked) when a value is malformed. Does not
/// wait for the server: an unreachable server shows up as errc::connection_lost later.
std::shared_ptr<mutex_backend> make_backend(const backend_config& config, runtime& rt);

/// The "redis" type: its parameters (above), its default lease and make_backend().
const backend_descriptor& descriptor();

}  // namespace baton::backends::redis
