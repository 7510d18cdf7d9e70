#include "baton/mutex/errc.hpp"

#include <string>

namespace baton {
namespace {

class baton_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "baton"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::connection_lost:
        return "connection to the backend lost";
      case errc::session_expired:
        return "backend session expired";
      case errc::timeout:
        return "backend request timed out";
      case errc::not_owner:
        return "not the owner of the mutex (or a stale fence)";
      case errc::invalid_name:
        return "invalid mutex name";
      case errc::bad_reply:
        return "unexpected reply from the backend";
      case errc::auth_failed:
        return "authentication with the backend failed";
      case errc::invalid_argument:
        return "invalid argument";
      case errc::stopped:
        return "the service was stopped";
      case errc::backend_error:
        return "backend error";
      case errc::conflict:
        return "the record changed meanwhile (compare-and-set conflict)";
    }
    return "unknown baton error " + std::to_string(value);
  }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const baton_category category;
  return category;
}

std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }

bool is_retryable(std::error_code ec) noexcept {
  if (ec.category() != error_category()) return static_cast<bool>(ec);
  switch (static_cast<errc>(ec.value())) {
    case errc::connection_lost:
    case errc::session_expired:
    case errc::timeout:
    case errc::backend_error:
    case errc::bad_reply:
      return true;
    default:
      return false;
  }
}

}  // namespace baton
