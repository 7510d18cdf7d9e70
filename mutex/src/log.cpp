#include "baton/mutex/detail/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace baton::detail {

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    if (auto existing = spdlog::get("baton")) return existing;
    auto created = spdlog::stderr_color_mt("baton");
    created->set_level(spdlog::level::info);
    return created;
  }();
  return *logger;
}

}  // namespace baton::detail
