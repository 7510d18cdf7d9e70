#include "baton/mutex/records.hpp"

#include <future>
#include <memory>

#include "baton/mutex/errc.hpp"
#include "baton/mutex/names.hpp"

namespace baton {
namespace {

// The answer travels as a value; the exception is made on the caller's thread.
template <class T>
struct answer {
  std::error_code ec;
  T value{};
};

template <class T, class Start>
T wait_for(const char* what, const std::string& name, std::chrono::milliseconds timeout,
           Start start) {
  auto promise = std::make_shared<std::promise<answer<T>>>();
  auto future = promise->get_future();
  start([promise](std::error_code ec, T value) { promise->set_value({ec, std::move(value)}); });
  if (future.wait_for(timeout) != std::future_status::ready)
    throw std::system_error(make_error_code(errc::timeout),
                            std::string(what) + " '" + name + "': no answer");
  auto a = future.get();
  if (a.ec) throw std::system_error(a.ec, std::string(what) + " '" + name + "'");
  return std::move(a.value);
}

}  // namespace

std::vector<history_entry> read_history(record_store& store, const std::string& name,
                                        std::size_t limit, std::chrono::milliseconds timeout) {
  validate_mutex_name(name);
  return wait_for<std::vector<history_entry>>("read history", name, timeout, [&](auto done) {
    store.async_read_history(name, limit, std::move(done));
  });
}

controls_record read_controls(record_store& store, const std::string& name,
                              std::chrono::milliseconds timeout) {
  validate_mutex_name(name);
  return wait_for<controls_record>("read controls", name, timeout, [&](auto done) {
    store.async_read_controls(name, std::move(done));
  });
}

controls_record write_controls(record_store& store, const std::string& name, std::uint64_t expected,
                               std::string bytes, std::chrono::milliseconds timeout) {
  validate_mutex_name(name);
  return wait_for<controls_record>("write controls", name, timeout, [&](auto done) {
    store.async_write_controls(name, expected, std::move(bytes), std::move(done));
  });
}

controls_record update_controls(record_store& store, const std::string& name,
                                const std::function<std::string(const std::string&)>& change,
                                int attempts, std::chrono::milliseconds timeout) {
  auto current = read_controls(store, name, timeout);
  for (int i = 0;; ++i) {
    try {
      return write_controls(store, name, current.version, change(current.bytes), timeout);
    } catch (const std::system_error& e) {
      if (e.code() != make_error_code(errc::conflict) || i + 1 >= attempts) throw;
    }
    current = read_controls(store, name, timeout);
  }
}

}  // namespace baton
