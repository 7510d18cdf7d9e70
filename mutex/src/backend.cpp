#include "baton/mutex/backend.hpp"

#include <future>
#include <stdexcept>

#include "baton/mutex/detail/unsupported_records.hpp"
#include "baton/mutex/errc.hpp"
#include "baton/mutex/names.hpp"

namespace baton {

lease_store_backend::lease_store_backend(std::string type, runtime& rt,
                                         std::shared_ptr<lease_store> store,
                                         std::shared_ptr<record_store> records,
                                         contend_options defaults)
    : type_(std::move(type)),
      runtime_(rt),
      store_(std::move(store)),
      records_(std::move(records)),
      defaults_(defaults) {
  if (!records_) throw std::invalid_argument("lease_store_backend: no record store");
}

namespace {
std::shared_ptr<record_store> records_of(const std::shared_ptr<lease_store>& store) {
  if (auto r = std::dynamic_pointer_cast<record_store>(store)) return r;
  return std::make_shared<detail::unsupported_records>();
}
}  // namespace

lease_store_backend::lease_store_backend(std::string type, runtime& rt,
                                         std::shared_ptr<lease_store> store,
                                         contend_options defaults)
    : lease_store_backend(std::move(type), rt, store, records_of(store), defaults) {}

std::shared_ptr<contend_service> lease_store_backend::make_contend_service(
    const std::string& name, std::shared_ptr<mutex_contender> contender,
    const contend_options& options, std::string contender_id) {
  validate_mutex_name(name);
  return make_lease_contend_service(runtime_.io(), store_, name, std::move(contender_id),
                                    std::move(contender), options, default_random_source(), type_);
}

// The store's answer travels as a value; the exception is made on the caller's thread (an
// exception_ptr shared across threads is freed in libstdc++ where ThreadSanitizer cannot see
// its reference count).
namespace {
template <class T>
struct answer {
  std::error_code ec;
  T value{};
};
}  // namespace

mutex_owner lease_store_backend::read_owner(const std::string& name) {
  validate_mutex_name(name);
  std::promise<answer<lease_grant>> promise;
  auto future = promise.get_future();
  store_->async_read(name, [&promise](std::error_code ec, lease_grant grant) {
    promise.set_value({ec, std::move(grant)});
  });
  auto a = future.get();
  if (a.ec) throw std::system_error(a.ec, "read owner");
  return a.value.owner;
}

std::string lease_store_backend::read_state(const std::string& name) {
  validate_mutex_name(name);
  std::promise<answer<std::string>> promise;
  auto future = promise.get_future();
  store_->async_read_state(name, [&promise](std::error_code ec, std::string state) {
    promise.set_value({ec, std::move(state)});
  });
  auto a = future.get();
  if (a.ec) throw std::system_error(a.ec, "read state");
  return std::move(a.value);
}

}  // namespace baton
