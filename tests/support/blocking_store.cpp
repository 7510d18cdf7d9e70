#include "support/blocking_store.hpp"

#include <future>
#include <stdexcept>

#include "baton/backends/factory.hpp"

namespace baton::test {

namespace {

template <class Start>
blocking_store::reply wait_for_reply(Start start, std::chrono::milliseconds timeout) {
  auto promise = std::make_shared<std::promise<blocking_store::reply>>();
  auto future = promise->get_future();
  start([promise](std::error_code ec, lease_grant g) { promise->set_value({ec, std::move(g)}); });
  if (future.wait_for(timeout) != std::future_status::ready)
    throw std::runtime_error("no reply from the store within " + std::to_string(timeout.count()) +
                             " ms");
  return future.get();
}

}  // namespace

blocking_store::blocking_store(const backend_config& config, std::chrono::milliseconds timeout)
    : runtime_(std::make_shared<runtime>()), timeout_(timeout) {
  backend_ = make_backend(config, *runtime_);
  auto lsb = std::dynamic_pointer_cast<lease_store_backend>(backend_);
  if (!lsb) throw std::logic_error("not a lease_store_backend");
  store_ = lsb->store();
}

blocking_store::reply blocking_store::acquire(const std::string& name, const std::string& owner_id,
                                              std::chrono::milliseconds ttl,
                                              std::chrono::milliseconds transition) {
  return wait_for_reply(
      [&](auto done) { store_->async_acquire(name, owner_id, ttl, transition, done); }, timeout_);
}

blocking_store::reply blocking_store::read(const std::string& name) {
  return wait_for_reply([&](auto done) { store_->async_read(name, done); }, timeout_);
}

}  // namespace baton::test
