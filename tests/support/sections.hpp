#pragma once
// The shared critical-section log written by `baton_contender cs` (one line per section:
// "pid fence start_ns end_ns", CLOCK_MONOTONIC), and the check every multi-process test makes.
#include <string>
#include <vector>

namespace baton::test {

struct section {
  long long pid, fence, start, end;
};

/// The sections in `path`, sorted by start time.
std::vector<section> read_sections(const std::string& path);

/// Adds a test failure for any two sections that overlap or whose fences do not strictly
/// increase in time order.
void expect_sections_serialized(const std::vector<section>& sections);

}  // namespace baton::test
