// The web console's control token: read from the variable http.token_env names or the file
// http.token_file names, never from the config itself (daemon/README.md, "Web console").
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "baton/config/config.hpp"

namespace baton::config {

namespace {

// Largest token file read: a token is a line, not a document.
constexpr std::size_t max_token_file_bytes = 4096;

[[noreturn]] void fail(const daemon_config& config, const char* path, const std::string& why) {
  throw config_error({config.source + ": " + path + ": " + why});
}

std::string octal_mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

std::string read_token_file(const daemon_config& config) {
  const std::string& file = config.console.token_file;
  const char* at = "/http/token_file";
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) fail(config, at, "cannot open '" + file + "': " + std::strerror(errno));
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } close_it{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    fail(config, at, "cannot stat '" + file + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(config, at, "'" + file + "' is not a regular file");
  // Like ssh's private keys: a secret others may read is refused, not used.
  if ((st.st_mode & 077) != 0)
    fail(config, at,
         "'" + file + "' has mode " + octal_mode(st.st_mode) +
             ": group and others must have no access to a token file (chmod 600 '" + file + "')");
  std::string text(max_token_file_bytes + 1, '\0');
  std::size_t got = 0;
  while (got < text.size()) {  // ends at end of file, an error, or the size bound
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(config, at, "cannot read '" + file + "': " + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got > max_token_file_bytes)
    fail(config, at,
         "'" + file + "' is larger than " + std::to_string(max_token_file_bytes) +
             " bytes: a token file holds one line");
  text.resize(got);
  if (auto nl = text.find('\n'); nl != std::string::npos) text.resize(nl);
  if (!text.empty() && text.back() == '\r') text.pop_back();
  return text;
}

}  // namespace

std::string read_console_token(const daemon_config& config, const env_lookup& env) {
  const auto& console = config.console;
  if (!console.allow_control) return {};
  std::string token;
  const char* at = console.token_env.empty() ? "/http/token_file" : "/http/token_env";
  if (!console.token_env.empty()) {
    const auto value = env ? env(console.token_env) : process_env(console.token_env);
    if (!value || value->empty())
      fail(config, at,
           "the variable " + console.token_env +
               " is not set or empty (it holds the "
               "control token; allow_control needs it)");
    token = *value;
  } else {
    token = read_token_file(config);
  }
  if (token.size() < min_console_token_bytes)
    fail(config, at,
         "the token is " + std::to_string(token.size()) + " bytes; at least " +
             std::to_string(min_console_token_bytes) + " are needed (e.g. `openssl rand -hex 32`)");
  return token;
}

}  // namespace baton::config
