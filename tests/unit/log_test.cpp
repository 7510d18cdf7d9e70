// baton's log records: the public hook (set_log_handler) gets each record with its structured
// fields, an empty handler restores stderr, levels parse ("warning" = warn), and the text of a
// record is escaped so that it cannot forge a line or drive a terminal.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/log.hpp"

namespace baton {
namespace {

/// A record as the handler saw it (the string_views copied).
struct captured {
  log_level level;
  std::string message, schedule, node, event;
  std::uint64_t fence;
};

class log_hook : public ::testing::Test {
 protected:
  void SetUp() override {
    set_log_handler(
        [this](const log_record& r) {
          std::lock_guard lock(mutex_);
          records_.push_back({r.level, std::string(r.message), std::string(r.schedule),
                              std::string(r.node), std::string(r.event), r.fence});
        },
        log_level::debug);
  }
  void TearDown() override {
    set_log_handler({});
    set_log_level(log_level::info);
  }
  std::vector<captured> records() {
    std::lock_guard lock(mutex_);
    return records_;
  }

  std::mutex mutex_;
  std::vector<captured> records_;
};

TEST_F(log_hook, handler_gets_records_with_their_fields) {
  detail::set_log_node("node-7");
  detail::log({.schedule = "nightly", .event = "job.started", .fence = 42})
      .info("started '{}' as pid {}", "/bin/true", 123);
  detail::log().warn("no fields here");
  detail::log({.schedule = "nightly", .event = "job.debug"}).debug("at debug {}", 1);
  detail::log().trace("below the handler's level");
  detail::set_log_node("");

  const auto r = records();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].level, log_level::info);
  EXPECT_EQ(r[0].message, "started '/bin/true' as pid 123");  // no "[nightly]" tag in it
  EXPECT_EQ(r[0].schedule, "nightly");
  EXPECT_EQ(r[0].fence, 42u);
  EXPECT_EQ(r[0].node, "node-7");
  EXPECT_EQ(r[0].event, "job.started");
  EXPECT_EQ(r[1].level, log_level::warn);
  EXPECT_EQ(r[1].message, "no fields here");
  EXPECT_EQ(r[1].schedule, "");
  EXPECT_EQ(r[1].fence, 0u);
  EXPECT_EQ(r[1].event, "");
  EXPECT_EQ(r[2].level, log_level::debug);
  EXPECT_EQ(r[2].event, "job.debug");
}

TEST_F(log_hook, fields_do_not_leak_into_later_lines) {
  {
    detail::log_scope scope({.schedule = "outer", .event = "a.b"});
    detail::log().info("inside");
  }
  detail::log().info("outside");
  const auto r = records();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].schedule, "outer");
  EXPECT_EQ(r[1].schedule, "");
  EXPECT_EQ(r[1].event, "");
}

TEST_F(log_hook, handler_gets_escaped_message) {
  detail::log({.schedule = "s"}).info("ok\r2026-01-01T00:00:00Z error [other] forged\x1b[2J");
  const auto r = records();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].message, "ok\\r2026-01-01T00:00:00Z error [other] forged\\e[2J");
}

TEST_F(log_hook, empty_handler_restores_stderr) {
  detail::log().info("to the handler");
  set_log_handler({});
  // stderr goes to a pipe for the next line: it must arrive there, not at the handler.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(fds[1], STDERR_FILENO);
  detail::log({.schedule = "back"}).info("to stderr again");
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(fds[1]);
  char buf[512] = {};
  const ssize_t n = ::read(fds[0], buf, sizeof buf - 1);
  ::close(fds[0]);
  ASSERT_GT(n, 0);
  const std::string line(buf, static_cast<std::size_t>(n));
  EXPECT_THAT(line, ::testing::EndsWith("Z info [back] to stderr again\n")) << line;
  EXPECT_EQ(line.find('T'), 10u) << line;  // 2026-11-22T03:00:00.123Z
  const auto r = records();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].message, "to the handler");
}

TEST(log_level_names, parse_accepts_warning_and_any_case) {
  log_level l = log_level::info;
  EXPECT_TRUE(parse_log_level("warning", l));
  EXPECT_EQ(l, log_level::warn);
  EXPECT_TRUE(parse_log_level("WARN", l));
  EXPECT_EQ(l, log_level::warn);
  EXPECT_TRUE(parse_log_level("Debug", l));
  EXPECT_EQ(l, log_level::debug);
  EXPECT_FALSE(parse_log_level("verbose", l));
  EXPECT_EQ(l, log_level::debug);  // unchanged on failure
  EXPECT_EQ(to_string(log_level::warn), "warn");
  EXPECT_EQ(to_string(log_level::critical), "critical");
}

TEST(log_escape, control_bytes_and_invalid_utf8_are_escaped) {
  using detail::escape_log_text;
  EXPECT_EQ(escape_log_text("plain text\twith tab"), "plain text\twith tab");
  EXPECT_EQ(escape_log_text("a\rb\nc\bd\x1b[2Je\x7f"), "a\\rb\\nc\\bd\\e[2Je\\x7f");
  EXPECT_EQ(escape_log_text(std::string("nul\0x", 5)), "nul\\x00x");
  EXPECT_EQ(escape_log_text("caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac");  // UTF-8 kept
  EXPECT_EQ(escape_log_text("bad \xff \xc3"), "bad \\xff \\xc3");
  EXPECT_EQ(escape_log_text("csi \xc2\x9b"), "csi \\xc2\\x9b");   // C1 control U+009B
  EXPECT_EQ(escape_log_text("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a UTF-16 surrogate
}

TEST(log_escape, json_string_quotes_and_backslashes) {
  EXPECT_EQ(detail::json_string("say \"hi\" \\ now\t"), "\"say \\\"hi\\\" \\\\ now\\t\"");
}

}  // namespace
}  // namespace baton
