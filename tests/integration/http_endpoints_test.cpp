// The daemon's HTTP endpoints in-process (daemon/http.cpp), where the test controls the runtime
// and the backend: /healthz turns 503 while the runtime's io threads are stuck and 200 after;
// /readyz says "starting" before the scheduler is attached, "stopping" once stopping, reports a
// failing backend with its error (secrets scrubbed), and a backend that does not answer neither
// blocks /metrics nor holds /readyz longer than its bounded wait.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>

#include "baton/backends/factory.hpp"
#include "baton/mutex/errc.hpp"
#include "baton/mutex/runtime.hpp"
#include "baton/scheduler/scheduler.hpp"
#include "http.hpp"
#include "support/env.hpp"
#include "support/http_client.hpp"

namespace {

using namespace std::chrono_literals;
using baton::test::http_get;
using baton::test::wait_until;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using steady = std::chrono::steady_clock;

/// A backend whose read_owner() the test steers: answer, fail, or hang until released.
class steered_backend : public baton::mutex_backend {
 public:
  enum class mode { answer, fail, hang };

  explicit steered_backend(std::shared_ptr<baton::mutex_backend> records)
      : records_(std::move(records)) {}

  void set(mode m) {
    {
      std::lock_guard lock(mutex_);
      mode_ = m;
    }
    cv_.notify_all();
  }

  std::string_view type() const noexcept override { return "steered"; }
  std::shared_ptr<baton::contend_service> make_contend_service(
      const std::string&, std::shared_ptr<baton::mutex_contender>, const baton::contend_options&,
      std::string) override {
    throw std::logic_error("steered_backend: no contend services");
  }
  baton::mutex_owner read_owner(const std::string&) override {
    std::unique_lock lock(mutex_);
    // A hang lasts until the test changes the mode, at most 20 s.
    cv_.wait_for(lock, 20s, [&] { return mode_ != mode::hang; });
    if (mode_ == mode::fail)
      throw std::system_error(make_error_code(baton::errc::connection_lost),
                              "connect to db:5432 with password s3cret-pw refused");
    return {};
  }
  std::string read_state(const std::string&) override { return {}; }
  baton::record_store& records() override { return records_->records(); }

 private:
  std::shared_ptr<baton::mutex_backend> records_;
  std::mutex mutex_;
  std::condition_variable cv_;
  mode mode_ = mode::answer;
};

baton::config::listen_address any_loopback_port() {
  return baton::config::parse_listen_address("127.0.0.1:0");
}

int port_of(const baton::daemon::http_endpoints& e) {
  const auto a = e.address();
  return std::stoi(a.substr(a.rfind(':') + 1));
}

std::string reason_of(const baton::test::http_response& r) {
  try {
    const auto j = json::parse(r.body);
    return j.value("reason", std::string());
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not JSON: " << r.body;
    return {};
  }
}

TEST(http_endpoints, healthz_is_503_while_the_runtime_io_threads_are_stuck_and_200_after) {
  baton::runtime rt(baton::runtime::options{1, 1});
  baton::daemon::http_endpoints http(any_loopback_port(), rt, "test", "memory");
  const int port = port_of(http);
  ASSERT_EQ(http_get(port, "/healthz").status, 200);

  // The one io thread is busy until released (at most 20 s).
  std::promise<void> release;
  auto released = release.get_future().share();
  boost::asio::post(rt.io(), [released] { released.wait_for(20s); });
  const auto t0 = steady::now();
  const auto stuck = http_get(port, "/healthz");
  const auto took = steady::now() - t0;
  EXPECT_EQ(stuck.status, 503) << stuck.body;
  EXPECT_EQ(json::parse(stuck.body)["status"], "unhealthy");
  EXPECT_THAT(reason_of(stuck), HasSubstr("io threads did not run a probe within 1000ms"));
  EXPECT_GE(took, 1s);
  EXPECT_LT(took, 5s);  // the bounded wait, not the stuck thread's 20 s
  // /metrics is served meanwhile (it does not need the io threads).
  EXPECT_EQ(http_get(port, "/metrics").status, 200);

  release.set_value();
  EXPECT_TRUE(wait_until([&] { return http_get(port, "/healthz").status == 200; }, 10s));
}

TEST(http_endpoints, readyz_follows_the_scheduler_and_the_backend_and_never_blocks_the_server) {
  baton::runtime rt(baton::runtime::options{2, 2});
  auto memory = baton::make_backend(baton::test::backend_config_for("memory"), rt);
  auto steered = std::make_shared<steered_backend>(memory);
  baton::scheduler sched(*memory, rt, {});
  baton::daemon::http_endpoints http(any_loopback_port(), rt, "test", "memory");
  const int port = port_of(http);

  // Before the scheduler is attached: starting.
  const auto starting = http_get(port, "/readyz");
  EXPECT_EQ(starting.status, 503);
  EXPECT_EQ(reason_of(starting), "starting");

  http.attach(sched, steered, "probe-name", [](const std::string& text) {
    std::string out = text;
    for (auto p = out.find("s3cret-pw"); p != std::string::npos; p = out.find("s3cret-pw"))
      out.replace(p, 9, "***");
    return out;
  });
  EXPECT_TRUE(wait_until([&] { return http_get(port, "/readyz").status == 200; }, 10s));

  // A backend that fails: 503 with its error, the secret masked (once the 1 s cache expired).
  steered->set(steered_backend::mode::fail);
  baton::test::http_response failing;
  ASSERT_TRUE(wait_until(
      [&] {
        failing = http_get(port, "/readyz");
        return failing.status == 503;
      },
      10s));
  EXPECT_THAT(reason_of(failing), HasSubstr("backend unreachable: connect to db:5432"));
  EXPECT_THAT(failing.body, Not(HasSubstr("s3cret-pw")));

  // A backend that does not answer: /readyz gives up after its bounded wait, and /metrics and
  // /healthz answer at once meanwhile.
  steered->set(steered_backend::mode::hang);
  std::this_thread::sleep_for(1100ms);  // let the cached failure age past its 1 s
  const auto t0 = steady::now();
  auto pending = std::async(std::launch::async, [&] { return http_get(port, "/readyz", 10s); });
  EXPECT_EQ(pending.wait_for(200ms), std::future_status::timeout);  // it is waiting
  // While the probe hangs (the steered backend never answers it), the server answers the others.
  EXPECT_EQ(http_get(port, "/metrics").status, 200);
  EXPECT_EQ(http_get(port, "/healthz").status, 200);
  const auto hung = pending.get();
  EXPECT_EQ(hung.status, 503) << hung.body;
  EXPECT_THAT(reason_of(hung), HasSubstr("no answer to a probe within 2000ms"));
  EXPECT_LT(steady::now() - t0, 10s);  // bounded: the 2 s wait, not the hanging probe

  // Answering again: ready again.
  steered->set(steered_backend::mode::answer);
  EXPECT_TRUE(wait_until([&] { return http_get(port, "/readyz").status == 200; }, 10s));

  // Stopping: 503 "stopping" at once, whatever the backend says.
  http.stopping();
  const auto stopping = http_get(port, "/readyz");
  EXPECT_EQ(stopping.status, 503);
  EXPECT_EQ(reason_of(stopping), "stopping");
  http.stop();
  EXPECT_FALSE(baton::test::accepts_on_loopback(port));
}

}  // namespace
