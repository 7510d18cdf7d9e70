#include "baton/scheduler/detail/balancer.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

#include <boost/asio/post.hpp>

#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/duration.hpp"
#include "baton/mutex/errc.hpp"

namespace baton::detail {

namespace {

using std::chrono::milliseconds;

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

/// A dead member's id is dropped from the registry once its record is this old.
constexpr milliseconds prune_after{10 * 60 * 1000};
/// A tick whose backend requests have not all answered after this many heartbeats is given up.
constexpr int stale_ticks = 10;

}  // namespace

std::string node_id_from_contender(const std::string& contender_id) {
  std::string out;
  for (char c : contender_id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    out += ok ? c : '-';
  }
  if (out.size() > 100) out.resize(100);
  return out.empty() ? std::string("node") : out;
}

}  // namespace baton::detail

namespace baton {

balance_options resolve(balance_options o, const contend_options& lease,
                        const std::string& contender_id) {
  if (o.node_id.empty()) o.node_id = detail::node_id_from_contender(contender_id);
  if (o.heartbeat <= std::chrono::milliseconds::zero())
    o.heartbeat = std::clamp<std::chrono::milliseconds>(
        std::chrono::duration_cast<std::chrono::milliseconds>(lease.transition / 3),
        std::chrono::milliseconds{100}, std::chrono::milliseconds{1000});
  if (o.member_timeout <= std::chrono::milliseconds::zero())
    o.member_timeout = std::max(lease.transition, 3 * o.heartbeat);
  if (o.settle <= std::chrono::milliseconds::zero()) o.settle = 2 * o.heartbeat;
  return o;
}

}  // namespace baton

namespace baton::detail {

std::size_t share_tolerance(std::size_t assigned) noexcept {
  return std::max<std::size_t>(1, assigned / 10);
}

std::size_t handoff_quota(std::size_t leads, std::size_t assigned, bool draining,
                          const std::vector<member_share>& others) noexcept {
  if (leads <= assigned) return 0;
  const std::size_t excess = leads - assigned;
  if (draining || leads > assigned + share_tolerance(assigned)) return excess;
  for (const auto& o : others)
    if (o.assigned > o.leads + share_tolerance(o.assigned)) return excess;
  return 0;
}

void token_bucket::refill(time_point now) {
  if (last_) {
    const double dt = std::chrono::duration<double>(now - *last_).count();
    if (dt > 0) tokens_ = std::min(std::max(1.0, rate_), tokens_ + dt * rate_);
  }
  last_ = now;
}

bool token_bucket::take(time_point now) {
  refill(now);
  if (tokens_ < 1.0) return false;
  tokens_ -= 1.0;
  return true;
}

void token_bucket::refund() { tokens_ = std::min(std::max(1.0, rate_), tokens_ + 1.0); }

bool member_tracker::observe(const balance_member& m, time_point now,
                             std::chrono::system_clock::time_point wall_now) {
  auto it = seen_.find(m.node_id);
  // A record changes when its writer writes it (written_at); a drain request written by a tool
  // does not make a dead node look alive.
  const std::uint64_t stamp =
      m.written_at ? static_cast<std::uint64_t>(m.written_at->time_since_epoch().count()) : 0;
  if (it == seen_.end()) {
    seen s;
    s.version = stamp;
    const bool recent =
        m.written_at && wall_now - *m.written_at < timeout_ && *m.written_at - wall_now < timeout_;
    s.changed = recent ? now : now - timeout_;
    it = seen_.emplace(m.node_id, s).first;
  } else if (it->second.version != stamp) {
    it->second.version = stamp;
    it->second.changed = now;
  }
  return !m.leaving && m.balance && now - it->second.changed < timeout_;
}

struct balancer::tick_state {
  std::vector<std::string> ids;  // the registry, this node excluded
  std::map<std::string, std::optional<controls_record>> records;
  std::size_t pending = 0;
};

balancer::balancer(boost::asio::io_context& io, record_store& records, balance_options options,
                   std::string contender_id, schedules_fn schedules)
    : strand_(boost::asio::make_strand(io)),
      timer_(strand_),
      records_(records),
      options_(std::move(options)),
      contender_id_(std::move(contender_id)),
      schedules_(std::move(schedules)),
      tracker_(options_.member_timeout),
      bucket_(options_.handoff_rate) {
  std::sort(options_.tags.begin(), options_.tags.end());
  status_.enabled = true;
  status_.node_id = options_.node_id;
  status_.tags = options_.tags;
}

void balancer::start() {
  boost::asio::post(strand_, [self = shared_from_this()] {
    self->started_at_ = std::chrono::steady_clock::now();
    // Where the backend pushes controls changes (Redis, ZooKeeper, PostgreSQL), a node that
    // joins or leaves the registry is seen at once, not at the next heartbeat.
    std::weak_ptr<balancer> weak = self;
    self->registry_watch_ = self->records_.watch_controls(balance_registry_name, [weak] {
      if (auto b = weak.lock())
        boost::asio::post(b->strand_, [b] {
          if (b->stopped_) return;
          if (b->busy_)
            b->tick_again_ = true;
          else
            b->tick();
        });
    });
    self->tick();
  });
}

void balancer::arm(milliseconds after) {
  timer_.expires_after(after);
  timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (!ec) self->tick();
  });
}

void balancer::drain(bool on) {
  boost::asio::post(strand_, [self = shared_from_this(), on] {
    if (self->drain_ == on) return;
    self->drain_ = on;
    if (on)
      log({.event = "node.drain_requested"})
          .info("node '{}' drains: handing its schedules to the other nodes",
                self->options_.node_id);
    else
      log({.event = "node.drain_cancelled"})
          .info("node '{}' takes a share of the schedules again", self->options_.node_id);
    self->tick();
  });
}

void balancer::tick() {
  if (stopped_) return;
  const auto now = std::chrono::steady_clock::now();
  arm(options_.heartbeat);
  if (busy_ && now - tick_started_ < stale_ticks * options_.heartbeat) return;
  if (busy_)
    log({.event = "balance.stalled"})
        .warn("membership requests did not answer in {} heartbeats; starting over", stale_ticks);
  ++gen_;
  busy_ = true;
  tick_started_ = now;
  const auto gen = gen_;
  records_.async_read_controls(balance_registry_name, [self = shared_from_this(), gen](
                                                          std::error_code ec, controls_record rec) {
    boost::asio::post(self->strand_,
                      [self, gen, ec, rec = std::move(rec)] { self->registry_read(gen, ec, rec); });
  });
}

void balancer::registry_read(std::uint64_t gen, std::error_code ec, const controls_record& rec) {
  if (gen != gen_ || stopped_) return;
  if (ec) {
    note_error("reading the membership registry", ec);
    return write_record(gen, 0);
  }
  auto ids = registry_nodes(rec.bytes);
  const auto now = std::chrono::steady_clock::now();
  const auto wall = std::chrono::system_clock::now();
  const bool listed = std::find(ids.begin(), ids.end(), options_.node_id) != ids.end();
  registered_ticks_ = listed ? registered_ticks_ + 1 : 0;
  // Members long dead (or whose record is gone) leave the registry.
  std::vector<std::string> keep, dropped;
  for (const auto& id : ids) {
    if (id == options_.node_id) {
      keep.push_back(id);
      continue;
    }
    // A member without a written record (a newcomer lists itself before it writes its record)
    // goes only once it has stayed so for as long.
    auto m = members_.find(id);
    bool dead = false;
    if (m != members_.end() && !alive_[id]) {
      if (m->second.written_at) {
        dead = wall - *m->second.written_at > prune_after;
      } else {
        auto since = unwritten_since_.find(id);
        dead = since != unwritten_since_.end() && now - since->second > prune_after;
      }
    }
    if (dead) {
      dropped.push_back(id);
      log({.event = "balance.member_pruned"})
          .info("node '{}' left the membership registry (no record for a long time)", id);
      tracker_.forget(id);
      unwritten_since_.erase(id);
      continue;
    }
    keep.push_back(id);
  }
  // A leaving node takes itself out (the others are pushed the change where the backend can).
  if (leaving_ && listed) dropped.push_back(options_.node_id);
  if ((!listed && joinable()) || !dropped.empty()) write_registry(rec, dropped, 0);
  auto t = std::make_shared<tick_state>();
  for (const auto& id : keep)
    if (id != options_.node_id) t->ids.push_back(id);
  if (t->ids.empty()) return compute(gen, t);
  t->pending = t->ids.size();
  for (const auto& id : t->ids)
    records_.async_read_controls(
        balance_record_name(id),
        [self = shared_from_this(), gen, t, id](std::error_code ec, controls_record rec) {
          boost::asio::post(self->strand_, [self, gen, t, id, ec, rec = std::move(rec)] {
            if (gen != self->gen_) return;
            if (ec)
              self->note_error("reading a membership record", ec);
            else
              t->records[id] = rec;
            if (--t->pending == 0) self->compute(gen, t);
          });
        });
}

void balancer::write_registry(const controls_record& current, std::vector<std::string> dropped,
                              int attempt) {
  if (stopped_) return;
  const auto ids = registry_nodes(current.bytes);
  std::vector<std::string> next;
  for (const auto& id : ids)
    if (std::find(dropped.begin(), dropped.end(), id) == dropped.end()) next.push_back(id);
  if (joinable() && std::find(next.begin(), next.end(), options_.node_id) == next.end())
    next.push_back(options_.node_id);
  std::sort(next.begin(), next.end());
  if (next == ids) return;  // already so (another writer did it)
  // Nodes that start together register together: the write that loses the compare-and-set tries
  // again at once on the record that won, so that every one of them is listed within this
  // heartbeat (else each would see itself alone at the next and contend for everything).
  records_.async_write_controls(
      balance_registry_name, current.version, format_registry(next),
      [self = shared_from_this(), dropped, attempt](std::error_code ec, controls_record rec) {
        boost::asio::post(self->strand_, [self, dropped, attempt, ec, rec = std::move(rec)] {
          if (ec == make_error_code(errc::conflict)) {
            if (attempt < 5) self->write_registry(rec, dropped, attempt + 1);
          } else if (ec) {
            self->note_error("writing the membership registry", ec);
          }
        });
      });
}

void balancer::compute(std::uint64_t gen, std::shared_ptr<tick_state> t) {
  if (gen != gen_ || stopped_) return;
  const auto now = std::chrono::steady_clock::now();
  const auto wall = std::chrono::system_clock::now();
  // Members.
  std::map<std::string, balance_member> members;
  std::map<std::string, bool> alive;
  for (const auto& id : t->ids) {
    auto r = t->records.find(id);
    if (r == t->records.end() || !r->second) {
      // Unreadable this time: keep what was known, and its verdict ages on the tracker.
      if (auto old = members_.find(id); old != members_.end()) {
        members[id] = old->second;
        alive[id] = tracker_.observe(old->second, now, wall);
      }
      continue;
    }
    auto m = parse_member(r->second->bytes);
    if (!m || m->node_id != id) {
      balance_member unknown;
      unknown.node_id = id;
      unknown.version = r->second->version;
      members[id] = unknown;
      alive[id] = false;
      continue;
    }
    m->version = r->second->version;
    alive[id] = tracker_.observe(*m, now, wall);
    m->alive = alive[id];
    members[id] = std::move(*m);
  }
  for (const auto& [id, m] : members_)
    if (members.find(id) == members.end()) tracker_.forget(id);
  for (const auto& [id, m] : members) {
    if (m.written_at)
      unwritten_since_.erase(id);
    else
      unwritten_since_.try_emplace(id, now);
  }
  std::erase_if(unwritten_since_,
                [&](const auto& entry) { return members.find(entry.first) == members.end(); });
  members_ = std::move(members);
  alive_ = std::move(alive);
  self_alive_ = !leaving_ && last_write_ok_ && now - *last_write_ok_ < options_.member_timeout;

  // The schedules and the view (rebuilt when the list changed).
  auto list = schedules_();
  if (list != list_) {
    list_ = std::move(list);
    list_view_.clear();
    list_view_.reserve(list_.size());
    for (const auto& s : list_)
      list_view_.push_back({s->name(), s->required_tags(), s->preferred_tags()});
    list_digest_ = schedules_digest(list_view_);
    list_index_.clear();
    owners_nodes_.reset();
  }
  const auto& bs = list_view_;
  const auto& digest = list_digest_;
  std::vector<balance_node> nodes;
  bool mixed = false;
  for (const auto& [id, m] : members_) {
    if (!alive_[id]) continue;
    nodes.push_back({id, m.tags, m.drain});
    if (m.schedules != digest) mixed = true;
  }
  if (self_alive_) nodes.push_back({options_.node_id, options_.tags, drain_});
  std::sort(nodes.begin(), nodes.end(),
            [](const balance_node& a, const balance_node& b) { return a.id < b.id; });
  const auto view = view_digest(nodes, digest);
  if (mixed != mixed_) {
    if (mixed)
      log({.event = "balance.mixed_configs"})
          .warn(
              "the live nodes run different schedule sets: every node contends for every "
              "schedule it may run (first come) until their configs agree");
    else
      log({.event = "balance.configs_agree"}).info("the live nodes run the same schedule set");
    mixed_ = mixed;
  }
  if (view != view_) {
    std::vector<std::string> shown;
    for (const auto& n : nodes) shown.push_back(n.id + (n.draining ? "(draining)" : ""));
    view_ = view;
    view_since_ = now;
    view_nodes_ = nodes;
    std::lock_guard lock(status_mutex_);
    ++status_.view_changes;
    log({.event = "balance.view"})
        .info("view {}: {} live node(s) [{}]", view, nodes.size(), join(shown));
  }
  if (!self_alive_ || mixed_) {
    owners_.assign(bs.size(), std::string());
    owners_nodes_.reset();
    assigned_ = 0;
  } else if (!owners_nodes_ || *owners_nodes_ != nodes) {
    owners_ = assign_schedules(nodes, bs);
    owners_nodes_ = nodes;
    assigned_ =
        static_cast<std::size_t>(std::count(owners_.begin(), owners_.end(), options_.node_id));
  }
  {
    std::lock_guard lock(status_mutex_);
    status_.view = view_;
  }
  schedules_digest_ = digest;
  schedule_count_ = bs.size();
  write_record(gen, 0);
}

balance_member balancer::own_record() const {
  balance_member m;
  m.node_id = options_.node_id;
  m.contender_id = contender_id_;
  m.tags = options_.tags;
  m.drain = drain_;
  m.drained = drain_ && leads_ == 0 && !startup_;
  m.leaving = leaving_;
  m.leads = leads_;
  m.assigned = assigned_;
  m.schedule_count = schedule_count_;
  m.view = startup_ ? std::string() : view_;
  m.schedules = schedules_digest_;
  m.written_at = std::chrono::system_clock::now();
  return m;
}

void balancer::write_record(std::uint64_t gen, int attempt) {
  if (gen != gen_ || stopped_) return;
  const bool leaving = leaving_;
  records_.async_write_controls(
      balance_record_name(options_.node_id), version_, format_member(own_record()),
      [self = shared_from_this(), gen, attempt, leaving](std::error_code ec, controls_record rec) {
        boost::asio::post(self->strand_, [self, gen, attempt, leaving, ec, rec = std::move(rec)] {
          if (!ec && leaving) self->left_written_ = true;
          self->record_written(gen, attempt, ec, rec);
        });
      });
}

void balancer::record_written(std::uint64_t gen, int attempt, std::error_code ec,
                              const controls_record& rec) {
  if (gen != gen_ || stopped_) return;
  if (!ec) {
    version_ = rec.version;
    last_write_ok_ = std::chrono::steady_clock::now();
    first_write_ = false;
    if (error_logged_)
      log({.event = "balance.recovered"}).info("membership records are written again");
    error_logged_ = false;
    return apply(gen);
  }
  if (ec == make_error_code(errc::conflict)) {
    // Someone else wrote our record: a tool (a drain request), the process this one replaced
    // (same node id, restarted), or another live process with the same node id.
    auto theirs = parse_member(rec.bytes);
    if (theirs && theirs->contender_id == contender_id_) {
      if (theirs->drain != drain_) {
        drain_ = theirs->drain;
        if (drain_)
          log({.event = "node.drain_requested"})
              .info("node '{}' was asked to drain: handing its schedules to the others",
                    options_.node_id);
        else
          log({.event = "node.drain_cancelled"})
              .info("node '{}' was asked to stop draining: taking a share again", options_.node_id);
      }
    } else if (theirs && first_write_) {
      log({.event = "balance.record_taken_over"})
          .info("node '{}': taking over the membership record of '{}' (a restart)",
                options_.node_id, theirs->contender_id);
    } else if (theirs && !first_write_) {
      log({.event = "balance.duplicate_node"})
          .error("node id '{}' is also used by contender '{}': give each node its own node.id",
                 options_.node_id, theirs->contender_id);
    }
    version_ = rec.version;
    if (attempt < 2) return write_record(gen, attempt + 1);
    return apply(gen);
  }
  note_error("writing this node's membership record", ec);
  apply(gen);
}

void balancer::apply(std::uint64_t gen) {
  if (gen != gen_ || stopped_) return;
  const auto now = std::chrono::steady_clock::now();
  auto list = schedules_();
  if (leaving_) {
    wanted_.assign(list.size(), 0);
    wanted_list_ = std::move(list);
    return finish(gen);
  }
  // Start contending once this node has been in the registry for a heartbeat, so that nodes
  // that start together see each other before they choose.
  if (startup_ && !self_alive_ &&
      now - started_at_ > options_.member_timeout + options_.heartbeat) {
    // The membership records cannot be written: contend first come rather than not at all.
    startup_ = false;
    log({.event = "balance.unavailable"})
        .warn(
            "node '{}': membership records could not be written for {}; contending for every "
            "schedule it may run (first come) until they can",
            options_.node_id, format_duration(options_.member_timeout));
  }
  if (startup_ && registered_ticks_ >= 1 && self_alive_) {
    startup_ = false;
    log({.event = "balance.ready"})
        .info("node '{}' (tags [{}]) contends for {} of {} schedule(s)", options_.node_id,
              join(options_.tags), assigned_, list.size());
  }
  // What each schedule was told before: by index while the list is the same, else looked up
  // (-1: never told).
  std::vector<char> told(list.size(), -1);
  if (list == wanted_list_) {
    for (std::size_t i = 0; i < list.size(); ++i) told[i] = wanted_[i];
  } else {
    std::map<std::shared_ptr<balanced_schedule>, char> before;
    for (std::size_t i = 0; i < wanted_list_.size(); ++i) before[wanted_list_[i]] = wanted_[i];
    for (std::size_t i = 0; i < list.size(); ++i)
      if (auto b = before.find(list[i]); b != before.end()) told[i] = b->second;
  }
  wanted_.assign(list.size(), 0);
  leads_ = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto& s = list[i];
    bool want = false;
    if (startup_)
      want = false;
    else if (!self_alive_ || mixed_)
      want = has_tags(options_.tags, s->required_tags());  // first come
    else
      want = assigned_node(list, i) == options_.node_id;
    if (told[i] != static_cast<char>(want)) s->set_wanted(want);
    wanted_[i] = want;
    if (s->is_owner()) ++leads_;
  }
  wanted_list_ = list;

  // Handoffs: only on a settled view both sides share.
  if (!startup_ && self_alive_ && !mixed_ && now - view_since_ >= options_.settle) {
    std::vector<member_share> others;
    for (const auto& [id, m] : members_)
      if (alive_[id] && m.view == view_ && !m.drain) others.push_back({m.leads, m.assigned});
    auto quota = handoff_quota(leads_, assigned_, drain_, others);
    if (quota > 0 && !list.empty()) {
      const std::size_t n = list.size();
      for (std::size_t k = 0; k < n && quota > 0; ++k) {
        const auto& s = list[(rotate_ + k) % n];
        if (!s->is_owner()) continue;
        const auto& assigned = assigned_node(list, (rotate_ + k) % n);
        if (assigned.empty() || assigned == options_.node_id) continue;
        auto m = members_.find(assigned);
        if (m == members_.end() || !alive_[assigned] || m->second.view != view_) continue;
        if (!bucket_.take(now)) break;
        --quota;
        const auto to = assigned;
        s->try_handoff([self = shared_from_this(), name = s->name(), to](bool done) {
          boost::asio::post(self->strand_, [self, name, to, done] {
            if (!done) return self->bucket_.refund();
            std::lock_guard lock(self->status_mutex_);
            ++self->status_.handoffs;
            log({.schedule = name, .event = "balance.handoff"}).info("handed off to node '{}'", to);
          });
        });
      }
      rotate_ = (rotate_ + 1) % n;
    }
  }
  if (drain_ && leads_ == 0 && !startup_) {
    if (!drained_logged_)
      log({.event = "node.drained"})
          .info("node '{}' is drained: it leads no schedule", options_.node_id);
    drained_logged_ = true;
  } else if (!drain_) {
    drained_logged_ = false;
  }
  finish(gen);
}

const std::string& balancer::assigned_node(
    const std::vector<std::shared_ptr<balanced_schedule>>& list, std::size_t index) {
  static const std::string none;
  if (owners_.size() != list_.size()) return none;
  // The list compute() assigned (the usual case): by index.
  if (index < list_.size() && list[index] == list_[index]) return owners_[index];
  // The list changed since (a schedule added or removed): by name.
  if (list_index_.empty())
    for (std::size_t i = 0; i < list_.size(); ++i) list_index_.emplace(list_[i]->name(), i);
  auto it = list_index_.find(list[index]->name());
  return it == list_index_.end() ? none : owners_[it->second];
}

void balancer::finish(std::uint64_t gen) {
  if (gen != gen_) return;
  busy_ = false;
  publish_status();
  if (tick_again_) {
    tick_again_ = false;
    timer_.cancel();
    tick();
  }
}

void balancer::publish_status() {
  std::lock_guard lock(status_mutex_);
  status_.draining = drain_;
  status_.drained = drain_ && leads_ == 0 && !startup_;
  status_.view_ready = !startup_;
  status_.mixed_configs = mixed_;
  status_.view = view_;
  status_.assigned = assigned_;
  status_.leads = leads_;
  status_.members.clear();
  std::size_t alive = self_alive_ ? 1 : 0;
  auto self = own_record();
  self.alive = self_alive_;
  self.version = version_;
  bool self_listed = false;
  for (const auto& [id, m] : members_) {
    if (!self_listed && id > options_.node_id) {
      status_.members.push_back(self);
      self_listed = true;
    }
    auto copy = m;
    copy.alive = alive_.count(id) != 0 && alive_.at(id);
    if (copy.alive) ++alive;
    status_.members.push_back(std::move(copy));
  }
  if (!self_listed) status_.members.push_back(self);
  status_.alive = alive;
}

void balancer::note_error(const char* what, std::error_code ec) {
  {
    std::lock_guard lock(status_mutex_);
    ++status_.record_errors;
  }
  if (!error_logged_)
    log({.event = "balance.record_failed"})
        .warn("{} failed: {} (retrying every heartbeat)", what, ec.message());
  error_logged_ = true;
}

void balancer::leave(milliseconds timeout) noexcept {
  try {
    boost::asio::post(strand_, [self = shared_from_this()] {
      if (self->stopped_ || self->leaving_) return;
      self->leaving_ = true;
      log({.event = "node.leaving"})
          .info("node '{}' is leaving the cluster's membership", self->options_.node_id);
      if (self->busy_)
        self->tick_again_ = true;
      else {
        self->timer_.cancel();
        self->tick();
      }
    });
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!left_written_.load() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(milliseconds{10});
  } catch (...) {
  }
}

void balancer::await_handover(std::chrono::steady_clock::time_point deadline) noexcept {
  try {
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard lock(status_mutex_);
        bool all = true;
        for (const auto& m : status_.members)
          if (m.node_id != options_.node_id && m.alive && m.view != status_.view) all = false;
        if (all && left_written_.load()) return;
      }
      std::this_thread::sleep_for(milliseconds{20});
    }
  } catch (...) {
  }
}

void balancer::stop() noexcept {
  try {
    auto done = std::make_shared<std::atomic<bool>>(false);
    boost::asio::post(strand_, [self = shared_from_this(), done] {
      self->stopped_ = true;
      self->timer_.cancel();
      if (self->registry_watch_ != 0) self->records_.unwatch_controls(self->registry_watch_);
      self->registry_watch_ = 0;
      done->store(true);
    });
    // The schedules callback belongs to the scheduler: no tick may call it after this returns.
    if (strand_.running_in_this_thread()) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{5};
    while (!done->load() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(milliseconds{1});
  } catch (...) {
  }
}

balance_status balancer::status() const {
  std::lock_guard lock(status_mutex_);
  return status_;
}

}  // namespace baton::detail
