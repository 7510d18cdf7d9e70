// A command run is its whole process tree: for every job shape people write (a direct child, a
// `sh -c` grandchild, a setsid() descendant, a double fork, `nohup ... &`) and every way a run
// ends (timeout, stop request, the process running the job killed with SIGKILL), no process of
// the run is left afterwards (checked by scanning /proc for a variable only the run carries), and
// the status reported is the command's own. Every process of these shapes ignores SIGTERM, so
// each run needs the supervisor's SIGKILL after kill_grace.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "baton/jobs/command_job.hpp"
#include "support/env.hpp"
#include "support/process.hpp"

namespace baton {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

constexpr milliseconds kill_grace{300};

struct shape {
  const char* name;
  const char* script;     // for /bin/sh -c; "$UP" is a file to create once started
  std::size_t processes;  // processes of the run once it is up (all ignore SIGTERM)
};

const shape shapes[] = {
    {"direct_child", "trap '' TERM; touch \"$UP\"; exec sleep 30", 1},
    {"sh_c_grandchild", "trap '' TERM; touch \"$UP\"; sleep 30; true", 2},
    {"setsid_descendant", "trap '' TERM; setsid -f sleep 30; touch \"$UP\"; sleep 30", 3},
    {"double_fork", "trap '' TERM; (sleep 30 &); touch \"$UP\"; sleep 30", 3},
    {"nohup_background", "trap '' TERM; nohup sleep 30 >/dev/null 2>&1 & touch \"$UP\"; sleep 30",
     3},
};

std::string marker_for(const std::string& what) {
  static std::atomic<int> counter{0};
  return "BATON_TREE_MARK=" + what + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(++counter);
}

/// Waits until the run has all its processes; false after 10 s.
bool wait_up(const std::string& marker, std::size_t count) {
  return test::wait_until([&] { return test::processes_with_env(marker).size() >= count; }, 10s);
}

/// Milliseconds from `since` until no process carries `marker`; -1 if some still do after 10 s.
double gone_after(const std::string& marker, steady::time_point since) {
  if (!test::wait_until([&] { return test::processes_with_env(marker).empty(); }, 10s)) return -1;
  return std::chrono::duration<double, std::milli>(steady::now() - since).count();
}

void report(const char* shape, const char* end, double ms) {
  std::cout << "[ tree ] " << shape << " x " << end << ": last process gone " << ms
            << " ms after the run had to end (kill_grace " << kill_grace.count() << " ms)\n";
  ::testing::Test::RecordProperty(std::string(end) + "_gone_ms", std::to_string(ms));
}

/// The run failed, and its error says `text` (the command's own status).
void expect_failure(std::future<void>& run, const std::string& text) {
  try {
    run.get();
    ADD_FAILURE() << "a run that was killed succeeded";
  } catch (const command_error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

class job_tree : public ::testing::TestWithParam<shape> {
 protected:
  void SetUp() override { dir_ = test::temp_dir("job-tree"); }

  command_options options(const std::string& marker) const {
    command_options o;
    o.argv = {"/bin/sh", "-c", GetParam().script};
    o.env = {{marker.substr(0, marker.find('=')), marker.substr(marker.find('=') + 1)},
             {"UP", dir_ + "/up"}};
    o.kill_grace = kill_grace;
    return o;
  }

  std::string dir_;
};

TEST_P(job_tree, a_timeout_ends_every_process_of_the_run) {
  const auto marker = marker_for(GetParam().name);
  auto job = make_command_job(options(marker));
  job_context ctx;
  ctx.schedule = "tree";
  const auto deadline = steady::now() + 1500ms;
  ctx.deadline = deadline;
  auto run = std::async(std::launch::async, [&] { job(ctx); });
  ASSERT_TRUE(wait_up(marker, GetParam().processes));
  ASSERT_LT(steady::now(), deadline) << "the run took too long to start";
  ASSERT_EQ(run.wait_for(15s), std::future_status::ready);
  // The command's own status: sh (or sleep) ignored SIGTERM and was killed.
  expect_failure(run, "killed by SIGKILL (timeout)");
  const double ms = gone_after(marker, deadline);
  ASSERT_GE(ms, 0) << "processes outlived the run: " << test::processes_with_env(marker).size();
  report(GetParam().name, "timeout", ms);
  EXPECT_LE(ms, (kill_grace + 1s).count());
}

TEST_P(job_tree, a_stop_request_ends_every_process_of_the_run) {
  const auto marker = marker_for(GetParam().name);
  auto job = make_command_job(options(marker));
  std::stop_source stop;
  job_context ctx;
  ctx.schedule = "tree";
  ctx.stop = stop.get_token();
  auto run = std::async(std::launch::async, [&] { job(ctx); });
  ASSERT_TRUE(wait_up(marker, GetParam().processes));
  const auto requested = steady::now();
  stop.request_stop();
  ASSERT_EQ(run.wait_for(15s), std::future_status::ready);
  // The job returns only once the whole tree is gone.
  EXPECT_TRUE(test::processes_with_env(marker).empty());
  expect_failure(run, "killed by SIGKILL (stop requested)");
  const double ms = gone_after(marker, requested);
  ASSERT_GE(ms, 0);
  report(GetParam().name, "stop_request", ms);
  EXPECT_GE(ms, kill_grace.count() - 50.0) << "SIGKILL came before kill_grace";
  EXPECT_LE(ms, (kill_grace + 1s).count());
}

TEST_P(job_tree, killing_the_process_that_runs_the_job_ends_every_process_of_the_run) {
  const auto marker = marker_for(GetParam().name);
  const auto o = options(marker);
  std::vector<std::string> argv{test::program_path("run_job"), std::to_string(kill_grace.count())};
  argv.insert(argv.end(), o.argv.begin(), o.argv.end());
  // The helper passes its environment on: give it the marker and $UP there.
  for (const auto& [k, v] : o.env) ::setenv(k.c_str(), v.c_str(), 1);
  test::child_process runner(argv);
  ::unsetenv(marker.substr(0, marker.find('=')).c_str());
  // The helper itself carries the marker: wait for it plus the run.
  ASSERT_TRUE(wait_up(marker, GetParam().processes + 1));
  const auto killed = steady::now();
  runner.signal(SIGKILL);
  ASSERT_TRUE(runner.wait_exit(5s));
  const double ms = gone_after(marker, killed);
  ASSERT_GE(ms, 0) << "processes outlived the killed daemon: "
                   << test::processes_with_env(marker).size();
  report(GetParam().name, "runner_sigkill", ms);
  EXPECT_LE(ms, (kill_grace + 1s).count());
}

TEST(job_tree_status, a_job_writing_output_while_it_shuts_down_after_the_daemon_died_is_not_cut) {
  // The daemon (here the helper) is gone, so nobody reads the job's output any more. The job's
  // SIGTERM handler still writes (more than a pipe holds) and must get to its end: no SIGPIPE,
  // no blocking on a full pipe.
  const std::string dir = test::temp_dir("job-shutdown-output");
  const auto marker = marker_for("output");
  ::setenv("BATON_TREE_MARK", marker.substr(marker.find('=') + 1).c_str(), 1);
  ::setenv("UP", (dir + "/up").c_str(), 1);
  ::setenv("DONE", (dir + "/done").c_str(), 1);
  test::child_process runner(
      {test::program_path("run_job"), "5000", "/bin/sh", "-c",
       "trap 'echo bye; echo bye >&2; seq 1 100000; seq 1 100000 >&2; touch \"$DONE\"; exit 0' "
       "TERM; touch \"$UP\"; while :; do sleep 0.05; done"});
  ::unsetenv("BATON_TREE_MARK");
  ASSERT_TRUE(test::wait_until([&] { return std::filesystem::exists(dir + "/up"); }, 10s));
  runner.signal(SIGKILL);
  ASSERT_TRUE(runner.wait_exit(5s));
  EXPECT_TRUE(test::wait_until([&] { return std::filesystem::exists(dir + "/done"); }, 4s))
      << "the job's SIGTERM handler did not finish";
  EXPECT_TRUE(test::wait_until([&] { return test::processes_with_env(marker).empty(); }, 6s));
}

TEST(job_tree_status, the_status_is_the_commands_own_even_with_leftovers) {
  const auto marker = marker_for("status");
  command_options o;
  o.argv = {"/bin/sh", "-c", "nohup sleep 30 >/dev/null 2>&1 & (setsid -f sleep 30); exit 5"};
  o.env = {{marker.substr(0, marker.find('=')), marker.substr(marker.find('=') + 1)}};
  o.kill_grace = kill_grace;
  job_context ctx;
  ctx.schedule = "status";
  try {
    make_command_job(o)(ctx);
    FAIL() << "exit 5 succeeded";
  } catch (const command_error& e) {
    EXPECT_NE(std::string(e.what()).find("exited with status 5"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(test::processes_with_env(marker).empty());
}

TEST(job_tree_status, the_command_gets_no_descriptor_but_0_1_2) {
  const auto marker = marker_for("fds");
  command_options o;
  o.argv = {"sleep", "30"};  // opens nothing itself: what it has, it inherited
  o.env = {{marker.substr(0, marker.find('=')), marker.substr(marker.find('=') + 1)}};
  o.kill_grace = kill_grace;
  std::stop_source stop;
  job_context ctx;
  ctx.schedule = "fds";
  ctx.stop = stop.get_token();
  auto run = std::async(std::launch::async, [&] {
    try {
      make_command_job(o)(ctx);
    } catch (const command_error&) {
    }
  });
  ASSERT_TRUE(wait_up(marker, 1));
  const pid_t pid = test::processes_with_env(marker).at(0);
  std::vector<std::string> fds;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd"))
    fds.push_back(e.path().filename().string());
  std::sort(fds.begin(), fds.end());
  stop.request_stop();
  ASSERT_EQ(run.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(fds, (std::vector<std::string>{"0", "1", "2"}));
}

INSTANTIATE_TEST_SUITE_P(shapes, job_tree, ::testing::ValuesIn(shapes),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace baton
