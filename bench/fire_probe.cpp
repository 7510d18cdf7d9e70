// baton_fire_probe: the short command of the fire benchmark (bench/fire_bench.cpp). Run by the
// daemon for every fire, it appends one line "<schedule> <planned fire, ms> <started, ms>" (Unix
// epoch, wall clock) to the file named by its argument, in one O_APPEND write (atomic for lines
// this short), and exits. Links nothing but libc, so that it starts about as fast as `true`.
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

/// "2026-11-26T08:30:00Z" or "...00.250Z" -> ms since the epoch; -1 when malformed.
long long parse_rfc3339_ms(const char* s) {
  struct tm tm {};
  const char* rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
  if (!rest) return -1;
  long long ms = static_cast<long long>(timegm(&tm)) * 1000;
  if (*rest == '.') {
    int digits = 0, frac = 0;
    for (++rest; *rest >= '0' && *rest <= '9'; ++rest)
      if (digits < 3) frac = frac * 10 + (*rest - '0'), ++digits;
    while (digits < 3) frac *= 10, ++digits;
    ms += frac;
  }
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  if (argc < 2) return 2;
  const char* schedule = std::getenv("BATON_SCHEDULE");
  const char* fire = std::getenv("BATON_FIRE_TIME");
  const long long started = static_cast<long long>(now.tv_sec) * 1000 + now.tv_nsec / 1'000'000;
  char line[512];
  const int n = std::snprintf(line, sizeof line, "%s %lld %lld\n", schedule ? schedule : "-",
                              fire ? parse_rfc3339_ms(fire) : -1LL, started);
  const int fd = ::open(argv[1], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || n <= 0) return 1;
  const bool ok = ::write(fd, line, static_cast<std::size_t>(n)) == n;
  ::close(fd);
  return ok ? 0 : 1;
}
