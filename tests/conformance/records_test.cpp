// The record_store contract (mutex/records.hpp), run on every backend this build has: bounded
// history written only by the owner with its fence, compare-and-set controls, and notification
// of controls changes where the backend can push.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <set>
#include <thread>

#include "baton/backends/factory.hpp"
#include "baton/mutex/errc.hpp"
#include "baton/mutex/records.hpp"
#include "support/env.hpp"
#include "support/lease.hpp"

using namespace std::chrono_literals;

namespace {

using baton::test::unique_name;

struct quiet final : baton::mutex_contender {
  void on_acquired(const baton::mutex_state&) override {}
  void on_released(const baton::mutex_state&) override {}
};

class records : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    config_ = baton::test::backend_config_for(GetParam());
    backend_ = baton::make_backend(config_, rt_);
  }

  std::shared_ptr<baton::contend_service> owner_of(const std::string& name) {
    auto s = backend_->make_contend_service(name, contender_, baton::test::lease_options());
    s->start();
    EXPECT_TRUE(baton::test::wait_until([&] { return s->is_owner(); }, 10s)) << name;
    return s;
  }

  std::error_code append(const std::string& name, const std::string& id, std::uint64_t fence,
                         std::string bytes, std::size_t keep = 50,
                         baton::mutex_backend* on = nullptr) {
    auto p = std::make_shared<std::promise<std::error_code>>();
    auto f = p->get_future();
    (on ? on : backend_.get())
        ->records()
        .async_append_history(name, id, fence, std::move(bytes), keep,
                              [p](std::error_code ec) { p->set_value(ec); });
    EXPECT_EQ(f.wait_for(30s), std::future_status::ready);
    return f.get();
  }

  // Another node on the same backend: a second instance from the same config (the memory
  // backend lives in one process: the same instance).
  std::shared_ptr<baton::mutex_backend> another_node() {
    if (GetParam() == "memory") return backend_;
    return baton::make_backend(config_, rt2_);
  }

  std::vector<baton::history_entry> history(const std::string& name, std::size_t limit = 100) {
    return baton::read_history(backend_->records(), name, limit);
  }

  std::shared_ptr<quiet> contender_ = std::make_shared<quiet>();
  baton::runtime rt_;
  baton::runtime rt2_;
  baton::backend_config config_;
  std::shared_ptr<baton::mutex_backend> backend_;
};

std::string param_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

}  // namespace

TEST_P(records, history_is_written_by_the_owner_and_read_newest_first) {
  const auto name = unique_name("hist");
  EXPECT_TRUE(history(name).empty());
  auto s = owner_of(name);
  // JSON-like text with quotes, backslashes, newlines and multi-byte UTF-8 comes back unchanged.
  const std::string third = "{\"x\":\"caf\xc3\xa9 \\\" \\n\",\n'quote' %s ${X}}";
  EXPECT_FALSE(append(name, s->contender_id(), s->fence(), "first"));
  EXPECT_FALSE(append(name, s->contender_id(), s->fence(), "second"));
  EXPECT_FALSE(append(name, s->contender_id(), s->fence(), third));
  auto h = history(name);
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].bytes, third);
  EXPECT_EQ(h[1].bytes, "second");
  EXPECT_EQ(h[2].bytes, "first");
  EXPECT_GT(h[0].seq, h[1].seq);
  EXPECT_GT(h[1].seq, h[2].seq);
  EXPECT_GE(h[2].seq, 1u);  // 0 means "not stored" (run_record::seq)
  for (const auto& e : h) EXPECT_EQ(e.fence, s->fence());
  auto two = history(name, 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0], h[0]);
  EXPECT_EQ(two[1], h[1]);
  EXPECT_TRUE(s->stop_and_wait(10s));
}

TEST_P(records, history_is_pruned_to_the_newest_keep_entries_by_the_writer) {
  const auto name = unique_name("bounded");
  auto s = owner_of(name);
  for (int i = 1; i <= 12; ++i)
    ASSERT_FALSE(append(name, s->contender_id(), s->fence(), "run " + std::to_string(i), 5));
  auto h = history(name);
  ASSERT_EQ(h.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(h[i].bytes, "run " + std::to_string(12 - i));
  // A smaller keep prunes further; seq keeps counting (never reused after pruning).
  const auto last_seq = h[0].seq;
  ASSERT_FALSE(append(name, s->contender_id(), s->fence(), "run 13", 2));
  h = history(name);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].bytes, "run 13");
  EXPECT_EQ(h[1].bytes, "run 12");
  EXPECT_GT(h[0].seq, last_seq);
  EXPECT_TRUE(s->stop_and_wait(10s));
}

TEST_P(records, a_stale_leaders_late_record_is_rejected_and_history_survives_the_change) {
  const auto name = unique_name("stale-history");
  auto a = owner_of(name);
  const auto a_id = a->contender_id();
  const auto a_fence = a->fence();
  ASSERT_FALSE(append(name, a_id, a_fence, "by a"));
  auto b = backend_->make_contend_service(name, contender_, baton::test::lease_options());
  b->start();
  ASSERT_TRUE(a->stop_and_wait(10s));
  ASSERT_TRUE(baton::test::wait_until([&] { return b->is_owner(); }, 10s));
  ASSERT_NE(b->fence(), a_fence);
  // The old leader's late record: its id and fence no longer own the mutex.
  EXPECT_EQ(append(name, a_id, a_fence, "late by a"), baton::errc::not_owner);
  // Neither a right fence with a wrong id nor the right id with a wrong fence is enough.
  EXPECT_EQ(append(name, a_id, b->fence(), "a with b's fence"), baton::errc::not_owner);
  EXPECT_EQ(append(name, b->contender_id(), a_fence, "b with a's fence"), baton::errc::not_owner);
  EXPECT_FALSE(append(name, b->contender_id(), b->fence(), "by b"));
  auto h = history(name);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].bytes, "by b");
  EXPECT_EQ(h[0].fence, b->fence());
  EXPECT_EQ(h[1].bytes, "by a");
  EXPECT_EQ(h[1].fence, a_fence);
  EXPECT_TRUE(b->stop_and_wait(10s));
  // Nobody owns it now: nobody may append, and the history stays readable.
  EXPECT_EQ(append(name, b->contender_id(), b->fence() + 1, "nobody"), baton::errc::not_owner);
  EXPECT_EQ(history(name).size(), 2u);
}

TEST_P(records, a_mutex_never_held_takes_no_history) {
  const auto name = unique_name("never");
  EXPECT_EQ(append(name, "someone", 1, "x"), baton::errc::not_owner);
  EXPECT_TRUE(history(name).empty());
}

TEST_P(records, oversized_entries_and_bad_keep_are_refused_without_writing) {
  const auto name = unique_name("limits");
  auto s = owner_of(name);
  EXPECT_EQ(append(name, s->contender_id(), s->fence(),
                   std::string(baton::max_history_entry_bytes + 1, 'x')),
            baton::errc::invalid_argument);
  EXPECT_EQ(append(name, s->contender_id(), s->fence(), "x", 0), baton::errc::invalid_argument);
  EXPECT_EQ(append(name, s->contender_id(), s->fence(), "x", baton::max_history_keep + 1),
            baton::errc::invalid_argument);
  EXPECT_TRUE(history(name).empty());
  // The largest entry allowed fits (ZooKeeper: well under its 1 MiB node limit).
  const std::string big(baton::max_history_entry_bytes, 'y');
  EXPECT_FALSE(append(name, s->contender_id(), s->fence(), big));
  auto h = history(name);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].bytes, big);
  EXPECT_TRUE(s->stop_and_wait(10s));
}

TEST_P(records, controls_are_compare_and_set) {
  const auto name = unique_name("controls");
  auto& store = backend_->records();
  EXPECT_EQ(baton::read_controls(store, name), (baton::controls_record{"", 0}));
  auto v1 = baton::write_controls(store, name, 0, "{\"paused\":true}");
  EXPECT_EQ(v1, (baton::controls_record{"{\"paused\":true}", 1}));
  // A writer that read version 0 loses, and is told what is there now.
  auto p = std::make_shared<std::promise<std::pair<std::error_code, baton::controls_record>>>();
  store.async_write_controls(name, 0, "{\"paused\":false}",
                             [p](std::error_code ec, baton::controls_record r) {
                               p->set_value({ec, std::move(r)});
                             });
  auto [ec, now] = p->get_future().get();
  EXPECT_EQ(ec, baton::errc::conflict);
  EXPECT_EQ(now, v1);
  EXPECT_THROW(baton::write_controls(store, name, 7, "x"), std::system_error);
  auto v2 = baton::write_controls(store, name, 1, "{\"paused\":false}");
  EXPECT_EQ(v2.version, 2u);
  // Another instance of the backend (another node) sees it; controls need no ownership.
  auto other = another_node();
  EXPECT_EQ(baton::read_controls(other->records(), name), v2);
  EXPECT_THROW(
      baton::write_controls(store, name, 0, std::string(baton::max_controls_bytes + 1, 'x')),
      std::system_error);
  EXPECT_EQ(baton::read_controls(store, name), v2);
}

TEST_P(records, concurrent_controls_updates_from_two_nodes_lose_nothing) {
  const auto name = unique_name("cas");
  auto other = another_node();
  constexpr int per_writer = 15;
  auto bump = [&](baton::mutex_backend& b) {
    for (int i = 0; i < per_writer; ++i)
      baton::update_controls(
          b.records(), name,
          [](const std::string& bytes) {
            return std::to_string(bytes.empty() ? 1 : std::stoi(bytes) + 1);
          },
          1000);
  };
  std::thread t1([&] { bump(*backend_); });
  std::thread t2([&] { bump(*other); });
  t1.join();
  t2.join();
  auto r = baton::read_controls(backend_->records(), name);
  EXPECT_EQ(r.bytes, std::to_string(2 * per_writer));
  EXPECT_EQ(r.version, 2u * per_writer);
}

// Every backend tells a watcher of a controls change: PostgreSQL (NOTIFY), Redis (pub/sub),
// ZooKeeper (a watch) and memory push it; SQLite and MySQL find it with the store's controls
// poll (one SELECT of every row's version per poll_interval), which also wakes each watcher
// once in its first round.
TEST_P(records, a_controls_change_by_another_node_reaches_the_watcher) {
  const auto name = unique_name("watch");
  std::atomic<int> calls{0};
  const auto handle = backend_->records().watch_controls(name, [&] { ++calls; });
  ASSERT_NE(handle, 0u);
  auto other = another_node();
  baton::write_controls(other->records(), name, 0, "one");
  EXPECT_TRUE(baton::test::wait_until([&] { return calls.load() >= 1; }, 10s));
  // A second change is told too (one-shot watches are re-armed; the poll compares versions).
  int before = calls.load();
  baton::write_controls(other->records(), name, 1, "two");
  EXPECT_TRUE(baton::test::wait_until([&] { return calls.load() > before; }, 10s));
  before = calls.load();
  baton::write_controls(other->records(), name, 2, "three");
  EXPECT_TRUE(baton::test::wait_until([&] { return calls.load() > before; }, 10s));
  backend_->records().unwatch_controls(handle);
  // After unwatch no more calls come (allow one already in flight).
  const int after = calls.load();
  baton::write_controls(other->records(), name, 3, "four");
  std::this_thread::sleep_for(
      1200ms);  // a bounded look (two SQL polls) for a call that must not come
  EXPECT_LE(calls.load(), after + 1);
}

TEST_P(records, a_controls_watcher_is_not_woken_by_changes_of_other_names) {
  const auto name = unique_name("watched");
  const auto other_name = unique_name("unwatched");
  std::atomic<int> calls{0}, other_calls{0};
  const auto handle = backend_->records().watch_controls(name, [&] { ++calls; });
  const auto other_handle = backend_->records().watch_controls(other_name, [&] { ++other_calls; });
  auto other = another_node();
  // Two changes of `other_name` told: any first-round wake of `name` is over by then.
  baton::write_controls(other->records(), other_name, 0, "a");
  ASSERT_TRUE(baton::test::wait_until([&] { return other_calls.load() >= 1; }, 10s));
  int before = other_calls.load();
  baton::write_controls(other->records(), other_name, 1, "b");
  ASSERT_TRUE(baton::test::wait_until([&] { return other_calls.load() > before; }, 10s));
  const int quiet = calls.load();
  before = other_calls.load();
  baton::write_controls(other->records(), other_name, 2, "c");
  ASSERT_TRUE(baton::test::wait_until([&] { return other_calls.load() > before; }, 10s));
  EXPECT_EQ(calls.load(), quiet);
  backend_->records().unwatch_controls(handle);
  backend_->records().unwatch_controls(other_handle);
}

TEST_P(records, a_read_only_backend_reads_records_and_writes_none) {
  // The memory backend has no store outside its instance to open read-only.
  if (GetParam() == "memory") return;
  const auto name = unique_name("ro");
  auto s = owner_of(name);
  ASSERT_FALSE(append(name, s->contender_id(), s->fence(), "entry"));
  baton::write_controls(backend_->records(), name, 0, "c");
  auto cfg = config_;
  cfg.read_only = true;
  auto ro = baton::make_backend(cfg, rt2_);
  auto h = baton::read_history(ro->records(), name, 10);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].bytes, "entry");
  EXPECT_EQ(baton::read_controls(ro->records(), name), (baton::controls_record{"c", 1}));
  EXPECT_EQ(append(name, s->contender_id(), s->fence(), "via ro", 50, ro.get()),
            baton::errc::invalid_argument);
  EXPECT_THROW(baton::write_controls(ro->records(), name, 1, "d"), std::system_error);
  EXPECT_EQ(history(name).size(), 1u);
  EXPECT_TRUE(s->stop_and_wait(10s));
}

INSTANTIATE_TEST_SUITE_P(backend, records, ::testing::ValuesIn(baton::available_backends()),
                         param_name);
