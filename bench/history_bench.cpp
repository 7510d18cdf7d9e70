// baton_history_bench: the cost of recording one run in the backend's history (issue 15).
//
// One process owns a mutex on each backend and, per sample, appends a realistic run record (the
// scheduler's run_record JSON with ~1 KiB of captured stderr, `keep` = 50, the config default)
// with record_store::async_append_history, timed from the call to its completion. The floor,
// measured in the same run on the same backend and mutex, interleaved sample by sample, is the
// write the scheduler already makes per fire: contend_service::async_write_state of a small
// state (the schedule's last fire). The history write is fence-checked like the state write, so
// the ratio is what recording history adds per run.
//
// Samples per backend: 300 (BATON_BENCH_QUICK=1: 30), after 20 warm-up writes of each (so the
// history is already at `keep` and every append also prunes). Output: JSON records on stdout,
// figure "history_write", subjects "baton" (the append) and "floor" (write_state), unit ms,
// with extra "p90", "entry_bytes" and "keep"; progress and errors on stderr. Exits 1 if any
// backend failed.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <future>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "baton/backends/factory.hpp"
#include "baton/scheduler/records.hpp"
#include "common.hpp"

using namespace std::chrono_literals;

namespace {

constexpr std::size_t keep = 50;
constexpr int warmup = 20;

struct quiet final : baton::mutex_contender {
  void on_acquired(const baton::mutex_state&) override {}
  void on_released(const baton::mutex_state&) override {}
};

std::string fmt(double v) {
  std::ostringstream o;
  o.precision(4);
  o << v;
  return o.str();
}

// p-th percentile, nearest rank.
double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// A failed run with ~1 KiB of stderr, as the scheduler writes it.
std::string realistic_record(const std::string& name, const baton::contend_service& s, int n) {
  baton::run_record r;
  r.schedule = name;
  r.node = s.contender_id();
  r.fence = s.fence();
  r.trigger = baton::run_trigger::schedule;
  r.planned = std::chrono::system_clock::now();
  r.started = r.planned + 3ms;
  r.ended = r.planned + 1234ms;
  r.duration = 1231ms;
  r.outcome = baton::run_outcome::failed;
  r.exit_status = 3;
  r.error = "exited with status 3";
  std::string out;
  while (out.size() < 900)
    out += "2024-05-01T03:00:0" + std::to_string(n % 10) +
           "Z report.sh: ERROR upstream returned 503, retrying in 2s\n";
  r.output = out;
  r.output_truncated = true;
  return baton::to_json(r);
}

// Times one operation (ms) started by `start`, which calls its argument on completion.
template <class Start>
double timed(const char* what, Start start) {
  auto p = std::make_shared<std::promise<std::error_code>>();
  auto f = p->get_future();
  const auto t0 = std::chrono::steady_clock::now();
  start([p](std::error_code ec) { p->set_value(ec); });
  if (f.wait_for(30s) != std::future_status::ready)
    throw std::runtime_error(std::string(what) + ": no answer within 30 s");
  const auto ec = f.get();
  const auto t1 = std::chrono::steady_clock::now();
  if (ec) throw std::runtime_error(std::string(what) + ": " + ec.message());
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

void run(const std::string& type, int samples) {
  baton::runtime rt;
  auto backend = baton::make_backend(baton::bench::backend_config_for(type), rt);
  const auto name = "history-bench-" + std::to_string(::getpid());
  // The backend's default lease, as the daemon would contend.
  auto s =
      backend->make_contend_service(name, std::make_shared<quiet>(), backend->default_options());
  s->start();
  if (!baton::test::wait_until([&] { return s->is_owner(); }, 30s))
    throw std::runtime_error("did not become owner of '" + name + "' within 30 s");
  auto& records = backend->records();
  const auto id = s->contender_id();
  const auto fence = s->fence();
  std::size_t entry_bytes = 0;
  auto append = [&](int n) {
    auto bytes = realistic_record(name, *s, n);
    entry_bytes = bytes.size();
    return timed("async_append_history", [&](auto done) {
      records.async_append_history(name, id, fence, std::move(bytes), keep, done);
    });
  };
  auto write_state = [&](int n) {
    auto state = "{\"last_fire\":\"2024-05-01T03:00:0" + std::to_string(n % 10) + "Z\"}";
    return timed("async_write_state",
                 [&](auto done) { s->async_write_state(std::move(state), done); });
  };
  for (int i = 0; i < warmup; ++i) {
    append(i);
    write_state(i);
  }
  std::vector<double> history, floor;
  for (int i = 0; i < samples; ++i) {
    // Alternating order, so that neither always follows the other.
    if (i % 2 == 0) {
      history.push_back(append(i));
      floor.push_back(write_state(i));
    } else {
      floor.push_back(write_state(i));
      history.push_back(append(i));
    }
  }
  const auto stored = baton::read_history(records, name, keep + 10);
  if (stored.size() != keep)
    throw std::runtime_error("history holds " + std::to_string(stored.size()) + " entries, not " +
                             std::to_string(keep));
  s->stop_and_wait(10s);
  const auto h = baton::bench::summarize(history);
  const auto f = baton::bench::summarize(floor);
  const std::map<std::string, std::string> common{{"entry_bytes", std::to_string(entry_bytes)},
                                                  {"keep", std::to_string(keep)}};
  auto extra = common;
  extra["p90"] = fmt(percentile(history, 90));
  extra["ratio_to_floor"] = fmt(f.median > 0 ? h.median / f.median : 0);
  baton::bench::emit("history_write", type, "baton", "ms", h, extra);
  extra = common;
  extra["p90"] = fmt(percentile(floor, 90));
  extra["what"] = "contend_service::async_write_state";
  baton::bench::emit("history_write", type, "floor", "ms", f, extra);
  std::cerr << "history_bench: " << type << ": append median " << fmt(h.median) << " ms (p90 "
            << fmt(percentile(history, 90)) << "), write_state median " << fmt(f.median)
            << " ms, ratio " << fmt(f.median > 0 ? h.median / f.median : 0) << "\n";
}

}  // namespace

int main() { return baton::bench::run_backends("history_bench", 30, 300, run); }
