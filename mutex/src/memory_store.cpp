#include "baton/mutex/memory_store.hpp"

#include <vector>

#include "baton/mutex/errc.hpp"
#include "baton/mutex/metrics.hpp"

namespace baton {

namespace {

// Counts one request of the in-memory backend from its construction to its end (the time
// spent in the store, waiting for its lock included; the handler's time not).
class request_timer {
 public:
  request_timer() noexcept : sent_(std::chrono::steady_clock::now()) {}
  request_timer(const request_timer&) = delete;
  request_timer& operator=(const request_timer&) = delete;
  ~request_timer() { done(); }
  /// The request is answered (before its handler runs); later calls do nothing.
  void done() noexcept {
    if (done_) return;
    done_ = true;
    detail::record_backend_request("memory", std::chrono::steady_clock::now() - sent_);
  }

 private:
  std::chrono::steady_clock::time_point sent_;
  bool done_ = false;
};

}  // namespace

memory_lease_store::memory_lease_store(clock_function clock)
    : clock_(clock ? std::move(clock) : [] {
        return std::chrono::time_point_cast<std::chrono::milliseconds>(
            std::chrono::system_clock::now());
      }) {}

void memory_lease_store::async_acquire(const std::string& name, const std::string& owner_id,
                                       std::chrono::milliseconds ttl,
                                       std::chrono::milliseconds transition,
                                       grant_handler handler) {
  request_timer timer;
  lease_grant grant;
  {
    std::lock_guard lock(mutex_);
    auto now = clock_();
    auto& rec = records_[name];
    const bool live = now <= rec.owner.transition_at;
    const bool renew = rec.owner.is(owner_id) && live;
    if (renew || !live) {
      if (!renew) {
        rec.owner.owner_id = owner_id;
        rec.owner.acquired_at = now;
        ++rec.owner.fence;
      }
      rec.owner.ttl_at = now + ttl;
      rec.owner.transition_at = now + ttl + transition;
    }
    grant = {rec.owner, now};
  }
  timer.done();
  handler({}, grant);
}

void memory_lease_store::async_release(const std::string& name, const std::string& owner_id,
                                       done_handler handler) {
  request_timer timer;
  std::vector<std::function<void()>> wake;
  {
    std::lock_guard lock(mutex_);
    auto it = records_.find(name);
    if (it != records_.end() && it->second.owner.is(owner_id)) {
      auto now = clock_();
      it->second.owner.owner_id.clear();
      it->second.owner.ttl_at = now;
      it->second.owner.transition_at = now - std::chrono::milliseconds{1};
      for (auto& [id, w] : watchers_)
        if (w.name == name) wake.push_back(w.wake);
    }
  }
  timer.done();
  handler({});
  for (auto& w : wake) w();
}

void memory_lease_store::async_read(const std::string& name, grant_handler handler) {
  request_timer timer;
  lease_grant grant;
  {
    std::lock_guard lock(mutex_);
    auto it = records_.find(name);
    grant.now = clock_();
    if (it != records_.end()) grant.owner = it->second.owner;
  }
  timer.done();
  handler({}, grant);
}

void memory_lease_store::async_read_state(const std::string& name, state_handler handler) {
  request_timer timer;
  std::string state;
  {
    std::lock_guard lock(mutex_);
    if (auto it = records_.find(name); it != records_.end()) state = it->second.state;
  }
  timer.done();
  handler({}, std::move(state));
}

void memory_lease_store::async_write_state(const std::string& name, const std::string& owner_id,
                                           std::uint64_t fence, std::string bytes,
                                           done_handler handler) {
  request_timer timer;
  std::error_code ec;
  {
    std::lock_guard lock(mutex_);
    auto it = records_.find(name);
    if (it == records_.end() || !it->second.owner.is(owner_id) || it->second.owner.fence != fence ||
        clock_() > it->second.owner.transition_at)
      ec = make_error_code(errc::not_owner);
    else
      it->second.state = std::move(bytes);
  }
  timer.done();
  handler(ec);
}

std::uint64_t memory_lease_store::watch(const std::string& name, const std::string& owner_id,
                                        std::chrono::milliseconds, std::function<void()> wake) {
  std::lock_guard lock(mutex_);
  auto id = next_watch_++;
  watchers_[id] = watcher{name, std::move(wake)};
  return id;
}

void memory_lease_store::unwatch(std::uint64_t handle) noexcept {
  std::lock_guard lock(mutex_);
  watchers_.erase(handle);
}

void memory_lease_store::async_append_history(const std::string& name, const std::string& owner_id,
                                              std::uint64_t fence, std::string bytes,
                                              std::size_t keep, append_handler handler) {
  std::error_code ec;
  if (keep == 0 || keep > max_history_keep || bytes.size() > max_history_entry_bytes) {
    ec = make_error_code(errc::invalid_argument);
  } else {
    request_timer timer;
    std::lock_guard lock(mutex_);
    auto it = records_.find(name);
    if (it == records_.end() || !it->second.owner.is(owner_id) || it->second.owner.fence != fence) {
      ec = make_error_code(errc::not_owner);
    } else {
      auto& rec = it->second;
      rec.history.push_back({++rec.history_seq, fence, std::move(bytes)});
      while (rec.history.size() > keep) rec.history.pop_front();
    }
  }
  handler(ec);
}

void memory_lease_store::async_read_history(const std::string& name, std::size_t limit,
                                            history_handler handler) {
  request_timer timer;
  std::vector<history_entry> out;
  {
    std::lock_guard lock(mutex_);
    if (auto it = records_.find(name); it != records_.end())
      for (auto e = it->second.history.rbegin();
           e != it->second.history.rend() && out.size() < limit; ++e)
        out.push_back(*e);
  }
  timer.done();
  handler({}, std::move(out));
}

void memory_lease_store::async_read_controls(const std::string& name, controls_handler handler) {
  request_timer timer;
  controls_record rec;
  {
    std::lock_guard lock(mutex_);
    if (auto it = records_.find(name); it != records_.end()) rec = it->second.controls;
  }
  timer.done();
  handler({}, std::move(rec));
}

void memory_lease_store::async_write_controls(const std::string& name, std::uint64_t expected,
                                              std::string bytes, controls_handler handler) {
  if (bytes.size() > max_controls_bytes)
    return handler(make_error_code(errc::invalid_argument), {});
  request_timer timer;
  std::error_code ec;
  controls_record now;
  std::vector<std::function<void()>> notify;
  {
    std::lock_guard lock(mutex_);
    auto& rec = records_[name].controls;
    if (rec.version != expected) {
      ec = make_error_code(errc::conflict);
    } else {
      rec.bytes = std::move(bytes);
      ++rec.version;
      for (auto& [id, w] : controls_watchers_)
        if (w.name == name) notify.push_back(w.wake);
    }
    now = rec;
  }
  timer.done();
  handler(ec, std::move(now));
  for (auto& n : notify) n();
}

std::uint64_t memory_lease_store::watch_controls(const std::string& name,
                                                 std::function<void()> changed) {
  std::lock_guard lock(mutex_);
  auto id = next_watch_++;
  controls_watchers_[id] = watcher{name, std::move(changed)};
  return id;
}

void memory_lease_store::unwatch_controls(std::uint64_t handle) noexcept {
  std::lock_guard lock(mutex_);
  controls_watchers_.erase(handle);
}

}  // namespace baton
