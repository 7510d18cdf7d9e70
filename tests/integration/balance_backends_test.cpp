// Balance on every real backend (the servers scripts/test.sh starts; a missing one fails the
// test): three nodes, each a scheduler with balance on and its own backend instance (own
// connections, own runtime), sixty schedules firing every second, 1 s + 1 s leases and a 300 ms
// heartbeat. Fair shares whatever the start order; a stopped node's share spreads over the other
// two; a joining node takes about a third; drain empties a node and undrain refills it; a node
// killed with SIGKILL (a child process, baton_balance_node) is taken over. Every run is recorded
// (node, fence, planned fire, start, end on CLOCK_MONOTONIC) and checked per schedule: no two
// runs overlap, a fence never goes back, no planned fire runs twice, no fire is lost across
// graceful moves, and no gap between consecutive starts exceeds the period plus the takeover
// bound of the move. Each test prints what it measured (shares, settle times, moves, largest
// gap) on a "[balance_backends TYPE]" line. About 35 s per backend.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "baton/backends/factory.hpp"
#include "baton/mutex/duration.hpp"
#include "baton/mutex/log.hpp"
#include "baton/mutex/records.hpp"
#include "baton/scheduler/detail/balancer.hpp"
#include "baton/scheduler/scheduler.hpp"
#include "support/env.hpp"
#include "support/lease.hpp"
#include "support/process.hpp"

namespace baton {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

constexpr std::size_t schedule_count = 60;
constexpr milliseconds period{1000};
constexpr milliseconds heartbeat{300};
constexpr milliseconds ttl{1000};   // and transition: a lease lasts 2 s
constexpr milliseconds retry{100};  // retry_period and poll_interval
constexpr double handoff_rate = 20;
// The balancer's member_timeout when left at 0: max(transition, 3 heartbeats).
constexpr milliseconds member_timeout = std::max(ttl, 3 * heartbeat);

// How long a schedule may go without a run beyond its period when it moves gracefully (handoff,
// drain, scheduler::stop): stop() leaves the membership and waits up to 3 heartbeats + 500 ms
// for the others to show a view without it before it releases; the new owner then acquires
// within a poll interval. Plus 1 s for a loaded 2-core machine.
constexpr milliseconds graceful_bound = 3 * heartbeat + 500ms + retry + 1000ms;

// The same after a crash (kill -9): the dead owner's lease runs out (ttl + transition; on
// ZooKeeper its session expires), the others notice the member is gone (its record has not
// changed for member_timeout, read at the next heartbeat) and contend, and acquire within a poll
// interval. The sum (the two waits overlap in fact), plus 1 s for a loaded machine.
milliseconds crash_bound(const backend_config& config) {
  milliseconds lease = 2 * ttl;
  if (auto s = config.params.find("session_timeout"); s != config.params.end())
    lease = std::max(lease, parse_duration(s->second).value_or(lease));
  return lease + member_timeout + heartbeat + retry + 1000ms;
}

std::vector<std::string> real_backends() {
  auto all = available_backends();
  all.erase(std::remove(all.begin(), all.end(), "memory"), all.end());
  return all;
}

double seconds(long long ns) { return static_cast<double>(ns) / 1e9; }
double seconds(milliseconds d) { return static_cast<double>(d.count()) / 1e3; }

// --- runs -------------------------------------------------------------------------------------

/// One run as its job recorded it (times: CLOCK_MONOTONIC ns, the same clock in every process).
struct run_entry {
  std::string node;
  std::string schedule;
  std::uint64_t fence = 0;
  long long fire_ms = 0;  ///< planned fire time, ms since the epoch
  long long start_ns = 0;
  long long end_ns = -1;  ///< -1: no end recorded (the process was killed)
};

/// Every run of the in-process nodes (thread-safe).
class ledger {
 public:
  job_function job(std::string node) {
    return [this, node](const job_context& ctx) {
      std::size_t i = 0;
      {
        std::lock_guard lock(mutex_);
        i = runs_.size();
        runs_.push_back(
            {node, ctx.schedule, ctx.fence,
             std::chrono::duration_cast<milliseconds>(ctx.fire_time.time_since_epoch()).count(),
             test::mono_ns(), -1});
      }
      std::this_thread::sleep_for(10ms);
      std::lock_guard lock(mutex_);
      runs_[i].end_ns = test::mono_ns();
    };
  }
  std::vector<run_entry> runs() const {
    std::lock_guard lock(mutex_);
    return {runs_.begin(), runs_.end()};
  }

 private:
  mutable std::mutex mutex_;
  std::deque<run_entry> runs_;
};

/// The runs baton_balance_node appended to `path` ("start ..." and "end ..." lines).
std::vector<run_entry> read_child_runs(const std::string& path) {
  std::ifstream in(path);
  std::map<std::pair<std::string, long long>, run_entry> by_start;  // (schedule, start_ns)
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string kind;
    run_entry r;
    f >> kind >> r.node >> r.schedule >> r.fence >> r.fire_ms >> r.start_ns;
    if (!f) continue;
    auto& slot = by_start[{r.schedule, r.start_ns}];
    if (kind == "start") {
      r.end_ns = slot.end_ns;
      slot = r;
    } else if (kind == "end") {
      f >> r.end_ns;
      slot = r;
    }
  }
  std::vector<run_entry> out;
  for (auto& [key, r] : by_start) out.push_back(r);
  return out;
}

/// What the runs of one window show, per schedule (runs sorted by start).
struct findings {
  std::size_t runs = 0;
  std::size_t overlaps = 0;           ///< a run started before the previous one ended
  std::size_t fence_regressions = 0;  ///< a run's fence is below the previous run's
  std::size_t duplicate_fires = 0;    ///< a planned fire time run again (or an older one)
  std::size_t lost_fires = 0;         ///< planned fire times skipped between consecutive runs
  std::size_t moves = 0;              ///< fence changes between runs that started after `since`
  std::size_t gaps_beyond_bound = 0;
  std::size_t silent_schedules = 0;  ///< schedules without a run in the window
  long long largest_gap_ns = 0;      ///< between consecutive starts (or the last start and `to`)
  std::string largest_gap_schedule;
  std::string details;
};

/// Checks the runs that started in [from_ns, to_ns] of `schedules`. A run without an end counts
/// as ending at `open_end_ns`; moves count from `since_ns`; a gap beyond period + `bound` counts.
findings check(const std::vector<run_entry>& all, const std::vector<std::string>& schedules,
               long long from_ns, long long to_ns, long long open_end_ns, long long since_ns,
               milliseconds bound) {
  findings out;
  std::map<std::string, std::vector<run_entry>> by;
  for (const auto& r : all)
    if (r.start_ns >= from_ns && r.start_ns <= to_ns) by[r.schedule].push_back(r);
  const long long bound_ns = std::chrono::nanoseconds(period + bound).count();
  const auto note = [&](const std::string& what) {
    if (out.details.size() < 4000) out.details += what + "\n";
  };
  const auto gap = [&](const std::string& s, long long ns) {
    if (ns > out.largest_gap_ns) {
      out.largest_gap_ns = ns;
      out.largest_gap_schedule = s;
    }
    if (ns > bound_ns) {
      ++out.gaps_beyond_bound;
      note(s + ": " + std::to_string(seconds(ns)) + " s between starts");
    }
  };
  for (const auto& s : schedules) {
    auto it = by.find(s);
    if (it == by.end() || it->second.empty()) {
      ++out.silent_schedules;
      note(s + ": no run");
      continue;
    }
    auto& runs = it->second;
    std::sort(runs.begin(), runs.end(), [](const run_entry& a, const run_entry& b) {
      return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.fence < b.fence;
    });
    out.runs += runs.size();
    for (std::size_t i = 1; i < runs.size(); ++i) {
      const auto& p = runs[i - 1];
      const auto& c = runs[i];
      const long long p_end = p.end_ns < 0 ? open_end_ns : p.end_ns;
      const std::string pair = s + ": run (" + p.node + ", fence " + std::to_string(p.fence) +
                               ", fire " + std::to_string(p.fire_ms) + ") then (" + c.node +
                               ", fence " + std::to_string(c.fence) + ", fire " +
                               std::to_string(c.fire_ms) + ")";
      if (c.start_ns < p_end) {
        ++out.overlaps;
        note(pair + " overlap by " + std::to_string(seconds(p_end - c.start_ns)) + " s");
      }
      if (c.fence < p.fence) {
        ++out.fence_regressions;
        note(pair + ": the fence went back");
      }
      const long long d = c.fire_ms - p.fire_ms;
      if (d <= 0) {
        ++out.duplicate_fires;
        note(pair + ": the planned fire ran again");
      } else {
        const auto k = std::llround(static_cast<double>(d) / static_cast<double>(period.count()));
        if (k > 1) {
          out.lost_fires += static_cast<std::size_t>(k - 1);
          note(pair + ": " + std::to_string(k - 1) + " planned fire(s) lost");
        }
      }
      if (c.fence != p.fence && c.start_ns >= since_ns) ++out.moves;
      gap(s, c.start_ns - p.start_ns);
    }
    gap(s, to_ns - runs.back().start_ns);
  }
  return out;
}

std::string describe(const findings& f, milliseconds bound) {
  std::ostringstream o;
  o << f.runs << " runs, " << f.moves << " moves, largest gap " << seconds(f.largest_gap_ns)
    << " s (" << f.largest_gap_schedule << "; bound " << seconds(period + bound) << " s), "
    << f.overlaps << " overlaps, " << f.fence_regressions << " fence regressions, "
    << f.duplicate_fires << " duplicate fires, " << f.lost_fires << " lost fires, "
    << f.silent_schedules << " silent schedules";
  return o.str();
}

// --- log capture ------------------------------------------------------------------------------

/// Keeps baton's log lines (not the per-run ones) and prints them only when a test fails.
class log_capture {
 public:
  log_capture() {
    set_log_handler(
        [this](const log_record& r) {
          if (r.event == "run.started" || r.event == "run.finished") return;
          std::ostringstream line;
          line << seconds(test::mono_ns()) << " " << to_string(r.level) << " [" << r.event << "] "
               << r.schedule << (r.fence ? " fence " + std::to_string(r.fence) : "") << ": "
               << r.message;
          std::lock_guard lock(mutex_);
          lines_.push_back(line.str());
          if (lines_.size() > 20000) lines_.pop_front();
        },
        log_level::info);
  }
  ~log_capture() { set_log_handler({}); }
  void dump() const {
    std::lock_guard lock(mutex_);
    const std::size_t skip = lines_.size() > 4000 ? lines_.size() - 4000 : 0;
    for (std::size_t i = skip; i < lines_.size(); ++i) std::cerr << lines_[i] << "\n";
  }

 private:
  mutable std::mutex mutex_;
  std::deque<std::string> lines_;
};

// --- nodes ------------------------------------------------------------------------------------

scheduler_options node_options(const std::string& id) {
  scheduler_options o;
  o.contender_id = id;
  o.lease = test::lease_options(ttl, retry);
  o.balance.enabled = true;
  o.balance.node_id = id;
  o.balance.heartbeat = heartbeat;
  o.balance.handoff_rate = handoff_rate;
  return o;
}

/// One cluster node in this process: a scheduler on a backend instance and runtime of its own.
struct node {
  node(const backend_config& config, std::string node_id, const std::vector<std::string>& names,
       ledger& runs)
      : id(std::move(node_id)), backend(make_backend(config, rt)) {
    sched = std::make_unique<scheduler>(*backend, rt, node_options(id));
    for (const auto& name : names) {
      schedule_options s;
      s.name = name;
      s.when = every_trigger{period};
      s.job = runs.job(id);
      s.history = 0;
      sched->add(std::move(s));
    }
  }
  std::size_t leads() const {
    std::size_t n = 0;
    for (const auto& s : sched->status()) n += s.leader ? 1 : 0;
    return n;
  }

  std::string id;
  runtime rt;
  std::shared_ptr<mutex_backend> backend;
  std::unique_ptr<scheduler> sched;  // destroyed first: before its backend and runtime
};

std::size_t tolerance(std::size_t share) { return std::max<std::size_t>(1, share / 10); }

bool within(std::size_t leads, std::size_t share) {
  return leads + tolerance(share) >= share && leads <= share + tolerance(share);
}

class balance_backends : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    config_ = test::backend_config_for(GetParam());  // SQLite: one new file the nodes share
    prefix_ = test::unique_name("bal");
    names_ = names(prefix_);
  }
  void TearDown() override {
    stop({});
    if (HasFailure()) logs_.dump();
  }

  static std::vector<std::string> names(const std::string& prefix) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < schedule_count; ++i)
      out.push_back(prefix + "-" + std::to_string(i));
    return out;
  }

  node& make(const std::string& tag, const std::vector<std::string>& names) {
    nodes_.push_back(std::make_unique<node>(config_, prefix_ + "-" + tag, names, ledger_));
    return *nodes_.back();
  }
  node& make(const std::string& tag) { return make(tag, names_); }

  /// Stops `which` (every node when empty) at once, each on a thread of its own.
  void stop(std::vector<node*> which) {
    if (which.empty())
      for (auto& n : nodes_) which.push_back(n.get());
    std::vector<std::thread> threads;
    for (auto* n : which) threads.emplace_back([n] { n->sched->stop(1s); });
    for (auto& t : threads) t.join();
  }

  /// Leads of a node in another process (nullopt: not alive).
  using outside_fn = std::function<std::optional<std::size_t>()>;

  /// Each of `ns` (and the node `outside` tells of) leads `share` +- tolerance, they lead all
  /// schedules together, and each of `ns` sees `alive` live members.
  static bool fair(const std::vector<node*>& ns, std::size_t share, std::size_t alive,
                   const outside_fn& outside = {}) {
    std::size_t total = 0;
    if (outside) {
      const auto l = outside();
      if (!l || !within(*l, share)) return false;
      total += *l;
    }
    for (auto* n : ns) {
      const auto l = n->leads();
      if (!within(l, share) || n->sched->balance().alive != alive) return false;
      total += l;
    }
    return total == schedule_count;
  }

  static std::string shares(const std::vector<node*>& ns) {
    std::string out;
    for (auto* n : ns)
      out += (out.empty() ? "" : "/") + std::to_string(n->leads()) + "(alive " +
             std::to_string(n->sched->balance().alive) + ")";
    return out;
  }

  /// Handoffs of every node so far.
  std::uint64_t handoffs() const {
    std::uint64_t n = 0;
    for (const auto& x : nodes_) n += x->sched->balance().handoffs;
    return n;
  }

  /// Waits until `ns` share the schedules fairly and stay so, without a handoff anywhere, for
  /// `quiet` (more than a settle time of 2 heartbeats plus the heartbeat that acts on it).
  /// Returns how long it took to reach those shares for good (ms), or -1 after `timeout`.
  long long settle(const std::vector<node*>& ns, std::size_t share, std::size_t alive,
                   const outside_fn& outside = {}, milliseconds timeout = 30s) const {
    constexpr milliseconds quiet{1000};
    const auto t0 = std::chrono::steady_clock::now();
    bool holding = false;  // fair since `since`, with `moved` handoffs
    auto since = t0;
    std::uint64_t moved = 0;
    while (std::chrono::steady_clock::now() - t0 < timeout) {
      const auto now = std::chrono::steady_clock::now();
      if (fair(ns, share, alive, outside)) {
        const auto h = handoffs();
        if (!holding || h != moved) {
          holding = true;
          since = now;
          moved = h;
        } else if (now - since >= quiet) {
          return std::chrono::duration_cast<milliseconds>(since - t0).count();
        }
      } else {
        holding = false;
      }
      std::this_thread::sleep_for(20ms);
    }
    return -1;
  }

  /// Who leads each schedule now (schedule -> node id).
  std::map<std::string, std::string> leaders() const {
    std::map<std::string, std::string> out;
    for (const auto& n : nodes_)
      for (const auto& st : n->sched->status())
        if (st.leader) out[st.name] = n->id;
    return out;
  }

  /// Schedules led by another node in `after` than in `before`.
  static std::size_t moved(const std::map<std::string, std::string>& before,
                           const std::map<std::string, std::string>& after) {
    std::size_t n = 0;
    for (const auto& [name, who] : after) {
      auto it = before.find(name);
      if (it == before.end() || it->second != who) ++n;
    }
    return n;
  }

  void report(const std::string& what) {
    std::cout << "[balance_backends " << GetParam() << "] " << what << std::endl;
  }

  log_capture logs_;
  backend_config config_;
  std::string prefix_;
  std::vector<std::string> names_;
  ledger ledger_;
  std::vector<std::unique_ptr<node>> nodes_;
};

std::string param_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

/// What every window must show: no overlap, no fence going back, no fire run twice, no schedule
/// left without runs, no gap beyond the period plus `bound`.
void expect_clean(const findings& f, milliseconds bound) {
  EXPECT_EQ(f.overlaps, 0u) << f.details;
  EXPECT_EQ(f.fence_regressions, 0u) << f.details;
  EXPECT_EQ(f.duplicate_fires, 0u) << f.details;
  EXPECT_EQ(f.silent_schedules, 0u) << f.details;
  EXPECT_EQ(f.gaps_beyond_bound, 0u) << describe(f, bound) << "\n" << f.details;
}

TEST_P(balance_backends, shares_are_fair_whatever_the_start_order) {
  // Round 1: one node first, alone until it leads every schedule; then the two others.
  const long long t0 = test::mono_ns();
  auto& a = make("a");
  auto& b = make("b");
  auto& c = make("c");
  a.sched->start();
  ASSERT_TRUE(test::wait_until([&] { return a.leads() == schedule_count; }, 20s))
      << "a alone leads " << a.leads();
  b.sched->start();
  std::this_thread::sleep_for(400ms);
  c.sched->start();
  const auto first = settle({&a, &b, &c}, 20, 3);
  ASSERT_GE(first, 0) << shares({&a, &b, &c});
  // Settled stays settled: the shares hold and nothing moves for another second.
  const auto handoffs_settled = handoffs();
  const auto hold_until = std::chrono::steady_clock::now() + 1000ms;
  while (std::chrono::steady_clock::now() < hold_until) {
    ASSERT_TRUE(fair({&a, &b, &c}, 20, 3)) << "unsettled again: " << shares({&a, &b, &c});
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(handoffs(), handoffs_settled) << "schedules moved in a settled cluster";
  const auto shares1 = shares({&a, &b, &c});
  const long long t1 = test::mono_ns();
  stop({});

  // Round 2: new schedules, the three nodes in reverse order, 300 ms apart (each starts while
  // the ones before it are still choosing).
  const auto names2 = names(prefix_ + "r2");
  auto& c2 = make("c2", names2);
  auto& b2 = make("b2", names2);
  auto& a2 = make("a2", names2);
  const long long t2 = test::mono_ns();
  c2.sched->start();
  std::this_thread::sleep_for(300ms);
  b2.sched->start();
  std::this_thread::sleep_for(300ms);
  a2.sched->start();
  const auto second = settle({&a2, &b2, &c2}, 20, 3);
  ASSERT_GE(second, 0) << shares({&a2, &b2, &c2});
  const auto shares2 = shares({&a2, &b2, &c2});
  const long long t3 = test::mono_ns();
  stop({});

  // Every move was a handoff at a quiet moment: nothing lost, nothing run twice.
  const auto runs = ledger_.runs();
  const auto f1 = check(runs, names_, t0, t1, t1, t0, graceful_bound);
  const auto f2 = check(runs, names2, t2, t3, t3, t2, graceful_bound);
  report("a first, then b, c: settled " + std::to_string(first) + " ms after c started, at " +
         shares1 + "; handoffs " + std::to_string(handoffs_settled) + "; " +
         describe(f1, graceful_bound));
  report("c, b, a 300 ms apart: settled " + std::to_string(second) + " ms after a started, at " +
         shares2 + "; " + describe(f2, graceful_bound));
  expect_clean(f1, graceful_bound);
  expect_clean(f2, graceful_bound);
  EXPECT_EQ(f1.lost_fires, 0u) << f1.details;
  EXPECT_EQ(f2.lost_fires, 0u) << f2.details;
}

TEST_P(balance_backends, a_stopped_nodes_share_spreads_over_the_others) {
  const long long t0 = test::mono_ns();
  auto& a = make("a");
  auto& b = make("b");
  auto& c = make("c");
  for (auto* n : {&a, &b, &c}) n->sched->start();
  ASSERT_GE(settle({&a, &b, &c}, 20, 3), 0) << shares({&a, &b, &c});
  const auto before = leaders();
  const auto c_share = c.leads();
  const long long t_stop = test::mono_ns();
  stop({&c});
  const auto stop_ms = (test::mono_ns() - t_stop) / 1'000'000;
  const auto after_ms = settle({&a, &b}, 30, 2);
  ASSERT_GE(after_ms, 0) << shares({&a, &b});
  const auto net = moved(before, leaders());
  const long long t_end = test::mono_ns();
  const auto survivors = shares({&a, &b});
  stop({});

  const auto f = check(ledger_.runs(), names_, t0, t_end, t_end, t_stop, graceful_bound);
  report("c (leading " + std::to_string(c_share) + ") stopped in " + std::to_string(stop_ms) +
         " ms; a/b settled " + std::to_string(after_ms) + " ms later at " + survivors + "; " +
         std::to_string(net) + " schedules changed leader; " + describe(f, graceful_bound));
  expect_clean(f, graceful_bound);
  EXPECT_EQ(f.lost_fires, 0u) << f.details;
  // c's share moved, and little else.
  EXPECT_GE(net, c_share);
  EXPECT_LE(net, c_share + 2 * tolerance(30));
}

TEST_P(balance_backends, a_joining_node_takes_about_a_third_without_overlap) {
  const long long t0 = test::mono_ns();
  auto& a = make("a");
  auto& b = make("b");
  a.sched->start();
  b.sched->start();
  ASSERT_GE(settle({&a, &b}, 30, 2), 0) << shares({&a, &b});
  const auto before = leaders();
  auto& c = make("c");
  const long long t_join = test::mono_ns();
  c.sched->start();
  const auto after_ms = settle({&a, &b, &c}, 20, 3);
  ASSERT_GE(after_ms, 0) << shares({&a, &b, &c});
  const auto net = moved(before, leaders());
  const auto c_share = c.leads();
  const long long t_end = test::mono_ns();
  const auto joined = shares({&a, &b, &c});
  stop({});

  const auto f = check(ledger_.runs(), names_, t0, t_end, t_end, t_join, graceful_bound);
  report("c joined a/b: settled " + std::to_string(after_ms) + " ms after it started, at " +
         joined + "; " + std::to_string(net) + " schedules changed leader; " +
         describe(f, graceful_bound));
  expect_clean(f, graceful_bound);
  EXPECT_EQ(f.lost_fires, 0u) << f.details;
  // c's share moved to c, and little else. The bounded-load assignment itself also swaps a few
  // schedules between a and b (one whose first choice was full before has room there now):
  // over 2,000 random sets of 60 names, assign_schedules moved 0-7 beyond c's share, more than
  // 4 in 1.5 % of them (25 for a share of 20 failed a CI-like run on mysql). 3 tolerances (6)
  // leave 0.1 %.
  EXPECT_GE(net, c_share);
  EXPECT_LE(net, c_share + 3 * tolerance(20));
}

TEST_P(balance_backends, drain_empties_a_node_and_undrain_brings_it_back) {
  const long long t0 = test::mono_ns();
  auto& a = make("a");
  auto& b = make("b");
  auto& c = make("c");
  for (auto* n : {&c, &a, &b}) n->sched->start();
  ASSERT_GE(settle({&a, &b, &c}, 20, 3), 0) << shares({&a, &b, &c});
  const auto before = leaders();
  const auto b_share = b.leads();

  const long long t_drain = test::mono_ns();
  b.sched->drain(true);
  ASSERT_TRUE(test::wait_until([&] { return b.sched->balance().drained && b.leads() == 0; }, 30s))
      << "drained " << b.sched->balance().drained << ", shares " << shares({&a, &b, &c});
  const long long t_drained = test::mono_ns();
  EXPECT_TRUE(b.sched->balance().draining);
  // a and c take it all, and b stays empty (it no longer contends).
  const auto drained_ms = settle({&a, &c}, 30, 3);
  ASSERT_GE(drained_ms, 0) << shares({&a, &b, &c});
  EXPECT_EQ(b.leads(), 0u);
  EXPECT_TRUE(b.sched->balance().drained);
  const auto net_drain = moved(before, leaders());
  const auto drained = leaders();
  const auto drained_shares = shares({&a, &b, &c});
  const long long t_undrain = test::mono_ns();

  b.sched->drain(false);
  const auto back_ms = settle({&a, &b, &c}, 20, 3);
  ASSERT_GE(back_ms, 0) << shares({&a, &b, &c});
  EXPECT_FALSE(b.sched->balance().draining);
  const auto net_back = moved(drained, leaders());
  const auto b_back = b.leads();
  const long long t_end = test::mono_ns();
  const auto back_shares = shares({&a, &b, &c});
  stop({});

  const auto runs = ledger_.runs();
  const auto fd = check(runs, names_, t0, t_undrain, t_undrain, t_drain, graceful_bound);
  const auto fu = check(runs, names_, t0, t_end, t_end, t_undrain, graceful_bound);
  report("b (leading " + std::to_string(b_share) + ") drained in " +
         std::to_string((t_drained - t_drain) / 1'000'000) + " ms, settled at " + drained_shares +
         ", " + std::to_string(net_drain) + " schedules changed leader; " +
         describe(fd, graceful_bound));
  report("b undrained: settled " + std::to_string(back_ms) + " ms later at " + back_shares + ", " +
         std::to_string(net_back) + " schedules changed leader; " + describe(fu, graceful_bound));
  expect_clean(fd, graceful_bound);
  expect_clean(fu, graceful_bound);
  EXPECT_EQ(fu.lost_fires, 0u) << fu.details;
  // No run on b from drained to undrain.
  for (const auto& r : runs)
    EXPECT_FALSE(r.node == b.id && r.start_ns > t_drained && r.start_ns < t_undrain)
        << r.schedule << " ran on the drained node";
  EXPECT_GE(net_drain, b_share);
  EXPECT_LE(net_drain, b_share + 2 * tolerance(30));
  EXPECT_GE(net_back, b_back);
  EXPECT_LE(net_back, b_back + 3 * tolerance(20));
}

TEST_P(balance_backends, a_killed_node_is_taken_over_without_overlap) {
  const auto dir = test::temp_dir("balance-kill");
  const auto log = dir + "/runs.log";
  const auto x_id = prefix_ + "-x";
  std::vector<std::string> argv = {test::program_path("balance_node"), "--type", config_.type};
  for (const auto& [k, v] : config_.params) {
    argv.push_back("--param");
    argv.push_back(k + "=" + v);
  }
  for (const auto& arg :
       {"--node", x_id.c_str(), "--prefix", prefix_.c_str(), "--log", log.c_str()})
    argv.emplace_back(arg);
  for (const auto& [k, v] : std::vector<std::pair<std::string, long long>>{
           {"--schedules", schedule_count},
           {"--period-ms", period.count()},
           {"--heartbeat-ms", heartbeat.count()},
           {"--ttl-ms", ttl.count()},
           {"--retry-ms", retry.count()},
           {"--handoff-rate", static_cast<long long>(handoff_rate)}}) {
    argv.push_back(k);
    argv.push_back(std::to_string(v));
  }

  const long long t0 = test::mono_ns();
  test::child_process x(argv);
  ASSERT_TRUE(x.wait_line("READY", 20s)) << x.describe();
  auto& a = make("a");
  auto& b = make("b");
  a.sched->start();
  b.sched->start();
  // x's share as it publishes it in its membership record.
  const auto x_leads = [&]() -> std::optional<std::size_t> {
    for (const auto& m : a.sched->balance().members)
      if (m.node_id == x_id && m.alive) return m.leads;
    return std::nullopt;
  };
  const auto x_fair = [&] {
    x.drain();  // keep its stdout pipe from filling up
    return x_leads();
  };
  ASSERT_GE(settle({&a, &b}, 20, 3, x_fair), 0)
      << shares({&a, &b}) << ", x " << (x_leads() ? std::to_string(*x_leads()) : "not alive")
      << "; " << x.describe();
  const auto x_share = *x_leads();
  const auto before = leaders();

  const long long t_kill = test::mono_ns();
  x.signal(SIGKILL);
  ASSERT_TRUE(x.wait_exit(5s));
  const auto after_ms = settle({&a, &b}, 30, 2);
  ASSERT_GE(after_ms, 0) << shares({&a, &b});
  const auto taken = leaders();
  std::size_t from_x = 0;  // schedules a and b did not lead before
  for (const auto& [name, who] : taken) from_x += before.count(name) ? 0 : 1;
  const long long t_end = test::mono_ns();
  const auto survivors = shares({&a, &b});
  stop({});

  auto runs = ledger_.runs();
  const auto xs = read_child_runs(log);
  ASSERT_FALSE(xs.empty()) << "x recorded no run in " << log;
  runs.insert(runs.end(), xs.begin(), xs.end());
  const auto bound = crash_bound(config_);
  // A run of x without an end died with x.
  const auto f = check(runs, names_, t0, t_end, t_kill, t_kill, bound);
  report("x (a child leading " + std::to_string(x_share) + ") killed; a/b settled " +
         std::to_string(after_ms) + " ms later at " + survivors + ", " +
         std::to_string(moved(before, taken) - from_x) + " schedules moved between them; " +
         describe(f, bound));
  expect_clean(f, bound);
  EXPECT_EQ(from_x, x_share);
  EXPECT_LE(moved(before, taken) - from_x, 2 * tolerance(30));
}

// A node lists itself in the registry a few round trips before its own record is first written.
// Another node that reads in between must not take it for long dead and drop it from the
// registry (the newcomer would register again, and every view would change twice more).
TEST_P(balance_backends, a_member_listed_before_its_first_record_stays_listed) {
  runtime rt;
  auto backend = make_backend(config_, rt);
  const auto late = prefix_ + "-late";
  const auto listed = [&] {
    const auto ids =
        detail::registry_nodes(read_controls(backend->records(), balance_registry_name).bytes);
    return std::find(ids.begin(), ids.end(), late) != ids.end();
  };
  update_controls(backend->records(), balance_registry_name, [&](const std::string& bytes) {
    auto ids = detail::registry_nodes(bytes);
    ids.push_back(late);
    return detail::format_registry(ids);
  });
  ASSERT_TRUE(listed());
  auto& a = make("a");
  a.sched->start();
  ASSERT_TRUE(test::wait_until([&] { return a.sched->balance().view_ready; }, 10s));
  // a has read the registry and found no record of `late` for several heartbeats.
  std::this_thread::sleep_for(4 * heartbeat);
  EXPECT_TRUE(listed()) << "a dropped a member that has not written its record yet";
  EXPECT_EQ(a.sched->balance().alive, 1u);
}

INSTANTIATE_TEST_SUITE_P(backends, balance_backends, ::testing::ValuesIn(real_backends()),
                         param_name);

}  // namespace
}  // namespace baton
