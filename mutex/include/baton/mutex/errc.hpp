#pragma once
/// Error codes of every baton backend, in one category, and what may be retried.
#include <system_error>

namespace baton {

/// Runtime trouble reported by a backend. Each backend maps its native errors onto these in
/// exactly one function.
enum class errc {
  connection_lost = 1,  ///< the connection broke or could not be made; retryable
  session_expired,      ///< the backend session (ZooKeeper) is gone; retryable with a new one
  timeout,              ///< a statement or command took too long; retryable
  not_owner,            ///< a conditional write found another owner or fence; not retryable
  invalid_name,         ///< a mutex name outside [A-Za-z0-9._-]{1,128}
  bad_reply,            ///< the server answered something we did not expect
  auth_failed,          ///< credentials were refused; not retryable
  invalid_argument,     ///< bad configuration or arguments
  stopped,              ///< the service was stopped before the operation finished
  backend_error,        ///< any other server-side failure; retryable
  conflict,             ///< a compare-and-set found another version; read again and retry
};

/// The category of `baton::errc`.
const std::error_category& error_category() noexcept;

/// Makes an error_code of baton's category.
std::error_code make_error_code(errc e) noexcept;

/// True when retrying the same operation later may succeed (connection, timeout, server errors).
bool is_retryable(std::error_code ec) noexcept;

}  // namespace baton

template <>
struct std::is_error_code_enum<baton::errc> : std::true_type {};
