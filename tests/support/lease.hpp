#pragma once
// The lease options the tests use: short leases so handovers take a second, not ten.
#include <chrono>

#include "baton/mutex/options.hpp"

namespace baton::test {

/// contend_options{} with ttl and transition `ttl`, retry_period and poll_interval `retry`. The
/// defaults (1 s, 100 ms) are what the conformance and backend tests contend with.
contend_options lease_options(std::chrono::milliseconds ttl = std::chrono::milliseconds{1000},
                              std::chrono::milliseconds retry = std::chrono::milliseconds{100});

}  // namespace baton::test
