#include "support/sections.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

namespace baton::test {

std::vector<section> read_sections(const std::string& path) {
  std::vector<section> out;
  std::ifstream in(path);
  section s{};
  while (in >> s.pid >> s.fence >> s.start >> s.end) out.push_back(s);
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.start < b.start; });
  return out;
}

void expect_sections_serialized(const std::vector<section>& sections) {
  for (std::size_t i = 1; i < sections.size(); ++i) {
    EXPECT_LE(sections[i - 1].end, sections[i].start)
        << "sections overlap: pid " << sections[i - 1].pid << " fence " << sections[i - 1].fence
        << " and pid " << sections[i].pid << " fence " << sections[i].fence;
    EXPECT_LT(sections[i - 1].fence, sections[i].fence) << "fence did not increase at " << i;
  }
}

}  // namespace baton::test
