#pragma once
/// Choose a backend by configuration alone.
#include <memory>
#include <string>
#include <vector>

#include "baton/mutex/backend.hpp"
#include "baton/mutex/runtime.hpp"

namespace baton {

/// Builds the backend `config.type` names: "sqlite" (`path`), "postgresql" and "mysql"
/// (`connection`), "redis" (`url`), "zookeeper" (`hosts`, `session_timeout`) or "memory".
/// Throws std::invalid_argument naming the type or parameter when the config is wrong, and
/// std::runtime_error when the backend cannot be set up.
std::shared_ptr<mutex_backend> make_backend(const backend_config& config, runtime& rt);

/// The backend types this build supports.
std::vector<std::string> available_backends();

}  // namespace baton
