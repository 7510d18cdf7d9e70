// baton_balance_bench: figure 8, balance (issue 18: schedules spread over the cluster's nodes).
//  (a) Moves and settle: N nodes (3 and 5) share 1,000 schedules that never fire during the run
//      (cron "0 0 1 1 *"), so that every move is pure lease work. Each node is an in-process
//      baton::scheduler with balance on and its own runtime and backend instance (its own
//      connections). Events, in this order: drain of one node, its undrain, its graceful stop
//      (leave), a new node's start (join). Per event: moves (fence changes, summed over every
//      schedule: each new ownership raises a schedule's fence by one), the minimum (the share
//      that had to move), the graceful handoffs among them, and the time to settle: from the
//      event until the last change of any node's lead count, after which every node leads within
//      its tolerance of its assigned share (max(1, 10 %)), all views agree and nothing moves for
//      2 s. Heartbeat 1 s; handoff_rate 5/s (the default: settle is dominated by it) and 50/s.
//  (b) Lateness: 10,000 schedules firing every minute (cron "* * * * *", all at second 0) whose
//      job returns at once, on 3 nodes (child processes, bench/balance_child.cpp) and on 1 node:
//      start time minus planned fire time of every run of the fires after settle.
// Environment: as bench/run.sh sets it (BATON_TEST_*, BATON_BENCH_BIN, BATON_BENCH_QUICK,
// BATON_BENCH_BACKENDS, default redis,sqlite). Overrides: BATON_BALANCE_PARTS (moves,lateness),
// BATON_BALANCE_NODES (cluster sizes in (a): quick 3, else 3,5), BATON_BALANCE_RATES
// (handoff_rate values in (a): quick 50, else 5,50), BATON_BALANCE_SAMPLES (cycles of the four
// events per configuration: 3 at 50/s, else 1), BATON_BALANCE_ROUNDS (minutes of fires measured in
// (b): quick 1, else 3), BATON_BALANCE_TRACE=1 (lead counts on stderr while waiting for a settle).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "baton/backends/factory.hpp"
#include "baton/mutex/log.hpp"
#include "baton/scheduler/scheduler.hpp"
#include "common.hpp"

namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
namespace bb = baton::bench;

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

bool quick() { return env_or("BATON_BENCH_QUICK", "0") == "1"; }
/// BATON_BALANCE_TRACE=1: the lead counts every sample, on stderr.
bool trace() { return env_or("BATON_BALANCE_TRACE", "0") == "1"; }

double seconds(steady::duration d) { return std::chrono::duration<double>(d).count(); }

using bb::fixed;

/// How far a node's lead count may stray from its assigned share (the balancer's tolerance).
std::size_t tolerance(std::size_t assigned) { return std::max<std::size_t>(1, assigned / 10); }

// --- (a) moves and settle -------------------------------------------------------------------

constexpr std::size_t move_schedules = 1000;
constexpr auto heartbeat = 1000ms;

/// One node: its own runtime, backend instance (connections) and scheduler.
struct node {
  std::string id;
  std::unique_ptr<baton::runtime> rt;
  std::shared_ptr<baton::mutex_backend> backend;
  std::unique_ptr<baton::scheduler> sched;
};

/// A node with `count` schedules, built but not started.
std::unique_ptr<node> make_node(const baton::backend_config& config, const std::string& id,
                                const std::string& prefix, std::size_t count, double rate) {
  auto n = std::make_unique<node>();
  n->id = id;
  n->rt = std::make_unique<baton::runtime>();
  n->backend = baton::make_backend(config, *n->rt);
  baton::scheduler_options o;
  o.job_threads = 1;
  o.contender_id = id + "@bench";
  o.balance.enabled = true;
  o.balance.node_id = id;
  o.balance.heartbeat = heartbeat;
  o.balance.handoff_rate = rate;
  n->sched = std::make_unique<baton::scheduler>(*n->backend, *n->rt, o);
  const auto never = baton::cron_trigger{baton::cron_expression::parse("0 0 1 1 *", "UTC")};
  for (std::size_t i = 0; i < count; ++i) {
    baton::schedule_options s;
    s.name = prefix + std::to_string(i);
    s.when = never;
    s.job = [](const baton::job_context&) {};
    s.history = 0;
    n->sched->add(std::move(s));
  }
  return n;
}

/// Who leads what, as the live nodes see it.
struct snapshot {
  std::vector<std::uint64_t> fence;  // per schedule, 0: nobody leads it
  std::vector<std::size_t> leads;    // per node
  std::size_t led = 0;
  std::map<const node*, std::uint64_t> handoffs;  // per node, as its balancer counts them
};

snapshot take(const std::vector<node*>& nodes, std::size_t count) {
  snapshot s;
  s.fence.assign(count, 0);
  for (auto* n : nodes) {
    std::size_t leads = 0;
    const auto st = n->sched->status();
    for (std::size_t i = 0; i < st.size() && i < count; ++i)
      if (st[i].leader) {
        ++leads;
        s.fence[i] = st[i].fence;
      }
    s.leads.push_back(leads);
    s.led += leads;
    s.handoffs[n] = n->sched->balance().handoffs;
  }
  return s;
}

/// Fence changes between two snapshots: every new ownership raises a schedule's fence by one.
std::uint64_t moves(const snapshot& before, const snapshot& after) {
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < before.fence.size(); ++i)
    if (before.fence[i] && after.fence[i] > before.fence[i]) n += after.fence[i] - before.fence[i];
  return n;
}

struct settle_result {
  bool settled = false;
  double settle_s = 0;        // event -> the last change of a lead count
  std::size_t least_led = 0;  // fewest schedules led at once during the event
  std::string leads;          // the lead counts at the end, per node
};

/// Waits until every node leads within tolerance of the share its view assigns to it (a draining
/// node: none), every schedule is led, the views agree, and no lead count has changed for 2 s.
settle_result wait_settled(const std::vector<node*>& nodes, std::size_t count,
                           steady::time_point event, std::chrono::seconds timeout) {
  settle_result r;
  r.least_led = count;
  std::vector<std::size_t> last;
  auto changed = event;
  for (;;) {
    const auto now = steady::now();
    std::vector<std::size_t> leads;
    std::size_t led = 0;
    bool within = true;
    std::set<std::string> views;
    for (auto* n : nodes) {
      std::size_t l = 0;
      for (const auto& st : n->sched->status()) l += st.leader ? 1 : 0;
      leads.push_back(l);
      led += l;
      const auto b = n->sched->balance();
      views.insert(b.view);
      const auto a = b.assigned;
      if (!b.view_ready || (l > a + tolerance(a)) || (l + tolerance(a) < a)) within = false;
    }
    r.least_led = std::min(r.least_led, led);
    if (trace()) {
      std::cerr << "  t+" << fixed(seconds(now - event), 1) << " s leads";
      for (auto l : leads) std::cerr << ' ' << l;
      std::cerr << (within ? " within" : "") << " views " << views.size() << "\n";
    }
    if (leads != last) {
      if (!last.empty()) changed = now;
      last = leads;
    }
    if (within && led == count && views.size() == 1 && now - changed >= 2s) {
      r.settled = true;
      r.settle_s = seconds(changed - event);
      break;
    }
    if (now - event > timeout) {
      r.settle_s = seconds(now - event);
      break;
    }
    std::this_thread::sleep_for(200ms);
  }
  for (auto l : last) r.leads += (r.leads.empty() ? "" : "/") + std::to_string(l);
  return r;
}

struct event_samples {
  std::vector<double> moves, minimum, handoffs, settle;
  std::string leads;
  int unsettled = 0;
  std::size_t least_led = move_schedules;
};

std::vector<node*> live(const std::vector<std::unique_ptr<node>>& nodes) {
  std::vector<node*> out;
  for (const auto& n : nodes) out.push_back(n.get());
  return out;
}

/// Measures one event: `act` at the event time, then waits for the cluster `after` to settle.
void measure(const std::string& what, const std::vector<node*>& before_nodes,
             const std::function<void()>& act, const std::function<std::vector<node*>()>& after,
             std::size_t minimum, event_samples& out, const std::string& label) {
  const auto before = take(before_nodes, move_schedules);
  const auto event = steady::now();
  act();
  const auto nodes = after();
  const auto timeout = std::chrono::seconds(
      60 + static_cast<long>(move_schedules));  // 1,000 handoffs at 1/s would be the worst
  auto r = wait_settled(nodes, move_schedules, event, timeout);
  const auto end = take(nodes, move_schedules);
  const auto m = moves(before, end);
  // Graceful handoffs by the nodes live before and after (a stopped node's count goes with it;
  // a leaver releases everything at once, which its balancer does not count as handoffs).
  std::uint64_t handoffs = 0;
  for (const auto& [n, count] : end.handoffs)
    if (auto b = before.handoffs.find(n); b != before.handoffs.end()) handoffs += count - b->second;
  std::cerr << "balance " << label << ": " << what << ": " << m << " moves (minimum " << minimum
            << "), settled " << (r.settled ? "after " : "NOT within ") << fixed(r.settle_s, 1)
            << " s, fewest led " << r.least_led << ", leads " << r.leads << "\n";
  out.moves.push_back(static_cast<double>(m));
  out.minimum.push_back(static_cast<double>(minimum));
  out.handoffs.push_back(static_cast<double>(handoffs));
  out.settle.push_back(r.settle_s);
  out.leads = r.leads;
  out.least_led = std::min(out.least_led, r.least_led);
  if (!r.settled) ++out.unsettled;
}

void run_moves(const std::string& type, std::size_t count, double rate, int samples) {
  auto config = bb::backend_config_for(type);  // SQLite: a new file
  static int run = 0;
  ++run;
  const std::string tag = std::to_string(getpid()) + "-" + std::to_string(run);
  const std::string prefix = "bal-" + tag + "-";
  const std::string label = type + " " + std::to_string(count) + " nodes, rate " + fixed(rate, 0);
  std::vector<std::unique_ptr<node>> nodes;
  int next_id = 0;
  const auto new_id = [&] { return "n" + tag + "-" + std::to_string(next_id++); };
  for (std::size_t k = 0; k < count; ++k)
    nodes.push_back(make_node(config, new_id(), prefix, move_schedules, rate));
  const auto t0 = steady::now();
  for (auto& n : nodes) n->sched->start();
  auto start = wait_settled(live(nodes), move_schedules, t0, 300s);
  if (!start.settled) fail(label + ": the first start did not settle within 300 s");
  std::cerr << "balance " << label << ": started, settled after " << fixed(start.settle_s, 1)
            << " s (" << start.leads << ")\n";

  std::map<std::string, event_samples> events;
  {
    // Nodes that start together contend only for their own shares: every handoff at the start
    // is a move beyond the first acquisitions.
    auto& e = events["start"];
    double handoffs = 0;
    for (const auto& [n, h] : take(live(nodes), move_schedules).handoffs)
      handoffs += static_cast<double>(h);
    e.moves.push_back(handoffs);
    e.minimum.push_back(0);
    e.handoffs.push_back(handoffs);
    e.settle.push_back(start.settle_s);
    e.leads = start.leads;
    e.least_led = start.least_led;
  }
  const std::size_t share = move_schedules / count;
  for (int k = 0; k < samples; ++k) {
    node* x = nodes.back().get();
    const auto leads_of = [&](node* n) {
      std::size_t l = 0;
      for (const auto& st : n->sched->status()) l += st.leader ? 1 : 0;
      return l;
    };
    // Drain: its whole share goes to the others.
    measure(
        "drain", live(nodes), [&] { x->sched->drain(true); }, [&] { return live(nodes); },
        leads_of(x), events["drain"], label);
    // Undrain: it takes a share back (a join under the same id).
    measure(
        "undrain", live(nodes), [&] { x->sched->drain(false); }, [&] { return live(nodes); }, share,
        events["undrain"], label);
    // Leave: a graceful stop (the others take over what it releases).
    std::thread stopper;
    std::unique_ptr<node> leaver;
    measure(
        "leave", live(nodes),
        [&] {
          leaver = std::move(nodes.back());
          nodes.pop_back();
          stopper = std::thread([l = leaver.get()] { l->sched->stop(10s); });
        },
        [&] { return live(nodes); }, leads_of(x), events["leave"], label);
    stopper.join();
    leaver.reset();
    // Join: a new node (built beforehand: only its start is the event).
    auto joiner = make_node(config, new_id(), prefix, move_schedules, rate);
    measure(
        "join", live(nodes),
        [&] {
          joiner->sched->start();
          nodes.push_back(std::move(joiner));
        },
        [&] { return live(nodes); }, share, events["join"], label);
  }
  {
    std::vector<std::thread> stops;  // each stop waits for the others' views: in parallel
    for (auto& n : nodes) stops.emplace_back([s = n->sched.get()] { s->stop(10s); });
    for (auto& t : stops) t.join();
  }
  nodes.clear();

  const std::string suffix = "_" + std::to_string(count) + "n_rate" + fixed(rate, 0);
  for (const auto& [event, e] : events) {
    const std::map<std::string, std::string> extra{
        {"event", event},
        {"nodes", std::to_string(count)},
        {"schedules", std::to_string(move_schedules)},
        {"handoff_rate", fixed(rate, 0)},
        {"heartbeat_ms", std::to_string(heartbeat.count())},
        {"minimum", fixed(bb::summarize(e.minimum).median, 0)},
        {"handoffs", fixed(bb::summarize(e.handoffs).median, 0)},
        {"leads_after", e.leads},
        {"fewest_led", std::to_string(e.least_led)},
        {"unsettled", std::to_string(e.unsettled)},
        {"definition",
         "moves: fence changes summed over all schedules; minimum: the share that had to move; "
         "settle: event -> last lead-count change, then within tolerance and quiet for 2 s"}};
    bb::emit("balance_moves_" + event + suffix, type, "baton", "moves", bb::summarize(e.moves),
             extra);
    bb::emit("balance_settle_" + event + suffix, type, "baton", "s", bb::summarize(e.settle),
             extra);
  }
}

// --- (b) lateness ---------------------------------------------------------------------------

constexpr std::size_t lateness_schedules = 10000;

struct stat_line {
  std::size_t leads = 0, assigned = 0, runs = 0;
};

/// The last STAT line of a child (after reading what it has written).
stat_line last_stat(bb::child_process& child) {
  child.drain();
  const auto& lines = child.lines();
  for (auto it = lines.rbegin(); it != lines.rend(); ++it)
    if (it->rfind("STAT ", 0) == 0) {
      stat_line s;
      std::istringstream in(it->substr(5));
      in >> s.leads >> s.assigned >> s.runs;
      return s;
    }
  return {};
}

long long epoch_us(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

void run_lateness(const std::string& type, std::size_t node_count, int rounds) {
  auto config = bb::backend_config_for(type);
  const std::string tag =
      "late" + std::to_string(getpid()) + "-" + std::to_string(node_count) + "n";
  const std::string label = type + " " + std::to_string(node_count) + " node(s)";
  const std::string dir = baton::test::temp_dir("balance-lateness");
  std::vector<bb::child_process> children;
  std::vector<std::string> files;
  for (std::size_t k = 0; k < node_count; ++k) {
    std::vector<std::string> argv{bb::bench_bin_dir() + "/baton_balance_child", "--type",
                                  config.type};
    for (const auto& [key, value] : config.params) {
      argv.push_back("--param");
      argv.push_back(key + "=" + value);
    }
    files.push_back(dir + "/runs-" + std::to_string(k) + ".txt");
    for (const auto& a : {std::string("--node"), tag + "-" + std::to_string(k),
                          std::string("--prefix"), tag + "-s", std::string("--count"),
                          std::to_string(lateness_schedules), std::string("--out"), files.back()})
      argv.push_back(a);
    children.emplace_back(argv, bb::bench_child_options);
  }
  for (auto& c : children) bb::expect_line(c, {"READY"}, 300s, "READY");
  const auto t0 = steady::now();
  for (auto& c : children) c.send("START");

  // Settle: every schedule led, each node within tolerance, no change for 2 s.
  std::vector<std::size_t> last;
  auto changed = t0;
  double settle_s = -1;
  while (settle_s < 0) {
    const auto now = steady::now();
    if (now - t0 > 600s) fail(label + ": did not settle within 600 s");
    std::vector<std::size_t> leads;
    std::size_t led = 0;
    bool within = true;
    for (auto& c : children) {
      const auto s = last_stat(c);
      leads.push_back(s.leads);
      led += s.leads;
      if (s.assigned == 0 || s.leads > s.assigned + tolerance(s.assigned) ||
          s.leads + tolerance(s.assigned) < s.assigned)
        within = false;
    }
    if (leads != last) {
      changed = now;
      last = leads;
    }
    if (within && led == lateness_schedules && now - changed >= 2s)
      settle_s = seconds(changed - t0);
    else
      std::this_thread::sleep_for(250ms);
  }
  std::string shares;
  for (auto l : last) shares += (shares.empty() ? "" : "/") + std::to_string(l);
  std::cerr << "balance " << label << ": settled after " << fixed(settle_s, 1) << " s (" << shares
            << ")\n";

  // The fires measured: the next `rounds` minute boundaries at least 2 s away.
  using sys = std::chrono::system_clock;
  const auto first = std::chrono::ceil<std::chrono::minutes>(sys::now() + 2s);
  std::set<long long> boundaries;
  for (int r = 0; r < rounds; ++r) boundaries.insert(epoch_us(first + std::chrono::minutes(r)));
  const auto last_fire = first + std::chrono::minutes(rounds - 1);
  for (auto& c : children) c.send("MARK");  // warnings from here on count as the window's
  std::cerr << "balance " << label << ": measuring " << rounds << " fire(s) of every schedule from "
            << baton::format_rfc3339_utc(first) << "\n";
  // Until the last fire's runs are over: no new run for 3 s, at most 55 s after it.
  std::size_t least_led = lateness_schedules, most_led = 0;
  std::size_t runs_seen = 0;
  auto runs_changed = steady::now();
  for (;;) {
    std::size_t runs = 0, led = 0;
    for (auto& c : children) {
      const auto s = last_stat(c);
      runs += s.runs;
      led += s.leads;
    }
    least_led = std::min(least_led, led);
    most_led = std::max(most_led, led);
    if (runs != runs_seen) {
      runs_seen = runs;
      runs_changed = steady::now();
    }
    const auto now = sys::now();
    if (now > last_fire + 55s) break;
    if (now > last_fire + 5s && steady::now() - runs_changed >= 3s) break;
    std::this_thread::sleep_for(250ms);
  }
  for (auto& c : children) c.send("STOP");
  for (auto& c : children) bb::expect_line(c, {"DONE"}, 120s, "DONE");
  for (auto& c : children) c.wait_exit(30s);
  // The children's warnings and errors, by phase and event.
  std::map<std::string, std::map<std::string, std::size_t>> logged;
  for (auto& c : children)
    for (const auto& line : c.lines())
      if (line.rfind("LOG ", 0) == 0) {
        std::istringstream in(line.substr(4));
        std::string phase, event;
        std::size_t n = 0;
        if (in >> phase >> event >> n) logged[phase][event] += n;
      }
  const auto logged_text = [&](const std::string& phase) {
    std::string out;
    for (const auto& [event, n] : logged[phase])
      out += (out.empty() ? "" : ",") + event + "=" + std::to_string(n);
    return out.empty() ? std::string("none") : out;
  };
  std::cerr << "balance " << label
            << ": warnings and errors before the window: " << logged_text("start")
            << "; in it: " << logged_text("window") << "\n";

  // Every run of a measured fire: its lateness; a fire run twice is a duplicate.
  std::vector<double> late_ms;
  std::set<std::pair<std::size_t, long long>> seen;
  std::size_t duplicates = 0, within = 0;
  for (const auto& f : files) {
    std::ifstream in(f);
    std::size_t schedule;
    long long fire, start;
    while (in >> schedule >> fire >> start) {
      if (!boundaries.count(fire)) continue;
      if (!seen.insert({schedule, fire}).second) {
        ++duplicates;
        continue;
      }
      const double ms = static_cast<double>(start - fire) / 1000.0;
      late_ms.push_back(ms);
      if (ms <= 1000.0) ++within;
    }
  }
  std::filesystem::remove_all(dir);
  const std::size_t expected = lateness_schedules * static_cast<std::size_t>(rounds);
  const double fraction = static_cast<double>(within) / static_cast<double>(expected);
  const auto s = bb::summarize(late_ms);
  std::cerr << "balance " << label << ": " << late_ms.size() << " of " << expected
            << " runs started; lateness p50 " << fixed(s.median, 0) << " ms, p99 "
            << fixed(s.p99, 0) << " ms, max " << fixed(s.max, 0) << " ms; within 1 s "
            << fixed(100.0 * fraction, 1) << " %; duplicates " << duplicates << "\n";
  bb::emit("balance_lateness_" + std::to_string(node_count) + "n", type, "baton", "ms", s,
           {{"nodes", std::to_string(node_count)},
            {"schedules", std::to_string(lateness_schedules)},
            {"rounds", std::to_string(rounds)},
            {"expected", std::to_string(expected)},
            {"started", std::to_string(late_ms.size())},
            {"missed", std::to_string(expected - late_ms.size())},
            {"duplicates", std::to_string(duplicates)},
            {"within_1s", fixed(fraction, 4)},
            {"settle_s", fixed(settle_s, 1)},
            {"shares", shares},
            {"led_during_window", std::to_string(least_led) + ".." + std::to_string(most_led)},
            {"warnings_before", logged_text("start")},
            {"warnings_window", logged_text("window")},
            {"definition",
             "start wall time - planned fire time of every run of the measured fires "
             "(cron * * * * *, job returns at once); within_1s counts missed fires as late"}});
}

/// A comma list of numbers from the environment, or `fallback`.
std::vector<double> numbers(const char* name, const std::string& fallback) {
  std::vector<double> out;
  std::stringstream in(env_or(name, fallback));
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(std::stod(item));
  return out;
}

}  // namespace

int main() try {
  baton::set_log_level(baton::log_level::warn);
  const std::string parts = env_or("BATON_BALANCE_PARTS", "moves,lateness");
  std::vector<std::string> types{"redis", "sqlite"};
  if (!env_or("BATON_BENCH_BACKENDS", "").empty()) types = bb::backends_to_run();
  const int rounds = std::stoi(env_or("BATON_BALANCE_ROUNDS", quick() ? "1" : "3"));
  // Cycles of the four events: 3 at the fast rate, 1 at the default (about 3 minutes a cycle).
  const auto samples_at = [](double rate) {
    return std::stoi(env_or("BATON_BALANCE_SAMPLES", quick() || rate < 50 ? "1" : "3"));
  };
  // Quick (a smoke run of a few minutes): 3 nodes at the fast rate only (its settle times show
  // the floor, not the default), and the lateness workload on the first backend only.
  const auto sizes = numbers("BATON_BALANCE_NODES", quick() ? "3" : "3,5");
  const auto rates = numbers("BATON_BALANCE_RATES", quick() ? "50" : "5,50");
  int failures = 0;
  for (const auto& type : types) {
    try {
      if (parts.find("moves") != std::string::npos)
        for (double rate : rates)
          for (double n : sizes)
            run_moves(type, static_cast<std::size_t>(n), rate, samples_at(rate));
      if (parts.find("lateness") != std::string::npos && (!quick() || type == types.front())) {
        run_lateness(type, 3, rounds);
        run_lateness(type, 1, rounds);
      }
    } catch (const std::exception& e) {
      std::cerr << "baton_balance_bench: " << type << ": FAILED: " << e.what() << "\n";
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::cerr << "baton_balance_bench: " << e.what() << "\n";
  return 1;
}
