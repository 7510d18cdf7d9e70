#pragma once
/// Choose a backend by configuration alone: the registry of backend descriptors.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "baton/mutex/backend.hpp"
#include "baton/mutex/backend_descriptor.hpp"
#include "baton/mutex/options.hpp"
#include "baton/mutex/runtime.hpp"

namespace baton {

/// The descriptor of every backend type this build supports: "memory", then "sqlite",
/// "postgresql", "mysql", "redis", "zookeeper" as built.
const std::vector<const backend_descriptor*>& backend_descriptors();

/// The descriptor of `type`, or nullptr when this build has no such backend.
const backend_descriptor* find_backend(std::string_view type);

/// The backend types this build supports, in backend_descriptors() order.
std::vector<std::string> available_backends();

/// The lease options the backend `config` describes uses by default (its default_options()),
/// computed from the parameters without connecting. Throws std::invalid_argument (a
/// backend_param_error for a bad parameter) like make_backend().
contend_options default_lease(const backend_config& config);

/// Builds the backend `config.type` names (see backend_descriptors() for the types and their
/// parameters). Throws std::invalid_argument naming the type or parameter when the config is
/// wrong (an unknown parameter too), and std::runtime_error when the backend cannot be set up.
/// With `config.read_only` the backend only reads (see backend_config::read_only).
std::shared_ptr<mutex_backend> make_backend(const backend_config& config, runtime& rt);

}  // namespace baton
