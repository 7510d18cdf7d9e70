#pragma once
/// Mutex names and contender ids.
#include <string>
#include <string_view>

namespace baton {

/// Longest accepted mutex name.
inline constexpr std::size_t max_mutex_name_length = 128;

/// Empty when `name` is a valid mutex name (1 to 128 of [A-Za-z0-9._-], not "." or ".."), else
/// why it is not.
std::string mutex_name_error(std::string_view name);

/// Throws std::invalid_argument with a clear message when `name` is not a valid mutex name.
void validate_mutex_name(std::string_view name);

/// A contender id unique in the cluster: `{counter}:{pid}@{host}`.
std::string make_contender_id();

/// A random (version 4) UUID, an alternative contender id.
std::string make_uuid_contender_id();

}  // namespace baton
