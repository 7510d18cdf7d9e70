#pragma once
/// Durations as written in a config file (`250ms`, `10s`, `5m`, `2h`, `1d`): the one parser in
/// baton/mutex/duration.hpp, which the backends use for their parameters too.
#include "baton/mutex/duration.hpp"

namespace baton::config {

using baton::duration_hint;
using baton::format_duration;
using baton::parse_duration;

}  // namespace baton::config
