#include "baton/mutex/backend.hpp"

#include <future>

#include "baton/mutex/errc.hpp"
#include "baton/mutex/names.hpp"

namespace baton {

lease_store_backend::lease_store_backend(std::string type, runtime& rt,
                                         std::shared_ptr<lease_store> store,
                                         contend_options defaults)
    : type_(std::move(type)), runtime_(rt), store_(std::move(store)), defaults_(defaults) {}

std::shared_ptr<contend_service> lease_store_backend::make_contend_service(
    const std::string& name, std::shared_ptr<mutex_contender> contender,
    const contend_options& options, std::string contender_id) {
  validate_mutex_name(name);
  return make_lease_contend_service(runtime_.io(), store_, name, std::move(contender_id),
                                    std::move(contender), options);
}

mutex_owner lease_store_backend::read_owner(const std::string& name) {
  validate_mutex_name(name);
  std::promise<lease_grant> promise;
  auto future = promise.get_future();
  store_->async_read(name, [&promise](std::error_code ec, lease_grant grant) {
    if (ec)
      promise.set_exception(std::make_exception_ptr(std::system_error(ec, "read owner")));
    else
      promise.set_value(std::move(grant));
  });
  return future.get().owner;
}

std::string lease_store_backend::read_state(const std::string& name) {
  validate_mutex_name(name);
  std::promise<std::string> promise;
  auto future = promise.get_future();
  store_->async_read_state(name, [&promise](std::error_code ec, std::string state) {
    if (ec)
      promise.set_exception(std::make_exception_ptr(std::system_error(ec, "read state")));
    else
      promise.set_value(std::move(state));
  });
  return future.get();
}

}  // namespace baton
