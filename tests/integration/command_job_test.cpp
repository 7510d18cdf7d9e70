// Command jobs against real processes: environment, argv, output logging, timeouts, stop
// requests, process groups and the parent-death signal.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "baton/jobs/command_job.hpp"
#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/log.hpp"
#include "baton/scheduler/cron.hpp"
#include "support/env.hpp"

namespace baton {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

/// Keeps every record baton logs (through the public hook, set_log_handler) as a text line:
/// "[schedule] message".
class capture_sink {
 public:
  void add(const log_record& r) {
    std::string line = r.schedule.empty() ? "" : "[" + std::string(r.schedule) + "] ";
    line += r.message;
    std::lock_guard lock(mutex_);
    lines_.push_back(std::move(line));
  }
  std::vector<std::string> lines() {
    std::lock_guard lock(mutex_);
    return lines_;
  }
  bool contains(const std::string& text) {
    std::lock_guard lock(mutex_);
    return std::any_of(lines_.begin(), lines_.end(),
                       [&](const std::string& l) { return l.find(text) != std::string::npos; });
  }
  bool has_line(const std::string& line) {
    std::lock_guard lock(mutex_);
    return std::find(lines_.begin(), lines_.end(), line) != lines_.end();
  }
  std::string dump() {
    std::string all;
    for (const auto& l : lines()) all += l + "\n";
    return all;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

/// True while `pid` exists and is not a zombie.
bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!stat || !std::getline(stat, text)) return false;
  auto paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return false;
  char state = text[paren + 2];
  return state != 'Z' && state != 'X';
}

/// The pid written to `path`, 0 until it is there.
pid_t read_pid(const std::string& path) {
  std::ifstream in(path);
  long pid = 0;
  if (in >> pid) return static_cast<pid_t>(pid);
  return 0;
}

/// Command options with the fields the tests vary.
command_options cmd(std::vector<std::string> argv, std::map<std::string, std::string> env,
                    std::chrono::milliseconds kill_grace) {
  command_options o;
  o.argv = std::move(argv);
  o.env = std::move(env);
  o.kill_grace = kill_grace;
  return o;
}

class command_job : public ::testing::Test {
 protected:
  void SetUp() override {
    sink_ = std::make_shared<capture_sink>();
    set_log_handler([sink = sink_](const log_record& r) { sink->add(r); }, log_level::info);
    dir_ = test::temp_dir("command-job");
  }
  void TearDown() override {
    set_log_handler({});
    set_log_level(log_level::info);
  }

  job_context context(const std::string& schedule, std::stop_token stop = {}) {
    job_context ctx;
    ctx.schedule = schedule;
    ctx.contender_id = "node-1";
    ctx.fence = 42;
    ctx.fire_time = std::chrono::system_clock::time_point{std::chrono::milliseconds{1709287200250}};
    ctx.stop = std::move(stop);
    return ctx;
  }

  static job_function shell(const std::string& script, std::chrono::milliseconds kill_grace = 2s) {
    return make_command_job(cmd({"/bin/sh", "-c", script}, {}, kill_grace));
  }

  std::shared_ptr<capture_sink> sink_;
  std::string dir_;
};

TEST_F(command_job, passes_the_baton_variables_the_extra_env_and_the_daemon_env) {
  ::setenv("BATON_TEST_INHERITED", "from the daemon", 1);
  auto job = make_command_job(cmd({"env"}, {{"EXTRA_VAR", "hello world"}}, 2s));
  auto ctx = context("env-test");
  job(ctx);
  for (std::string expected :
       {"[env-test] stdout: BATON_SCHEDULE=env-test", "[env-test] stdout: BATON_MUTEX=env-test",
        "[env-test] stdout: BATON_FENCING_TOKEN=42", "[env-test] stdout: BATON_CONTENDER_ID=node-1",
        "[env-test] stdout: BATON_FIRE_TIME=2024-03-01T10:00:00.250Z",
        "[env-test] stdout: EXTRA_VAR=hello world",
        "[env-test] stdout: BATON_TEST_INHERITED=from the daemon"})
    EXPECT_TRUE(sink_->contains(expected)) << expected << "\n" << sink_->dump();
  // The same text as the scheduler's formatter.
  EXPECT_TRUE(sink_->contains("BATON_FIRE_TIME=" + format_rfc3339_utc(ctx.fire_time)));
}

TEST_F(command_job, baton_variables_cannot_be_overridden_by_the_extra_env) {
  auto job = make_command_job(cmd({"env"}, {{"BATON_FENCING_TOKEN", "1"}}, 2s));
  job(context("override"));
  EXPECT_TRUE(sink_->has_line("[override] stdout: BATON_FENCING_TOKEN=42")) << sink_->dump();
  EXPECT_FALSE(sink_->has_line("[override] stdout: BATON_FENCING_TOKEN=1"));
}

TEST_F(command_job, withheld_variables_of_the_daemon_are_not_passed_but_the_extra_env_is) {
  ::setenv("BATON_TEST_SECRET", "hunter2", 1);
  ::setenv("BATON_TEST_VISIBLE", "plain", 1);
  auto opts = cmd({"env"}, {{"PGPASSWORD", "hunter2"}}, 2s);
  opts.withheld_env = {"BATON_TEST_SECRET", "BATON_TEST_UNSET"};
  make_command_job(opts)(context("withheld"));
  EXPECT_TRUE(sink_->has_line("[withheld] stdout: PGPASSWORD=hunter2")) << sink_->dump();
  EXPECT_TRUE(sink_->has_line("[withheld] stdout: BATON_TEST_VISIBLE=plain"));
  EXPECT_TRUE(sink_->has_line("[withheld] stdout: BATON_SCHEDULE=withheld"));
  EXPECT_FALSE(sink_->contains("BATON_TEST_SECRET")) << sink_->dump();
  ::unsetenv("BATON_TEST_SECRET");
  ::unsetenv("BATON_TEST_VISIBLE");
}

TEST_F(command_job, passes_argv_verbatim_without_a_shell) {
  const std::vector<std::string> args{"a b", "it's", "\"quoted\"", "$HOME", "*", "`id`", ""};
  std::vector<std::string> argv{"printf", "<%s>\\n"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto job = make_command_job(cmd(argv, {}, 2s));
  job(context("argv"));
  for (const auto& a : args)
    EXPECT_TRUE(sink_->contains("[argv] stdout: <" + a + ">")) << a << "\n" << sink_->dump();
}

TEST_F(command_job, logs_each_output_line_tagged_with_the_schedule) {
  auto job = shell("echo first; echo oops >&2; echo second; printf 'no newline'");
  job(context("nightly-report"));
  EXPECT_TRUE(sink_->contains("[nightly-report] stdout: first")) << sink_->dump();
  EXPECT_TRUE(sink_->contains("[nightly-report] stderr: oops"));
  EXPECT_TRUE(sink_->contains("[nightly-report] stdout: second"));
  EXPECT_TRUE(sink_->contains("[nightly-report] stdout: no newline"));
  EXPECT_TRUE(sink_->contains("[nightly-report] exited with status 0 after"));
}

TEST_F(command_job, output_beyond_log_output_is_read_counted_and_dropped_per_stream) {
  // 1,000,000 bytes of 100-byte lines on stdout; a little stderr before and after it.
  auto opts = cmd({"/bin/sh", "-c",
                   "echo 'first words' >&2; yes " + std::string(99, 'x') +
                       " | head -c 1000000; echo 'last words' >&2; exit 3"},
                  {}, 2s);
  try {
    make_command_job(opts)(context("chatty"));
    FAIL() << "no exception";
  } catch (const command_error& e) {
    EXPECT_NE(std::string(e.what()).find("exited with status 3"), std::string::npos) << e.what();
  }
  const auto lines = sink_->lines();
  const auto out_lines = std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
    return l.rfind("[chatty] stdout: ", 0) == 0;
  });
  // 655 whole lines and the first 36 bytes of the next one: 65,536 bytes.
  EXPECT_EQ(out_lines, 656);
  EXPECT_TRUE(sink_->has_line("[chatty] stdout: " + std::string(36, 'x'))) << sink_->dump();
  EXPECT_TRUE(sink_->has_line(
      "[chatty] log_output (64KiB) reached on stdout: the rest of this run's stdout is not "
      "logged"));
  EXPECT_TRUE(sink_->has_line(
      "[chatty] stdout of the run: 1000000 bytes, 65536 logged, 934464 dropped (log_output "
      "64KiB)"));
  // stderr has its own budget: both of its lines are logged, and nothing is said of it.
  EXPECT_TRUE(sink_->has_line("[chatty] stderr: first words"));
  EXPECT_TRUE(sink_->has_line("[chatty] stderr: last words"));
  EXPECT_FALSE(sink_->contains("stderr of the run"));
  EXPECT_TRUE(sink_->contains("[chatty] exited with status 3 after"));
}

TEST_F(command_job, log_output_zero_logs_no_output_but_says_how_much_there_was) {
  auto opts = cmd({"/bin/sh", "-c", "echo hello; echo oops >&2"}, {}, 2s);
  opts.log_output = 0;
  make_command_job(opts)(context("silent"));
  EXPECT_FALSE(sink_->contains("[silent] stdout: hello")) << sink_->dump();
  EXPECT_FALSE(sink_->contains("[silent] stderr: oops"));
  EXPECT_TRUE(
      sink_->has_line("[silent] stdout of the run: 6 bytes, 0 logged, 6 dropped (log_output 0B)"))
      << sink_->dump();
  EXPECT_TRUE(
      sink_->has_line("[silent] stderr of the run: 5 bytes, 0 logged, 5 dropped (log_output 0B)"));
  EXPECT_TRUE(sink_->contains("[silent] exited with status 0 after"));
}

TEST_F(command_job, a_non_zero_exit_is_a_failed_run) {
  auto job = shell("echo failing; exit 3");
  try {
    job(context("fails"));
    FAIL() << "no exception";
  } catch (const command_error& e) {
    EXPECT_NE(std::string(e.what()).find("exited with status 3"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(sink_->contains("[fails] exited with status 3 after"));
}

TEST_F(command_job, a_nonexistent_program_is_a_failed_run_with_a_clear_message) {
  auto by_path = make_command_job(cmd({"/nonexistent/baton-prog", "x"}, {}, 2s));
  try {
    by_path(context("missing"));
    FAIL() << "no exception";
  } catch (const command_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot start '/nonexistent/baton-prog': No such file"),
              std::string::npos)
        << e.what();
  }
  auto by_name = make_command_job(cmd({"baton-no-such-program"}, {}, 2s));
  try {
    by_name(context("missing"));
    FAIL() << "no exception";
  } catch (const command_error& e) {
    EXPECT_NE(std::string(e.what()).find("'baton-no-such-program': not found in PATH"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(sink_->contains("[missing] cannot start")) << sink_->dump();
}

TEST_F(command_job, a_file_that_is_not_executable_fails_clearly) {
  auto path = dir_ + "/not-executable";
  std::ofstream(path) << "echo hi\n";
  auto job = make_command_job(cmd({path}, {}, 2s));
  EXPECT_THROW(job(context("noexec")), command_error);
  EXPECT_TRUE(sink_->contains("Permission denied")) << sink_->dump();
}

TEST_F(command_job, bad_options_are_rejected_when_the_job_is_made) {
  EXPECT_THROW(make_command_job(command_options{}), std::invalid_argument);
  EXPECT_THROW(make_command_job(cmd({""}, {}, 2s)), std::invalid_argument);
  EXPECT_THROW(make_command_job(cmd({"true"}, {}, -1ms)), std::invalid_argument);
  EXPECT_THROW(make_command_job(cmd({"true"}, {{"A=B", "c"}}, 2s)), std::invalid_argument);
}

TEST_F(command_job, timeout_sends_sigterm_then_sigkill_to_a_job_that_ignores_sigterm) {
  auto job = shell("trap '' TERM; echo ready; sleep 30", 400ms);
  auto ctx = context("stubborn");
  const auto start = steady::now();
  ctx.deadline = start + 300ms;
  try {
    job(ctx);
    FAIL() << "no exception";
  } catch (const command_error& e) {
    EXPECT_NE(std::string(e.what()).find("killed by SIGKILL (timeout)"), std::string::npos)
        << e.what();
  }
  const auto took = steady::now() - start;
  EXPECT_GE(took, 700ms);
  EXPECT_LT(took, 700ms + 3s);
  EXPECT_TRUE(sink_->contains("[stubborn] timeout: sending SIGTERM")) << sink_->dump();
  EXPECT_TRUE(sink_->contains("sending SIGKILL"));
}

TEST_F(command_job, a_job_that_exits_cleanly_on_sigterm_is_not_killed) {
  auto job =
      shell("trap 'echo bye; exit 0' TERM; echo ready; while true; do sleep 0.05; done", 10s);
  std::stop_source stop;
  auto ctx = context("graceful", stop.get_token());
  auto run = std::async(std::launch::async, [&] { job(ctx); });
  ASSERT_TRUE(test::wait_until([&] { return sink_->contains("[graceful] stdout: ready"); }, 10s));
  const auto start = steady::now();
  stop.request_stop();
  ASSERT_EQ(run.wait_for(5s), std::future_status::ready);
  EXPECT_NO_THROW(run.get());
  EXPECT_LT(steady::now() - start, 5s);
  EXPECT_TRUE(sink_->contains("[graceful] stdout: bye")) << sink_->dump();
  EXPECT_FALSE(sink_->contains("SIGKILL"));
}

TEST_F(command_job, a_stop_request_kills_the_whole_process_group) {
  const auto pid_file = dir_ + "/grandchild.pid";
  auto job = shell("sleep 30 & echo $! > '" + pid_file + "'; wait", 5s);
  std::stop_source stop;
  auto ctx = context("group", stop.get_token());
  auto run = std::async(std::launch::async, [&] { job(ctx); });
  pid_t grandchild = 0;
  ASSERT_TRUE(test::wait_until([&] { return (grandchild = read_pid(pid_file)) > 0; }, 10s));
  ASSERT_TRUE(alive(grandchild));
  stop.request_stop();
  ASSERT_EQ(run.wait_for(10s), std::future_status::ready);
  EXPECT_THROW(run.get(), command_error);
  EXPECT_TRUE(test::wait_until([&] { return !alive(grandchild); }, 5s))
      << "grandchild " << grandchild << " survived";
  EXPECT_TRUE(
      sink_->contains("[group] stop requested: sending SIGTERM to every process of the run"))
      << sink_->dump();
}

TEST_F(command_job, processes_left_in_the_group_die_when_the_command_exits) {
  const auto pid_file = dir_ + "/leftover.pid";
  auto job = shell("sleep 30 & echo $! > '" + pid_file + "'");
  job(context("leftover"));
  const pid_t leftover = read_pid(pid_file);
  ASSERT_GT(leftover, 0);
  EXPECT_TRUE(test::wait_until([&] { return !alive(leftover); }, 5s));
  EXPECT_TRUE(sink_->contains("killed processes left behind")) << sink_->dump();
}

TEST_F(command_job, the_job_dies_when_the_process_that_started_it_is_killed) {
  const auto pid_file = dir_ + "/orphan.pid";
  auto job = shell("echo $$ > '" + pid_file + "'; exec sleep 30");
  // A helper process (a fork of this test, which has no other threads here) runs the job.
  const pid_t helper = ::fork();
  ASSERT_GE(helper, 0);
  if (helper == 0) {
    try {
      job(context("orphan"));
    } catch (...) {
    }
    ::_exit(0);
  }
  pid_t job_pid = 0;
  ASSERT_TRUE(test::wait_until([&] { return (job_pid = read_pid(pid_file)) > 0; }, 10s));
  ASSERT_TRUE(alive(job_pid));
  ASSERT_EQ(::kill(helper, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(helper, &status, 0), helper);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_TRUE(test::wait_until([&] { return !alive(job_pid); }, 5s))
      << "job process " << job_pid << " outlived its parent";
}

/// build/daemon/baton-supervisor: the supervisor as a program of its own.
std::string supervisor_program() {
  return std::string(BATON_BINARY_DIR) + "/daemon/baton-supervisor";
}

/// Threads of this process now.
long thread_count() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Threads:", 0) == 0) return std::stol(line.substr(8));
  return -1;
}

TEST_F(command_job, a_spawned_supervisor_runs_the_command_and_reports_its_status_and_output) {
  command_options o = cmd({"/bin/sh", "-c", "readlink /proc/$PPID/exe >&2; exit 3"}, {}, 2s);
  o.supervisor = supervisor_program();
  auto job = make_command_job(o);
  run_report report;
  report.output_tail_limit = 4096;
  auto ctx = context("spawned");
  ctx.report = &report;
  try {
    job(ctx);
    FAIL() << "no exception";
  } catch (const command_error& e) {
    EXPECT_NE(std::string(e.what()).find("exited with status 3"), std::string::npos) << e.what();
  }
  EXPECT_EQ(report.exit_status, std::optional<int>(3));
  // The command's parent is the supervisor program, not a fork of this process.
  EXPECT_NE(report.output_tail.find("baton-supervisor"), std::string::npos) << report.output_tail;
}

TEST_F(command_job, a_spawned_supervisor_ends_what_the_command_left_behind) {
  const auto pid_file = dir_ + "/spawned-leftover.pid";
  command_options o =
      cmd({"/bin/sh", "-c", "setsid -f sleep 30; sleep 30 & echo $! > '" + pid_file + "'"}, {}, 2s);
  o.supervisor = supervisor_program();
  make_command_job(o)(context("spawned-leftover"));
  const pid_t leftover = read_pid(pid_file);
  ASSERT_GT(leftover, 0);
  EXPECT_TRUE(test::wait_until([&] { return !alive(leftover); }, 5s));
  EXPECT_TRUE(sink_->contains("killed processes left behind")) << sink_->dump();
}

TEST_F(command_job, async_runs_hold_no_thread_each_and_end_on_a_stop_request) {
  constexpr int runs = 40;
  // A first thread created and joined: ThreadSanitizer starts its own background thread with
  // the process's first pthread_create, which would otherwise count as ours.
  std::thread([] {}).join();
  const long threads_before = thread_count();
  std::vector<std::stop_source> stops(runs);
  std::vector<std::promise<std::exception_ptr>> ended(runs);
  for (int i = 0; i < runs; ++i) {
    command_options o = cmd(
        {"/bin/sh", "-c", "echo up > '" + dir_ + "/up-" + std::to_string(i) + "'; exec sleep 60"},
        {}, 2s);
    o.supervisor = supervisor_program();
    auto job = make_async_command_job(o);
    job(context("async-" + std::to_string(i), stops[i].get_token()),
        [&ended, i](std::exception_ptr e) { ended[i].set_value(std::move(e)); });
  }
  ASSERT_TRUE(test::wait_until(
      [&] {
        for (int i = 0; i < runs; ++i)
          if (!std::ifstream(dir_ + "/up-" + std::to_string(i))) return false;
        return true;
      },
      30s));
  // Every command runs now: one thread (the reactor) watches all of them.
  EXPECT_LE(thread_count(), threads_before + 1);
  for (auto& s : stops) s.request_stop();
  for (int i = 0; i < runs; ++i) {
    auto f = ended[i].get_future();
    ASSERT_EQ(f.wait_for(30s), std::future_status::ready) << "run " << i;
    auto e = f.get();
    ASSERT_TRUE(e) << "run " << i << " did not fail";
    try {
      std::rethrow_exception(e);
    } catch (const command_error& error) {
      EXPECT_NE(std::string(error.what()).find("killed by SIGTERM (stop requested)"),
                std::string::npos)
          << error.what();
    }
  }
}

TEST_F(command_job, an_async_run_reports_output_status_and_timeout_like_a_synchronous_one) {
  command_options o = cmd({"/bin/sh", "-c", "echo out; echo err >&2; exit 4"}, {}, 2s);
  auto job = make_async_command_job(o);  // the supervisor as found (here: forked)
  run_report report;
  report.output_tail_limit = 4096;
  auto ctx = context("async-status");
  ctx.report = &report;
  std::promise<std::exception_ptr> ended;
  job(ctx, [&](std::exception_ptr e) { ended.set_value(std::move(e)); });
  auto f = ended.get_future();
  ASSERT_EQ(f.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(f.get());
  EXPECT_EQ(report.exit_status, std::optional<int>(4));
  EXPECT_EQ(report.output_tail, "err\n");
  EXPECT_TRUE(sink_->has_line("[async-status] stdout: out")) << sink_->dump();

  // A timeout: the deadline passes while the command runs.
  auto slow = make_async_command_job(cmd({"/bin/sh", "-c", "exec sleep 60"}, {}, 2s));
  auto timed = context("async-timeout");
  timed.deadline = steady::now() + 200ms;
  std::promise<std::exception_ptr> timed_out;
  slow(timed, [&](std::exception_ptr e) { timed_out.set_value(std::move(e)); });
  auto g = timed_out.get_future();
  ASSERT_EQ(g.wait_for(30s), std::future_status::ready);
  try {
    std::rethrow_exception(g.get());
  } catch (const command_error& error) {
    EXPECT_NE(std::string(error.what()).find("(timeout)"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace baton
