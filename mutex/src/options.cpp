#include "baton/mutex/options.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "baton/mutex/duration.hpp"

namespace baton {

std::chrono::milliseconds contend_options::effective_drift_margin() const noexcept {
  if (drift_margin > std::chrono::milliseconds::zero()) return drift_margin;
  return std::max(std::chrono::milliseconds{50}, lease() / 50);
}

std::string join_messages(const std::vector<setting_problem>& problems) {
  std::string out;
  for (const auto& p : problems) out += (out.empty() ? "" : "; ") + p.message;
  return out;
}

std::vector<setting_problem> check(const contend_options& o) {
  using std::chrono::milliseconds;
  const auto show = [](milliseconds d) { return format_duration(d); };
  std::vector<setting_problem> problems;
  if (o.ttl <= milliseconds::zero())
    problems.push_back({"ttl", "ttl must be greater than 0s (e.g. \"10s\")"});
  if (o.transition < milliseconds::zero())
    problems.push_back({"transition", "transition must not be negative"});
  if (o.retry_period <= milliseconds::zero())
    problems.push_back({"retry_period", "retry_period must be greater than 0s"});
  else if (o.ttl > milliseconds::zero() && o.retry_period >= o.ttl)
    problems.push_back({"retry_period",
                        "retry_period (" + show(o.retry_period) + ") must be less than ttl (" +
                            show(o.ttl) +
                            "), so that a failed renewal is retried before the lease runs out: "
                            "lower retry_period or raise ttl",
                        {"ttl"}});
  if (o.poll_interval <= milliseconds::zero())
    problems.push_back({"poll_interval", "poll_interval must be greater than 0s"});
  if (o.drift_margin < milliseconds::zero())
    problems.push_back({"drift_margin", "drift_margin must not be negative"});
  if (o.max_clock_offset < milliseconds::zero())
    problems.push_back({"max_clock_offset", "max_clock_offset must not be negative"});
  if (o.lapse_jitter < milliseconds::zero())
    problems.push_back({"lapse_jitter", "lapse_jitter must not be negative"});
  if (!problems.empty()) return problems;
  if (o.lapse_jitter > o.lease())
    problems.push_back({"lapse_jitter",
                        "lapse_jitter (" + show(o.lapse_jitter) +
                            ") must be at most ttl + transition (" + show(o.lease()) + ")",
                        {"ttl", "transition"}});
  if (o.max_backoff < o.retry_period)
    problems.push_back({"max_backoff", "max_backoff (" + show(o.max_backoff) +
                                           ") must be at least retry_period (" +
                                           show(o.retry_period) + "): raise max_backoff"});
  const auto drift = o.effective_drift_margin();
  if (drift >= o.lease())
    problems.push_back({"drift_margin", "drift_margin (" + show(drift) +
                                            ") must be less than ttl + transition (" +
                                            show(o.lease()) + ")"});
  return problems;
}

void validate(const contend_options& o) {
  if (auto problems = check(o); !problems.empty())
    throw std::invalid_argument("lease options: " + join_messages(problems));
}

}  // namespace baton
