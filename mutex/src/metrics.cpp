#include "baton/mutex/metrics.hpp"

#include <algorithm>
#include <stdexcept>

#include "baton/mutex/errc.hpp"

namespace baton {

namespace {

std::atomic<bool> enabled{true};

// The backend types a process can have, in the order snapshots list them; anything else counts
// as "other" (a backend registered by an embedding service).
constexpr std::array<std::string_view, 7> known_types{"sqlite",    "postgresql", "mysql", "redis",
                                                      "zookeeper", "memory",     "other"};
// errc values 1..11 by index; 0: errors of other categories (system, native).
constexpr std::array<std::string_view, 12> error_names{
    "other",     "connection_lost", "session_expired",  "timeout", "not_owner",     "invalid_name",
    "bad_reply", "auth_failed",     "invalid_argument", "stopped", "backend_error", "conflict"};
constexpr std::size_t error_slots = error_names.size();

struct backend_slot {
  std::atomic<std::uint64_t> requests{0};
  histogram latency{histogram::request_bounds()};
  std::array<std::atomic<std::uint64_t>, error_slots> errors{};
  std::array<std::atomic<std::uint64_t>, lease_event_count> events{};
  std::atomic<std::int64_t> clock_offset_ms{0};
  std::atomic<bool> clock_known{false};
  std::atomic<bool> used{false};
};

std::array<backend_slot, known_types.size()>& slots() {
  static std::array<backend_slot, known_types.size()> s;
  return s;
}

backend_slot& slot_for(std::string_view type) noexcept {
  auto& s = slots();
  for (std::size_t i = 0; i + 1 < known_types.size(); ++i)
    if (known_types[i] == type) return s[i];
  return s.back();
}

void mark_used(backend_slot& s) noexcept {
  if (!s.used.load(std::memory_order_relaxed)) s.used.store(true, std::memory_order_relaxed);
}

}  // namespace

histogram::histogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {
  if (bounds_.size() + 1 > counts_.size())
    throw std::invalid_argument("histogram: at most 32 bucket bounds");
  if (!std::is_sorted(bounds_.begin(), bounds_.end()))
    throw std::invalid_argument("histogram: bucket bounds must ascend");
}

void histogram::observe(std::chrono::nanoseconds d) noexcept {
  const double seconds = std::chrono::duration<double>(d).count();
  const auto at = std::lower_bound(bounds_.begin(), bounds_.end(), seconds) - bounds_.begin();
  counts_[static_cast<std::size_t>(at)].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<std::uint64_t>(std::max<std::int64_t>(0, d.count())),
                    std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

histogram_snapshot histogram::snapshot() const {
  histogram_snapshot s;
  s.bounds = bounds_;
  s.counts.resize(bounds_.size() + 1);
  for (std::size_t i = 0; i < s.counts.size(); ++i)
    s.counts[i] = counts_[i].load(std::memory_order_relaxed);
  // The total is the sum of the buckets read, so that the +Inf bucket equals _count in the
  // exposition even while observations race with the read.
  s.count = 0;
  for (auto c : s.counts) s.count += c;
  s.sum = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
  return s;
}

const std::vector<double>& histogram::request_bounds() {
  static const std::vector<double> b{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                     0.1,    0.25,  0.5,    1,     2.5,  5,     10};
  return b;
}

const std::vector<double>& histogram::run_bounds() {
  static const std::vector<double> b{0.01, 0.05, 0.1, 0.5, 1,   2.5,  5,    10,
                                     30,   60,   120, 300, 600, 1800, 3600, 21600};
  return b;
}

std::string_view to_string(lease_event e) noexcept {
  switch (e) {
    case lease_event::acquired:
      return "acquired";
    case lease_event::renewed:
      return "renewed";
    case lease_event::lost:
      return "lost";
    case lease_event::step_down:
      return "step_down";
    case lease_event::released:
      return "released";
  }
  return "unknown";
}

void set_metrics_enabled(bool on) noexcept { enabled.store(on, std::memory_order_relaxed); }
bool metrics_enabled() noexcept { return enabled.load(std::memory_order_relaxed); }

std::vector<backend_metrics> backend_metrics_snapshot() {
  std::vector<backend_metrics> out;
  auto& s = slots();
  for (std::size_t i = 0; i < known_types.size(); ++i) {
    if (!s[i].used.load(std::memory_order_relaxed)) continue;
    backend_metrics m;
    m.type = std::string(known_types[i]);
    m.requests = s[i].requests.load(std::memory_order_relaxed);
    m.request_latency = s[i].latency.snapshot();
    for (std::size_t e = 0; e < error_slots; ++e) {
      const auto n = s[i].errors[e].load(std::memory_order_relaxed);
      if (n == 0) continue;
      m.errors.emplace_back(std::string(error_names[e]), n);
    }
    for (std::size_t e = 0; e < lease_event_count; ++e)
      m.lease_events[e] = s[i].events[e].load(std::memory_order_relaxed);
    if (s[i].clock_known.load(std::memory_order_relaxed))
      m.clock_offset =
          std::chrono::milliseconds{s[i].clock_offset_ms.load(std::memory_order_relaxed)};
    out.push_back(std::move(m));
  }
  return out;
}

namespace detail {

void record_backend_request(std::string_view type, std::chrono::nanoseconds latency) noexcept {
  if (!metrics_enabled()) return;
  auto& s = slot_for(type);
  mark_used(s);
  s.requests.fetch_add(1, std::memory_order_relaxed);
  s.latency.observe(latency);
}

void record_backend_error(std::string_view type, std::error_code ec) noexcept {
  if (!metrics_enabled()) return;
  auto& s = slot_for(type);
  mark_used(s);
  std::size_t at = 0;
  if (ec.category() == error_category() && ec.value() > 0 &&
      static_cast<std::size_t>(ec.value()) < error_slots)
    at = static_cast<std::size_t>(ec.value());
  s.errors[at].fetch_add(1, std::memory_order_relaxed);
}

void record_lease_event(std::string_view type, lease_event e) noexcept {
  if (!metrics_enabled()) return;
  auto& s = slot_for(type);
  mark_used(s);
  s.events[static_cast<std::size_t>(e)].fetch_add(1, std::memory_order_relaxed);
}

void record_clock_offset(std::string_view type, std::chrono::milliseconds offset) noexcept {
  if (!metrics_enabled()) return;
  auto& s = slot_for(type);
  mark_used(s);
  s.clock_offset_ms.store(offset.count(), std::memory_order_relaxed);
  s.clock_known.store(true, std::memory_order_relaxed);
}

}  // namespace detail

}  // namespace baton
