#pragma once
// A Redis reply copied out of hiredis (hiredis frees its own after the callback), and the one
// function that turns hiredis and Redis errors into baton::errc.
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

struct redisReply;

namespace baton::backends::redis::detail {

/// One RESP2 reply.
struct reply {
  enum class kind { nil, string, status, integer, array, error };

  kind type = kind::nil;
  std::string str;  ///< string, status and error text
  long long integer = 0;
  std::vector<reply> elements;

  /// A deep copy of a hiredis reply.
  static reply from(const redisReply& r);
  bool is_error() const noexcept { return type == kind::error; }
  /// True for an error reply whose code (first word) is `code`, e.g. "NOSCRIPT".
  bool is_error(std::string_view code) const noexcept;
  /// A short description for logs ("integer 3", "array of 2", "error NOSCRIPT ...").
  std::string describe() const;
};

/// What went wrong natively: a hiredis context error (REDIS_ERR_IO, ...; 0 when none) with its
/// text, or an error reply from Redis.
struct native_error {
  int context_error = 0;
  std::string_view text;
};

/// The one place where hiredis and Redis errors become baton::errc: I/O errors, EOF and refused
/// connections -> connection_lost; NOAUTH, WRONGPASS, NOPERM and a password the server does not
/// expect -> auth_failed; NOT_OWNER (our scripts) -> not_owner; a bad database index ->
/// invalid_argument; protocol errors -> bad_reply; anything else (LOADING, BUSY, READONLY,
/// NOSCRIPT after the EVAL fallback, ...) -> backend_error, which is retried.
std::error_code translate(const native_error& e) noexcept;

}  // namespace baton::backends::redis::detail
