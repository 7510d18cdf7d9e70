#include "reply.hpp"

#include <hiredis/hiredis.h>

#include "baton/mutex/errc.hpp"

namespace baton::backends::redis::detail {
namespace {

bool starts_with(std::string_view text, std::string_view prefix) noexcept {
  return text.substr(0, prefix.size()) == prefix;
}

}  // namespace

reply reply::from(const redisReply& r) {
  reply out;
  switch (r.type) {
    case REDIS_REPLY_STRING:
      out.type = kind::string;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = kind::status;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = kind::error;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = kind::integer;
      out.integer = r.integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = kind::array;
      out.elements.reserve(r.elements);
      for (std::size_t i = 0; i < r.elements; ++i)
        out.elements.push_back(r.element[i] ? from(*r.element[i]) : reply{});
      break;
    default:
      out.type = kind::nil;
      break;
  }
  return out;
}

bool reply::is_error(std::string_view code) const noexcept {
  if (type != kind::error) return false;
  std::string_view text = str;
  return starts_with(text, code) && (text.size() == code.size() || text[code.size()] == ' ');
}

std::string reply::describe() const {
  auto clip = [](const std::string& s) { return s.size() > 80 ? s.substr(0, 80) + "..." : s; };
  switch (type) {
    case kind::nil:
      return "nil";
    case kind::string:
      return "string '" + clip(str) + "'";
    case kind::status:
      return "status '" + clip(str) + "'";
    case kind::integer:
      return "integer " + std::to_string(integer);
    case kind::array: {
      std::string out = "array of " + std::to_string(elements.size()) + " [";
      for (std::size_t i = 0; i < elements.size() && i < 8; ++i)
        out += (i ? ", " : "") + elements[i].describe();
      return out + (elements.size() > 8 ? ", ...]" : "]");
    }
    case kind::error:
      return "error '" + clip(str) + "'";
  }
  return "?";
}

std::error_code translate(const native_error& e) noexcept {
  if (e.context_error != 0) {
    switch (e.context_error) {
      case REDIS_ERR_PROTOCOL:
        return make_error_code(errc::bad_reply);
      case REDIS_ERR_OOM:
        return make_error_code(errc::backend_error);
      default:  // REDIS_ERR_IO (refused, reset, unreachable), REDIS_ERR_EOF, REDIS_ERR_OTHER
        return make_error_code(errc::connection_lost);
    }
  }
  const auto text = e.text;
  if (starts_with(text, "NOAUTH") || starts_with(text, "WRONGPASS") ||
      starts_with(text, "NOPERM") || starts_with(text, "ERR invalid password") ||
      starts_with(text, "ERR invalid username") || starts_with(text, "ERR AUTH") ||
      starts_with(text, "ERR Client sent AUTH"))
    return make_error_code(errc::auth_failed);
  if (starts_with(text, "NOT_OWNER")) return make_error_code(errc::not_owner);
  if (starts_with(text, "ERR DB index") || starts_with(text, "ERR invalid DB index"))
    return make_error_code(errc::invalid_argument);
  return make_error_code(errc::backend_error);
}

}  // namespace baton::backends::redis::detail
