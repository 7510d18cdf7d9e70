#include "baton/scheduler/clock.hpp"

namespace baton {
namespace {

class system_clock_impl final : public scheduler_clock {
 public:
  std::chrono::system_clock::time_point now_system() const override {
    return std::chrono::system_clock::now();
  }
  std::chrono::steady_clock::time_point now_steady() const override {
    return std::chrono::steady_clock::now();
  }
};

}  // namespace

std::shared_ptr<const scheduler_clock> system_scheduler_clock() {
  static const auto clock = std::make_shared<const system_clock_impl>();
  return clock;
}

}  // namespace baton
