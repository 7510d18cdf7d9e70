#include "baton/mutex/locker.hpp"

#include <algorithm>

#include "baton/mutex/contender.hpp"

namespace baton {

// Turns the contender callbacks into something a blocked thread can wait on.
struct locker::waiter final : mutex_contender {
  std::mutex mutex;
  std::condition_variable changed;
  bool owner = false;
  std::uint64_t rounds = 0;  // contend rounds finished (reply or error)

  void on_acquired(const mutex_state&) override {
    std::lock_guard lock(mutex);
    owner = true;
    changed.notify_all();
  }
  void on_released(const mutex_state&) override {
    std::lock_guard lock(mutex);
    owner = false;
    changed.notify_all();
  }
  void on_observed(const mutex_owner&) override { finish_round(); }
  void on_error(std::error_code) override { finish_round(); }
  void finish_round() {
    std::lock_guard lock(mutex);
    ++rounds;
    changed.notify_all();
  }
};

locker::locker(mutex_backend& backend, const std::string& name, contend_options options,
               std::string contender_id)
    : waiter_(std::make_shared<waiter>()),
      service_(backend.make_contend_service(name, waiter_, options, std::move(contender_id))) {}

locker::locker(mutex_backend& backend, const std::string& name)
    : locker(backend, name, backend.default_options()) {}

locker::~locker() { unlock(); }

void locker::lock() {
  if (locked_) throw std::logic_error("baton::locker: already locked");
  // An uncontended mutex is won on this thread, without a hop to an io thread and back.
  if (service_->start_blocking() == contend_service::start_result::owner) {
    locked_ = true;
    return;
  }
  std::unique_lock lock(waiter_->mutex);
  waiter_->changed.wait(lock, [&] { return waiter_->owner; });
  locked_ = true;
}

bool locker::try_lock() {
  if (locked_) throw std::logic_error("baton::locker: already locked");
  {
    std::lock_guard lock(waiter_->mutex);
    waiter_->rounds = 0;
  }
  switch (service_->start_blocking(true)) {
    case contend_service::start_result::owner:
      locked_ = true;
      return true;
    case contend_service::start_result::not_owner:
      return false;
    case contend_service::start_result::started:
    case contend_service::start_result::refused:
      break;
  }
  std::unique_lock lock(waiter_->mutex);
  // One round: the first reply (or error). Bounded by the lease in case nothing ever answers.
  bool answered = waiter_->changed.wait_for(lock, service_->options().lease(),
                                            [&] { return waiter_->owner || waiter_->rounds > 0; });
  if (answered && waiter_->owner) {
    locked_ = true;
    return true;
  }
  lock.unlock();
  service_->stop_and_wait(service_->options().lease());
  return false;
}

bool locker::try_lock_until_steady(std::chrono::steady_clock::time_point deadline) {
  if (locked_) throw std::logic_error("baton::locker: already locked");
  if (service_->start_blocking() == contend_service::start_result::owner) {
    locked_ = true;
    return true;
  }
  std::unique_lock lock(waiter_->mutex);
  if (waiter_->changed.wait_until(lock, deadline, [&] { return waiter_->owner; })) {
    locked_ = true;
    return true;
  }
  lock.unlock();
  service_->stop_and_wait(service_->options().lease());
  return false;
}

void locker::unlock() noexcept {
  if (!locked_) return;
  locked_ = false;
  service_->stop_blocking(
      std::min<std::chrono::milliseconds>(service_->options().lease(), std::chrono::seconds{10}));
}

bool locker::owns_lease() const noexcept { return locked_ && service_->is_owner(); }
std::uint64_t locker::fence() const noexcept { return service_->fence(); }
std::chrono::steady_clock::time_point locker::lease_deadline() const noexcept {
  return service_->lease_deadline();
}
const std::string& locker::contender_id() const noexcept { return service_->contender_id(); }

}  // namespace baton
