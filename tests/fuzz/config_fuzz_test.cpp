// Fuzzing the config loader (issue 14): random and mutated configs go through load_config(), the
// function `baton validate` and `baton run` read their config with, in this process. Whatever the
// input, the loader returns a config or throws config_error whose every message names the file
// and a place (a JSON path, a line and column, or the file itself), is valid UTF-8 and short; it
// neither crashes (scripts/test.sh runs this binary under ASan+UBSan) nor hangs.
//
// Deterministic: case N of seed S is the same input on every run. A failure prints N, S, what
// the case was and the file its input was kept in. Bounded by a case count and a wall deadline:
//   BATON_FUZZ_CASES    cases to run (default 10000)
//   BATON_FUZZ_SECONDS  wall deadline (default 300); reaching it first fails the test
//   BATON_FUZZ_SEED     seed (default 14)
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "baton/config/config.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using baton::config::config_error;
using baton::config::config_limits;

std::uint64_t setting(const char* name, std::uint64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const auto value = std::strtoull(text, &end, 10);
  if (*end != '\0') throw std::invalid_argument(std::string(name) + ": not a number: " + text);
  return value;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string repeated(const std::string& s, std::size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (std::size_t i = 0; i < n; ++i) out += s;
  return out;
}

// ---------------------------------------------------------------------------------------------
// seeds: the example configs, the READMEs' config blocks, configs like the tests', regressions

const std::string ok_schedule = R"({"name": "a", "every": "1s", "command": ["/bin/true"]})";

std::vector<std::string> builtin_seeds() {
  return {
      // Every key there is.
      R"({"backend": {"type": "sqlite", "path": "state/baton.db", "table": "locks",
                      "create_table": false, "pool_size": 2, "poll_interval": "200ms",
                      "statement_timeout": "1s"},
          "lease": {"ttl": "4s", "transition": "2s", "retry_period": "500ms",
                    "poll_interval": "250ms", "drift_margin": "100ms", "max_backoff": "2s",
                    "stop_grace": "800ms"},
          "kill_grace": "500ms", "log_level": "debug",
          "schedules": [
            {"name": "heartbeat", "every": "5s", "mode": "fixed_delay", "initial_delay": "1s",
             "command": ["scripts/heartbeat.sh", "--verbose"], "env": {"COLOR": "blue"},
             "timeout": "3s", "kill_grace": "250ms", "misfire": "skip",
             "lease": {"ttl": "8s", "stop_grace": "1s"}, "working_directory": "/",
             "user": "root", "group": "root"},
            {"name": "nightly-report", "cron": "0 3 * * *", "time_zone": "Europe/Berlin",
             "command": ["date"]},
            {"name": "seconds", "cron": "*/10 * * * * *", "command": ["date"], "misfire": "run_once"}
          ]})",
      R"({"backend": {"type": "memory"}, "schedules": [)" + ok_schedule + "]}",
      R"({"backend": {"type": "postgresql", "connection": "dbname=x host=h password=${BAD}",
                      "table": "public.baton_mutex"}, "schedules": [)" +
          ok_schedule + "]}",
      R"({"backend": {"type": "mysql", "connection": "db=x host=h port=3306 user=u pass=p"},
          "schedules": [)" +
          ok_schedule + "]}",
      R"({"backend": {"type": "redis", "url": "redis://u:p@127.0.0.1:6379/2", "key_prefix": "p:",
                      "poll_interval": "250ms", "connect_timeout": "2s", "command_timeout": "1s",
                      "handoff_window": "100ms"}, "schedules": [)" +
          ok_schedule + "]}",
      R"({"backend": {"type": "zookeeper", "hosts": "127.0.0.1:2181,h:1/chroot",
                      "session_timeout": "3s", "root": "/baton", "username": "u",
                      "password": "${EMPTY}"},
          "lease": {"stop_grace": "500ms"}, "schedules": [)" +
          ok_schedule + "]}",
      // Errors of every kind, like the daemon tests' table.
      R"({"backend": {"type": "sqlite"}, "lease": {"ttl": "ten seconds"}, "log_level": "loud",
          "schedules": [{"name": "bad name", "every": "5x", "command": []},
                        {"name": "c", "cron": "61 * * * *", "time_zone": "Nowhere/Land",
                         "command": ["${NOPE}"]},
                        {"name": "c", "every": "1s", "cron": "* * * * *", "mode": "x",
                         "env": {"BATON_SCHEDULE": "x", "A=B": "1", "N": 5}, "evrey": 1}]})",
      // The regressions of issue 14.
      R"({"backend": {"type": "sqlite", "path": "x.db", "pool_size": )" + repeated("[", 100000) +
          repeated("]", 100000) + R"(}, "schedules": [)" + ok_schedule + "]}",
      R"({"backend": {"type": "sqlite", "path": "x.db", "pool_size": 1e400}, "schedules": [)" +
          ok_schedule + "]}",
      R"({"backend": {"type": "${BAD}"}, "schedules": [{"name": "${BAD}", "every": "${BAD}",
          "command": ["/bin/echo", "${BAD}"], "env": {"X": "${BAD}"}}]})",
  };
}

// The ```json blocks of a README.
std::vector<std::string> json_blocks(const std::string& markdown) {
  std::vector<std::string> blocks;
  std::size_t pos = 0;
  for (int guard = 0; guard < 1000; ++guard) {
    const auto start = markdown.find("```json\n", pos);
    if (start == std::string::npos) break;
    const auto end = markdown.find("\n```", start + 8);
    if (end == std::string::npos) break;
    blocks.push_back(markdown.substr(start + 8, end - start - 8));
    pos = end + 4;
  }
  return blocks;
}

std::vector<std::string> seed_configs() {
  auto seeds = builtin_seeds();
  const fs::path root(BATON_SOURCE_DIR);
  std::size_t examples = 0;
  for (const auto& entry : fs::directory_iterator(root / "examples"))
    if (entry.path().extension() == ".json") seeds.push_back(read_text(entry.path())), ++examples;
  if (examples == 0) throw std::runtime_error("no examples/*.json under " + root.string());
  for (const char* readme : {"README.md", "daemon/README.md"})
    for (auto& block : json_blocks(read_text(root / readme)))
      if (block.find("\"schedules\"") != std::string::npos) seeds.push_back(std::move(block));
  return seeds;
}

// ---------------------------------------------------------------------------------------------
// generators

const std::vector<std::string> keys{
    "backend",
    "type",
    "path",
    "table",
    "create_table",
    "pool_size",
    "poll_interval",
    "statement_timeout",
    "connection",
    "url",
    "key_prefix",
    "connect_timeout",
    "hosts",
    "session_timeout",
    "root",
    "username",
    "password",
    "lease",
    "ttl",
    "transition",
    "retry_period",
    "drift_margin",
    "max_backoff",
    "lapse_jitter",
    "stop_grace",
    "kill_grace",
    "log_level",
    "schedules",
    "name",
    "every",
    "cron",
    "mode",
    "initial_delay",
    "time_zone",
    "command",
    "env",
    "timeout",
    "misfire",
    "user",
    "group",
    "working_directory",
    "node",
    "id",
    "tags",
    "balance",
    "enabled",
    "heartbeat",
    "member_timeout",
    "settle",
    "handoff_rate",
    "requires",
    "prefers",
    "",
    "BATON_SCHEDULE",
    "a/b~c",
    "\u00e9\u4e2d\U0001F600",
};

const std::vector<std::string> strings{
    "5s",
    "0s",
    "-1s",
    "1d",
    "250ms",
    "1.5s",
    "99999999999999999999d",
    "9223372036854775807ms",
    "1h30m",
    "",
    "* * * * *",
    "0 3 * * *",
    "*/0 * * * *",
    "0 0 30 2 *",
    "@daily",
    "@reboot",
    "*/10 * * * * *",
    "60 24 32 13 8",
    "1-0/3 * * * *",
    "Europe/Berlin",
    "UTC",
    "Mars/Base",
    "../../../../dev/zero",
    "memory",
    "sqlite",
    "postgresql",
    "mysql",
    "redis",
    "zookeeper",
    "fixed_rate",
    "fixed_delay",
    "skip",
    "run_once",
    "debug",
    "gpu",
    "eu-west",
    "web-1",
    "baton.nodes",
    "baton.node.x",
    "/bin/true",
    "scripts/x.sh",
    "root",
    "nobody",
    "65534",
    "/",
    ":memory:",
    "file:x?mode=memory",
    "temp.t",
    "a b",
    ".",
    "..",
    "${BAD}",
    "${HUGE}",
    "${UNSET}",
    "${EMPTY}",
    "${NUL}",
    "${OK}",
    "x${OK}y${BAD}",
    "$${OK}",
    "${",
    "${1}",
    "${OK",
    "redis://u:p/w@h:1/0",
    "h:0,h:99999",
    "host=h password='a\\'b'",
};

// Values that are not JSON text: tokens to splice into the bytes.
const std::vector<std::string> tokens{
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\\",
    "\\u0000",
    "\\ud800",
    "\\udc00",
    "\\uffff",
    "\\\"",
    "null",
    "true",
    "false",
    "0",
    "-0",
    "-1",
    "1e400",
    "-1e400",
    "1e-400",
    "1E+308",
    "18446744073709551616",
    "-9223372036854775809",
    "0.1",
    "\xff",
    "\xfe\xff",
    "\xc0\x80",
    "\xed\xa0\x80",
    "\xf4\x90\x80\x80",
    "\xe2\x82",
    std::string(1, '\0'),
    "\n",
    "\t",
    " ",
    "/*",
    "//",
    "\"${BAD}\"",
    "\"${HUGE}\"",
    "\"${UNSET}\"",
    "${",
    "$${",
    "\"\xff\"",
};

std::string dump(const json& doc) {
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

// How deeply `text` nests arrays and objects (brackets outside strings), to keep nlohmann's
// recursive dump() away from the deep seeds.
std::size_t nesting(const std::string& text) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

class generator {
 public:
  explicit generator(std::uint64_t seed) : rng_(seed) {}

  std::size_t below(std::size_t n) { return n == 0 ? 0 : rng_() % n; }
  bool chance(std::size_t percent) { return below(100) < percent; }
  template <typename T>
  const T& pick(const std::vector<T>& from) {
    return from[below(from.size())];
  }

  // A string: known words, environment references, unicode, control characters, random bytes
  // (dumped with replacement, so that the JSON text stays valid), sometimes long.
  std::string text() {
    switch (below(8)) {
      case 0: {
        std::string s(below(40), ' ');
        for (auto& c : s) c = static_cast<char>(below(256));
        return s;
      }
      case 1:
        return std::string(chance(3) ? 100000 + below(1 << 20) : below(2000), 'x');
      case 2:
        return pick(strings) + pick(strings);
      default:
        return pick(strings);
    }
  }

  json number() {
    switch (below(6)) {
      case 0:
        return static_cast<std::int64_t>(rng_());
      case 1:
        return static_cast<std::uint64_t>(rng_());
      case 2:
        return std::uniform_real_distribution<double>(-1e308, 1e308)(rng_);
      case 3:
        return std::numeric_limits<double>::min();
      default:
        return static_cast<int>(below(100)) - 10;
    }
  }

  json value(int depth) {
    switch (below(depth > 0 ? 9 : 6)) {
      case 0:
        return nullptr;
      case 1:
        return chance(50);
      case 2:
        return number();
      case 3:
      case 4:
      case 5:
        return text();
      case 6: {
        json a = json::array();
        for (std::size_t i = 0, n = below(6); i < n; ++i) a.push_back(value(depth - 1));
        return a;
      }
      default: {
        json o = json::object();
        for (std::size_t i = 0, n = below(6); i < n; ++i)
          o[chance(70) ? pick(keys) : text()] = value(depth - 1);
        return o;
      }
    }
  }

  // A random node of `doc` (the root included), reached by a random walk.
  json& node(json& doc) {
    json* at = &doc;
    for (int step = 0; step < 8 && at->is_structured() && !at->empty() && chance(75); ++step) {
      auto it = at->begin();
      std::advance(it, static_cast<std::ptrdiff_t>(below(at->size())));
      at = &*it;
    }
    return *at;
  }

  // A change to the document: replace, remove, add, rename or multiply a part.
  void mutate_tree(json& doc) {
    json& at = node(doc);
    switch (below(6)) {
      case 0:
        at = value(3);
        break;
      case 1:
        if (at.is_object() && !at.empty()) {
          auto it = at.begin();
          std::advance(it, static_cast<std::ptrdiff_t>(below(at.size())));
          at.erase(it);
        } else if (at.is_array() && !at.empty()) {
          at.erase(below(at.size()));
        }
        break;
      case 2:
      case 3:
        if (at.is_object())
          at[chance(70) ? pick(keys) : text()] = value(2);
        else if (at.is_array())
          at.push_back(value(2));
        else
          at = value(2);
        break;
      case 4:
        if (at.is_array() && !at.empty()) {
          const json copy = at[below(at.size())];
          // At most about 4 MiB of copies.
          const std::size_t size = dump(copy).size() + 1;
          const std::size_t n = std::min<std::size_t>(1 + below(chance(5) ? 2000 : 20),
                                                      config_limits::default_max_bytes / size);
          for (std::size_t i = 0; i < n; ++i) at.push_back(copy);
        }
        break;
      default:
        if (at.is_string()) at = pick(strings);
        break;
    }
  }

  // Byte-level changes: bit flips, random bytes, spliced tokens, cut, copied and deleted ranges.
  void mutate_bytes(std::string& text) {
    for (std::size_t i = 0, n = 1 + below(8); i < n; ++i) {
      const std::size_t at = below(text.size() + 1);
      switch (below(7)) {
        case 0:
          if (at < text.size()) text[at] = static_cast<char>(text[at] ^ (1 << below(8)));
          break;
        case 1:
          if (at < text.size()) text[at] = static_cast<char>(below(256));
          break;
        case 2:
        case 3:
          text.insert(at, pick(tokens));
          break;
        case 4:
          text.erase(at, below(32));
          break;
        case 5:
          if (at < text.size()) text.insert(below(text.size() + 1), text.substr(at, below(64)));
          break;
        default:
          if (chance(30)) text.resize(at);
          break;
      }
    }
  }

  // Nesting around the limit or far beyond, at a random place, balanced or not.
  void nest(std::string& text) {
    static const std::vector<std::size_t> depths{62, 63, 64, 65, 100, 1000, 100000};
    const std::size_t n = chance(80) ? pick(depths) : below(5000);
    const bool arrays = chance(60);
    const std::string open = arrays ? "[" : R"({"a": )";
    std::string inner = repeated(open, n) + (arrays ? "" : "1");
    if (chance(80)) inner += repeated(arrays ? "]" : "}", chance(90) ? n : below(n + 1));
    // After a ':' (a value's place) if there is one, else anywhere.
    std::size_t at = below(text.size() + 1);
    if (const auto colon = text.find(':', at); colon != std::string::npos) at = colon + 1;
    if (chance(50)) {
      const auto end = text.find_first_of(",}]", at);
      if (end != std::string::npos) text.erase(at, end - at);
    }
    text.insert(std::min(at, text.size()), inner);
  }

  // Big inputs: around the size limit, a huge key or value, thousands of schedules.
  std::string huge(const std::string& seed) {
    const std::size_t limit = config_limits::default_max_bytes;
    switch (below(3)) {
      case 0: {
        std::string text = seed;
        const std::size_t target = limit - 100 + below(200);
        if (text.size() < target) text.insert(text.size() > 1 ? 1 : 0, target - text.size(), ' ');
        return text;
      }
      case 1:
        return R"({"backend": {"type": ")" + std::string(limit / 2, 'b') + R"("}, ")" +
               std::string(limit / 4, 'k') + R"(": 1, "schedules": [)" + ok_schedule + "]}";
      default: {
        std::string text = R"({"backend": {"type": "memory"}, "schedules": [)";
        for (std::size_t i = 0, n = 1000 + below(20000); i < n; ++i)
          text += (i ? "," : "") + std::string(R"({"name": "s)") + std::to_string(i % 5000) +
                  R"(", "every": "1s", "command": ["x"]})";
        return text + "]}";
      }
    }
  }

  std::string random_bytes() {
    std::string s(below(4096), ' ');
    for (auto& c : s) c = static_cast<char>(chance(70) ? pick(tokens)[0] : below(256));
    return s;
  }

 private:
  std::mt19937_64 rng_;
};

// Case `number` of `seed`: what it is and its text.
std::pair<std::string, std::string> make_case(const std::vector<std::string>& seeds,
                                              std::uint64_t seed, std::uint64_t number) {
  // The built-in seeds (regressions included) first, each as it is.
  if (number < seeds.size()) return {"seed " + std::to_string(number), seeds[number]};
  generator g(seed * 0x9E3779B97F4A7C15ULL + number);
  const auto& base = g.pick(seeds);
  std::optional<json> tree;
  if (base.size() < 100000 && nesting(base) < 16)
    tree = json::parse(base, nullptr, /*allow_exceptions=*/false);
  if (tree && tree->is_discarded()) tree.reset();
  const auto kind = g.below(1000);
  std::string text;
  if (kind < 300) {
    text = base;
    g.mutate_bytes(text);
    return {"byte mutations", text};
  }
  if (kind < 650 && tree) {
    for (std::size_t i = 0, n = 1 + g.below(4); i < n; ++i) g.mutate_tree(*tree);
    text = dump(*tree);
    if (g.chance(30)) g.mutate_bytes(text);
    return {"tree mutations", text};
  }
  if (kind < 800) {
    text = g.chance(70) ? base : dump(g.value(4));
    g.nest(text);
    return {"deep nesting", text};
  }
  if (kind < 900) {
    json doc = g.value(5);
    if (g.chance(60) && doc.is_object()) doc["schedules"] = json::array({g.value(3), g.value(3)});
    return {"random document", dump(doc)};
  }
  if (kind < 997) return {"random bytes", g.random_bytes()};
  return {"huge", g.huge(base)};
}

// ---------------------------------------------------------------------------------------------
// the checks

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Why `message` does not name `source` and a place, or is not valid UTF-8, or is too long; ""
// when it is fine.
std::string message_problem(const std::string& message, const std::string& source) {
  if (!starts_with(message, source + ": ")) return "does not start with the file name";
  if (message.size() > 1100) return "longer than 1100 bytes";
  try {
    (void)json(message).dump();
  } catch (const json::exception&) {
    return "not valid UTF-8";
  }
  // The loader's last resort for library exceptions (config.cpp, guarded()) keeps the contract
  // but loses the message's sense: reaching it is a place to fix.
  if (message.find(": cannot read this value: ") != std::string::npos ||
      message.find(": cannot read the config: ") != std::string::npos)
    return "a library exception reached the loader's guard";
  const std::string rest = message.substr(source.size() + 2);
  if (rest.size() > 1 && rest[0] == '/' && rest.find(": ") != std::string::npos) return "";
  for (const char* place : {"invalid JSON: parse error at line ", "is empty: ", "is larger than ",
                            "is a directory", "is a socket"})
    if (starts_with(rest, place)) return "";
  if (rest.find(" bytes, larger than ") != std::string::npos) return "";
  if (rest.find(" more errors not listed") != std::string::npos) return "";
  return "names no place (JSON path, line and column or the file)";
}

std::optional<std::string> env(const std::string& name) {
  static const std::map<std::string, std::string> vars{
      {"BAD", "\xff\xfe"}, {"HUGE", std::string(512 * 1024, 'h')},
      {"EMPTY", ""},       {"NUL", std::string("a\0b", 3)},
      {"OK", "5s"},
  };
  auto it = vars.find(name);
  if (it == vars.end()) return std::nullopt;
  return it->second;
}

TEST(config_fuzz, random_and_mutated_configs_load_or_fail_with_a_config_error_naming_the_place) {
  const auto cases = setting("BATON_FUZZ_CASES", 10000);
  const auto seconds = setting("BATON_FUZZ_SECONDS", 300);
  const auto seed = setting("BATON_FUZZ_SEED", 14);
  const auto seeds = seed_configs();

  // Each case goes through a file: in memory (/dev/shm) where there is one, as rewriting a file
  // on a busy disk 10,000 times can cost more than the loading.
  std::error_code ec;
  const char* tmp = std::getenv("BATON_TEST_TMPDIR");
  const fs::path base = fs::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0
                            ? fs::path("/dev/shm")
                            : fs::path(tmp && *tmp ? tmp : "/tmp");
  const fs::path dir = base / ("baton-config-fuzz-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "case.json";

  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto deadline = start + std::chrono::seconds(seconds);
  std::uint64_t done = 0, accepted = 0, rejected = 0, failures = 0;
  std::chrono::duration<double> slowest{0};
  std::uint64_t slowest_case = 0;
  for (std::uint64_t n = 0; n < cases && clock::now() < deadline && failures < 10; ++n) {
    const auto [kind, text] = make_case(seeds, seed, n);
    std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
    std::string problem;
    const auto case_start = clock::now();
    try {
      const auto config = baton::config::load_config(file, env);
      for (const auto& s : config.schedules) {
        (void)baton::config::fingerprint(config, s, config.backend_defaults);
        (void)baton::config::describe(s.when);
      }
      ++accepted;
    } catch (const config_error& e) {
      ++rejected;
      if (e.errors().empty()) problem = "config_error without a message";
      if (e.count() < e.errors().size()) problem = "count() below the listed errors";
      for (const auto& m : e.errors())
        if (auto why = message_problem(m, file.string()); !why.empty() && problem.empty())
          problem = why + ": " + m.substr(0, 300);
    } catch (const std::exception& e) {
      problem = std::string("not a config_error: ") + typeid(e).name() + ": " + e.what();
    }
    const std::chrono::duration<double> took = clock::now() - case_start;
    if (took > slowest) slowest = took, slowest_case = n;
    ++done;
    if (!problem.empty()) {
      ++failures;
      const fs::path kept = dir / ("failed-case-" + std::to_string(n) + ".json");
      fs::copy_file(file, kept, fs::copy_options::overwrite_existing);
      ADD_FAILURE() << "case " << n << " of seed " << seed << " (" << kind << ", " << text.size()
                    << " bytes, kept in " << kept.string() << "): " << problem;
    }
  }
  const std::chrono::duration<double> wall = clock::now() - start;
  std::cout << "config fuzz: " << done << " cases of seed " << seed << " in " << wall.count()
            << " s (" << accepted << " accepted, " << rejected << " rejected); slowest case "
            << slowest_case << " took " << slowest.count() << " s\n";
  ::testing::Test::RecordProperty("cases", static_cast<int>(done));
  EXPECT_EQ(done, cases) << "only " << done << " of " << cases << " cases within " << seconds
                         << " s (BATON_FUZZ_SECONDS)";
  if (failures == 0) fs::remove_all(dir);
}

}  // namespace
