// Session: one connection, one request at a time (see server.h for the
// bounds and the shutdown it takes part in).
#include <algorithm>
#include <array>
#include <string>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "http/codec.h"
#include "http/errors.h"
#include "http/memory.h"
#include "http/server_state.h"
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

}  // namespace

class Session : public std::enable_shared_from_this<Session>, public ResponseSink {
 public:
  Session(tcp::socket&& socket, ServerState& server, Worker& worker)
      : stream_(std::move(socket)),
        watchdog_(worker.io),
        buffer_(ReadBufferMax(server.options)),
        server_(server),
        worker_(worker) {
    error_code ec;
    auto remote = stream_.socket().remote_endpoint(ec);
    if (!ec) {
      peer_ = remote.address().is_v6() ? "[" + remote.address().to_string() + "]" : remote.address().to_string();
      peer_ += ":" + std::to_string(remote.port());
      codec_.set_peer(peer_);
    }
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
    if (AuthFailureThrottle* throttle = server_.options.auth_throttle;
        throttle && !throttle->idle() && request.HasHeader("Authorization")) {
      if (int64_t wait = throttle->RetryAfterSeconds(AuthThrottleClient(request))) {
        Response r = ErrorResponse(Status(ErrorCode::kRateLimited,
                                          "too many failed credentials from this client within a minute; retry "
                                          "after " +
                                              std::to_string(wait) + " s"));
        r.AddHeader("Retry-After", std::to_string(wait));
        Responder(shared_from_this(), n).Send(std::move(r));
        return;
      }
    }
    try {
      server_.handler(request, Responder(shared_from_this(), n));
    } catch (const std::exception& e) {
      log::Error("request {}: handler for {} threw: {}", request.request_id, std::string(request.target), e.what());
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

  std::string peer_ = "-";  // declared first: the codec refers to it
  HandlerMemory memory_;    // declared first: operations may outlive the other members' use
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

void StartSession(tcp::socket&& socket, ServerState& server, Worker& worker) {
  std::make_shared<Session>(std::move(socket), server, worker)->Start();
}
void DrainSession(Session& session) { session.Drain(); }
void ForceCloseSession(Session& session) { session.ForceClose(); }
void CheckHandlerDeadline(Session& session, asio::steady_timer::clock_type::time_point now) {
  session.CheckHandlerDeadline(now);
}
std::shared_ptr<Session> LockSession(Session* session) { return session->weak_from_this().lock(); }

}  // namespace hotrow::http
