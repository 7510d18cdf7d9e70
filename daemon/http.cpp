#include "http.hpp"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/metrics.hpp"
#include "metrics_text.hpp"

namespace baton::daemon {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using boost::asio::ip::tcp;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// How long /healthz waits for the runtime's io threads to run its probe.
constexpr milliseconds health_wait{1000};
// A readiness probe younger than this is answered from the cache.
constexpr milliseconds ready_fresh{1000};
// How long /readyz waits for a new probe before it answers 503.
constexpr milliseconds ready_wait{2000};
// How often a waiting request checks for its answer.
constexpr milliseconds poll_interval{5};
// How long the server waits before accepting again after accept() failed (out of descriptors).
constexpr milliseconds accept_retry{100};

std::string json_body(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// the server

class http_server::impl {
 public:
  impl(http_handler handler, limits l) : handler_(std::move(handler)), limits_(l) {}

  void accept();
  void stop() noexcept;

  http_handler handler_;
  limits limits_;
  // Touched on the server's thread only (and by stop() once that thread has ended).
  std::size_t active_ = 0;  // connections open
  bool paused_ = false;     // accept() waits for a connection to end
  bool stopping_ = false;
  tcp::endpoint endpoint_;  // set before the thread starts
  // Destroyed after the thread (joined) and before the fields above: sessions still queued in
  // it are destroyed with it and update active_ on the way.
  boost::asio::io_context io_{1};
  tcp::acceptor acceptor_{io_};
  boost::asio::steady_timer retry_{io_};
  std::thread thread_;
};

namespace {

// One connection: read a request, answer it, repeat while keep-alive.
class session : public std::enable_shared_from_this<session> {
 public:
  session(tcp::socket socket, http_server::impl& owner)
      : stream_(std::move(socket)),
        owner_(owner),
        buffer_(owner.limits_.header_bytes + owner.limits_.body_bytes) {}

  ~session() {
    --owner_.active_;
    if (owner_.paused_ && !owner_.stopping_) {
      owner_.paused_ = false;
      owner_.accept();
    }
  }

  void start() {
    beast::error_code ec;
    const auto remote = stream_.socket().remote_endpoint(ec);
    if (!ec) {
      peer_ip_ = remote.address().to_string();
      peer_ = (remote.address().is_v6() ? "[" + peer_ip_ + "]" : peer_ip_) + ":" +
              std::to_string(remote.port());
    } else {
      peer_ip_ = peer_ = "unknown";
    }
    read();
  }

 private:
  void read() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(owner_.limits_.header_bytes));
    parser_->body_limit(owner_.limits_.body_bytes);
    stream_.expires_after(owner_.limits_.io_timeout);
    bhttp::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec) {
      // A malformed or oversized request gets an answer; a closed, reset or idle connection
      // (the timeout) just ends.
      if (ec == bhttp::error::header_limit)
        return answer({431, "text/plain; charset=utf-8", "request header fields too large\n"},
                      false, 11, false);
      if (ec == bhttp::error::body_limit)
        return answer({413, "text/plain; charset=utf-8", "request body too large\n"}, false, 11,
                      false);
      if (&ec.category() == &bhttp::make_error_code(bhttp::error::bad_target).category() &&
          ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message)
        return answer({400, "text/plain; charset=utf-8", "bad request\n"}, false, 11, false);
      return close();
    }
    const auto& req = parser_->get();
    const unsigned version = req.version();
    const bool keep_alive = req.keep_alive();
    const bool head = req.method() == bhttp::verb::head;
    http_request request;
    request.method = std::string(req.method_string());
    request.path = std::string(req.target());
    if (auto q = request.path.find('?'); q != std::string::npos) {
      request.query = request.path.substr(q + 1);
      request.path.resize(q);
    }
    if (auto it = req.find(bhttp::field::authorization); it != req.end())
      request.authorization = std::string(it->value());
    if (auto it = req.find(bhttp::field::host); it != req.end())
      request.host = std::string(it->value());
    request.body = req.body();
    request.peer = peer_;
    request.peer_ip = peer_ip_;
    // Called on the server's thread, or from another thread (the console's pool): then the
    // answer is posted there. The copies of `respond` hold the session only until the first call
    // takes it: a copy destroyed later on another thread must not end the session there (its
    // destructor touches the server's state).
    auto done = std::make_shared<std::atomic<bool>>(false);
    auto holder = std::make_shared<std::shared_ptr<session>>(shared_from_this());
    auto respond = [holder, done, head, version, keep_alive](http_reply reply) {
      if (done->exchange(true)) return;
      auto self = std::move(*holder);
      auto& io = self->owner_.io_;
      if (io.get_executor().running_in_this_thread())
        return self->answer(std::move(reply), head, version, keep_alive);
      boost::asio::post(io, [self = std::move(self), reply = std::move(reply), head, version,
                             keep_alive]() mutable {
        self->answer(std::move(reply), head, version, keep_alive);
      });
    };
    try {
      owner_.handler_(request, owner_.io_, respond);
    } catch (const std::exception& e) {
      detail::log({.event = "http.request_failed"})
          .warn("http: {} {}: {}", request.method, request.path, e.what());
      respond({500, "text/plain; charset=utf-8", "internal error\n"});
    }
  }

  void answer(http_reply reply, bool head, unsigned version, bool keep_alive) {
    res_ = {};
    res_.version(version);
    res_.result(reply.status);
    res_.set(bhttp::field::content_type, reply.content_type);
    res_.set(bhttp::field::cache_control, "no-store");
    res_.set("X-Content-Type-Options", "nosniff");
    for (const auto& [name, value] : reply.headers) res_.set(name, value);
    res_.keep_alive(keep_alive);
    const std::size_t length = reply.body.size();
    if (!head) res_.body() = std::move(reply.body);
    res_.content_length(length);  // HEAD: the length a GET would get, and no body
    stream_.expires_after(owner_.limits_.io_timeout);
    bhttp::async_write(stream_, res_,
                       [self = shared_from_this(), keep_alive](beast::error_code ec, std::size_t) {
                         if (ec || !keep_alive) return self->close();
                         self->read();
                       });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  http_server::impl& owner_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bhttp::response<bhttp::string_body> res_;
  std::string peer_;     // "127.0.0.1:50412"
  std::string peer_ip_;  // "127.0.0.1"
};

}  // namespace

void http_server::impl::accept() {
  if (stopping_) return;
  if (active_ >= limits_.max_connections) {
    paused_ = true;  // the next session to end accepts again
    return;
  }
  acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (stopping_ || ec == boost::asio::error::operation_aborted) return;
    if (ec) {
      detail::log({.event = "http.accept_failed"})
          .warn("http: accept on {}: {}", endpoint_.address().to_string(), ec.message());
      retry_.expires_after(accept_retry);
      retry_.async_wait([this](beast::error_code e) {
        if (!e) accept();
      });
      return;
    }
    ++active_;
    std::make_shared<session>(std::move(socket), *this)->start();
    accept();
  });
}

void http_server::impl::stop() noexcept {
  if (!thread_.joinable()) return;
  boost::asio::post(io_, [this] {
    stopping_ = true;
    beast::error_code ignored;
    acceptor_.close(ignored);
    retry_.cancel();
    io_.stop();
  });
  thread_.join();
  stopping_ = true;
}

http_server::http_server(const config::listen_address& address, http_handler handler, limits l)
    : impl_(std::make_unique<impl>(std::move(handler), l)) {
  auto fail = [&](beast::error_code ec, const char* what) {
    throw std::system_error(ec, "cannot listen on " + address.text() + ": " + what);
  };
  beast::error_code ec;
  const auto ip = address.host == "localhost" ? boost::asio::ip::address_v4::loopback()
                                              : boost::asio::ip::make_address(address.host, ec);
  if (ec) fail(ec, "address");
  const tcp::endpoint endpoint(ip, address.port);
  auto& acceptor = impl_->acceptor_;
  acceptor.open(endpoint.protocol(), ec);
  if (ec) fail(ec, "socket");
  // Restarting at once must not fail on connections of the previous process in TIME_WAIT (on
  // Linux this never lets two listeners share a port).
  acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  acceptor.bind(endpoint, ec);
  if (ec) fail(ec, "bind");
  acceptor.listen(64, ec);
  if (ec) fail(ec, "listen");
  impl_->endpoint_ = acceptor.local_endpoint(ec);
  if (ec) fail(ec, "getsockname");
  impl_->accept();
  impl_->thread_ = std::thread([this] {
    // Handlers do not throw (each catches); should one still, the server logs it and goes on
    // until stop() stops the io_context.
    while (!impl_->io_.stopped()) {
      try {
        impl_->io_.run();
      } catch (const std::exception& e) {
        detail::log({.event = "http.failed"}).warn("http: {}", e.what());
      }
    }
  });
}

http_server::~http_server() { stop(); }

tcp::endpoint http_server::local_endpoint() const noexcept { return impl_->endpoint_; }

void http_server::stop() noexcept { impl_->stop(); }

// ---------------------------------------------------------------------------------------------
// the endpoints

namespace {

// Calls done(true) once ready() holds, or done(false) at `deadline`; checks every
// poll_interval on `io` (the server's thread: ready() needs no lock against the handlers).
void poll(boost::asio::io_context& io, std::function<bool()> ready, steady::time_point deadline,
          std::function<void(bool)> done) {
  if (ready()) return done(true);
  if (steady::now() >= deadline) return done(false);
  auto timer = std::make_shared<boost::asio::steady_timer>(io, poll_interval);
  timer->async_wait([&io, timer, ready = std::move(ready), deadline,
                     done = std::move(done)](beast::error_code ec) mutable {
    if (ec) return;  // the server stops
    poll(io, std::move(ready), deadline, std::move(done));
  });
}

}  // namespace

/// Shared by the server's handlers, the readiness prober and run().
struct http_endpoints::state {
  state(runtime& r, std::string v, std::string b)
      : rt(r), version(std::move(v)), backend_type(std::move(b)) {}

  runtime& rt;
  const std::string version;
  const std::string backend_type;
  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> reloads_applied{0};
  std::atomic<std::uint64_t> reloads_rejected{0};

  // /healthz: probe n is answered when io_answered reaches n (the runtime's io threads write
  // it; the posted probe holds it, not this state, so a stuck probe keeps nothing else alive).
  std::shared_ptr<std::atomic<std::uint64_t>> io_answered =
      std::make_shared<std::atomic<std::uint64_t>>(0);
  std::uint64_t io_asked = 0;  // the server's thread only

  struct probe_result {
    steady::time_point finished;
    bool ok = false;
    std::string error;
  };
  std::mutex mutex;  // guards everything below
  const scheduler* sched = nullptr;
  std::shared_ptr<mutex_backend> backend;
  std::string probe_name;
  std::function<std::string(const std::string&)> scrub;
  std::shared_ptr<http_routes> console;
  std::optional<probe_result> last_probe;
  bool probe_wanted = false;
  bool prober_stop = false;
  std::condition_variable prober_cv;
  std::thread prober;

  void prober_loop();
  void handle(const http_request& request, boost::asio::io_context& io,
              const std::function<void(http_reply)>& respond);
  http_reply metrics();
  void healthz(boost::asio::io_context& io, const std::function<void(http_reply)>& respond);
  void readyz(boost::asio::io_context& io, const std::function<void(http_reply)>& respond);
};

void http_endpoints::state::prober_loop() {
  std::unique_lock lock(mutex);
  while (true) {  // ends with stop(): prober_stop
    prober_cv.wait(lock, [&] { return probe_wanted || prober_stop; });
    if (prober_stop) return;
    probe_wanted = false;
    auto b = backend;
    const auto name = probe_name;
    lock.unlock();
    probe_result r;
    try {
      b->read_owner(name);
      r.ok = true;
    } catch (const std::exception& e) {
      r.error = e.what();
    }
    r.finished = steady::now();
    lock.lock();
    if (!r.ok && scrub) r.error = scrub(r.error);
    last_probe = std::move(r);
  }
}

void http_endpoints::state::handle(const http_request& request, boost::asio::io_context& io,
                                   const std::function<void(http_reply)>& respond) {
  const std::string& path = request.path;
  std::shared_ptr<http_routes> c;
  {
    std::lock_guard lock(mutex);
    c = console;
  }
  if (c && c->serves(path)) return c->handle(request, io, respond);
  if (request.method != "GET" && request.method != "HEAD")
    return respond({405,
                    "text/plain; charset=utf-8",
                    "method not allowed (GET, HEAD)\n",
                    {{"Allow", "GET, HEAD"}}});
  if (path == "/metrics") return respond(metrics());
  if (path == "/healthz") return healthz(io, respond);
  if (path == "/readyz") return readyz(io, respond);
  respond({404, "text/plain; charset=utf-8",
           "not found: " + path + " (this server has /metrics, /healthz and /readyz)\n"});
}

http_reply http_endpoints::state::metrics() {
  metrics_input in;
  in.version = version;
  in.configured_backend = backend_type;
  {
    std::lock_guard lock(mutex);
    if (sched != nullptr) {
      in.schedules = sched->status();
      in.balance = sched->balance();
    }
  }
  in.backends = backend_metrics_snapshot();
  in.process = read_process_metrics();
  in.reloads_applied = reloads_applied.load();
  in.reloads_rejected = reloads_rejected.load();
  return {200, std::string(metrics_content_type), metrics_text(in)};
}

void http_endpoints::state::healthz(boost::asio::io_context& io,
                                    const std::function<void(http_reply)>& respond) {
  const std::uint64_t n = ++io_asked;
  boost::asio::post(rt.io(), [answered = io_answered, n] {
    std::uint64_t seen = answered->load();
    while (seen < n && !answered->compare_exchange_weak(seen, n)) {
    }
  });
  poll(
      io, [answered = io_answered, n] { return answered->load() >= n; },
      steady::now() + health_wait,
      [respond](bool ok) {
        if (ok) return respond({200, "application/json", json_body({{"status", "ok"}})});
        respond({503, "application/json",
                 json_body({{"status", "unhealthy"},
                            {"reason", "the runtime's io threads did not run a probe within " +
                                           std::to_string(health_wait.count()) + "ms"}})});
      });
}

void http_endpoints::state::readyz(boost::asio::io_context& io,
                                   const std::function<void(http_reply)>& respond) {
  auto not_ready = [](const std::string& reason) {
    return http_reply{503, "application/json",
                      json_body({{"status", "not_ready"}, {"reason", reason}})};
  };
  auto from = [this, not_ready](const probe_result& r) {
    if (r.ok)
      return http_reply{200, "application/json",
                        json_body({{"status", "ok"}, {"backend", backend_type}})};
    return not_ready("backend unreachable: " + r.error);
  };
  if (stopping) return respond(not_ready("stopping"));
  const auto asked = steady::now();
  {
    std::lock_guard lock(mutex);
    if (sched == nullptr) return respond(not_ready("starting"));
    if (last_probe && asked - last_probe->finished < ready_fresh) return respond(from(*last_probe));
    probe_wanted = true;
  }
  prober_cv.notify_one();
  poll(
      io,
      [this, asked] {
        std::lock_guard lock(mutex);
        return last_probe && last_probe->finished >= asked;
      },
      asked + ready_wait,
      [this, respond, from, not_ready](bool answered) {
        if (stopping) return respond(not_ready("stopping"));
        std::optional<probe_result> r;
        if (answered) {
          std::lock_guard lock(mutex);
          r = last_probe;
        }
        if (r) return respond(from(*r));
        respond(not_ready("backend unreachable: no answer to a probe within " +
                          std::to_string(ready_wait.count()) + "ms"));
      });
}

http_endpoints::http_endpoints(const config::listen_address& address, runtime& rt,
                               std::string version, std::string backend_type)
    : state_(std::make_shared<state>(rt, std::move(version), std::move(backend_type))) {
  server_ = std::make_unique<http_server>(
      address, [s = state_.get()](const http_request& request, boost::asio::io_context& io,
                                  std::function<void(http_reply)> respond) {
        s->handle(request, io, respond);
      });
}

http_endpoints::~http_endpoints() { stop(); }

std::string http_endpoints::address() const {
  const auto e = server_->local_endpoint();
  const auto host = e.address().to_string();
  return (e.address().is_v6() ? "[" + host + "]" : host) + ":" + std::to_string(e.port());
}

void http_endpoints::attach(const scheduler& s, std::shared_ptr<mutex_backend> backend,
                            std::string probe_name,
                            std::function<std::string(const std::string&)> scrub) {
  std::lock_guard lock(state_->mutex);
  state_->sched = &s;
  state_->backend = std::move(backend);
  state_->probe_name = std::move(probe_name);
  state_->scrub = std::move(scrub);
  if (!state_->prober.joinable())
    state_->prober = std::thread([st = state_.get()] { st->prober_loop(); });
}

void http_endpoints::set_console(std::shared_ptr<http_routes> console) {
  {
    std::lock_guard lock(state_->mutex);
    std::swap(state_->console, console);
  }
  // The one replaced ends here, outside the lock: stop() waits for its backend requests.
  if (console) console->stop();
}

void http_endpoints::count_reload(bool applied) noexcept {
  ++(applied ? state_->reloads_applied : state_->reloads_rejected);
}

void http_endpoints::stopping() noexcept { state_->stopping = true; }

void http_endpoints::stop() noexcept {
  state_->stopping = true;
  server_->stop();  // no handler runs after this
  std::shared_ptr<http_routes> c;
  {
    std::lock_guard lock(state_->mutex);
    c = std::move(state_->console);
  }
  // Its threads end before the server goes: their answers are posted onto the server's
  // io_context, which must still exist (it drops them, stopped).
  if (c) c->stop();
  {
    std::lock_guard lock(state_->mutex);
    state_->prober_stop = true;
  }
  state_->prober_cv.notify_one();
  if (state_->prober.joinable()) state_->prober.join();
  std::lock_guard lock(state_->mutex);
  state_->sched = nullptr;
  state_->backend.reset();
}

std::unique_ptr<http_endpoints> start_http_endpoints(const std::optional<std::string>& http_listen,
                                                     const config::daemon_config& config,
                                                     runtime& rt, std::string version) {
  if (!http_listen && !config.http_listen) {
    if (config.console.enabled)
      detail::log({.event = "http.console_unserved"})
          .warn(
              "{}: /http/console is on but nothing listens: set /http/listen (e.g. "
              "\"127.0.0.1:9464\") or pass --http-listen",
              config.source);
    return nullptr;
  }
  // --http-listen was checked when the command line was read.
  const auto address =
      http_listen ? config::parse_listen_address(*http_listen) : *config.http_listen;
  const std::string where =
      http_listen ? std::string("--http-listen") : config.source + ": /http/listen";
  std::unique_ptr<http_endpoints> endpoints;
  try {
    endpoints =
        std::make_unique<http_endpoints>(address, rt, std::move(version), config.backend.type);
  } catch (const std::system_error& e) {
    throw std::runtime_error("http (" + where + "): " + e.what());
  }
  const std::string served = config.console.enabled
                                 ? "/metrics, /healthz, /readyz, the console at / and /api/v1"
                                 : "/metrics, /healthz, /readyz";
  detail::log({.event = "http.listening"})
      .info("http: listening on {} ({}; {})", endpoints->address(), served, where);
  beast::error_code ec;
  const auto ip = boost::asio::ip::make_address(address.host, ec);
  if (config.console.enabled && address.host != "localhost" && (ec || !ip.is_loopback()))
    detail::log({.event = "http.console_exposed"})
        .warn(
            "http: the console listens on {}, not a loopback address: anyone who reaches it "
            "reads every schedule's state and history{}",
            endpoints->address(), config.console.allow_control ? " (controls need the token)" : "");
  return endpoints;
}

}  // namespace baton::daemon
