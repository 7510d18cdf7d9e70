// The daemon's /metrics writer (daemon/metrics_text): families with HELP and TYPE, label
// escaping, cumulative histograms, every outcome counted, values read back exactly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "baton/scheduler/records.hpp"
#include "metrics_text.hpp"

#include "support/http_client.hpp"

namespace {

using baton::daemon::escape_label_value;
using baton::daemon::format_value;
using baton::daemon::metrics_input;
using baton::daemon::metrics_text;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The value of the sample line that starts with `series` ("name{labels}"); NaN when absent.
double value_of(const std::string& text, const std::string& series) {
  for (const auto& line : lines_of(text))
    if (line.rfind(series + " ", 0) == 0)
      return std::strtod(line.c_str() + series.size() + 1, nullptr);
  return std::nan("");
}

baton::schedule_status schedule(const std::string& name) {
  baton::schedule_status s;
  s.name = name;
  return s;
}

TEST(metrics_text, escapes_backslash_quote_and_newline_in_label_values) {
  EXPECT_EQ(escape_label_value("plain-name_1"), "plain-name_1");
  EXPECT_EQ(escape_label_value("a\\b"), "a\\\\b");
  EXPECT_EQ(escape_label_value("say \"hi\""), "say \\\"hi\\\"");
  EXPECT_EQ(escape_label_value("two\nlines"), "two\\nlines");
  EXPECT_EQ(escape_label_value("\\\"\n"), "\\\\\\\"\\n");

  metrics_input in;
  in.schedules.push_back(schedule("we\"ird\\na\nme"));
  const auto text = metrics_text(in);
  EXPECT_THAT(text, HasSubstr("baton_schedule_leader{schedule=\"we\\\"ird\\\\na\\nme\"} 0\n"));
  // No raw newline inside a sample line: every line is a comment or a whole sample.
  for (const auto& line : lines_of(text))
    EXPECT_TRUE(line.rfind("# ", 0) == 0 || line.find(' ') != std::string::npos) << line;
}

TEST(metrics_text, formats_values_exactly_and_specials_as_the_format_spells_them) {
  EXPECT_EQ(format_value(0), "0");
  EXPECT_EQ(format_value(3600), "3600");
  EXPECT_EQ(format_value(-2), "-2");
  EXPECT_EQ(format_value(0.0005), "0.0005");
  EXPECT_EQ(format_value(2.5), "2.5");
  EXPECT_EQ(format_value(1e-7), "1e-07");
  EXPECT_EQ(format_value(1.7e308), "1.7e+308");
  EXPECT_EQ(format_value(INFINITY), "+Inf");
  EXPECT_EQ(format_value(-INFINITY), "-Inf");
  EXPECT_EQ(format_value(NAN), "NaN");
  // Shortest round trip: reading the text back gives the same double.
  for (double v : {0.1, 1.0 / 3.0, 1763981234.567, 6.02214076e23, 123456789.000001, 2.5e-5})
    EXPECT_EQ(std::strtod(format_value(v).c_str(), nullptr), v) << format_value(v);
}

TEST(metrics_text, every_family_has_help_and_type_once_before_its_samples) {
  metrics_input in;
  in.version = "1.2.3";
  in.configured_backend = "redis";
  in.schedules = {schedule("a"), schedule("b")};
  in.process = baton::daemon::process_metrics{1.5, 4096, 8192, 1.7e9, 7, 1024, 5};
  in.balance = baton::balance_status{};
  const auto text = metrics_text(in);
  std::map<std::string, std::string> types;  // family -> type
  std::map<std::string, int> helps;
  std::string last_family;
  for (const auto& line : lines_of(text)) {
    std::istringstream words(line);
    std::string hash, kind, name;
    if (line.rfind("# HELP ", 0) == 0) {
      words >> hash >> kind >> name;
      ++helps[name];
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      std::string type;
      words >> hash >> kind >> name >> type;
      EXPECT_EQ(types.count(name), 0u) << "second TYPE for " << name;
      types[name] = type;
      last_family = name;
      continue;
    }
    const std::string sample = line.substr(0, line.find_first_of("{ "));
    // A sample belongs to the family whose TYPE came last (histogram suffixes included).
    EXPECT_TRUE(sample == last_family || sample == last_family + "_bucket" ||
                sample == last_family + "_sum" || sample == last_family + "_count")
        << sample << " after TYPE " << last_family;
  }
  for (const auto& [name, type] : types) EXPECT_EQ(helps[name], 1) << name;
  const auto& expected = baton::test::documented_metric_families();
  EXPECT_EQ(types, expected);
  EXPECT_EQ(value_of(text, "baton_schedules"), 2);
  EXPECT_EQ(value_of(text, "baton_build_info{version=\"1.2.3\"}"), 1);
  EXPECT_EQ(value_of(text, "process_cpu_seconds_total"), 1.5);
  EXPECT_EQ(value_of(text, "process_start_time_seconds"), 1.7e9);
  // The configured backend shows before it counted anything.
  EXPECT_EQ(value_of(text, "baton_backend_requests_total{backend=\"redis\"}"), 0);
  EXPECT_EQ(value_of(text, "baton_lease_renewals_total{backend=\"redis\"}"), 0);
}

TEST(metrics_text, schedule_gauges_and_every_outcome_per_schedule) {
  auto s = schedule("nightly");
  s.leader = true;
  s.fence = 42;
  s.paused = true;
  s.running = true;
  s.consecutive_failures = 3;
  s.outcomes[static_cast<std::size_t>(baton::run_outcome::succeeded)] = 7;
  s.outcomes[static_cast<std::size_t>(baton::run_outcome::timed_out)] = 2;
  s.last_success = std::chrono::system_clock::time_point{std::chrono::milliseconds{1763981234567}};
  metrics_input in;
  in.schedules = {s, schedule("idle")};
  const auto text = metrics_text(in);
  const std::string n = "{schedule=\"nightly\"}";
  EXPECT_EQ(value_of(text, "baton_schedule_leader" + n), 1);
  EXPECT_EQ(value_of(text, "baton_schedule_fence" + n), 42);
  EXPECT_EQ(value_of(text, "baton_schedule_paused" + n), 1);
  EXPECT_EQ(value_of(text, "baton_schedule_running" + n), 1);
  EXPECT_EQ(value_of(text, "baton_schedule_consecutive_failures" + n), 3);
  EXPECT_EQ(value_of(text, "baton_schedule_leader{schedule=\"idle\"}"), 0);
  EXPECT_EQ(value_of(text, "baton_schedule_last_success_timestamp_seconds" + n), 1763981234.567);
  // Unknown until a success: no sample for "idle".
  EXPECT_THAT(text,
              Not(HasSubstr("baton_schedule_last_success_timestamp_seconds{schedule=\"idle\"}")));
  // Every outcome, zeros included, for both schedules.
  for (const char* name : {"nightly", "idle"})
    for (std::size_t o = 0; o < baton::run_outcome_count; ++o) {
      const std::string outcome(baton::to_string(static_cast<baton::run_outcome>(o)));
      const double v = value_of(text, "baton_schedule_runs_total{schedule=\"" + std::string(name) +
                                          "\",outcome=\"" + outcome + "\"}");
      const double want = std::string(name) == "idle" ? 0 : s.outcomes[o];
      EXPECT_EQ(v, want) << name << " " << outcome;
    }
}

TEST(metrics_text, histograms_are_cumulative_with_inf_equal_to_count) {
  auto s = schedule("job");
  s.run_duration.bounds = {0.1, 1, 10};
  s.run_duration.counts = {2, 0, 3, 1};  // per bucket, the last one above 10 s
  s.run_duration.sum = 31.5;
  s.run_duration.count = 6;
  baton::backend_metrics b;
  b.type = "sqlite";
  b.requests = 9;
  b.request_latency.bounds = {0.001, 0.01};
  b.request_latency.counts = {4, 5, 0};
  b.request_latency.sum = 0.05;
  b.request_latency.count = 9;
  b.errors = {{"connection_lost", 2}, {"timeout", 1}};
  b.lease_events[static_cast<std::size_t>(baton::lease_event::acquired)] = 1;
  b.lease_events[static_cast<std::size_t>(baton::lease_event::renewed)] = 30;
  b.lease_events[static_cast<std::size_t>(baton::lease_event::lost)] = 2;
  b.lease_events[static_cast<std::size_t>(baton::lease_event::step_down)] = 3;
  b.lease_events[static_cast<std::size_t>(baton::lease_event::released)] = 4;
  metrics_input in;
  in.schedules = {s};
  in.backends = {b};
  in.configured_backend = "sqlite";
  const auto text = metrics_text(in);
  const std::string h = "baton_schedule_run_duration_seconds";
  EXPECT_EQ(value_of(text, h + "_bucket{schedule=\"job\",le=\"0.1\"}"), 2);
  EXPECT_EQ(value_of(text, h + "_bucket{schedule=\"job\",le=\"1\"}"), 2);
  EXPECT_EQ(value_of(text, h + "_bucket{schedule=\"job\",le=\"10\"}"), 5);
  EXPECT_EQ(value_of(text, h + "_bucket{schedule=\"job\",le=\"+Inf\"}"), 6);
  EXPECT_EQ(value_of(text, h + "_sum{schedule=\"job\"}"), 31.5);
  EXPECT_EQ(value_of(text, h + "_count{schedule=\"job\"}"), 6);

  const std::string r = "baton_backend_request_duration_seconds";
  EXPECT_EQ(value_of(text, r + "_bucket{backend=\"sqlite\",le=\"0.001\"}"), 4);
  EXPECT_EQ(value_of(text, r + "_bucket{backend=\"sqlite\",le=\"0.01\"}"), 9);
  EXPECT_EQ(value_of(text, r + "_bucket{backend=\"sqlite\",le=\"+Inf\"}"), 9);
  EXPECT_EQ(value_of(text, r + "_count{backend=\"sqlite\"}"), 9);
  EXPECT_EQ(value_of(text, "baton_backend_requests_total{backend=\"sqlite\"}"), 9);
  EXPECT_EQ(
      value_of(text, "baton_backend_errors_total{backend=\"sqlite\",kind=\"connection_lost\"}"), 2);
  EXPECT_EQ(value_of(text, "baton_backend_errors_total{backend=\"sqlite\",kind=\"timeout\"}"), 1);
  EXPECT_EQ(value_of(text, "baton_lease_acquisitions_total{backend=\"sqlite\"}"), 1);
  EXPECT_EQ(value_of(text, "baton_lease_renewals_total{backend=\"sqlite\"}"), 30);
  EXPECT_EQ(value_of(text, "baton_lease_losses_total{backend=\"sqlite\"}"), 2);
  EXPECT_EQ(value_of(text, "baton_lease_step_downs_total{backend=\"sqlite\"}"), 3);
  EXPECT_EQ(value_of(text, "baton_lease_releases_total{backend=\"sqlite\"}"), 4);
  // Listed once although it is also the configured backend.
  std::size_t listed = 0;
  for (const auto& line : lines_of(text))
    listed += line.rfind("baton_backend_requests_total{", 0) == 0 ? 1 : 0;
  EXPECT_EQ(listed, 1u);
}

TEST(metrics_text, an_empty_histogram_gets_the_default_buckets_and_a_lagging_total_is_raised) {
  // Nothing observed yet (no bounds in the snapshot): the run buckets, all zero.
  metrics_input in;
  in.schedules = {schedule("new")};
  auto lagging = schedule("racy");
  lagging.run_duration.bounds = {1};
  lagging.run_duration.counts = {3, 1};
  lagging.run_duration.count = 2;  // read before the buckets were
  in.schedules.push_back(lagging);
  const auto text = metrics_text(in);
  const std::string h = "baton_schedule_run_duration_seconds";
  std::size_t buckets = 0;
  for (const auto& line : lines_of(text))
    buckets += line.rfind(h + "_bucket{schedule=\"new\"", 0) == 0 ? 1 : 0;
  EXPECT_EQ(buckets, baton::histogram::run_bounds().size() + 1);
  EXPECT_EQ(value_of(text, h + "_bucket{schedule=\"new\",le=\"+Inf\"}"), 0);
  EXPECT_EQ(value_of(text, h + "_count{schedule=\"new\"}"), 0);
  // +Inf and _count agree and are never below a bucket.
  EXPECT_EQ(value_of(text, h + "_bucket{schedule=\"racy\",le=\"1\"}"), 3);
  EXPECT_EQ(value_of(text, h + "_bucket{schedule=\"racy\",le=\"+Inf\"}"), 4);
  EXPECT_EQ(value_of(text, h + "_count{schedule=\"racy\"}"), 4);
}

TEST(metrics_text, balance_gauges_and_counters_come_from_the_balancer_status) {
  baton::balance_status b;
  b.enabled = true;
  b.node_id = "web-1";
  b.alive = 3;
  b.assigned = 20;
  b.leads = 18;
  b.handoffs = 7;
  b.view_changes = 4;
  b.draining = true;
  b.drained = false;
  b.mixed_configs = true;
  b.record_errors = 2;
  metrics_input in;
  in.balance = b;
  auto text = metrics_text(in);
  EXPECT_EQ(value_of(text, "baton_balance_enabled"), 1);
  EXPECT_EQ(value_of(text, "baton_balance_members_alive"), 3);
  EXPECT_EQ(value_of(text, "baton_balance_assigned_schedules"), 20);
  EXPECT_EQ(value_of(text, "baton_balance_leading_schedules"), 18);
  EXPECT_EQ(value_of(text, "baton_balance_handoffs_total"), 7);
  EXPECT_EQ(value_of(text, "baton_balance_view_changes_total"), 4);
  EXPECT_EQ(value_of(text, "baton_balance_draining"), 1);
  EXPECT_EQ(value_of(text, "baton_balance_drained"), 0);
  EXPECT_EQ(value_of(text, "baton_balance_mixed_configs"), 1);
  EXPECT_EQ(value_of(text, "baton_balance_record_errors_total"), 2);
  EXPECT_THAT(text, HasSubstr("# TYPE baton_balance_handoffs_total counter\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE baton_balance_leading_schedules gauge\n"));
  // No labels: the node id is not a label (one series per family).
  EXPECT_THAT(text, Not(HasSubstr("web-1")));

  // Balance off: the families are there, at zero.
  in.balance = baton::balance_status{};
  text = metrics_text(in);
  EXPECT_EQ(value_of(text, "baton_balance_enabled"), 0);
  EXPECT_EQ(value_of(text, "baton_balance_leading_schedules"), 0);
  // Before the scheduler runs: left out.
  in.balance.reset();
  EXPECT_THAT(metrics_text(in), Not(HasSubstr("baton_balance_")));
}

TEST(metrics_text, process_metrics_come_from_proc_self) {
  const auto p = baton::daemon::read_process_metrics();
  ASSERT_TRUE(p.has_value());
  EXPECT_GT(p->resident_memory_bytes, 0);
  EXPECT_GE(p->virtual_memory_bytes, p->resident_memory_bytes);
  EXPECT_GE(p->threads, 1);
  EXPECT_GE(p->open_fds, 1);  // the directory listing /proc/self/fd at least
  EXPECT_GE(p->max_fds, p->open_fds);
  // Started in the past day and not in the future (wall clock, seconds).
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_LE(p->start_time_seconds, now + 1);
  EXPECT_GT(p->start_time_seconds, now - 86400);
}

}  // namespace
