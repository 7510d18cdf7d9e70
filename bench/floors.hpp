#pragma once
// Floors for the throughput figure: one lock+unlock cycle done by hand, synchronously from one
// thread, with the same client library and the same requests a baton backend sends. What baton
// adds on top of these (threads, strands, timers, callbacks) is the difference to the figure.
#include <memory>
#include <string>

namespace baton::bench {

/// A raw lock on one mutex, through the backend's own client library.
class floor_lock {
 public:
  virtual ~floor_lock() = default;
  /// Acquires and releases once. Throws std::runtime_error when a request fails or the
  /// acquire does not make this client the owner (the mutex is not contended here).
  virtual void cycle() = 0;
  /// What one cycle sends, for the record ("EVALSHA acquire + EVALSHA release").
  virtual std::string requests() const = 0;
};

/// A floor lock on mutex `name` for backend `type` (the servers of backend_from_env(type); the
/// Redis scripts from $BATON_BENCH_LUA_DIR). Keys, tables and znodes are kept apart from
/// baton's own. Throws std::runtime_error when it cannot connect or set up.
std::unique_ptr<floor_lock> make_floor_lock(const std::string& type, const std::string& name);

}  // namespace baton::bench
