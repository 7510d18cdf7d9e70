// make_backend() for ZooKeeper, the blocking status queries, and the test hooks of detail.hpp.
#include "baton/backends/zookeeper/zookeeper_backend.hpp"

#include <future>
#include <stdexcept>

#include "baton/backends/zookeeper/detail.hpp"
#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/duration.hpp"
#include "baton/mutex/errc.hpp"
#include "baton/mutex/names.hpp"
#include "contend.hpp"
#include "records.hpp"
#include "session.hpp"

namespace baton::backends::zookeeper {
namespace {

using std::chrono::milliseconds;

class zk_backend final : public mutex_backend {
 public:
  explicit zk_backend(std::shared_ptr<detail::session> s)
      : session_(std::move(s)), records_(detail::make_records(session_)) {}

  std::string_view type() const noexcept override { return "zookeeper"; }

  // The session timeout governs the lease here (detail::lease_defaults).
  contend_options default_options() const override {
    return detail::lease_defaults(session_->config());
  }

  std::shared_ptr<contend_service> make_contend_service(const std::string& name,
                                                        std::shared_ptr<mutex_contender> contender,
                                                        const contend_options& options,
                                                        std::string contender_id) override {
    validate_mutex_name(name);
    return detail::make_contend_service(session_, name, std::move(contender_id),
                                        std::move(contender), options);
  }

  mutex_owner read_owner(const std::string& name) override {
    validate_mutex_name(name);
    const auto dir = session_->config().mutex_dir(name);
    const auto what = "read_owner('" + name + "')";
    for (int attempt = 0; attempt < 5; ++attempt) {
      auto list =
          call(what, [&](detail::op_handler h) { session_->get_children(0, dir, std::move(h)); });
      if (list.rc == ZNONODE) return {};
      check(list.rc, what);
      auto locks = detail::sorted_locks(std::move(list.children));
      if (locks.empty()) return {};
      auto node = call(what, [&](detail::op_handler h) {
        session_->get(0, dir + "/" + locks.front(), false, std::move(h));
      });
      if (node.rc == ZNONODE) continue;  // the owner left meanwhile: look again
      check(node.rc, what);
      return detail::owner_record(node.data, node.stat, session_->session_timeout());
    }
    throw std::system_error(make_error_code(errc::backend_error),
                            "zookeeper: " + what + ": the owner kept changing");
  }

  std::string read_state(const std::string& name) override {
    validate_mutex_name(name);
    const auto what = "read_state('" + name + "')";
    auto r = call(what, [&](detail::op_handler h) {
      session_->get(0, session_->config().mutex_dir(name), false, std::move(h));
    });
    if (r.rc == ZNONODE) return {};
    check(r.rc, what);
    return r.data;
  }

  // The lock nodes after the owner's, in order: their data is the contender id.
  std::optional<std::vector<std::string>> read_waiters(const std::string& name) override {
    validate_mutex_name(name);
    const auto dir = session_->config().mutex_dir(name);
    const auto what = "read_waiters('" + name + "')";
    auto list =
        call(what, [&](detail::op_handler h) { session_->get_children(0, dir, std::move(h)); });
    if (list.rc == ZNONODE) return std::vector<std::string>{};
    check(list.rc, what);
    auto locks = detail::sorted_locks(std::move(list.children));
    std::vector<std::string> ids;
    for (std::size_t i = 1; i < locks.size(); ++i) {
      auto node = call(what, [&](detail::op_handler h) {
        session_->get(0, dir + "/" + locks[i], false, std::move(h));
      });
      if (node.rc == ZNONODE) continue;  // it left meanwhile
      check(node.rc, what);
      ids.push_back(std::move(node.data));
    }
    return ids;
  }

  record_store& records() override { return *records_; }

  detail::session& session() noexcept { return *session_; }

 private:
  // One request, waited for a bounded time. The completion does not need an io thread.
  detail::op_result call(const std::string& what,
                         const std::function<void(detail::op_handler)>& start) {
    const auto& cfg = session_->config();
    if (!session_->connected() && !session_->wait_connected(cfg.session_timeout))
      throw std::system_error(make_error_code(errc::connection_lost),
                              "zookeeper: " + what + ": not connected to " + cfg.hosts);
    auto promise = std::make_shared<std::promise<detail::op_result>>();
    auto future = promise->get_future();
    start([promise](detail::op_result r) { promise->set_value(std::move(r)); });
    if (future.wait_for(2 * session_->session_timeout() + milliseconds{1'000}) !=
        std::future_status::ready)
      throw std::system_error(make_error_code(errc::timeout),
                              "zookeeper: " + what + ": no answer from " + cfg.hosts);
    return future.get();
  }

  void check(int rc, const std::string& what) {
    if (rc == ZOK) return;
    throw std::system_error(
        detail::translate(rc),
        "zookeeper: " + what + " at " + session_->config().hosts + ": " + zerror(rc));
  }

  std::shared_ptr<detail::session> session_;
  std::shared_ptr<record_store> records_;
};

zk_backend& as_zookeeper(mutex_backend& backend) {
  auto* zk = dynamic_cast<zk_backend*>(&backend);
  if (zk == nullptr)
    throw std::invalid_argument("not a zookeeper backend: '" + std::string(backend.type()) + "'");
  return *zk;
}

}  // namespace

std::shared_ptr<mutex_backend> make_backend(const backend_config& config, runtime& rt) {
  auto settings = detail::parse_settings(config);
  auto session = detail::session::create(settings, rt);
  if (!rt.on_io_thread()) {
    const auto wait = std::min<milliseconds>(settings.session_timeout, milliseconds{10'000});
    if (!session->wait_connected(wait))
      baton::detail::log().warn(
          "zookeeper: not connected to {} after {} ms; contenders keep trying and report "
          "connection_lost meanwhile",
          settings.hosts, wait.count());
  }
  return std::make_shared<zk_backend>(std::move(session));
}

const backend_descriptor& descriptor() {
  static const backend_descriptor d = [] {
    const detail::settings defaults;
    backend_descriptor d;
    d.type = "zookeeper";
    d.doc =
        "ZooKeeper: ephemeral sequential nodes, predecessor watches; lease from session_timeout";
    d.params = {
        {"hosts", param_kind::text, true, "", false,
         "host:port[,host:port...][/chroot] (port 2181 when omitted)"},
        {"session_timeout", param_kind::duration, false, format_duration(defaults.session_timeout),
         false,
         "requested session timeout, 100ms..1h; the default lease is ttl = a third of it, "
         "transition = the rest"},
        {"root", param_kind::text, false, "/baton", false,
         "the folder of the mutexes (below the chroot)"},
        {"username", param_kind::text, false, "", false,
         "digest ACL user (needs password; no ':')"},
        {"password", param_kind::text, false, "", true, "digest ACL password (needs username)"},
    };
    d.default_lease = [](const backend_config& config) {
      return detail::lease_defaults(detail::parse_settings(config));
    };
    d.make = [](const backend_config& config, runtime& rt) { return make_backend(config, rt); };
    return d;
  }();
  return d;
}

namespace detail {

stats get_stats(mutex_backend& backend) {
  auto& c = as_zookeeper(backend).session().counters();
  stats s;
  s.sessions = c.sessions;
  s.local_expiries = c.local_expiries;
  s.disconnects = c.disconnects;
  s.watch_events = c.watch_events;
  s.nodes_created = c.nodes_created;
  s.nodes_adopted = c.nodes_adopted;
  s.ghosts_deleted = c.ghosts_deleted;
  s.heartbeats = c.heartbeats;
  s.heartbeat_events = c.heartbeat_events;
  s.lapses = c.lapses;
  s.max_in_flight = max_requests_in_flight;
  s.peak_in_flight = c.peak_in_flight;
  s.peak_waiting = c.peak_waiting;
  return s;
}

void inject_lost_create_replies(mutex_backend& backend, unsigned count) {
  as_zookeeper(backend).session().counters().lost_create_replies = count;
}

void inject_unproven_answers(mutex_backend& backend, bool on) {
  as_zookeeper(backend).session().counters().unproven_answers = on;
}

std::int64_t session_id(mutex_backend& backend) {
  auto& s = as_zookeeper(backend).session();
  return s.client_id(s.generation());
}

bool expire_session(mutex_backend& backend, std::chrono::milliseconds timeout) {
  return as_zookeeper(backend).session().expire_for_test(timeout);
}

}  // namespace detail
}  // namespace baton::backends::zookeeper
