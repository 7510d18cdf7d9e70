#pragma once
/// baton's logger (spdlog, named "baton"); the daemon sets its level and sinks.
#include <memory>

#include <spdlog/spdlog.h>

namespace baton::detail {

/// The shared "baton" logger, created on first use (stderr).
spdlog::logger& log();

}  // namespace baton::detail
