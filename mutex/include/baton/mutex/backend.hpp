#pragma once
/// A backend instance: makes contend services for named mutexes and answers status queries.
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "baton/mutex/contend_service.hpp"
#include "baton/mutex/contender.hpp"
#include "baton/mutex/lease_store.hpp"
#include "baton/mutex/options.hpp"
#include "baton/mutex/owner.hpp"
#include "baton/mutex/records.hpp"
#include "baton/mutex/runtime.hpp"

namespace baton {

/// One backend (connections, sessions) shared by every mutex of a process.
class mutex_backend {
 public:
  virtual ~mutex_backend() = default;

  /// "sqlite", "postgresql", "mysql", "redis", "zookeeper" or "memory".
  virtual std::string_view type() const noexcept = 0;
  /// Options suited to this backend (poll interval and so on).
  virtual contend_options default_options() const { return {}; }
  /// A stopped contend service for `name`; throws std::invalid_argument for a bad name or
  /// options. An empty `contender_id` gets make_contender_id().
  virtual std::shared_ptr<contend_service> make_contend_service(
      const std::string& name, std::shared_ptr<mutex_contender> contender,
      const contend_options& options, std::string contender_id = {}) = 0;
  /// The owner record of `name` (blocking; not on an io thread). Throws std::system_error.
  virtual mutex_owner read_owner(const std::string& name) = 0;
  /// The lease-guarded state of `name` (blocking). Throws std::system_error.
  virtual std::string read_state(const std::string& name) = 0;
  /// The contender ids waiting for `name` now, first in line first (blocking). std::nullopt when
  /// this backend keeps no record of its waiters (SQL: waiters only poll). Throws
  /// std::system_error.
  virtual std::optional<std::vector<std::string>> read_waiters(const std::string& name) {
    return std::nullopt;
  }
  /// History and controls of every mutex of this backend (records.hpp). The store lives as long
  /// as the backend.
  virtual record_store& records() = 0;
};

/// A mutex_backend over a lease_store (the SQL, Redis and in-memory backends).
class lease_store_backend : public mutex_backend {
 public:
  /// `records` serves records(); a store that implements both interfaces may be passed twice.
  lease_store_backend(std::string type, runtime& rt, std::shared_ptr<lease_store> store,
                      std::shared_ptr<record_store> records, contend_options defaults = {});
  /// records() is `store` itself if it is also a record_store; else every record request
  /// fails with errc::backend_error (a lease_store made before history and controls existed).
  lease_store_backend(std::string type, runtime& rt, std::shared_ptr<lease_store> store,
                      contend_options defaults = {});
  std::string_view type() const noexcept override { return type_; }
  contend_options default_options() const override { return defaults_; }
  std::shared_ptr<contend_service> make_contend_service(const std::string& name,
                                                        std::shared_ptr<mutex_contender> contender,
                                                        const contend_options& options,
                                                        std::string contender_id = {}) override;
  mutex_owner read_owner(const std::string& name) override;
  std::string read_state(const std::string& name) override;
  record_store& records() override { return *records_; }
  const std::shared_ptr<lease_store>& store() const noexcept { return store_; }

 private:
  std::string type_;
  runtime& runtime_;
  std::shared_ptr<lease_store> store_;
  std::shared_ptr<record_store> records_;
  contend_options defaults_;
};

/// How to reach a backend: its type and string parameters (`path`, `connection`, `url`, ...).
struct backend_config {
  std::string type;
  std::map<std::string, std::string> params;
  /// Inspect only (`baton status`): the backend answers read_owner() and read_state() and
  /// creates or changes nothing on the server (no database file, table, key or node);
  /// make_contend_service() throws std::logic_error. Not a config file parameter.
  bool read_only = false;
};

/// Thrown by read_owner() and read_state() of a read-only backend whose store does not exist
/// yet (an SQLite file, an SQL table): nothing has run there. what() names what is missing.
class store_missing : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace baton
