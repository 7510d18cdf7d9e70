#include "file_read.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <system_error>

#include "baton/config/duration.hpp"
#include "json_reader.hpp"

namespace baton::config::detail {

namespace {

[[noreturn]] void fail(const std::string& source, const std::string& message) {
  throw config_error({source + ": " + message});
}

[[noreturn]] void fail_errno(const std::string& source, const char* what, int err) {
  fail(source, std::string(what) + ": " + std::generic_category().message(err));
}

class descriptor {
 public:
  explicit descriptor(int fd) : fd_(fd) {}
  descriptor(const descriptor&) = delete;
  descriptor& operator=(const descriptor&) = delete;
  ~descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const noexcept { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string read_config_file(const std::filesystem::path& file, const config_limits& limits) {
  const std::string source = file.string();
  const std::string too_large =
      "larger than " + size_text(limits.max_bytes) + ", the limit for a config file";
  // Without O_NONBLOCK, opening a FIFO would wait for a writer without end.
  const descriptor fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) {
    const int err = errno;
    struct stat st {};
    if (err == ENXIO && ::stat(file.c_str(), &st) == 0 && S_ISSOCK(st.st_mode))
      fail(source, "is a socket, not a config file");
    fail_errno(source, "cannot read", err);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail_errno(source, "cannot read", errno);
  if (S_ISDIR(st.st_mode)) fail(source, "is a directory, not a config file");
  const bool regular = S_ISREG(st.st_mode);
  if (regular && static_cast<unsigned long long>(st.st_size) > limits.max_bytes)
    fail(source, "is " + std::to_string(st.st_size) + " bytes, " + too_large);

  // A regular file reads at once; a pipe, FIFO or device gets read_timeout for all of it.
  const auto deadline = std::chrono::steady_clock::now() + limits.read_timeout;
  std::string text;
  std::size_t size = 0;
  constexpr std::size_t chunk = 64 * 1024;
  for (;;) {
    if (!regular) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        fail(source, "did not deliver the whole config within " +
                         format_duration(limits.read_timeout) +
                         " (a pipe or FIFO that nobody writes to or closes?)");
      pollfd p{fd.get(), POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
      if (ready < 0 && errno != EINTR) fail_errno(source, "cannot read", errno);
      if (ready <= 0) continue;  // the deadline above ends the wait
    }
    // One byte more than the limit tells a file at the limit from a longer one.
    const std::size_t want = std::min(chunk, limits.max_bytes + 1 - size);
    text.resize(size + want);
    const ssize_t n = ::read(fd.get(), text.data() + size, want);
    if (n == 0) break;
    if (n < 0) {
      const int err = errno;
      if (err == EINTR || err == EAGAIN || err == EWOULDBLOCK) {
        if (regular && err != EINTR) fail_errno(source, "cannot read", err);
        continue;  // bounded by the deadline (a regular file does not block)
      }
      fail_errno(source, "cannot read", err);
    }
    size += static_cast<std::size_t>(n);
    if (size > limits.max_bytes) fail(source, "is " + too_large);
  }
  text.resize(size);
  return text;
}

}  // namespace baton::config::detail
