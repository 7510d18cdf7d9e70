#pragma once
// Small text helpers shared by the backends' parameter parsers (build-only, not installed).
#include <cctype>
#include <string>
#include <string_view>

namespace baton::detail {

/// `s` with ASCII letters lowered.
inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// Decodes every %XX of `in` into `out`; false (and `out` unspecified) when a '%' is not
/// followed by two hex digits.
inline bool percent_decode(std::string_view in, std::string& out) {
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = hex(in[i + 1]), lo = hex(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

}  // namespace baton::detail
