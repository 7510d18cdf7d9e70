#pragma once
// Reading a config file with bounds: at most config_limits::max_bytes, and a pipe or device
// within config_limits::read_timeout, so that /dev/zero, a FIFO nobody writes to or a huge file
// is an error, not a hang or a process that grows without end.
#include <filesystem>
#include <string>

#include "baton/config/config.hpp"

namespace baton::config::detail {

/// The whole of `file`. Throws config_error naming `file` when it cannot be opened or read, is a
/// directory or a socket, has more than limits.max_bytes, or (a pipe, FIFO or device) does not
/// deliver its end within limits.read_timeout.
std::string read_config_file(const std::filesystem::path& file, const config_limits& limits);

}  // namespace baton::config::detail
