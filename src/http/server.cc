#include <utility>  // before Asio: g++ 12 in C++20 mode needs it for awaitable.hpp

#include "http/server.h"

#include <sys/resource.h>

#include <array>
#include <charconv>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <ctime>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>
#include <vector>

#include "http/errors.h"
#include "ops/log.h"

namespace hotrow::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

namespace {

Method ToMethod(bhttp::verb v) {
  switch (v) {
    case bhttp::verb::get: return Method::kGet;
    case bhttp::verb::head: return Method::kHead;
    case bhttp::verb::post: return Method::kPost;
    case bhttp::verb::put: return Method::kPut;
    case bhttp::verb::patch: return Method::kPatch;
    case bhttp::verb::delete_: return Method::kDelete;
    case bhttp::verb::options: return Method::kOptions;
    default: return Method::kOther;
  }
}

// The Date header, formatted once per second per thread.
std::string_view HttpDate() {
  thread_local std::time_t cached_second = 0;
  thread_local char buffer[40];
  std::time_t now = std::time(nullptr);
  if (now != cached_second) {
    cached_second = now;
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(buffer, sizeof buffer, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  }
  return buffer;
}

bool IsHttpParseError(const error_code& ec) {
  static const auto& category = bhttp::make_error_code(bhttp::error::bad_target).category();
  return &ec.category() == &category;
}

// Raises the open-file limit to its hard maximum: each connection is a file.
void RaiseFileLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace

class Session;

struct Worker {
  // Declared before io so that sessions destroyed with io can still
  // unregister themselves.
  std::mutex mutex;
  std::unordered_set<Session*> sessions;
  asio::io_context io{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
  std::thread thread;
};

struct ServerState {
  ServerOptions options;
  Handler handler;
  std::atomic<int> connections{0};
  std::atomic<int> rejecting{0};
  std::atomic<bool> draining{false};
  asio::io_context control{1};
  std::vector<std::unique_ptr<Worker>> workers;
  std::optional<tcp::acceptor> acceptor;
  size_t next_worker = 0;
  uint16_t port = 0;
  std::once_flag shutdown_once;

  ServerState(ServerOptions o, Handler h) : options(std::move(o)), handler(std::move(h)) {}
  void Accept();
  void BeginShutdown();
};

// ---------------------------------------------------------------------------
// Session: one connection, one request at a time.
// ---------------------------------------------------------------------------

class Session : public std::enable_shared_from_this<Session>, public ResponseSink {
 public:
  Session(tcp::socket&& socket, ServerState& server, Worker& worker)
      : stream_(std::move(socket)), server_(server), worker_(worker) {
    server_.connections.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(worker_.mutex);
    worker_.sessions.insert(this);
  }
  ~Session() override {
    {
      std::lock_guard lock(worker_.mutex);
      worker_.sessions.erase(this);
    }
    server_.connections.fetch_sub(1, std::memory_order_relaxed);
  }

  void Start() { ReadRequest(); }

  void Send(Response&& response) override {
    asio::dispatch(stream_.get_executor(),
                   [self = shared_from_this(), r = std::move(response)]() mutable { self->Write(std::move(r)); });
  }

  // Shutdown: an idle connection closes now, a busy one after its response.
  void Drain() {
    if (state_ == State::kReading) {
      error_code ignored;
      stream_.socket().cancel(ignored);
    }
  }

 private:
  enum class State { kReading, kHandling, kWriting, kClosing };

  void ReadRequest() {
    state_ = State::kReading;
    if (server_.draining.load(std::memory_order_relaxed)) return Close();
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(server_.options.header_bytes_max));
    parser_->body_limit(server_.options.body_bytes_max);
    // One deadline for the whole request: an idle connection and a client
    // that trickles a request both run into it.
    stream_.expires_after(server_.options.request_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             beast::bind_front_handler(&Session::OnHeader, shared_from_this()));
  }

  void OnHeader(error_code ec, size_t) {
    if (ec) return OnReadError(ec);
    if (beast::iequals(parser_->get()[bhttp::field::expect], "100-continue") && !parser_->is_done()) {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      asio::async_write(stream_, asio::buffer(kContinue.data(), kContinue.size()),
                        [self = shared_from_this()](error_code ec2, size_t) {
                          if (ec2) return self->Close();
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    if (parser_->is_done()) return OnRead({}, 0);
    bhttp::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::OnRead, shared_from_this()));
  }

  void OnReadError(const error_code& ec) {
    if (ec == bhttp::error::header_limit)
      return Fail({ErrorCode::kHeadersTooLarge, "request header block is larger than " +
                                                    std::to_string(server_.options.header_bytes_max) + " bytes"});
    if (ec == bhttp::error::body_limit)
      return Fail({ErrorCode::kPayloadTooLarge,
                   "request body is larger than " + std::to_string(server_.options.body_bytes_max) + " bytes"});
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted || !IsHttpParseError(ec))
      return Close();
    Fail(Status::BadRequest("malformed HTTP request: " + ec.message()));
  }

  // Answers an unreadable request, then closes gracefully.
  void Fail(const Status& status) {
    Response r = ErrorResponse(status);
    r.close = true;
    Write(std::move(r));
  }

  void OnRead(error_code ec, size_t) {
    if (ec) return OnReadError(ec);
    state_ = State::kHandling;
    auto& msg = parser_->get();
    request_.method = ToMethod(msg.method());
    std::string_view target(msg.target().data(), msg.target().size());
    request_.target = target;
    size_t q = target.find('?');
    request_.path = target.substr(0, q);
    request_.query = q == std::string_view::npos ? std::string_view{} : target.substr(q + 1);
    request_.body = msg.body();
    request_.headers.clear();
    for (const auto& field : msg)
      request_.headers.emplace_back(std::string_view(field.name_string().data(), field.name_string().size()),
                                    std::string_view(field.value().data(), field.value().size()));
    keep_alive_ = msg.keep_alive();
    http10_keep_alive_ = keep_alive_ && msg.version() < 11;
    try {
      server_.handler(request_, Responder(shared_from_this()));
    } catch (const std::exception& e) {
      log::Error("handler for {} threw: {}", std::string(request_.target), e.what());
      if (state_ == State::kHandling) Write(ErrorResponse(Status::Internal("internal error")));
    }
  }

  void Write(Response&& r) {
    if (state_ == State::kWriting || state_ == State::kClosing) return;  // answered twice: ignore
    state_ = State::kWriting;
    bool close = r.close || !keep_alive_ || server_.draining.load(std::memory_order_relaxed);
    close_after_write_ = close;
    // The head is written here rather than through beast::http::response:
    // Beast's fields container allocates per header, and these few fixed
    // headers need no container. head_ keeps its capacity across requests.
    head_.clear();
    AppendHead(head_, r, close, http10_keep_alive_ && !close);
    body_ = std::move(r.body);
    std::array<asio::const_buffer, 2> buffers{asio::buffer(head_), asio::buffer(body_)};
    stream_.expires_after(server_.options.request_timeout);
    asio::async_write(stream_, buffers, beast::bind_front_handler(&Session::OnWrite, shared_from_this()));
  }

  static void AppendHead(std::string& out, const Response& r, bool close, bool keep_alive_header) {
    char number[24];
    auto append_number = [&](uint64_t v) {
      auto [end, ec] = std::to_chars(number, number + sizeof number, v);
      out.append(number, static_cast<size_t>(end - number));
    };
    out.append("HTTP/1.1 ");
    append_number(static_cast<uint64_t>(r.status));
    out.push_back(' ');
    auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(r.status));
    out.append(reason.data(), reason.size());
    out.append("\r\nServer: hotrow\r\nDate: ");
    out.append(HttpDate());
    out.append("\r\n");
    bool bodiless = r.status == 204 || r.status == 304 || r.status < 200;
    if (!bodiless) {
      out.append("Content-Type: ");
      out.append(r.content_type);
      out.append("\r\nContent-Length: ");
      append_number(r.body.size());
      out.append("\r\n");
    }
    for (const auto& [name, value] : r.headers) {
      out.append(name);
      out.append(": ");
      out.append(value);
      out.append("\r\n");
    }
    if (close) out.append("Connection: close\r\n");
    else if (keep_alive_header) out.append("Connection: keep-alive\r\n");
    out.append("\r\n");
  }

  void OnWrite(error_code ec, size_t) {
    if (ec) return Close();
    if (close_after_write_) return GracefulClose();
    ReadRequest();
  }

  // Half-closes, then reads and discards what the client still sends (up to
  // a bound) so that it sees our response rather than a reset.
  void GracefulClose() {
    state_ = State::kClosing;
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    drained_bytes_ = 0;
    stream_.expires_after(server_.options.drain_timeout);
    DrainSome();
  }

  void DrainSome() {
    stream_.async_read_some(asio::buffer(discard_), [self = shared_from_this()](error_code ec, size_t n) {
      self->drained_bytes_ += n;
      if (ec || self->drained_bytes_ >= self->server_.options.drain_bytes_max) return self->Close();
      self->DrainSome();
    });
  }

  void Close() {
    state_ = State::kClosing;
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::string head_;
  std::string body_;
  Request request_;
  ServerState& server_;
  Worker& worker_;
  State state_ = State::kReading;
  bool keep_alive_ = true;
  bool http10_keep_alive_ = false;  // an HTTP/1.0 client asked for keep-alive
  bool close_after_write_ = false;
  size_t drained_bytes_ = 0;
  std::array<char, 4096> discard_{};
};

// Answers one connection over the limit with 503 and closes it.
class Rejector : public std::enable_shared_from_this<Rejector> {
 public:
  Rejector(tcp::socket&& socket, ServerState& server) : socket_(std::move(socket)), server_(server) {
    server_.rejecting.fetch_add(1, std::memory_order_relaxed);
    Response r = ErrorResponse(Status::Overloaded("too many open connections; retry later"));
    text_ = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n"
            "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
            std::to_string(r.body.size()) + "\r\n\r\n" + r.body;
  }
  ~Rejector() { server_.rejecting.fetch_sub(1, std::memory_order_relaxed); }

  void Start() {
    asio::async_write(socket_, asio::buffer(text_), [self = shared_from_this()](error_code, size_t) {
      error_code ignored;
      self->socket_.shutdown(tcp::socket::shutdown_both, ignored);
      self->socket_.close(ignored);
    });
  }

 private:
  tcp::socket socket_;
  ServerState& server_;
  std::string text_;
};

// ---------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------

void ServerState::Accept() {
  Worker& w = *workers[next_worker];
  next_worker = (next_worker + 1) % workers.size();
  acceptor->async_accept(w.io, [this, &w](error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor->is_open()) return;
    if (ec) {
      // Typically EMFILE. Back off briefly instead of spinning on accept.
      log::Warn("accept failed: {}", ec.message());
      auto timer = std::make_shared<asio::steady_timer>(acceptor->get_executor(), std::chrono::milliseconds(50));
      timer->async_wait([this, timer](error_code) {
        if (acceptor->is_open()) Accept();
      });
      return;
    }
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    if (connections.load(std::memory_order_relaxed) >= options.connections_max) {
      // Past the limit: answer 503 while the rejectors stay few, else drop.
      if (rejecting.load(std::memory_order_relaxed) < 1024)
        asio::post(w.io, [this, s = std::move(socket)]() mutable {
          std::make_shared<Rejector>(std::move(s), *this)->Start();
        });
    } else {
      asio::post(w.io, [this, &w, s = std::move(socket)]() mutable {
        std::make_shared<Session>(std::move(s), *this, w)->Start();
      });
    }
    Accept();
  });
}

Server::Server(ServerOptions options, Handler handler)
    : impl_(std::make_unique<ServerState>(std::move(options), std::move(handler))) {
  int n = impl_->options.threads > 0 ? impl_->options.threads
                                      : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 0; i < n; ++i) impl_->workers.push_back(std::make_unique<Worker>());
}

Server::~Server() = default;

uint16_t Server::port() const { return impl_->port; }
int Server::threads() const { return static_cast<int>(impl_->workers.size()); }
int Server::connections() const { return impl_->connections.load(); }

Status Server::Listen() {
  RaiseFileLimit();
  error_code ec;
  auto address = asio::ip::make_address(impl_->options.host, ec);
  if (ec) return Status::BadRequest("--host is not an IP address: " + impl_->options.host);
  tcp::endpoint endpoint(address, impl_->options.port);
  auto& acceptor = impl_->acceptor.emplace(impl_->workers[0]->io);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(4096, ec);
  if (ec)
    return Status::Unavailable("cannot listen on " + impl_->options.host + ":" +
                               std::to_string(impl_->options.port) + ": " + ec.message());
  impl_->port = acceptor.local_endpoint().port();
  return Status::Ok();
}

void Server::Shutdown() {
  asio::post(impl_->control, [this] { impl_->BeginShutdown(); });
}

void ServerState::BeginShutdown() {
  if (draining.exchange(true)) return;
  log::Info("shutting down: {} connection(s) open", connections.load());
  asio::post(workers[0]->io, [this] {
    error_code ignored;
    acceptor->close(ignored);
  });
  for (auto& w : workers) {
    asio::post(w->io, [w = w.get()] {
      std::vector<std::shared_ptr<Session>> sessions;
      {
        std::lock_guard lock(w->mutex);
        for (Session* s : w->sessions) {
          if (auto sp = s->weak_from_this().lock()) sessions.push_back(std::move(sp));
        }
      }
      for (auto& s : sessions) s->Drain();
    });
  }
}

void Server::Run(const std::function<void()>& before_stop) {
  auto& impl = *impl_;
  for (auto& w : impl.workers) {
    w->guard.emplace(w->io.get_executor());
    w->thread = std::thread([w = w.get()] { w->io.run(); });
  }
  asio::post(impl.workers[0]->io, [&impl] { impl.Accept(); });

  std::optional<asio::signal_set> signals;
  if (impl.options.handle_signals) {
    signals.emplace(impl.control, SIGINT, SIGTERM);
    signals->async_wait([&impl](error_code ec, int sig) {
      if (!ec) {
        log::Info("received signal {}", sig);
        impl.BeginShutdown();
      }
    });
  }

  // Poll for the end of the drain: cheap, and only runs while shutting down.
  asio::steady_timer poll(impl.control);
  auto deadline = std::chrono::steady_clock::time_point::max();
  std::function<void(error_code)> check = [&](error_code) {
    if (impl.draining.load()) {
      if (deadline == std::chrono::steady_clock::time_point::max())
        deadline = std::chrono::steady_clock::now() + impl.options.shutdown_timeout_max;
      if (impl.connections.load() == 0 || std::chrono::steady_clock::now() >= deadline) {
        if (impl.connections.load() > 0)
          log::Warn("shutdown: {} connection(s) still open after the grace period", impl.connections.load());
        if (signals) signals->cancel();
        return;  // nothing left on control: run() returns
      }
    }
    poll.expires_after(std::chrono::milliseconds(10));
    poll.async_wait(check);
  };
  check({});
  impl.control.run();

  if (before_stop) before_stop();
  for (auto& w : impl.workers) {
    w->guard.reset();
    w->io.stop();
  }
  for (auto& w : impl.workers) w->thread.join();
}

}  // namespace hotrow::http
