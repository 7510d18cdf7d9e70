#include "baton/backends/factory.hpp"

#include <stdexcept>

#include "baton/mutex/errc.hpp"
#include "baton/mutex/memory_store.hpp"
#ifdef BATON_HAS_SQL
#include "baton/backends/sql/sql_backend.hpp"
#endif
#ifdef BATON_HAS_REDIS
#include "baton/backends/redis/redis_backend.hpp"
#endif
#ifdef BATON_HAS_ZOOKEEPER
#include "baton/backends/zookeeper/zookeeper_backend.hpp"
#endif

namespace baton {
namespace {

const backend_descriptor& memory_descriptor() {
  static const backend_descriptor d = [] {
    backend_descriptor d;
    d.type = "memory";
    d.doc = "in this process only: for trying things out and tests";
    d.process_local =
        "the memory backend keeps leases in this process only: another baton running this "
        "config runs every job too (no exclusion between processes); for more than one node use "
        "sqlite, postgresql, mysql, redis or zookeeper";
    d.default_lease = [](const backend_config&) { return contend_options{}; };
    d.make = [](const backend_config&, runtime& rt) -> std::shared_ptr<mutex_backend> {
      auto store = std::make_shared<memory_lease_store>();
      return std::make_shared<lease_store_backend>("memory", rt, store, store);
    };
    return d;
  }();
  return d;
}

// The records of a read-only backend: reads pass through, writes are refused.
class read_only_records final : public record_store {
 public:
  explicit read_only_records(record_store& inner) : inner_(inner) {}
  void async_append_history(const std::string&, const std::string&, std::uint64_t, std::string,
                            std::size_t, append_handler handler) override {
    handler(make_error_code(errc::invalid_argument));
  }
  void async_read_history(const std::string& name, std::size_t limit,
                          history_handler handler) override {
    inner_.async_read_history(name, limit, std::move(handler));
  }
  void async_read_controls(const std::string& name, controls_handler handler) override {
    inner_.async_read_controls(name, std::move(handler));
  }
  void async_write_controls(const std::string&, std::uint64_t, std::string,
                            controls_handler handler) override {
    handler(make_error_code(errc::invalid_argument), {});
  }

 private:
  record_store& inner_;
};

// A backend built with backend_config::read_only: reads pass through, contending and writing
// records are refused, so nothing that inspects a backend can write to it by accident.
class read_only_backend final : public mutex_backend {
 public:
  explicit read_only_backend(std::shared_ptr<mutex_backend> inner) : inner_(std::move(inner)) {}
  std::string_view type() const noexcept override { return inner_->type(); }
  contend_options default_options() const override { return inner_->default_options(); }
  std::shared_ptr<contend_service> make_contend_service(const std::string& name,
                                                        std::shared_ptr<mutex_contender>,
                                                        const contend_options&,
                                                        std::string) override {
    throw std::logic_error("the " + std::string(type()) + " backend is read-only (built for " +
                           "inspection): cannot contend for '" + name + "'");
  }
  mutex_owner read_owner(const std::string& name) override { return inner_->read_owner(name); }
  std::string read_state(const std::string& name) override { return inner_->read_state(name); }
  std::optional<std::vector<std::string>> read_waiters(const std::string& name) override {
    return inner_->read_waiters(name);
  }
  record_store& records() override { return records_; }

 private:
  std::shared_ptr<mutex_backend> inner_;
  read_only_records records_{inner_->records()};
};

const backend_descriptor& descriptor_of(const backend_config& config) {
  if (const auto* d = find_backend(config.type)) return *d;
  std::string known;
  for (const auto& t : available_backends()) known += (known.empty() ? "" : ", ") + t;
  throw std::invalid_argument("unknown backend type '" + config.type +
                              "' (this build has: " + known + ")");
}

}  // namespace

const std::vector<const backend_descriptor*>& backend_descriptors() {
  static const std::vector<const backend_descriptor*> all{
      &memory_descriptor(),
#ifdef BATON_HAS_SQL
      &backends::sql::descriptor(backends::sql::dialect::sqlite),
      &backends::sql::descriptor(backends::sql::dialect::postgresql),
      &backends::sql::descriptor(backends::sql::dialect::mysql),
#endif
#ifdef BATON_HAS_REDIS
      &backends::redis::descriptor(),
#endif
#ifdef BATON_HAS_ZOOKEEPER
      &backends::zookeeper::descriptor(),
#endif
  };
  return all;
}

const backend_descriptor* find_backend(std::string_view type) {
  for (const auto* d : backend_descriptors())
    if (d->type == type) return d;
  return nullptr;
}

std::vector<std::string> available_backends() {
  std::vector<std::string> types;
  for (const auto* d : backend_descriptors()) types.push_back(d->type);
  return types;
}

contend_options default_lease(const backend_config& config) {
  const auto& d = descriptor_of(config);
  check_params(d, config);
  return d.default_lease(config);
}

std::shared_ptr<mutex_backend> make_backend(const backend_config& config, runtime& rt) {
  const auto& d = descriptor_of(config);
  check_params(d, config);
  auto backend = d.make(config, rt);
  if (!config.read_only) return backend;
  return std::make_shared<read_only_backend>(std::move(backend));
}

}  // namespace baton
