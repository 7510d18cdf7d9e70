#include "baton/scheduler/records.hpp"

#include <array>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

#include "baton/mutex/names.hpp"
#include "baton/scheduler/cron.hpp"

namespace baton {
namespace {

using nlohmann::json;
using sys_time = std::chrono::system_clock::time_point;

constexpr std::array<std::pair<run_trigger, std::string_view>, 4> trigger_names{{
    {run_trigger::schedule, "schedule"},
    {run_trigger::catch_up, "catch_up"},
    {run_trigger::manual, "manual"},
    {run_trigger::retry, "retry"},
}};
constexpr std::array<std::pair<run_outcome, std::string_view>, 7> outcome_names{{
    {run_outcome::succeeded, "succeeded"},
    {run_outcome::failed, "failed"},
    {run_outcome::killed, "killed"},
    {run_outcome::timed_out, "timed_out"},
    {run_outcome::lost_lease, "lost_lease"},
    {run_outcome::skipped_overlap, "skipped_overlap"},
    {run_outcome::skipped_paused, "skipped_paused"},
}};

std::string dump(const json& j) {
  // stderr tails and reasons may hold any bytes: invalid UTF-8 becomes U+FFFD.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json parse_object(std::string_view bytes, const char* what) {
  json j = json::parse(bytes, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw std::invalid_argument(std::string(what) + ": not a JSON object");
  return j;
}

[[noreturn]] void bad(const char* what, const std::string& key, const char* expected) {
  throw std::invalid_argument(std::string(what) + ": '" + key + "' must be " + expected);
}

std::string text(const json& j, const char* what, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_string()) bad(what, key, "a string");
  return it->get<std::string>();
}

template <class T>
std::optional<T> number(const json& j, const char* what, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) bad(what, key, "an integer");
  if constexpr (std::is_unsigned_v<T>) {
    if (it->is_number_unsigned()) return it->get<T>();
    if (it->get<std::int64_t>() < 0) bad(what, key, "a non-negative integer");
  }
  return it->get<T>();
}

std::optional<sys_time> time_of(const json& j, const char* what, const char* key) {
  auto s = text(j, what, key);
  if (s.empty()) return std::nullopt;
  auto t = parse_rfc3339(s);
  if (!t) bad(what, key, "an RFC 3339 time");
  return t;
}

}  // namespace

std::string_view to_string(run_trigger t) noexcept {
  for (const auto& [v, n] : trigger_names)
    if (v == t) return n;
  return "unknown";
}

std::string_view to_string(run_outcome o) noexcept {
  for (const auto& [v, n] : outcome_names)
    if (v == o) return n;
  return "unknown";
}

std::optional<run_trigger> parse_run_trigger(std::string_view text) noexcept {
  for (const auto& [v, n] : trigger_names)
    if (n == text) return v;
  return std::nullopt;
}

std::optional<run_outcome> parse_run_outcome(std::string_view text) noexcept {
  for (const auto& [v, n] : outcome_names)
    if (n == text) return v;
  return std::nullopt;
}

std::string to_json(const run_record& r) {
  json j;
  if (r.seq != 0) j["seq"] = r.seq;
  j["schedule"] = r.schedule;
  j["node"] = r.node;
  j["fence"] = r.fence;
  j["trigger"] = to_string(r.trigger);
  j["attempt"] = r.attempt;
  j["planned"] = format_rfc3339_utc(r.planned);
  j["clock"] = "node_wall";
  j["started"] = r.started ? json(format_rfc3339_utc(*r.started)) : json(nullptr);
  j["ended"] = r.ended ? json(format_rfc3339_utc(*r.ended)) : json(nullptr);
  j["duration_ms"] = r.duration.count();
  j["outcome"] = to_string(r.outcome);
  j["exit_status"] = r.exit_status ? json(*r.exit_status) : json(nullptr);
  j["signal"] = r.signal ? json(*r.signal) : json(nullptr);
  j["error"] = r.error;
  j["output"] = r.output;
  j["output_truncated"] = r.output_truncated;
  return dump(j);
}

run_record parse_run_record(const history_entry& e) {
  static constexpr const char* what = "history record";
  const json j = parse_object(e.bytes, what);
  run_record r;
  r.seq = e.seq;
  r.fence = e.fence;
  r.schedule = text(j, what, "schedule");
  r.node = text(j, what, "node");
  if (auto t = parse_run_trigger(text(j, what, "trigger")))
    r.trigger = *t;
  else
    bad(what, "trigger", "schedule, catch_up, manual or retry");
  if (auto o = parse_run_outcome(text(j, what, "outcome")))
    r.outcome = *o;
  else
    bad(what, "outcome",
        "succeeded, failed, killed, timed_out, lost_lease, skipped_overlap or skipped_paused");
  r.attempt = number<unsigned>(j, what, "attempt").value_or(1);
  if (auto p = time_of(j, what, "planned"))
    r.planned = *p;
  else
    bad(what, "planned", "an RFC 3339 time");
  r.started = time_of(j, what, "started");
  r.ended = time_of(j, what, "ended");
  r.duration = std::chrono::milliseconds{number<std::int64_t>(j, what, "duration_ms").value_or(0)};
  r.exit_status = number<int>(j, what, "exit_status");
  r.signal = number<int>(j, what, "signal");
  r.error = text(j, what, "error");
  r.output = text(j, what, "output");
  if (auto it = j.find("output_truncated"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) bad(what, "output_truncated", "true or false");
    r.output_truncated = it->get<bool>();
  }
  return r;
}

std::string to_json(const schedule_controls& c) {
  json j;
  j["paused"] = c.paused;
  j["reason"] = c.reason;
  j["changed_by"] = c.changed_by;
  j["changed_at"] = c.changed_at ? json(format_rfc3339_utc(*c.changed_at)) : json(nullptr);
  j["trigger_requests"] = c.trigger_requests;
  return dump(j);
}

schedule_controls parse_schedule_controls(const controls_record& r) {
  static constexpr const char* what = "schedule controls";
  schedule_controls c;
  c.version = r.version;
  if (r.bytes.empty()) return c;
  const json j = parse_object(r.bytes, what);
  if (auto it = j.find("paused"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) bad(what, "paused", "true or false");
    c.paused = it->get<bool>();
  }
  c.reason = text(j, what, "reason");
  c.changed_by = text(j, what, "changed_by");
  c.changed_at = time_of(j, what, "changed_at");
  c.trigger_requests = number<std::uint64_t>(j, what, "trigger_requests").value_or(0);
  return c;
}

std::vector<run_record> read_run_history(mutex_backend& backend, const std::string& schedule,
                                         std::size_t limit) {
  std::vector<run_record> out;
  for (const auto& e : read_history(backend.records(), schedule, limit))
    out.push_back(parse_run_record(e));
  return out;
}

schedule_controls read_schedule_controls(mutex_backend& backend, const std::string& schedule) {
  return parse_schedule_controls(read_controls(backend.records(), schedule));
}

namespace {

template <class F>
schedule_controls change_controls(mutex_backend& backend, const std::string& schedule, F change) {
  auto written = update_controls(backend.records(), schedule, [&](const std::string& bytes) {
    auto c = parse_schedule_controls({bytes, 0});
    change(c);
    return to_json(c);
  });
  return parse_schedule_controls(written);
}

}  // namespace

schedule_controls pause_schedule(mutex_backend& backend, const std::string& schedule,
                                 std::string reason, std::string by) {
  return change_controls(backend, schedule, [&](schedule_controls& c) {
    c.paused = true;
    c.reason = reason;
    c.changed_by = by;
    c.changed_at = std::chrono::system_clock::now();
  });
}

schedule_controls resume_schedule(mutex_backend& backend, const std::string& schedule,
                                  std::string by) {
  return change_controls(backend, schedule, [&](schedule_controls& c) {
    c.paused = false;
    c.reason.clear();
    c.changed_by = by;
    c.changed_at = std::chrono::system_clock::now();
  });
}

schedule_controls trigger_schedule(mutex_backend& backend, const std::string& schedule,
                                   std::string by) {
  return change_controls(backend, schedule, [&](schedule_controls& c) { ++c.trigger_requests; });
}

}  // namespace baton
