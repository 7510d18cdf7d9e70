// Test vectors from other cron implementations' own test suites (tests/unit/cron_vectors.json):
// croniter, cronsim and robfig/cron, standard 5-field syntax only, their expected values taken
// as data. Each case says which semantics it assumes: "isc" where the peer's answer is ISC
// cron's, or "peer-policy: ..." where the peer decides differently; such a case keeps the
// peer's answer in "peer_next" / "peer_fires" and asserts ISC's answer in "next" / "fires", with
// the reason in "why". Cases spanning up to 45 days are also replayed on the brute-force ISC
// reference (a simulation of cron.c's loop), so the ISC answers are not only the engine's word.
#include <date/date.h>
#include <date/tz.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "baton/scheduler/cron.hpp"
#include "unit/cron_isc_reference.hpp"

namespace {

using time_point = std::chrono::system_clock::time_point;

time_point instant(const std::string& text) {
  const auto t = baton::parse_rfc3339(text);
  if (!t) throw std::invalid_argument("bad instant in cron_vectors.json: " + text);
  return *t;
}

struct tally {
  int cases = 0;
  int isc = 0;
  int peer_policy = 0;
  int replayed = 0;
};

}  // namespace

TEST(cron_vectors, peers_test_suites_give_isc_answers) {
  std::ifstream in(std::string(BATON_SOURCE_DIR) + "/tests/unit/cron_vectors.json");
  ASSERT_TRUE(in) << "cannot read tests/unit/cron_vectors.json";
  const auto corpus = nlohmann::json::parse(in);
  ASSERT_GE(corpus.size(), 100u);

  std::map<std::string, tally> by_peer;
  for (const auto& c : corpus) {
    const std::string expr = c.at("expr");
    const std::string zone = c.at("zone");
    const std::string semantics = c.at("semantics");
    const std::string peer =
        c.at("source").get<std::string>().substr(0, c.at("source").get<std::string>().find(' '));
    const std::string label = c.at("source").get<std::string>() + " " +
                              c.at("test").get<std::string>() + ": '" + expr + "' in " + zone +
                              " after " + c.at("start").get<std::string>();
    tally& t = by_peer[peer];
    ++t.cases;
    if (semantics == "isc") {
      ++t.isc;
    } else {
      ASSERT_EQ(semantics.rfind("peer-policy: ", 0), 0u) << label;
      ASSERT_TRUE(c.contains("why") && (c.contains("peer_next") || c.contains("peer_fires")))
          << label << ": a peer-policy case keeps the peer's answer and says why";
      ++t.peer_policy;
    }

    const auto e = baton::cron_expression::parse(expr, zone);
    const time_point start = instant(c.at("start"));
    if (c.contains("fires_at")) {
      const time_point at = instant(c.at("fires_at"));
      const auto next = e.next(start);
      EXPECT_EQ(next && *next == at, c.at("fires").get<bool>()) << label;
      continue;
    }

    const auto& expected = c.at("next");
    if (expected.empty()) {
      EXPECT_FALSE(e.next(start).has_value()) << label << ": expected never to fire";
      EXPECT_TRUE(e.never_fires()) << label;
      continue;
    }
    const auto actual = e.next_n(start, expected.size());
    ASSERT_EQ(actual.size(), expected.size()) << label;
    for (std::size_t i = 0; i < expected.size(); ++i) {
      if (expected[i].is_null()) continue;  // a fire time the peer's test does not check
      EXPECT_EQ(baton::format_rfc3339_utc(actual[i]),
                baton::format_rfc3339_utc(instant(expected[i])))
          << label << ", fire time #" << i + 1;
    }

    // Replay short spans on the ISC reference: every fire time in (start, last expected].
    if (e.has_seconds() || actual.back() - start > std::chrono::hours{24 * 45}) continue;
    ++t.replayed;
    std::vector<std::string> reference;
    for (const auto f : baton::test::isc_reference(expr).fires(
             *date::locate_zone(zone), date::floor<std::chrono::seconds>(start),
             date::floor<std::chrono::seconds>(actual.back()))) {
      reference.push_back(baton::format_rfc3339_utc(f));
    }
    std::vector<std::string> engine;
    for (const auto f : actual) engine.push_back(baton::format_rfc3339_utc(f));
    EXPECT_EQ(engine, reference) << label << ": the engine and the ISC reference differ";
  }

  for (const auto& [peer, t] : by_peer) {
    std::printf(
        "[ cron vectors ] %-18s %3d cases: %3d agree with ISC, %3d peer policy (ISC asserted); %d "
        "replayed on the ISC reference\n",
        peer.c_str(), t.cases, t.isc, t.peer_policy, t.replayed);
  }
}
