// scheduler::add() validation and the lifecycle rules, on the in-process memory backend.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "baton/mutex/backend.hpp"
#include "baton/mutex/memory_store.hpp"
#include "baton/scheduler/scheduler.hpp"

namespace baton {
namespace {

using namespace std::chrono_literals;

class scheduler_options_test : public ::testing::Test {
 protected:
  scheduler_options_test()
      : backend_("memory", rt_, store_, store_),
        sched_(backend_, rt_, scheduler_options{1, std::nullopt, "node-1", nullptr}) {}

  static schedule_options valid(std::string name = "job-1") {
    schedule_options s;
    s.name = std::move(name);
    s.when = every_trigger{1s};
    s.job = [](const job_context&) {};
    return s;
  }

  // The message of the std::invalid_argument thrown by add(s).
  std::string add_error(schedule_options s) {
    try {
      sched_.add(std::move(s));
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(no error)";
  }

  runtime rt_{runtime::options{1, 1}};
  std::shared_ptr<memory_lease_store> store_ = std::make_shared<memory_lease_store>();
  lease_store_backend backend_;
  scheduler sched_;
};

TEST_F(scheduler_options_test, accepts_a_valid_schedule_and_lists_it_before_start) {
  sched_.add(valid());
  auto cron = valid("cron-job");
  cron.when = cron_trigger{cron_expression::parse("0 3 * * *", "Europe/Berlin")};
  sched_.add(std::move(cron));
  auto status = sched_.status();
  ASSERT_EQ(status.size(), 2u);
  EXPECT_EQ(status[0].name, "job-1");
  EXPECT_EQ(status[1].name, "cron-job");
  EXPECT_FALSE(status[0].leader);
  EXPECT_EQ(status[0].runs, 0u);
  EXPECT_EQ(sched_.contender_id(), "node-1");
}

TEST_F(scheduler_options_test, rejects_bad_names_and_duplicates_naming_the_schedule) {
  EXPECT_NE(add_error(valid("")).find("schedule '': invalid name"), std::string::npos);
  EXPECT_NE(add_error(valid("has space")).find("schedule 'has space': invalid name"),
            std::string::npos);
  sched_.add(valid("twice"));
  EXPECT_EQ(add_error(valid("twice")), "schedule 'twice': duplicate name");
}

TEST_F(scheduler_options_test, rejects_a_missing_job_and_bad_periods) {
  auto s = valid();
  s.job = nullptr;
  EXPECT_EQ(add_error(s), "schedule 'job-1': no job");
  s = valid();
  s.when = every_trigger{0ms};
  EXPECT_EQ(add_error(s), "schedule 'job-1': every: the period must be positive");
  s = valid();
  s.when = every_trigger{1s, every_mode::fixed_rate, -1ms};
  EXPECT_EQ(add_error(s), "schedule 'job-1': initial_delay must not be negative");
  s = valid();
  s.timeout = -1ms;
  EXPECT_EQ(add_error(s), "schedule 'job-1': timeout must not be negative");
}

TEST_F(scheduler_options_test, rejects_a_stop_grace_that_would_stop_jobs_before_every_renewal) {
  auto s = valid();
  s.stop_grace = 5680ms;  // default lease: transition 6 s - drift margin 320 ms
  EXPECT_NE(add_error(s).find("schedule 'job-1': stop_grace (5680ms) must be less than transition "
                              "- drift margin (6s - 320ms = 5680ms)"),
            std::string::npos)
      << add_error(s);
  s.stop_grace = -1ms;
  EXPECT_EQ(add_error(s), "schedule 'job-1': stop_grace must not be negative");
  s.stop_grace = 5679ms;
  EXPECT_EQ(add_error(s), "(no error)");
}

TEST_F(scheduler_options_test, rejects_an_inconsistent_lease) {
  auto s = valid();
  contend_options lease;
  lease.ttl = 0ms;
  s.lease = lease;
  EXPECT_NE(add_error(s).find("schedule 'job-1': lease: "), std::string::npos) << add_error(s);
}

TEST_F(scheduler_options_test, add_after_stop_and_start_twice_are_logic_errors) {
  sched_.add(valid());
  sched_.start();
  EXPECT_THROW(sched_.start(), std::logic_error);
  sched_.stop(1s);
  sched_.stop(1s);  // idempotent
  EXPECT_THROW(sched_.add(valid("late")), std::logic_error);
}

TEST_F(scheduler_options_test, a_schedule_added_while_running_contends_and_a_removed_one_releases) {
  sched_.add(valid());
  sched_.start();
  sched_.add(valid("late"));
  auto leads = [&](const std::string& name) {
    for (const auto& s : sched_.status())
      if (s.name == name) return s.leader;
    return false;
  };
  auto wait_for = [&](auto condition) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!condition() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(5ms);
    return condition();
  };
  EXPECT_TRUE(wait_for([&] { return leads("late"); }));
  EXPECT_THROW(sched_.add(valid("late")), std::invalid_argument);  // still a duplicate
  EXPECT_TRUE(sched_.remove("late", 1s));
  EXPECT_FALSE(sched_.remove("late", 1s));
  ASSERT_EQ(sched_.status().size(), 1u);
  EXPECT_EQ(sched_.status()[0].name, "job-1");
  // Released: the backend shows no owner (another contender may take it at once).
  EXPECT_TRUE(backend_.read_owner("late").empty());
  EXPECT_TRUE(backend_.read_owner("job-1").is("node-1"));
  sched_.stop(1s);
}

TEST(scheduler_lifecycle, stop_without_start_and_destruction_are_quiet) {
  runtime rt{runtime::options{1, 1}};
  auto store = std::make_shared<memory_lease_store>();
  lease_store_backend backend("memory", rt, store, store);
  {
    scheduler s(backend, rt);
    schedule_options x;
    x.name = "x";
    x.when = every_trigger{1s};
    x.job = [](const job_context&) {};
    s.add(std::move(x));
    s.stop(0ms);
  }
  { scheduler s(backend, rt); }
  SUCCEED();
}

}  // namespace
}  // namespace baton
