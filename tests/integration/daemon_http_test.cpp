// `baton run` with http.listen: /metrics scraped from a running daemon on every backend and
// parsed strictly (and checked by `promtool check metrics`), /healthz and /readyz (503 with a
// reason when the backend is gone), 404/405/431 answers, bad http.listen values (exit 2 naming
// /http/listen), a port in use (exit 1 naming the address), and a clean stop with a client
// connected.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "baton/backends/factory.hpp"
#include "baton/scheduler/records.hpp"
#include "support/daemon.hpp"
#include "support/env.hpp"
#include "support/http_client.hpp"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using baton::test::daemon_path;
using baton::test::http_get;
using baton::test::http_request;
using baton::test::json_string;
using baton::test::process;
using baton::test::read_file;
using baton::test::run_baton_command;
using baton::test::wait_until;
using baton::test::write_file;

// ---------------------------------------------------------------------------------------------
// a strict reader of the Prometheus text format 0.0.4 (what this test needs of it)

struct sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct exposition {
  std::map<std::string, std::string> types;  // family -> counter, gauge, histogram, ...
  std::set<std::string> helps;
  std::vector<sample> samples;
  std::vector<std::string> errors;  // everything wrong, with the line

  /// The samples of `name` whose labels include `labels`.
  std::vector<sample> find(const std::string& name,
                           const std::map<std::string, std::string>& labels = {}) const {
    std::vector<sample> out;
    for (const auto& s : samples) {
      if (s.name != name) continue;
      bool match = true;
      for (const auto& [k, v] : labels) {
        auto it = s.labels.find(k);
        match = match && it != s.labels.end() && it->second == v;
      }
      if (match) out.push_back(s);
    }
    return out;
  }
};

bool is_metric_name(const std::string& n) {
  static const std::regex re("[a-zA-Z_:][a-zA-Z0-9_:]*");
  return std::regex_match(n, re);
}

std::optional<double> parse_number(const std::string& text) {
  if (text == "+Inf") return INFINITY;
  if (text == "-Inf") return -INFINITY;
  if (text == "NaN") return NAN;
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

// Every line is a HELP, a TYPE or a sample `name{labels} value`; each sample's family has a TYPE
// before it; histogram buckets rise to le="+Inf" == _count.
exposition parse_exposition(const std::string& text) {
  exposition e;
  if (text.empty() || text.back() != '\n') e.errors.push_back("the text does not end in a newline");
  std::istringstream in(text);
  std::size_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    auto bad = [&](const std::string& why) {
      e.errors.push_back("line " + std::to_string(number) + ": " + why + ": " + line);
    };
    if (line.empty()) {
      bad("empty line");
      continue;
    }
    if (line[0] == '#') {
      std::istringstream words(line);
      std::string hash, kind, name, rest;
      words >> hash >> kind >> name;
      if (hash != "#" || (kind != "HELP" && kind != "TYPE") || !is_metric_name(name)) {
        bad("a comment that is neither HELP nor TYPE");
        continue;
      }
      std::getline(words, rest);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      if (kind == "HELP") {
        if (!e.helps.insert(name).second) bad("a second HELP");
        if (rest.empty()) bad("an empty HELP");
      } else {
        static const std::set<std::string> types{"counter", "gauge", "histogram", "summary",
                                                 "untyped"};
        if (types.count(rest) == 0) bad("unknown type");
        if (e.types.count(name) != 0) bad("a second TYPE");
        for (const auto& s : e.samples)
          if (s.name == name) bad("TYPE after samples of its family");
        e.types[name] = rest;
      }
      continue;
    }
    sample s;
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    if (!is_metric_name(s.name)) {
      bad("bad metric name");
      continue;
    }
    if (i < line.size() && line[i] == '{') {
      ++i;
      bool ok = true;
      while (ok && i < line.size() && line[i] != '}') {
        std::size_t eq = line.find('=', i);
        if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') {
          ok = false;
          break;
        }
        const std::string label = line.substr(i, eq - i);
        static const std::regex label_re("[a-zA-Z_][a-zA-Z0-9_]*");
        if (!std::regex_match(label, label_re)) ok = false;
        std::string value;
        std::size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\') {
            if (j + 1 >= line.size()) {
              ok = false;
              break;
            }
            const char c = line[++j];
            if (c == 'n')
              value += '\n';
            else if (c == '\\' || c == '"')
              value += c;
            else
              ok = false;
          } else {
            value += line[j];
          }
        }
        if (j >= line.size()) ok = false;
        if (!ok) break;
        if (!s.labels.emplace(label, value).second) ok = false;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (!ok || i >= line.size() || line[i] != '}') {
        bad("bad labels");
        continue;
      }
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') {
      bad("no blank before the value");
      continue;
    }
    const auto value = parse_number(line.substr(i + 1));
    if (!value) {
      bad("the value is not a number (or there is a timestamp)");
      continue;
    }
    s.value = *value;
    // Its family: the name, or a histogram's name for _bucket, _sum, _count.
    std::string family = s.name;
    if (e.types.count(family) == 0) {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        const std::string sfx(suffix);
        if (s.name.size() > sfx.size() && s.name.ends_with(sfx)) {
          const auto base = s.name.substr(0, s.name.size() - sfx.size());
          if (e.types.count(base) != 0 && e.types[base] == "histogram") family = base;
        }
      }
    }
    if (e.types.count(family) == 0) bad("a sample before (or without) the TYPE of its family");
    e.samples.push_back(std::move(s));
  }

  // Histograms: per series (labels but le), buckets in rising le with non-decreasing counts, the
  // last le="+Inf", equal to _count.
  for (const auto& [family, type] : e.types) {
    if (type != "histogram") continue;
    std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>> buckets;
    for (const auto& s : e.samples) {
      if (s.name != family + "_bucket") continue;
      auto labels = s.labels;
      auto le = labels.find("le");
      if (le == labels.end()) {
        e.errors.push_back(family + ": a bucket without le");
        continue;
      }
      const auto bound = parse_number(le->second);
      labels.erase(le);
      if (!bound) e.errors.push_back(family + ": le=\"" + le->second + "\" is not a number");
      buckets[labels].push_back({bound.value_or(NAN), s.value});
    }
    for (const auto& [labels, list] : buckets) {
      const std::string series = family + json(labels).dump();
      for (std::size_t k = 1; k < list.size(); ++k) {
        if (!(list[k].first > list[k - 1].first)) e.errors.push_back(series + ": le not rising");
        if (list[k].second < list[k - 1].second)
          e.errors.push_back(series + ": bucket counts decrease");
      }
      if (list.empty() || !std::isinf(list.back().first))
        e.errors.push_back(series + ": no le=\"+Inf\" bucket last");
      const auto count = e.find(family + "_count", labels);
      const auto sum = e.find(family + "_sum", labels);
      if (count.size() != 1 || sum.size() != 1)
        e.errors.push_back(series + ": not exactly one _count and one _sum");
      else if (!list.empty() && count[0].value != list.back().second)
        e.errors.push_back(series + ": le=\"+Inf\" != _count");
    }
  }
  return e;
}

// `promtool check metrics` on `text`: its exit status and output. A missing promtool fails.
std::pair<int, std::string> promtool_check(const std::string& text, const fs::path& dir) {
  const std::string promtool = "/usr/bin/promtool";
  if (::access(promtool.c_str(), X_OK) != 0) {
    ADD_FAILURE() << promtool
                  << " is missing: install Debian's prometheus package (scripts/deps.sh)";
    return {-1, ""};
  }
  write_file(dir / "scrape.txt", text);
  const auto out = dir / "promtool.out";
  const std::string cmd = promtool + " check metrics < " + (dir / "scrape.txt").string() + " > " +
                          out.string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, read_file(out)};
}

// ---------------------------------------------------------------------------------------------
// a daemon with http.listen

std::vector<std::string> cluster_backends() {
  std::vector<std::string> out;
  for (const auto& t : baton::available_backends())
    if (t != "memory") out.push_back(t);
  return out;
}

std::string backend_json_for(const std::string& type) {
  const auto backend = baton::test::backend_config_for(type);
  std::string b = "{\"type\": " + json_string(type);
  for (const auto& [k, v] : backend.params) b += ", " + json_string(k) + ": " + json_string(v);
  return b + "}";
}

/// One `baton run` node with http.listen 127.0.0.1:0 (the port it got is read from its log).
class http_node {
 public:
  http_node(const std::string& hint, const std::string& backend,
            const std::vector<std::string>& schedules)
      : dir_(baton::test::temp_dir(hint)), schedules_(schedules) {
    std::string list;
    for (const auto& name : schedules)
      list += std::string(list.empty() ? "" : ",\n  ") + "{\"name\": " + json_string(name) +
              ", \"every\": \"300ms\", \"command\": [\"/bin/true\"]}";
    write_file(dir_ / "baton.json",
               "{\"backend\": " + backend +
                   ",\n \"lease\": {\"ttl\": \"2s\", \"transition\": \"2s\", \"retry_period\": "
                   "\"200ms\", \"poll_interval\": \"100ms\"},\n"
                   " \"http\": {\"listen\": \"127.0.0.1:0\"},\n \"schedules\": [\n  " +
                   list + "]}\n");
  }

  void start() {
    daemon_ = std::make_unique<process>(
        std::vector<std::string>{daemon_path(), "run", "--config", config()}, dir_ / "out.log",
        log());
  }
  /// Waits until the log names the port (then it listens): true when it did within 30 s.
  bool wait_listening() {
    static const std::regex re("http: listening on 127\\.0\\.0\\.1:([0-9]+)");
    return wait_until(
        [&] {
          std::smatch m;
          const auto text = read_file(log());
          if (!std::regex_search(text, m, re)) return false;
          port_ = std::stoi(m[1]);
          return true;
        },
        30s);
  }

  int port() const { return port_; }
  process& daemon() { return *daemon_; }
  const fs::path& dir() const { return dir_; }
  std::string config() const { return (dir_ / "baton.json").string(); }
  fs::path log() const { return dir_ / "baton.log"; }
  const std::vector<std::string>& schedules() const { return schedules_; }

 private:
  fs::path dir_;
  std::vector<std::string> schedules_;
  std::unique_ptr<process> daemon_;
  int port_ = 0;
};

// Header `name` (lower case) of `r`; "" when absent.
std::string header_of(const baton::test::http_response& r, const std::string& name) {
  auto it = r.headers.find(name);
  return it == r.headers.end() ? std::string() : it->second;
}

json parse_json(const std::string& body) {
  try {
    return json::parse(body);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not JSON (" << e.what() << "): " << body;
    return nullptr;
  }
}

// ---------------------------------------------------------------------------------------------

class daemon_http : public ::testing::TestWithParam<std::string> {};

TEST_P(daemon_http, scrape_parses_strictly_passes_promtool_and_labels_every_schedule) {
  const std::string type = GetParam();
  http_node node("http-" + type, backend_json_for(type),
                 {baton::test::unique_name("http-beat"), baton::test::unique_name("http-report")});
  node.start();
  ASSERT_TRUE(node.wait_listening()) << read_file(node.log());
  const int port = node.port();

  // Ready once the scheduler runs and the backend answered; this node alone leads both.
  ASSERT_TRUE(wait_until([&] { return http_get(port, "/readyz").status == 200; }, 30s))
      << http_get(port, "/readyz").body << read_file(node.log());
  const auto ready = http_get(port, "/readyz");
  EXPECT_EQ(header_of(ready, "content-type"), "application/json");
  EXPECT_EQ(parse_json(ready.body)["status"], "ok");

  exposition e;
  std::string text;
  auto leads_all = [&] {
    const auto r = http_get(port, "/metrics");
    if (r.status != 200) return false;
    text = r.body;
    e = parse_exposition(text);
    for (const auto& name : node.schedules()) {
      const auto leader = e.find("baton_schedule_leader", {{"schedule", name}});
      if (leader.size() != 1 || leader[0].value != 1) return false;
    }
    return true;
  };
  ASSERT_TRUE(wait_until(leads_all, 30s)) << text << read_file(node.log());

  const auto scrape = http_get(port, "/metrics");
  ASSERT_EQ(scrape.status, 200) << scrape.error;
  EXPECT_EQ(header_of(scrape, "content-type"), "text/plain; version=0.0.4; charset=utf-8");
  text = scrape.body;
  e = parse_exposition(text);
  EXPECT_TRUE(e.errors.empty()) << ::testing::PrintToString(e.errors) << "\n" << text;

  const auto& families = baton::test::documented_metric_families();
  for (const auto& [family, type_name] : families) {
    EXPECT_EQ(e.types[family], type_name) << family;
    EXPECT_EQ(e.helps.count(family), 1u) << family;
  }
  ASSERT_EQ(e.find("baton_schedules").size(), 1u);
  EXPECT_EQ(e.find("baton_schedules")[0].value, 2);
  for (const auto& name : node.schedules()) {
    const std::map<std::string, std::string> l{{"schedule", name}};
    for (const char* g :
         {"baton_schedule_leader", "baton_schedule_fence", "baton_schedule_paused",
          "baton_schedule_running", "baton_schedule_consecutive_failures",
          "baton_schedule_run_duration_seconds_count", "baton_schedule_run_duration_seconds_sum"})
      EXPECT_EQ(e.find(g, l).size(), 1u) << g << " " << name;
    EXPECT_GE(e.find("baton_schedule_fence", l)[0].value, 1) << name;  // leader: a fence
    EXPECT_EQ(e.find("baton_schedule_paused", l)[0].value, 0) << name;
    for (std::size_t o = 0; o < baton::run_outcome_count; ++o) {
      const std::string outcome(baton::to_string(static_cast<baton::run_outcome>(o)));
      EXPECT_EQ(
          e.find("baton_schedule_runs_total", {{"schedule", name}, {"outcome", outcome}}).size(),
          1u)
          << name << " " << outcome;
    }
  }
  // Label cardinality stays bounded: only these label names appear anywhere.
  const std::set<std::string> allowed_labels{"schedule", "outcome", "backend", "kind",
                                             "le",       "version", "result"};
  for (const auto& s : e.samples)
    for (const auto& [k, v] : s.labels)
      EXPECT_EQ(allowed_labels.count(k), 1u) << s.name << " " << k;
  // The configured backend, by its type.
  for (const char* b :
       {"baton_backend_requests_total", "baton_backend_request_duration_seconds_count",
        "baton_lease_acquisitions_total", "baton_lease_renewals_total", "baton_lease_losses_total",
        "baton_lease_step_downs_total", "baton_lease_releases_total"})
    EXPECT_EQ(e.find(b, {{"backend", type}}).size(), 1u) << b;
  EXPECT_EQ(e.find("baton_build_info").size(), 1u);
  EXPECT_EQ(e.find("baton_config_reloads_total", {{"result", "applied"}}).size(), 1u);
  ASSERT_EQ(e.find("process_resident_memory_bytes").size(), 1u);
  EXPECT_GT(e.find("process_resident_memory_bytes")[0].value, 0);
  ASSERT_EQ(e.find("process_threads").size(), 1u);
  EXPECT_GT(e.find("process_threads")[0].value, 2);  // main, io, http at least

  const auto [rc, promtool_output] = promtool_check(text, node.dir());
  std::cout << "promtool check metrics (exit status " << rc << "):\n" << promtool_output << "\n";
  EXPECT_EQ(rc, 0) << promtool_output << "\n" << text;

  // HEAD: the headers a GET gets, no body.
  const auto head = http_request(port, "HEAD", "/metrics");
  EXPECT_EQ(head.status, 200) << head.error;
  EXPECT_TRUE(head.body.empty());
  EXPECT_GT(std::strtoul(header_of(head, "content-length").c_str(), nullptr, 10), 0u);

  // The process is alive and its io threads answer.
  const auto health = http_get(port, "/healthz");
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(parse_json(health.body)["status"], "ok");

  // A connection left open mid-request does not hold up the stop.
  const int idle = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(idle, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string partial = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
  ASSERT_EQ(::send(idle, partial.data(), partial.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(partial.size()));
  node.daemon().signal(SIGTERM);
  EXPECT_EQ(node.daemon().wait_exit(30s), std::optional<int>(0)) << read_file(node.log());
  ::close(idle);
  EXPECT_FALSE(baton::test::accepts_on_loopback(port));
}

INSTANTIATE_TEST_SUITE_P(backends, daemon_http, ::testing::ValuesIn(cluster_backends()),
                         [](const auto& info) { return info.param; });

// ---------------------------------------------------------------------------------------------

TEST(daemon_http_server, answers_404_405_and_431_and_keeps_serving) {
  const auto db = fs::path(baton::test::temp_dir("http-codes")) / "s.db";
  http_node node("http-codes", "{\"type\": \"sqlite\", \"path\": " + json_string(db.string()) + "}",
                 {baton::test::unique_name("http-codes")});
  node.start();
  ASSERT_TRUE(node.wait_listening()) << read_file(node.log());
  const int port = node.port();

  const auto missing = http_get(port, "/nope");
  EXPECT_EQ(missing.status, 404) << missing.error;
  EXPECT_THAT(missing.body, HasSubstr("/metrics"));
  for (const char* method : {"POST", "PUT", "DELETE"}) {
    const auto r = http_request(port, method, "/metrics", 10s, "Content-Length: 0\r\n");
    EXPECT_EQ(r.status, 405) << method << " " << r.error;
    EXPECT_EQ(header_of(r, "allow"), "GET, HEAD") << method;
  }
  // Request headers beyond 8 KiB.
  const auto big = http_request(port, "GET", "/metrics", 10s,
                                "X-Filler: " + std::string(9 * 1024, 'x') + "\r\n");
  EXPECT_EQ(big.status, 431) << big.error;
  // A query string is ignored.
  EXPECT_EQ(http_get(port, "/healthz?verbose=1").status, 200);
  // Still serving after all that.
  EXPECT_EQ(http_get(port, "/metrics").status, 200);
  node.daemon().signal(SIGTERM);
  EXPECT_EQ(node.daemon().wait_exit(30s), std::optional<int>(0)) << read_file(node.log());
}

TEST(daemon_http_server, sighup_reloads_are_counted_by_result) {
  const auto db = fs::path(baton::test::temp_dir("http-reload")) / "s.db";
  http_node node("http-reload",
                 "{\"type\": \"sqlite\", \"path\": " + json_string(db.string()) + "}",
                 {baton::test::unique_name("http-reload")});
  node.start();
  ASSERT_TRUE(node.wait_listening()) << read_file(node.log());
  const int port = node.port();
  auto reloads = [&](const std::string& result) {
    const auto r = http_get(port, "/metrics");
    const auto found =
        parse_exposition(r.body).find("baton_config_reloads_total", {{"result", result}});
    return found.size() == 1 ? found[0].value : -1.0;
  };
  EXPECT_EQ(reloads("applied"), 0);
  EXPECT_EQ(reloads("rejected"), 0);
  node.daemon().signal(SIGHUP);  // the same file: applied, nothing changed
  EXPECT_TRUE(wait_until([&] { return reloads("applied") == 1; }, 20s)) << read_file(node.log());
  const std::string good = read_file(node.config());
  write_file(node.config(), "{\"schedules\": 1}\n");
  node.daemon().signal(SIGHUP);
  EXPECT_TRUE(wait_until([&] { return reloads("rejected") == 1; }, 20s)) << read_file(node.log());
  EXPECT_EQ(reloads("applied"), 1);
  write_file(node.config(), good);
  node.daemon().signal(SIGTERM);
  EXPECT_EQ(node.daemon().wait_exit(30s), std::optional<int>(0)) << read_file(node.log());
}

TEST(daemon_http_server, readyz_is_503_with_a_reason_while_the_backend_is_down) {
  // A Redis server of this test's own, killed to take the backend away and started again.
  const fs::path dir = baton::test::temp_dir("http-redis");
  const int redis_port = baton::test::unused_loopback_port();
  auto start_redis = [&] {
    return std::make_unique<process>(
        std::vector<std::string>{"/usr/bin/redis-server", "--port", std::to_string(redis_port),
                                 "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
                                 dir.string()},
        dir / "redis.out", dir / "redis.err");
  };
  auto redis = start_redis();
  ASSERT_TRUE(wait_until([&] { return baton::test::accepts_on_loopback(redis_port); }, 10s))
      << read_file(dir / "redis.out");
  http_node node(
      "http-ready",
      "{\"type\": \"redis\", \"url\": \"redis://127.0.0.1:" + std::to_string(redis_port) + "\"}",
      {baton::test::unique_name("http-ready")});
  node.start();
  ASSERT_TRUE(node.wait_listening()) << read_file(node.log());
  const int port = node.port();
  ASSERT_TRUE(wait_until([&] { return http_get(port, "/readyz").status == 200; }, 30s))
      << http_get(port, "/readyz").body << read_file(node.log());

  redis->signal(SIGKILL);
  ASSERT_TRUE(redis->wait_exit(5s));
  baton::test::http_response down;
  ASSERT_TRUE(wait_until(
      [&] {
        down = http_get(port, "/readyz");
        return down.status == 503;
      },
      30s))
      << down.status << " " << down.body << read_file(node.log());
  EXPECT_EQ(header_of(down, "content-type"), "application/json");
  const json why = parse_json(down.body);
  EXPECT_EQ(why["status"], "not_ready");
  ASSERT_TRUE(why["reason"].is_string()) << down.body;
  EXPECT_THAT(why["reason"].get<std::string>(), StartsWith("backend unreachable: "));
  // The process itself is fine: /healthz still answers 200, /metrics still serves.
  EXPECT_EQ(http_get(port, "/healthz").status, 200);
  EXPECT_EQ(http_get(port, "/metrics").status, 200);

  // Back when the backend is.
  redis = start_redis();
  ASSERT_TRUE(wait_until([&] { return baton::test::accepts_on_loopback(redis_port); }, 10s));
  EXPECT_TRUE(wait_until([&] { return http_get(port, "/readyz").status == 200; }, 30s))
      << http_get(port, "/readyz").body << read_file(node.log());
  node.daemon().signal(SIGTERM);
  EXPECT_EQ(node.daemon().wait_exit(30s), std::optional<int>(0)) << read_file(node.log());
}

TEST(daemon_http_server, a_port_in_use_exits_1_naming_the_address_before_the_backend) {
  // Something else listens on the port.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string taken = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));

  const fs::path dir = baton::test::temp_dir("http-in-use");
  write_file(dir / "baton.json",
             "{\"backend\": {\"type\": \"sqlite\", \"path\": \"s.db\"},\n"
             " \"schedules\": [{\"name\": \"a\", \"every\": \"1h\", "
             "\"command\": [\"/bin/true\"]}]}\n");
  const auto r = run_baton_command(
      {"run", "--config", (dir / "baton.json").string(), "--http-listen", taken}, 30s);
  ::close(fd);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_THAT(r.err, AllOf(HasSubstr("--http-listen"), HasSubstr("cannot listen on " + taken),
                           HasSubstr("in use")));
  // It stopped before the backend was built: no database file.
  EXPECT_FALSE(fs::exists(dir / "s.db"));
}

TEST(daemon_http_config, bad_listen_values_exit_2_naming_http_listen) {
  const fs::path dir = baton::test::temp_dir("http-bad");
  struct bad {
    std::string http;  // the value of "http"
    std::string path;  // named in the message
    std::string message;
  };
  const std::vector<bad> cases{
      {R"({"listen": "9464"})", "/http/listen", "missing ':PORT'"},
      {R"({"listen": "127.0.0.1"})", "/http/listen", "missing ':PORT'"},
      {R"({"listen": "example.com:9464"})", "/http/listen", "host names are not resolved"},
      {R"({"listen": "::1:9464"})", "/http/listen", "needs brackets"},
      {R"({"listen": "[::1]9464"})", "/http/listen", "missing ':PORT' after ']'"},
      {R"({"listen": "[nope]:9464"})", "/http/listen", "is not an IPv6 address"},
      {R"({"listen": "127.0.0.1:65536"})", "/http/listen", "from 0 to 65535"},
      {R"({"listen": "127.0.0.1:-1"})", "/http/listen", "from 0 to 65535"},
      {R"({"listen": "127.0.0.1:"})", "/http/listen", "from 0 to 65535"},
      {R"({"listen": "1.2.3:80"})", "/http/listen", "not an IPv4 address"},
      {R"({"listen": ":9464"})", "/http/listen", "missing the host"},
      {R"({"listen": 9464})", "/http/listen", "string"},
      {R"({"listen": "127.0.0.1:9464", "port": 1})", "/http/port", ""},
      {R"("127.0.0.1:9464")", "/http", "object"},
  };
  for (const auto& c : cases) {
    write_file(dir / "baton.json",
               "{\"backend\": {\"type\": \"sqlite\", \"path\": \"s.db\"},\n"
               " \"http\": " +
                   c.http +
                   ",\n \"schedules\": [{\"name\": \"a\", \"every\": \"1h\", "
                   "\"command\": [\"/bin/true\"]}]}\n");
    for (const char* cmd : {"validate", "run"}) {
      const auto r = run_baton_command({cmd, "--config", (dir / "baton.json").string()}, 30s);
      EXPECT_EQ(r.status, 2) << cmd << " " << c.http << "\n" << r.err;
      EXPECT_THAT(r.err, AllOf(HasSubstr("baton.json: " + c.path + ": "), HasSubstr(c.message)))
          << cmd << " " << c.http;
    }
  }
  EXPECT_FALSE(fs::exists(dir / "s.db"));

  // --http-listen is checked like the config's value.
  const auto cli = run_baton_command(
      {"run", "--config", (dir / "baton.json").string(), "--http-listen", "localhost"});
  EXPECT_EQ(cli.status, 2);
  EXPECT_THAT(cli.err, AllOf(HasSubstr("--http-listen"), HasSubstr("missing ':PORT'")));
  const auto not_run = run_baton_command(
      {"validate", "--config", (dir / "baton.json").string(), "--http-listen", "127.0.0.1:1"});
  EXPECT_EQ(not_run.status, 2);
  EXPECT_THAT(not_run.err, HasSubstr("--http-listen is not an option of validate"));
}

TEST(daemon_http_config, validate_shows_the_listen_address_in_text_and_json) {
  const fs::path dir = baton::test::temp_dir("http-validate");
  for (const std::string listen : {"localhost:0", "[::1]:9464", "0.0.0.0:9464"}) {
    write_file(
        dir / "baton.json",
        "{\"backend\": {\"type\": \"sqlite\", \"path\": \"s.db\"},\n \"http\": {\"listen\": " +
            json_string(listen) +
            "},\n \"schedules\": [{\"name\": \"a\", \"every\": \"1h\", \"command\": "
            "[\"/bin/true\"]}]}\n");
    const auto text = run_baton_command({"validate", "--config", (dir / "baton.json").string()});
    EXPECT_EQ(text.status, 0) << text.err;
    EXPECT_THAT(text.out, HasSubstr("http: listen " + listen + " (/metrics, /healthz, /readyz)"));
    const auto doc =
        run_baton_command({"validate", "--json", "--config", (dir / "baton.json").string()});
    EXPECT_EQ(doc.status, 0) << doc.err;
    EXPECT_EQ(parse_json(doc.out)["http"]["listen"], listen);
  }
  // Off by default.
  write_file(dir / "baton.json",
             "{\"backend\": {\"type\": \"sqlite\", \"path\": \"s.db\"},\n"
             " \"schedules\": [{\"name\": \"a\", \"every\": \"1h\", "
             "\"command\": [\"/bin/true\"]}]}\n");
  const auto off =
      run_baton_command({"validate", "--json", "--config", (dir / "baton.json").string()});
  EXPECT_TRUE(parse_json(off.out)["http"]["listen"].is_null()) << off.out;
  EXPECT_THAT(run_baton_command({"validate", "--config", (dir / "baton.json").string()}).out,
              HasSubstr("http: off"));
  // run --help documents the option.
  EXPECT_THAT(run_baton_command({"run", "--help"}).out, HasSubstr("--http-listen ADDR"));
}

}  // namespace
