#pragma once
/// baton's logger (spdlog, named "baton"); the daemon sets its level and sinks.
///
/// Internal: this header is not installed (mutex/internal/ is on the include path of baton's own
/// targets only, through baton_internal), so no installed header pulls in spdlog.
#include <memory>

#include <spdlog/spdlog.h>

namespace baton::detail {

/// The shared "baton" logger, created on first use (stderr).
spdlog::logger& log();

}  // namespace baton::detail
