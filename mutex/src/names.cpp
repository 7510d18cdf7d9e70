#include "baton/mutex/names.hpp"

#include <unistd.h>

#include <atomic>
#include <boost/uuid/uuid.hpp>
#include <boost/uuid/uuid_generators.hpp>
#include <boost/uuid/uuid_io.hpp>
#include <stdexcept>

namespace baton {

std::string mutex_name_error(std::string_view name) {
  if (name.empty()) return "mutex name is empty";
  if (name.size() > max_mutex_name_length)
    return "mutex name is " + std::to_string(name.size()) + " characters long, at most " +
           std::to_string(max_mutex_name_length) + " are allowed";
  // ZooKeeper cannot store a node named "." or ".." (a path component), and a name that is only
  // dots is no name to read in a log; one rule for every backend.
  if (name == "." || name == "..")
    return "mutex name '" + std::string(name) +
           "' is reserved (a path component on ZooKeeper): use a name with a letter or digit";
  for (std::size_t i = 0; i < name.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(name[i]);
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) {
      char shown[8];
      if (c >= 0x20 && c < 0x7f)
        std::snprintf(shown, sizeof shown, "'%c'", c);
      else
        std::snprintf(shown, sizeof shown, "0x%02x", c);
      return "mutex name has character " + std::string(shown) + " at position " +
             std::to_string(i) + "; only A-Z a-z 0-9 . _ - are allowed";
    }
  }
  return {};
}

void validate_mutex_name(std::string_view name) {
  if (auto why = mutex_name_error(name); !why.empty()) throw std::invalid_argument(why);
}

std::string make_contender_id() {
  static std::atomic<std::uint64_t> counter{0};
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown");
  return std::to_string(++counter) + ":" + std::to_string(::getpid()) + "@" + host;
}

std::string make_uuid_contender_id() {
  thread_local boost::uuids::random_generator generator;
  return boost::uuids::to_string(generator());
}

}  // namespace baton
