#include "http/server.h"

#include <sys/resource.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>
#include <utility>  // before Asio: g++ 12 in C++20 mode needs it for awaitable.hpp
#include <vector>

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

#include "http/codec.h"
#include "http/errors.h"
#include "http/memory.h"
#include "http/rejector.h"
#include "ops/log.h"

namespace hotrow::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

namespace {

bool IsHttpParseError(const error_code& ec) {
  static const auto& category = bhttp::make_error_code(bhttp::error::bad_target).category();
  return &ec.category() == &category;
}

// A connection's read buffer: room for a whole header, and for a chunk
// header or a trailer section of up to 32 KiB, never near the 64 KiB at
// which Beast's field container throws.
size_t ReadBufferMax(const ServerOptions& options) { return std::max<size_t>(32 * 1024, options.header_bytes_max * 2); }

// An event-loop thread: an exception that escapes a completion handler
// (Beast throws std::length_error for a field it cannot store) drops the
// operation it came from, and with it that connection, not the process.
void RunEventLoop(asio::io_context& io) {
  for (;;) {
    try {
      io.run();
      return;
    } catch (const std::exception& e) {
      log::Error("an event-loop thread caught an exception; the connection it came from is dropped: {}", e.what());
    }
  }
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
  // Every kSweepInterval: answers for the handlers past their deadline.
  std::optional<asio::steady_timer> sweep;
  std::vector<std::shared_ptr<Session>> sweep_due;  // reused by every sweep: no allocation after the first
  std::thread thread;
};

struct ServerState {
  ServerOptions options;
  Handler handler;
  std::atomic<int> connections{0};
  std::atomic<int64_t> body_bytes_in_flight{0};  // reserved by sessions (body_bytes_in_flight_max)
  std::atomic<int> rejecting{0};
  std::atomic<bool> draining{false};
  // Signals and shutdown run here; kept running by control_guard until the
  // drain ends.
  asio::io_context control{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> control_guard;
  asio::signal_set* signals = nullptr;
  std::optional<asio::steady_timer> drain_poll;
  std::chrono::steady_clock::time_point drain_deadline;
  std::vector<std::unique_ptr<Worker>> workers;
  std::optional<tcp::acceptor> acceptor;
  size_t next_worker = 0;
  uint16_t port = 0;
  std::once_flag shutdown_once;

  ServerState(ServerOptions o, Handler h) : options(std::move(o)), handler(std::move(h)) {}
  void Accept();
  void BeginShutdown();
  void PollDrain();
  // Runs `fn` on every open session, each on its own worker.
  template <typename Fn>
  void ForEachSession(Fn fn);
  // Waits (on the calling thread) until no connection is open or `bound`
  // passes; true when none is.
  bool WaitForNoConnections(std::chrono::milliseconds bound);
};

// ---------------------------------------------------------------------------
// Session: one connection, one request at a time.
// ---------------------------------------------------------------------------

class Session : public std::enable_shared_from_this<Session>, public ResponseSink {
 public:
  Session(tcp::socket&& socket, ServerState& server, Worker& worker)
      : stream_(std::move(socket)),
        watchdog_(worker.io),
        buffer_(ReadBufferMax(server.options)),
        server_(server),
        worker_(worker) {
    // Counted already, by the acceptor (ServerState::Accept).
    std::lock_guard lock(worker_.mutex);
    worker_.sessions.insert(this);
  }
  ~Session() override {
    ReleaseBody();
    {
      std::lock_guard lock(worker_.mutex);
      worker_.sessions.erase(this);
    }
    server_.connections.fetch_sub(1, std::memory_order_relaxed);
  }

  void Start() { ReadRequest(); }

  void Deliver(Response&& response) override {
    // The worker's own executor (not the stream's type-erased one), which
    // allocates the dispatch through the handler's allocator.
    asio::dispatch(worker_.io.get_executor(),
                   WithMemory(memory_, [self = shared_from_this(), r = std::move(response)]() mutable {
                     self->Write(std::move(r));
                   }));
  }

  // Shutdown: an idle connection closes now, a busy one after its response.
  void Drain() {
    if (state_ == State::kReading) {
      error_code ignored;
      stream_.socket().cancel(ignored);
    }
  }

  // The end of shutdown: whatever the connection is doing, it closes now.
  void ForceClose() {
    if (!closed_) Close();
  }
  // From the worker's sweep (ServerState::SweepHandlers), on this
  // connection's worker.
  void CheckHandlerDeadline(asio::steady_timer::clock_type::time_point now) {
    if (state_ == State::kHandling && now >= handler_deadline_) OnHandlerTimeout();
  }

 private:
  enum class State { kReading, kHandling, kWriting, kClosing };

  // The body's bytes against the server-wide budget; false when they do
  // not fit. A body that arrived with its header costs nothing extra, but
  // is counted too: what matters is what a connection can make us hold.
  bool ReserveBody() {
    const Parser& parser = codec_.parser();
    auto length = parser.content_length();
    const auto body_max = static_cast<int64_t>(server_.options.body_bytes_max);  // never more is held
    int64_t bytes = length             ? std::min<int64_t>(static_cast<int64_t>(*length), body_max)
                    : parser.chunked() ? body_max
                                       : 0;
    if (bytes == 0) return true;
    int64_t before = server_.body_bytes_in_flight.fetch_add(bytes, std::memory_order_relaxed);
    if (before + bytes > static_cast<int64_t>(server_.options.body_bytes_in_flight_max)) {
      server_.body_bytes_in_flight.fetch_sub(bytes, std::memory_order_relaxed);
      return false;
    }
    body_reserved_ = bytes;
    return true;
  }
  void ReleaseBody() {
    if (body_reserved_ == 0) return;
    server_.body_bytes_in_flight.fetch_sub(body_reserved_, std::memory_order_relaxed);
    body_reserved_ = 0;
  }

  void ReadRequest() {
    ReleaseBody();  // the previous request is answered
    state_ = State::kReading;
    reading_header_ = true;
    if (server_.draining.load(std::memory_order_relaxed)) return Close();
    Parser& parser = codec_.Begin(server_.options);
    // One deadline for the whole request: an idle connection and a client
    // that trickles a request both run into it.
    SetDeadline(server_.options.request_timeout);
    bhttp::async_read_header(stream_, buffer_, parser,
                             WithMemory(memory_, beast::bind_front_handler(&Session::OnHeader, shared_from_this())));
  }

  void OnHeader(error_code ec, size_t) {
    if (ec) return OnReadError(ec);
    reading_header_ = false;
    blank_lines_skipped_ = 0;
    if (Status s = codec_.CheckHeader(); !s.ok()) return Fail(s);
    if (!ReserveBody()) {
      return Fail(Status::Overloaded("too many request bodies are in flight (" +
                                     std::to_string(server_.options.body_bytes_in_flight_max / (1024 * 1024)) +
                                     " MiB in all); retry later"));
    }
    if (beast::iequals(codec_.parser().get()[bhttp::field::expect], "100-continue") && !codec_.parser().is_done()) {
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
    Parser& parser = codec_.parser();
    // A small body usually arrived with the header: parse it from the
    // buffer here rather than start an operation that completes at once
    // (whose completion Asio would have to post).
    if (!parser.is_done() && buffer_.size() > 0) {
      parser.eager(true);
      error_code ec;
      size_t used = parser.put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec && ec != bhttp::error::need_more) return OnReadError(ec);
    }
    if (parser.is_done()) return OnRead({}, 0);
    bhttp::async_read(stream_, buffer_, codec_.parser(),
                      WithMemory(memory_, beast::bind_front_handler(&Session::OnRead, shared_from_this())));
  }

  void OnReadError(const error_code& ec) {
    if (ec == bhttp::error::header_limit)
      return Fail({ErrorCode::kHeadersTooLarge, "request header block is larger than " +
                                                    std::to_string(server_.options.header_bytes_max) + " bytes"});
    if (ec == bhttp::error::buffer_overflow)
      return Fail({ErrorCode::kHeadersTooLarge, "a chunk header or the trailer is larger than " +
                                                    std::to_string(ReadBufferMax(server_.options)) + " bytes"});
    if (ec == bhttp::error::body_limit)
      return Fail({ErrorCode::kPayloadTooLarge,
                   "request body is larger than " + std::to_string(server_.options.body_bytes_max) + " bytes"});
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted || !IsHttpParseError(ec))
      return Close();
    // RFC 9112 §2.2: an empty line before the request line is ignored.
    // Beast stops at it; drop it and parse again (a few at most). Only
    // before a header: inside a body, the CRLF before a malformed chunk is
    // no such line, and what follows it is body, never a request.
    if (reading_header_ && SkipEmptyLine()) return ReadRequest();
    Fail(Status::BadRequest("malformed HTTP request: " + ec.message()));
  }

  bool SkipEmptyLine() {
    static constexpr int kEmptyLinesMax = 4;
    if (blank_lines_skipped_ >= kEmptyLinesMax) return false;
    auto data = buffer_.data();
    std::string_view pending(static_cast<const char*>(data.data()), data.size());
    size_t n = pending.rfind("\r\n", 0) == 0 ? 2 : pending.rfind('\n', 0) == 0 ? 1 : 0;
    if (n == 0) return false;
    buffer_.consume(n);
    ++blank_lines_skipped_;
    return true;
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
    deadline_ = Clock::time_point::max();  // the request has arrived; now the handler's bound applies
    Request& request = codec_.BuildRequest();
    handler_deadline_ = asio::steady_timer::clock_type::now() + server_.options.handler_timeout;
    uint64_t n = BeginRequest();
    try {
      server_.handler(request, Responder(shared_from_this(), n));
    } catch (const std::exception& e) {
      log::Error("handler for {} threw: {}", std::string(request.target), e.what());
      // Close after it, as after a timeout: the handler may still answer
      // through a copy of its Responder, and a server-answered request must
      // be the connection's last (ResponseSink::Claim relies on it).
      if (Claim(n, By::kServer)) {
        Response r = ErrorResponse(Status::Internal("internal error"));
        r.close = true;
        Write(std::move(r));
      }
    }
    if (request.long_running) handler_deadline_ = Clock::time_point::max();
  }

  // The handler did not answer within handler_timeout: answer for it (its
  // late answer is then ignored) and close, since what it did is unknown.
  void OnHandlerTimeout() {
    // The handler's answer may be on its way here already: then it wins.
    if (!Claim(current_request(), By::kServer)) return;
    log::Warn("a request did not finish within {} ms; answered 503", server_.options.handler_timeout.count());
    Response r = ErrorResponse(Status::Unavailable("the request did not finish within " +
                                                   std::to_string(server_.options.handler_timeout.count()) +
                                                   " ms; whether it took effect is unknown"));
    r.close = true;
    Write(std::move(r));
  }

  void Write(Response&& r) {
    if (state_ == State::kWriting || state_ == State::kClosing) return;  // answered twice: ignore
    state_ = State::kWriting;
    bool close = r.close || !codec_.keep_alive() || server_.draining.load(std::memory_order_relaxed);
    close_after_write_ = close;
    auto buffers = codec_.Serialize(std::move(r), close);
    SetDeadline(server_.options.request_timeout);
    asio::async_write(stream_, buffers,
                      WithMemory(memory_, beast::bind_front_handler(&Session::OnWrite, shared_from_this())));
  }

  void OnWrite(error_code ec, size_t) {
    codec_.Written();
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
    SetDeadline(server_.options.drain_timeout);
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
    ReleaseBody();
    state_ = State::kClosing;
    closed_ = true;
    watchdog_.cancel();
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  // Deadlines. Beast's tcp_stream arms and cancels a timer around every
  // read and write: a timer-queue update and an operation (allocated when
  // Asio's one recycled block is taken, which under load is a third of
  // requests) each time. Instead one watchdog per connection waits for
  // deadline_ and, when it fires early because the deadline moved on,
  // waits again: a request only stores a time.
  using Clock = asio::steady_timer::clock_type;
  void SetDeadline(Clock::duration d) {
    deadline_ = Clock::now() + d;
    if (closed_) return;
    if (!watchdog_armed_) return ArmWatchdog();
    if (deadline_ < watchdog_.expiry()) watchdog_.cancel();  // its completion re-arms, earlier
  }
  void ArmWatchdog() {
    watchdog_armed_ = true;
    watchdog_.expires_at(deadline_);
    watchdog_.async_wait(WithMemory(memory_, [self = shared_from_this()](error_code) { self->OnWatchdog(); }));
  }
  void OnWatchdog() {
    watchdog_armed_ = false;
    if (closed_ || deadline_ == Clock::time_point::max()) return;
    if (Clock::now() >= deadline_) return Close();  // the pending read or write fails and ends the session
    ArmWatchdog();
  }

  HandlerMemory memory_;  // declared first: operations may outlive the other members' use
  beast::tcp_stream stream_;
  asio::steady_timer watchdog_;
  Clock::time_point deadline_ = Clock::time_point::max();
  // When the running handler's answer is due (max: none running, or a
  // long_running one). Checked by the worker's sweep, not by the watchdog:
  // moving the watchdog earlier would cost a timer operation per request.
  Clock::time_point handler_deadline_ = Clock::time_point::max();
  bool watchdog_armed_ = false;
  bool closed_ = false;
  // Bounded: the header is bounded by header_bytes_max, a body is parsed as
  // it arrives, but a chunk header (with its extensions) and the trailer are
  // held here whole, and Beast's field container throws past 64 KiB.
  beast::flat_buffer buffer_;
  Codec codec_;
  ServerState& server_;
  Worker& worker_;
  State state_ = State::kReading;
  bool close_after_write_ = false;
  int blank_lines_skipped_ = 0;
  bool reading_header_ = true;  // no header parsed yet for this request
  int64_t body_reserved_ = 0;   // this request's share of body_bytes_in_flight
  size_t drained_bytes_ = 0;
  std::array<char, 4096> discard_{};
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
    // Counted here, at accept, not when the session starts on its worker:
    // a burst of accepts would all pass a check that the posted sessions
    // have not yet counted. ~Session gives the slot back.
    if (connections.fetch_add(1, std::memory_order_relaxed) >= options.connections_max) {
      connections.fetch_sub(1, std::memory_order_relaxed);
      // Past the limit: answer 503 while the rejectors stay few, else drop.
      if (rejecting.load(std::memory_order_relaxed) < 1024)
        asio::post(w.io, [this, s = std::move(socket)]() mutable {
          std::make_shared<Rejector>(std::move(s), rejecting)->Start();
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
    return Status::Unavailable("cannot listen on " + impl_->options.host + ":" + std::to_string(impl_->options.port) +
                               ": " + ec.message());
  impl_->port = acceptor.local_endpoint().port();
  return Status::Ok();
}

void Server::Shutdown() {
  asio::post(impl_->control, [this] { impl_->BeginShutdown(); });
}

// The handler bound is checked twice a second per worker: a handler past
// --handler-timeout-ms is answered within 500 ms of its deadline.
constexpr std::chrono::milliseconds kSweepInterval{500};

void SweepHandlers(Worker& w) {
  w.sweep->expires_after(kSweepInterval);
  w.sweep->async_wait([&w](error_code ec) {
    if (ec) return;
    auto now = asio::steady_timer::clock_type::now();
    {
      std::lock_guard lock(w.mutex);
      for (Session* s : w.sessions)
        if (auto sp = s->weak_from_this().lock()) w.sweep_due.push_back(std::move(sp));
    }
    for (auto& s : w.sweep_due) s->CheckHandlerDeadline(now);
    w.sweep_due.clear();
    SweepHandlers(w);
  });
}

template <typename Fn>
void ServerState::ForEachSession(Fn fn) {
  for (auto& w : workers) {
    asio::post(w->io, [w = w.get(), fn] {
      std::vector<std::shared_ptr<Session>> sessions;
      {
        std::lock_guard lock(w->mutex);
        for (Session* s : w->sessions) {
          if (auto sp = s->weak_from_this().lock()) sessions.push_back(std::move(sp));
        }
      }
      for (auto& s : sessions) fn(*s);
    });
  }
}

bool ServerState::WaitForNoConnections(std::chrono::milliseconds bound) {
  auto deadline = std::chrono::steady_clock::now() + bound;
  while (connections.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return connections.load() == 0;
}

void ServerState::BeginShutdown() {
  if (draining.exchange(true)) return;
  log::Info("shutting down: {} connection(s) open", connections.load());
  asio::post(workers[0]->io, [this] {
    error_code ignored;
    acceptor->close(ignored);
  });
  ForEachSession([](Session& s) { s.Drain(); });
  drain_deadline = std::chrono::steady_clock::now() + options.shutdown_timeout_max;
  PollDrain();
}

// Polls (on control, only while shutting down) for the last connection to
// close or the grace period to end; then lets control.run() return.
void ServerState::PollDrain() {
  if (connections.load() == 0 || std::chrono::steady_clock::now() >= drain_deadline) {
    if (connections.load() > 0)
      log::Warn("shutdown: {} connection(s) still open after the grace period", connections.load());
    if (signals) signals->cancel();
    control_guard.reset();
    return;
  }
  if (!drain_poll) drain_poll.emplace(control);
  drain_poll->expires_after(std::chrono::milliseconds(10));
  drain_poll->async_wait([this](error_code) { PollDrain(); });
}

bool Server::Run(const std::function<void()>& before_stop) {
  auto& impl = *impl_;
  for (auto& w : impl.workers) {
    w->guard.emplace(w->io.get_executor());
    w->sweep.emplace(w->io);
    asio::post(w->io, [w = w.get()] { SweepHandlers(*w); });
    w->thread = std::thread([w = w.get()] { RunEventLoop(w->io); });
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

  impl.signals = signals ? &*signals : nullptr;
  impl.control_guard.emplace(impl.control.get_executor());
  impl.control.run();
  impl.signals = nullptr;

  if (before_stop) before_stop();
  // before_stop stopped the work sources, which answered what they held:
  // those last responses go out and their connections close. Then any
  // connection left (a client that does not read) is closed. A session must
  // not outlive its worker's io_context: after this, none is left, unless a
  // handler still holds one (a work source that was not stopped: a bug).
  bool clean = impl.WaitForNoConnections(impl.options.drain_timeout);
  if (!clean) {
    impl.ForEachSession([](Session& s) { s.ForceClose(); });
    clean = impl.WaitForNoConnections(impl.options.drain_timeout);
  }
  if (!clean) log::Error("shutdown: {} request(s) still held by a handler", impl.connections.load());
  for (auto& w : impl.workers) {
    w->guard.reset();
    w->io.stop();
  }
  for (auto& w : impl.workers) w->thread.join();
  for (auto& w : impl.workers) w->sweep.reset();
  return clean;
}

}  // namespace hotrow::http
