// History and controls on ZooKeeper.
//
// History: <base>/<name>@history (persistent) holds one persistent sequential node per entry,
// named "<fence>-<seq>" (the server appends a 10-digit seq from the folder's child version: it
// only grows, also over deletes), whose data is the entry's bytes (at most 64 KiB, far below the
// 1 MiB node limit). An append is one transaction: check(the owner's lock node) + create(entry),
// so a stale leader whose lock node is gone is rejected atomically. The owner's lock node is the
// lowest one whose data is the contender id and whose czxid is the fence; it stays the lowest as
// long as it exists, so its path is cached per mutex. The writer then lists the folder and
// deletes the oldest entries beyond `keep` before it answers.
//
// Controls: <base>/<name>@controls, data = the bytes, our version = the node's data version + 1
// (no node: version 0). Expected 0 creates the node, otherwise setData with version expected-1;
// ZNODEEXISTS / ZBADVERSION / ZNONODE answer errc::conflict with the record read afterwards.
// watch_controls keeps an exists-watch on the node (fires on create, change and delete), armed
// again after each event and after every (re)connection, which also calls the watcher (a change
// may have been missed while the session was being rebuilt), and calls it once more when the
// server has the new watch (another session's change may have landed just before it).
//
// Every completion comes on a client thread: it only posts onto runtime::io(), where the next
// step runs; nothing here blocks.
#include "records.hpp"

#include <algorithm>
#include <atomic>
#include <boost/asio/post.hpp>
#include <charconv>
#include <climits>
#include <map>
#include <mutex>
#include <optional>

#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/errc.hpp"

namespace baton::backends::zookeeper::detail {
namespace {

bool parse_u64(std::string_view text, std::uint64_t& value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return !text.empty() && ec == std::errc{} && end == text.data() + text.size();
}

// "<fence>-<n>" -> fence and seq = n + 1 (the server counts from 0; seq 0 means "not stored"
// in the contract); false for a node that is not an entry.
bool parse_entry_name(std::string_view node, std::uint64_t& fence, std::uint64_t& seq) {
  const auto dash = node.rfind('-');
  if (dash == std::string_view::npos) return false;
  if (!parse_u64(node.substr(0, dash), fence) || !parse_u64(node.substr(dash + 1), seq))
    return false;
  ++seq;
  return true;
}

struct entry_name {
  std::uint64_t seq = 0;
  std::uint64_t fence = 0;
  std::string node;
};

// The entries among `children`, oldest first.
std::vector<entry_name> sorted_entries(const std::vector<std::string>& children) {
  std::vector<entry_name> out;
  for (const auto& c : children) {
    entry_name e;
    if (parse_entry_name(c, e.fence, e.seq)) {
      e.node = c;
      out.push_back(std::move(e));
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.seq < b.seq; });
  return out;
}

class zk_records final : public record_store, public std::enable_shared_from_this<zk_records> {
 public:
  explicit zk_records(std::shared_ptr<session> s) : session_(std::move(s)) {}

  void start() {
    listener_ = std::make_shared<listener>(weak_from_this(), &session_->rt().io());
    session_->subscribe(listener_key(), listener_);
  }

  ~zk_records() override {
    session_->unsubscribe(listener_key());
    std::lock_guard lock(mutex_);
    for (auto& [handle, w] : watches_)
      if (w.token != 0) session_->watches().remove(w.token);
  }

  // ---- history ---------------------------------------------------------------------------------

  void async_append_history(const std::string& name, const std::string& owner_id,
                            std::uint64_t fence, std::string bytes, std::size_t keep,
                            append_handler handler) override {
    if (keep == 0 || keep > max_history_keep || bytes.size() > max_history_entry_bytes)
      return handler(make_error_code(errc::invalid_argument));
    auto op = std::make_shared<append_op>();
    op->name = name;
    op->owner_id = owner_id;
    op->fence = fence;
    op->bytes = std::move(bytes);
    op->keep = keep;
    op->handler = std::move(handler);
    op->dir = history_dir(session_->config(), name);
    std::string cached;
    {
      std::lock_guard lock(mutex_);
      if (auto it = owners_.find(name);
          it != owners_.end() && it->second.owner_id == owner_id && it->second.fence == fence)
        cached = it->second.path;
    }
    if (cached.empty())
      find_owner(op);
    else
      write_entry(op, cached);
  }

  void async_read_history(const std::string& name, std::size_t limit,
                          history_handler handler) override {
    if (limit == 0) return handler({}, {});
    const auto dir = history_dir(session_->config(), name);
    session_->get_children(0, dir,
                           resume(
                               [dir, limit, handler](zk_records& self, op_result r) {
                                 if (r.rc == ZNONODE) return handler({}, {});
                                 if (r.rc != ZOK)
                                   return handler(self.failed("read_history", dir, r.rc), {});
                                 auto entries = sorted_entries(r.children);
                                 std::reverse(entries.begin(), entries.end());
                                 if (entries.size() > limit) entries.resize(limit);
                                 self.read_entries(dir, std::move(entries), handler);
                               },
                               [handler] { handler(make_error_code(errc::stopped), {}); }));
  }

  // ---- controls --------------------------------------------------------------------------------

  void async_read_controls(const std::string& name, controls_handler handler) override {
    const auto node = controls_node(session_->config(), name);
    session_->get(0, node, false,
                  resume(
                      [node, handler](zk_records& self, op_result r) {
                        if (r.rc == ZNONODE) return handler({}, {});
                        if (r.rc != ZOK)
                          return handler(self.failed("read_controls", node, r.rc), {});
                        handler({},
                                controls_record{std::move(r.data),
                                                static_cast<std::uint64_t>(r.stat.version) + 1});
                      },
                      [handler] { handler(make_error_code(errc::stopped), {}); }));
  }

  void async_write_controls(const std::string& name, std::uint64_t expected, std::string bytes,
                            controls_handler handler) override {
    if (bytes.size() > max_controls_bytes)
      return handler(make_error_code(errc::invalid_argument), {});
    const auto node = controls_node(session_->config(), name);
    if (expected == 0) return create_controls(name, node, std::move(bytes), handler, true);
    if (expected - 1 > static_cast<std::uint64_t>(INT_MAX)) return conflict(name, handler);
    auto gone = [handler] { handler(make_error_code(errc::stopped), {}); };
    session_->set(
        0, node, bytes, static_cast<int>(expected - 1),
        resume(
            [name, node, bytes, handler](zk_records& self, op_result r) {
              if (r.rc == ZBADVERSION || r.rc == ZNONODE) return self.conflict(name, handler);
              if (r.rc != ZOK) return handler(self.failed("write_controls", node, r.rc), {});
              handler({}, controls_record{bytes, static_cast<std::uint64_t>(r.stat.version) + 1});
            },
            gone));
  }

  std::uint64_t watch_controls(const std::string& name, std::function<void()> changed) override {
    std::uint64_t handle = 0;
    {
      std::lock_guard lock(mutex_);
      handle = next_handle_++;
      watches_[handle] =
          controls_watch{controls_node(session_->config(), name), std::move(changed), 0};
    }
    arm(handle);
    return handle;
  }

  void unwatch_controls(std::uint64_t handle) noexcept override {
    std::lock_guard lock(mutex_);
    auto it = watches_.find(handle);
    if (it == watches_.end()) return;
    if (it->second.token != 0) session_->watches().remove(it->second.token);
    watches_.erase(it);
  }

 private:
  struct append_op {
    std::string name, owner_id, bytes, dir;
    std::uint64_t fence = 0;
    std::size_t keep = 0;
    append_handler handler;
    int attempts = 0;
  };
  struct owner_node {
    std::string owner_id;
    std::uint64_t fence = 0;
    std::string path;
  };
  struct controls_watch {
    std::string node;
    std::function<void()> changed;
    std::uint64_t token = 0;  // in the session's watch table
  };

  // Session events arrive on the session strand: only post.
  class listener final : public session_listener {
   public:
    listener(std::weak_ptr<zk_records> records, boost::asio::io_context* io)
        : records_(std::move(records)), io_(io) {}
    void on_session_event(const session_event& event) override {
      if (event.kind != session_event::connected) return;
      boost::asio::post(*io_, [records = records_] {
        if (auto self = records.lock()) self->rearm_all();
      });
    }

   private:
    std::weak_ptr<zk_records> records_;
    boost::asio::io_context* io_;
  };

  std::uint64_t listener_key() const noexcept { return reinterpret_cast<std::uintptr_t>(this); }

  // A completion that continues on an io thread while this store lives, else calls `gone`.
  template <class F, class G>
  op_handler resume(F f, G gone) {
    return [weak = weak_from_this(), io = &session_->rt().io(), f = std::move(f),
            gone = std::move(gone)](op_result r) mutable {
      boost::asio::post(*io, [weak, f, gone, r = std::move(r)]() mutable {
        if (auto self = weak.lock())
          f(*self, std::move(r));
        else
          gone();
      });
    };
  }

  std::error_code failed(const char* op, const std::string& path, int rc) {
    baton::detail::log().warn("zookeeper: {} at {}: {}", op, path, zerror(rc));
    return translate(rc);
  }

  // The owner's lock node: the lowest one, if it names owner_id and its czxid is the fence.
  void find_owner(const std::shared_ptr<append_op>& op) {
    const auto dir = session_->config().mutex_dir(op->name);
    auto gone = [op] { op->handler(make_error_code(errc::stopped)); };
    session_->get_children(
        0, dir,
        resume(
            [op, dir, gone](zk_records& self, op_result r) {
              if (r.rc == ZNONODE) return op->handler(make_error_code(errc::not_owner));
              if (r.rc != ZOK) return op->handler(self.failed("append_history", dir, r.rc));
              auto locks = sorted_locks(std::move(r.children));
              if (locks.empty()) return op->handler(make_error_code(errc::not_owner));
              const auto path = dir + "/" + locks.front();
              self.session_->get(
                  0, path, false,
                  self.resume(
                      [op, path](zk_records& self, op_result r) {
                        if (r.rc == ZNONODE && ++op->attempts < 3)
                          return self.find_owner(op);  // the owner left meanwhile: look again
                        if (r.rc == ZNONODE) return op->handler(make_error_code(errc::not_owner));
                        if (r.rc != ZOK)
                          return op->handler(self.failed("append_history", path, r.rc));
                        if (r.data != op->owner_id ||
                            static_cast<std::uint64_t>(r.stat.czxid) != op->fence)
                          return op->handler(make_error_code(errc::not_owner));
                        {
                          std::lock_guard lock(self.mutex_);
                          self.owners_[op->name] = owner_node{op->owner_id, op->fence, path};
                        }
                        self.write_entry(op, path);
                      },
                      gone));
            },
            gone));
  }

  void forget_owner(const std::string& name, const std::string& path) {
    std::lock_guard lock(mutex_);
    if (auto it = owners_.find(name); it != owners_.end() && it->second.path == path)
      owners_.erase(it);
  }

  void write_entry(const std::shared_ptr<append_op>& op, const std::string& owner_path) {
    auto gone = [op] { op->handler(make_error_code(errc::stopped)); };
    session_->ensure_path(
        0, op->dir,
        resume(
            [op, owner_path, gone](zk_records& self, op_result r) {
              if (r.rc != ZOK) return op->handler(self.failed("append_history", op->dir, r.rc));
              self.session_->check_and_create(
                  0, owner_path, op->dir + "/" + std::to_string(op->fence) + "-", op->bytes,
                  ZOO_PERSISTENT_SEQUENTIAL,
                  self.resume(
                      [op, owner_path](zk_records& self, op_result r) {
                        if (r.rc == ZOK) return self.prune(op);
                        if (r.failed_op == 0 && r.rc == ZNONODE) {
                          // The owner's lock node is gone: that ownership has ended.
                          self.forget_owner(op->name, owner_path);
                          return op->handler(make_error_code(errc::not_owner));
                        }
                        if (r.failed_op == 1 && r.rc == ZNONODE && ++op->attempts < 3) {
                          self.session_->forget_dir(op->dir);  // deleted behind our back
                          return self.write_entry(op, owner_path);
                        }
                        op->handler(self.failed("append_history", op->dir, r.rc));
                      },
                      gone));
            },
            gone));
  }

  // Deletes the oldest entries beyond keep, then answers (the entry is written either way).
  void prune(const std::shared_ptr<append_op>& op) {
    session_->get_children(
        0, op->dir,
        resume(
            [op](zk_records& self, op_result r) {
              if (r.rc != ZOK) {
                baton::detail::log().debug("zookeeper: pruning {}: {}", op->dir, zerror(r.rc));
                return op->handler({});
              }
              auto entries = sorted_entries(r.children);
              if (entries.size() <= op->keep) return op->handler({});
              const auto excess = entries.size() - op->keep;
              auto left = std::make_shared<std::atomic<std::size_t>>(excess);
              for (std::size_t i = 0; i < excess; ++i) {
                const auto path = op->dir + "/" + entries[i].node;
                // Another writer may have pruned it already (ZNONODE): fine.
                self.session_->remove(0, path, [op, left, path](op_result r) {
                  if (r.rc != ZOK && r.rc != ZNONODE)
                    baton::detail::log().debug("zookeeper: pruning {}: {}", path, zerror(r.rc));
                  if (--*left == 0) op->handler({});
                });
              }
            },
            [op] { op->handler({}); }));
  }

  // Reads the entries (newest first) concurrently; an entry pruned meanwhile is left out.
  void read_entries(const std::string& dir, std::vector<entry_name> entries,
                    const history_handler& handler) {
    if (entries.empty()) return handler({}, {});
    struct read_state {
      std::mutex mutex;
      std::vector<entry_name> names;
      std::vector<std::optional<std::string>> data;
      std::size_t left = 0;
      int error = ZOK;
    };
    auto state = std::make_shared<read_state>();
    state->names = std::move(entries);
    state->data.resize(state->names.size());
    state->left = state->names.size();
    for (std::size_t i = 0; i < state->names.size(); ++i) {
      const auto path = dir + "/" + state->names[i].node;
      session_->get(0, path, false, [state, i, handler, path](op_result r) {
        bool last = false;
        {
          std::lock_guard lock(state->mutex);
          if (r.rc == ZOK)
            state->data[i] = std::move(r.data);
          else if (r.rc != ZNONODE && state->error == ZOK)
            state->error = r.rc;
          last = --state->left == 0;
        }
        if (!last) return;
        if (state->error != ZOK) {
          baton::detail::log().warn("zookeeper: read_history at {}: {}", path,
                                    zerror(state->error));
          return handler(translate(state->error), {});
        }
        std::vector<history_entry> out;
        for (std::size_t j = 0; j < state->names.size(); ++j)
          if (state->data[j])
            out.push_back({state->names[j].seq, state->names[j].fence, std::move(*state->data[j])});
        handler({}, std::move(out));
      });
    }
  }

  void create_controls(const std::string& name, const std::string& node, std::string bytes,
                       const controls_handler& handler, bool first_try) {
    session_->create(0, node, bytes, ZOO_PERSISTENT,
                     resume(
                         [name, node, bytes, handler, first_try](zk_records& self, op_result r) {
                           if (r.rc == ZOK) return handler({}, controls_record{bytes, 1});
                           if (r.rc == ZNODEEXISTS) return self.conflict(name, handler);
                           if (r.rc == ZNONODE && first_try) {
                             // The root folder does not exist yet.
                             const auto base = self.session_->config().base();
                             return self.session_->ensure_path(
                                 0, base,
                                 self.resume(
                                     [name, node, bytes, handler](zk_records& self, op_result r) {
                                       if (r.rc != ZOK)
                                         return handler(self.failed("write_controls", node, r.rc),
                                                        {});
                                       self.create_controls(name, node, bytes, handler, false);
                                     },
                                     [handler] { handler(make_error_code(errc::stopped), {}); }));
                           }
                           handler(self.failed("write_controls", node, r.rc), {});
                         },
                         [handler] { handler(make_error_code(errc::stopped), {}); }));
  }

  // A lost compare-and-set: errc::conflict with the record there now.
  void conflict(const std::string& name, const controls_handler& handler) {
    async_read_controls(name, [handler](std::error_code ec, controls_record now) {
      handler(ec ? ec : make_error_code(errc::conflict), std::move(now));
    });
  }

  // (Re)arms the exists-watch of one controls watch on the current session.
  void arm(std::uint64_t handle) {
    std::string node;
    const auto gen = session_->generation();
    {
      std::lock_guard lock(mutex_);
      auto it = watches_.find(handle);
      if (it == watches_.end()) return;
      if (it->second.token != 0) session_->watches().remove(it->second.token);
      node = it->second.node;
      it->second.token = session_->watches().add(
          gen, node, [weak = weak_from_this(), io = &session_->rt().io(), handle] {
            boost::asio::post(*io, [weak, handle] {
              if (auto self = weak.lock()) self->fired(handle);
            });
          });
    }
    // A failure (no connection) leaves no watch on the server; the next connect re-arms. Once
    // the server has the watch, the watcher is called once more: a change another session made
    // between the event and this request's arrival fired no watch (ZooKeeper orders requests
    // per session only), and a read after this call sees it.
    session_->exists_watch(
        gen, node, [node, weak = weak_from_this(), io = &session_->rt().io(), handle](op_result r) {
          if (!server_answered(r.rc)) {
            baton::detail::log().debug("zookeeper: watching {}: {}", node, zerror(r.rc));
            return;
          }
          boost::asio::post(*io, [weak, handle] {
            if (auto self = weak.lock()) self->armed(handle);
          });
        });
  }

  void armed(std::uint64_t handle) {
    std::function<void()> changed;
    {
      std::lock_guard lock(mutex_);
      auto it = watches_.find(handle);
      if (it == watches_.end()) return;
      changed = it->second.changed;
    }
    changed();
  }

  void fired(std::uint64_t handle) {
    std::function<void()> changed;
    {
      std::lock_guard lock(mutex_);
      auto it = watches_.find(handle);
      if (it == watches_.end()) return;
      it->second.token = 0;  // one-shot: fired and gone from the table
      changed = it->second.changed;
    }
    arm(handle);
    changed();
  }

  // After a (re)connection: a new session has none of our watches, and a change may have been
  // missed meanwhile.
  void rearm_all() {
    std::vector<std::pair<std::uint64_t, std::function<void()>>> all;
    {
      std::lock_guard lock(mutex_);
      for (auto& [handle, w] : watches_) all.emplace_back(handle, w.changed);
    }
    for (auto& [handle, changed] : all) {
      arm(handle);
      changed();
    }
  }

  std::shared_ptr<session> session_;
  std::shared_ptr<listener> listener_;
  std::mutex mutex_;  // guards the maps below
  std::map<std::string, owner_node> owners_;
  std::map<std::uint64_t, controls_watch> watches_;
  std::uint64_t next_handle_ = 1;
};

}  // namespace

std::string history_dir(const settings& s, const std::string& name) {
  return s.mutex_dir(name) + "@history";
}

std::string controls_node(const settings& s, const std::string& name) {
  return s.mutex_dir(name) + "@controls";
}

std::shared_ptr<record_store> make_records(std::shared_ptr<session> s) {
  auto records = std::make_shared<zk_records>(std::move(s));
  records->start();
  return records;
}

}  // namespace baton::backends::zookeeper::detail
