#include "sentinel.hpp"

#include <boost/asio/post.hpp>
#include <charconv>

#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/errc.hpp"

namespace baton::backends::redis::detail {
namespace {

constexpr std::string_view switch_channel = "+switch-master";
// How long an address from +switch-master is tried without asking the sentinels.
constexpr std::chrono::seconds prefer_for{5};

bool parse_port(std::string_view text, int& port) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  return ec == std::errc{} && end == text.data() + text.size() && port > 0 && port < 65536;
}

std::string address(const std::string& host, int port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

connection::options sentinel_options(const settings& config, const endpoint& sentinel,
                                     std::string role) {
  connection::options o;
  o.server = sentinel;
  o.role = std::move(role);
  o.connect_timeout = config.connect_timeout;
  o.command_timeout = config.command_timeout;
  return o;
}

}  // namespace

struct sentinel_resolver::query {
  resolve_handler done;
  std::string reasons;  // why each sentinel asked so far gave no address
};

sentinel_resolver::sentinel_resolver(connection::strand_type strand, const settings& config)
    : strand_(strand), settings_(config) {}

std::chrono::milliseconds sentinel_resolver::timeout() const {
  const auto per_sentinel = settings_.connect_timeout + settings_.command_timeout;
  return per_sentinel * static_cast<long>(settings_.sentinel->sentinels.size()) +
         std::chrono::milliseconds{500};
}

void sentinel_resolver::prefer(const std::string& host, int port) {
  endpoint ep;
  ep.host = host;
  ep.port = port;
  ep.display = address(host, port);
  preferred_ = std::move(ep);
  preferred_until_ = std::chrono::steady_clock::now() + prefer_for;
}

void sentinel_resolver::stop() noexcept {
  stopped_ = true;
  for (auto& conn : asking_) conn->stop();
  asking_.clear();
}

void sentinel_resolver::resolve(resolve_handler done) {
  auto q = std::make_shared<query>();
  q->done = std::move(done);
  if (preferred_ && std::chrono::steady_clock::now() < preferred_until_) {
    // Checked with ROLE by the connection like any other answer.
    boost::asio::post(strand_, [q, ep = *preferred_] { q->done({}, ep, {}); });
    return;
  }
  preferred_.reset();
  boost::asio::post(strand_, [self = shared_from_this(), q] { self->ask(q, 0); });
}

void sentinel_resolver::ask(std::shared_ptr<query> q, std::size_t index) {
  if (stopped_) return;
  const auto& sentinels = settings_.sentinel->sentinels;
  const auto& master = settings_.sentinel->master;
  if (index >= sentinels.size()) {
    q->done(make_error_code(errc::connection_lost), {},
            "no sentinel named master '" + master + "' (" + q->reasons + ")");
    return;
  }
  const auto& sentinel = sentinels[index];
  auto o = sentinel_options(settings_, sentinel, "sentinel query");
  o.quiet = true;
  auto asking = std::make_shared<connection>(strand_, std::move(o));
  asking_.push_back(asking);
  asking->start();
  asking->exec({"SENTINEL", "get-master-addr-by-name", master},
               [self = shared_from_this(), q, index, conn = asking](std::error_code ec, reply r) {
                 // Closed after this handler returns, never inside hiredis' callback.
                 boost::asio::post(self->strand_, [self, conn] {
                   conn->stop();
                   std::erase(self->asking_, conn);
                 });
                 if (self->stopped_) return;
                 const auto& who = self->settings_.sentinel->sentinels[index].display;
                 auto skip = [&](const std::string& why) {
                   q->reasons += (q->reasons.empty() ? "" : "; ") + who + ": " + why;
                   boost::asio::post(self->strand_, [self, q, index] { self->ask(q, index + 1); });
                 };
                 if (ec) return skip(ec.message());
                 if (r.is_error()) return skip(r.str);
                 if (r.type == reply::kind::nil)
                   return skip("does not know master '" + self->settings_.sentinel->master + "'");
                 int port = 0;
                 if (r.type != reply::kind::array || r.elements.size() != 2 ||
                     r.elements[0].type != reply::kind::string ||
                     r.elements[1].type != reply::kind::string || r.elements[0].str.empty() ||
                     !parse_port(r.elements[1].str, port))
                   return skip("unexpected answer " + r.describe());
                 endpoint ep;
                 ep.host = r.elements[0].str;
                 ep.port = port;
                 ep.display = address(ep.host, port);
                 baton::detail::log({.event = "redis.master_resolved"})
                     .debug("redis sentinel {}: master '{}' is at {}", who,
                            self->settings_.sentinel->master, ep.display);
                 q->done({}, std::move(ep), {});
               });
}

std::shared_ptr<connection> make_switch_listener(
    connection::strand_type strand, const settings& config,
    std::function<void(const std::string&, int, const std::string&)> on_switch) {
  const auto& sentinels = config.sentinel->sentinels;
  auto o = sentinel_options(config, sentinels.front(), "sentinel events");
  o.server.display = "sentinel";
  // Each connect goes to the next sentinel: one that is down is left for the others.
  auto next = std::make_shared<std::size_t>(0);
  o.resolve = [strand, sentinels, next](resolve_handler done) {
    auto ep = sentinels[(*next)++ % sentinels.size()];
    boost::asio::post(strand, [ep, done = std::move(done)] { done({}, ep, {}); });
  };
  auto listener = std::make_shared<connection>(strand, std::move(o));
  std::weak_ptr<connection> weak = listener;
  const std::string master = config.sentinel->master;
  listener->set_on_ready([weak] {
    if (auto l = weak.lock()) l->subscribe(std::string(switch_channel));
  });
  listener->set_on_push([weak, master, on_switch = std::move(on_switch)](const reply& r) {
    // "message" "+switch-master" "<name> <old ip> <old port> <new ip> <new port>"
    if (r.type != reply::kind::array || r.elements.size() != 3 || r.elements[0].str != "message" ||
        r.elements[1].str != switch_channel)
      return;
    const auto& text = r.elements[2].str;
    std::vector<std::string> words;
    for (std::size_t at = 0; at <= text.size();) {
      auto space = text.find(' ', at);
      if (space == std::string::npos) space = text.size();
      words.push_back(text.substr(at, space - at));
      at = space + 1;
    }
    int port = 0;
    if (words.size() != 5 || words[0] != master || !parse_port(words[4], port)) return;
    auto l = weak.lock();
    on_switch(words[3], port, l ? l->server().display : std::string("sentinel"));
  });
  return listener;
}

}  // namespace baton::backends::redis::detail
