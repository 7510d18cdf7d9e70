#include "baton/scheduler/balance.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <system_error>

#include <nlohmann/json.hpp>

#include "baton/mutex/duration.hpp"
#include "baton/mutex/errc.hpp"
#include "baton/mutex/records.hpp"
#include "baton/scheduler/cron.hpp"

namespace baton {

namespace {

using std::chrono::milliseconds;

constexpr std::size_t max_node_id_length = 100;
constexpr std::size_t max_tag_length = 64;
constexpr const char* record_prefix = "baton.node.";

std::string name_chars_error(const std::string& what, const std::string& s, std::size_t max) {
  if (s.empty()) return what + " is empty";
  if (s.size() > max)
    return what + " '" + s.substr(0, 40) + "...' is longer than " + std::to_string(max) +
           " characters";
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return what + " '" + s + "' has a character outside A-Z a-z 0-9 . _ -";
  }
  return {};
}

/// FNV-1a 64, then a splitmix finalizer: a stable hash (the same on every node and build).
std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

std::uint64_t hash_text(std::string_view s, std::uint64_t seed = 0xcbf29ce484222325ULL) {
  std::uint64_t h = seed;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return mix(h);
}

std::string hex(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::vector<std::string> sorted_unique(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

}  // namespace

std::vector<setting_problem> check(const balance_options& o) {
  std::vector<setting_problem> out;
  if (!o.node_id.empty())
    if (auto why = name_chars_error("node id", o.node_id, max_node_id_length); !why.empty())
      out.push_back({"node_id", why});
  std::set<std::string> seen;
  for (const auto& t : o.tags) {
    if (auto why = name_chars_error("tag", t, max_tag_length); !why.empty())
      out.push_back({"tags", why});
    else if (!seen.insert(t).second)
      out.push_back({"tags", "tag '" + t + "' is given twice"});
  }
  if (o.heartbeat < milliseconds::zero())
    out.push_back({"heartbeat", "heartbeat must not be negative (0: the default)"});
  if (o.member_timeout < milliseconds::zero())
    out.push_back({"member_timeout", "member_timeout must not be negative (0: the default)"});
  else if (o.member_timeout > milliseconds::zero() && o.heartbeat > milliseconds::zero() &&
           o.member_timeout < 2 * o.heartbeat)
    out.push_back({"member_timeout",
                   "member_timeout (" + format_duration(o.member_timeout) +
                       ") must be at least 2 heartbeats (" + format_duration(2 * o.heartbeat) +
                       "), else live nodes would be taken for gone",
                   {"heartbeat"}});
  if (o.settle < milliseconds::zero())
    out.push_back({"settle", "settle must not be negative (0: the default)"});
  if (!(o.handoff_rate > 0.0) || o.handoff_rate > 1000.0)
    out.push_back({"handoff_rate",
                   "handoff_rate must be a number of handoffs per second, "
                   "greater than 0 and at most 1000"});
  return out;
}

bool has_tags(const std::vector<std::string>& node_tags, const std::vector<std::string>& required) {
  for (const auto& t : required)
    if (std::find(node_tags.begin(), node_tags.end(), t) == node_tags.end()) return false;
  return true;
}

std::vector<std::string> assign_schedules(const std::vector<balance_node>& given_nodes,
                                          const std::vector<balance_schedule>& schedules) {
  std::vector<std::string> out(schedules.size());
  if (given_nodes.empty()) return out;
  // Order-independent: nodes by id (a node listed twice counts once).
  std::vector<balance_node> nodes = given_nodes;
  std::sort(nodes.begin(), nodes.end(),
            [](const balance_node& a, const balance_node& b) { return a.id < b.id; });
  nodes.erase(
      std::unique(nodes.begin(), nodes.end(),
                  [](const balance_node& a, const balance_node& b) { return a.id == b.id; }),
      nodes.end());
  std::vector<std::uint64_t> node_hash(nodes.size());
  for (std::size_t n = 0; n < nodes.size(); ++n) node_hash[n] = hash_text(nodes[n].id, 0x9e37);

  struct item {
    std::size_t index;
    std::uint64_t hash;
    std::vector<std::size_t> candidates;  // best first
    bool capped;                          // some non-draining node may run it
    std::size_t preferred;                // candidates with its preferred tags
  };
  std::vector<item> items;
  items.reserve(schedules.size());
  std::size_t assignable = 0;
  std::size_t active = 0;
  for (const auto& n : nodes) active += n.draining ? 0 : 1;
  for (std::size_t i = 0; i < schedules.size(); ++i) {
    const auto& s = schedules[i];
    const auto h = hash_text(s.name);
    std::vector<std::size_t> live, drain;
    for (std::size_t n = 0; n < nodes.size(); ++n)
      if (has_tags(nodes[n].tags, s.required_tags)) (nodes[n].draining ? drain : live).push_back(n);
    item it{i, h, live.empty() ? drain : live, !live.empty(), 0};
    if (it.candidates.empty()) continue;  // nobody may run it
    if (it.capped) ++assignable;
    // Preferred nodes first, then the rendezvous score, then the id (a total order).
    std::vector<std::pair<std::pair<int, std::uint64_t>, std::size_t>> ranked;
    for (auto n : it.candidates) {
      const int preferred =
          !s.preferred_tags.empty() && has_tags(nodes[n].tags, s.preferred_tags) ? 1 : 0;
      ranked.push_back({{preferred, mix(h ^ node_hash[n])}, n});
      it.preferred += static_cast<std::size_t>(preferred);
    }
    std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
      if (a.first != b.first) return a.first > b.first;
      return a.second < b.second;
    });
    it.candidates.clear();
    for (const auto& r : ranked) it.candidates.push_back(r.second);
    items.push_back(std::move(it));
  }
  // The most constrained choose first, then those with preferred nodes (fewest first: else a
  // schedule that prefers nothing may take a preferred node's room); among equals, by hash (then
  // name: a total order).
  const auto preference = [](const item& i) {
    return i.preferred == 0 ? std::numeric_limits<std::size_t>::max() : i.preferred;
  };
  std::sort(items.begin(), items.end(), [&](const item& a, const item& b) {
    if (a.candidates.size() != b.candidates.size())
      return a.candidates.size() < b.candidates.size();
    if (preference(a) != preference(b)) return preference(a) < preference(b);
    if (a.hash != b.hash) return a.hash < b.hash;
    return schedules[a.index].name < schedules[b.index].name;
  });
  // Fair shares: every active node may take floor(A/active), and only `extra` = A mod active of
  // them one more (a cap of ceil for all would let a node end up below the floor: 7 schedules on
  // 5 nodes as 2,2,2,1,0).
  const std::size_t floor_share = active == 0 ? 0 : assignable / active;
  const std::size_t extra = active == 0 ? 0 : assignable % active;
  std::size_t above_floor = 0;  // active nodes that took floor_share + 1
  std::vector<std::size_t> load(nodes.size(), 0);
  const auto has_room = [&](std::size_t n) {
    return load[n] < floor_share || (load[n] == floor_share && above_floor < extra);
  };
  for (const auto& it : items) {
    std::size_t chosen = it.candidates.front();
    if (it.capped) {
      bool found = false;
      for (auto n : it.candidates)
        if (has_room(n)) {
          chosen = n;
          found = true;
          break;
        }
      if (!found)  // every eligible node is full (tags): the least loaded, in rank order
        for (auto n : it.candidates)
          if (load[n] < load[chosen]) chosen = n;
      if (load[chosen] == floor_share) ++above_floor;
    }
    ++load[chosen];
    out[it.index] = nodes[chosen].id;
  }
  return out;
}

std::string schedules_digest(const std::vector<balance_schedule>& schedules) {
  std::vector<std::string> parts;
  parts.reserve(schedules.size());
  for (const auto& s : schedules) {
    std::string p = s.name;
    p += '\x1f';
    for (const auto& t : sorted_unique(s.required_tags)) p += t + ",";
    p += '\x1f';
    for (const auto& t : sorted_unique(s.preferred_tags)) p += t + ",";
    parts.push_back(std::move(p));
  }
  std::sort(parts.begin(), parts.end());
  std::string all;
  for (const auto& p : parts) all += p + '\x1e';
  return hex(hash_text(all) ^ mix(parts.size()));
}

std::string view_digest(const std::vector<balance_node>& given, const std::string& schedules) {
  auto nodes = given;
  std::sort(nodes.begin(), nodes.end(),
            [](const balance_node& a, const balance_node& b) { return a.id < b.id; });
  std::string all = schedules + '\x1e';
  for (const auto& n : nodes) {
    all += n.id + '\x1f' + (n.draining ? "d" : "a") + '\x1f';
    for (const auto& t : sorted_unique(n.tags)) all += t + ",";
    all += '\x1e';
  }
  return hex(hash_text(all));
}

std::string balance_record_name(const std::string& node_id) { return record_prefix + node_id; }

bool is_balance_record_name(const std::string& name) {
  return name == balance_registry_name || name.rfind(record_prefix, 0) == 0;
}

std::string format_member(const balance_member& m) {
  nlohmann::json j{{"node", m.node_id},      {"contender", m.contender_id},
                   {"tags", m.tags},         {"drain", m.drain},
                   {"drained", m.drained},   {"leaving", m.leaving},
                   {"balance", m.balance},   {"leads", m.leads},
                   {"assigned", m.assigned}, {"schedule_count", m.schedule_count},
                   {"view", m.view},         {"schedules", m.schedules}};
  if (m.written_at) j["written_at"] = format_rfc3339_utc(*m.written_at);
  return j.dump();
}

std::optional<balance_member> parse_member(const std::string& bytes) {
  if (bytes.empty()) return std::nullopt;
  try {
    const auto j = nlohmann::json::parse(bytes);
    if (!j.is_object()) return std::nullopt;
    balance_member m;
    m.node_id = j.at("node").get<std::string>();
    m.contender_id = j.value("contender", std::string());
    if (auto t = j.find("tags"); t != j.end() && t->is_array())
      for (const auto& x : *t)
        if (x.is_string()) m.tags.push_back(x.get<std::string>());
    m.tags = sorted_unique(std::move(m.tags));
    m.drain = j.value("drain", false);
    m.drained = j.value("drained", false);
    m.leaving = j.value("leaving", false);
    m.balance = j.value("balance", true);
    m.leads = j.value("leads", std::uint64_t{0});
    m.assigned = j.value("assigned", std::uint64_t{0});
    m.schedule_count = j.value("schedule_count", std::uint64_t{0});
    m.view = j.value("view", std::string());
    m.schedules = j.value("schedules", std::string());
    if (auto w = j.find("written_at"); w != j.end() && w->is_string())
      m.written_at = parse_rfc3339(w->get<std::string>());
    return m;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

namespace {

std::vector<std::string> parse_registry(const std::string& bytes) {
  std::vector<std::string> ids;
  if (bytes.empty()) return ids;
  try {
    const auto j = nlohmann::json::parse(bytes);
    if (auto n = j.find("nodes"); n != j.end() && n->is_array())
      for (const auto& x : *n)
        if (x.is_string()) ids.push_back(x.get<std::string>());
  } catch (const std::exception&) {
  }
  return sorted_unique(std::move(ids));
}

}  // namespace

namespace detail {

std::vector<std::string> registry_nodes(const std::string& bytes) { return parse_registry(bytes); }

std::string format_registry(const std::vector<std::string>& ids) {
  return nlohmann::json{{"nodes", sorted_unique(ids)}}.dump();
}

}  // namespace detail

std::vector<balance_member> read_members(mutex_backend& backend, milliseconds timeout) {
  auto& store = backend.records();
  const auto ids = parse_registry(read_controls(store, balance_registry_name).bytes);
  std::vector<balance_member> out;
  const auto now = std::chrono::system_clock::now();
  for (const auto& id : ids) {
    const auto rec = read_controls(store, balance_record_name(id));
    auto m = parse_member(rec.bytes);
    if (!m) {
      balance_member unknown;
      unknown.node_id = id;
      out.push_back(std::move(unknown));
      continue;
    }
    m->version = rec.version;
    m->alive = !m->leaving && m->written_at && now - *m->written_at < timeout &&
               *m->written_at - now < timeout;
    out.push_back(std::move(*m));
  }
  return out;
}

balance_member request_drain(mutex_backend& backend, const std::string& node_id, bool drain) {
  auto& store = backend.records();
  const auto ids = parse_registry(read_controls(store, balance_registry_name).bytes);
  if (std::find(ids.begin(), ids.end(), node_id) == ids.end()) {
    std::string known;
    for (const auto& id : ids) known += (known.empty() ? "" : ", ") + id;
    throw std::invalid_argument("no node '" + node_id + "' in the cluster's membership (known: " +
                                (known.empty() ? std::string("none") : known) + ")");
  }
  balance_member written;
  const auto rec = update_controls(store, balance_record_name(node_id), [&](const std::string& b) {
    auto m = parse_member(b);
    if (!m) {
      m = balance_member{};
      m->node_id = node_id;
    }
    m->drain = drain;
    if (!drain) m->drained = false;
    written = *m;
    return format_member(*m);
  });
  written.version = rec.version;
  return written;
}

}  // namespace baton
