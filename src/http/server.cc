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
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>
#include <vector>

#include "http/errors.h"
#include "ops/log.h"
#include "ops/pooling.h"

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

// ---------------------------------------------------------------------------
// Codec: what a connection keeps from one request to the next, so that a
// request in steady state allocates nothing (see ops/pooling.h).
//   - an arena for Beast's header fields and the request body, reset per
//     request (4 KiB per connection; anything larger falls back to the heap);
//   - the response head buffer and the spare response body, reused.
// Session (a socket) and InProcessConnection (none) share it, so the
// benchmarks measure the very code that serves requests.
// ---------------------------------------------------------------------------

class Arena {
 public:
  static constexpr size_t kBytes = 4096;
  void* Allocate(size_t n, size_t align) {
    if (pooling::Enabled()) {
      if (!block_) block_.reset(new char[kBytes]);
      size_t at = (used_ + align - 1) & ~(align - 1);
      if (at + n <= kBytes) {
        used_ = at + n;
        return block_.get() + at;
      }
    }
    return ::operator new(n);
  }
  void Deallocate(void* p) {
    if (!Owns(p)) ::operator delete(p);
  }
  void Reset() { used_ = 0; }

 private:
  bool Owns(void* p) const {
    auto* c = static_cast<char*>(p);
    return block_ && c >= block_.get() && c < block_.get() + kBytes;
  }
  std::unique_ptr<char[]> block_;
  size_t used_ = 0;
};

template <typename T>
struct ArenaAllocator {
  using value_type = T;
  Arena* arena;
  explicit ArenaAllocator(Arena* a) : arena(a) {}
  template <typename U>
  ArenaAllocator(const ArenaAllocator<U>& other) : arena(other.arena) {}  // NOLINT: allocator rebinding
  T* allocate(size_t n) { return static_cast<T*>(arena->Allocate(n * sizeof(T), alignof(T))); }
  void deallocate(T* p, size_t) { arena->Deallocate(p); }
  template <typename U>
  bool operator==(const ArenaAllocator<U>& o) const {
    return arena == o.arena;
  }
  template <typename U>
  bool operator!=(const ArenaAllocator<U>& o) const {
    return arena != o.arena;
  }
};

using ArenaBody = bhttp::basic_string_body<char, std::char_traits<char>, ArenaAllocator<char>>;
using Parser = bhttp::request_parser<ArenaBody, ArenaAllocator<char>>;

class Codec {
 public:
  // A fresh parser for the next request; the previous request's memory is
  // released (back to the arena).
  Parser& Begin(const ServerOptions& options) {
    parser_.reset();
    arena_.Reset();
    parser_.emplace(std::piecewise_construct, std::make_tuple(ArenaAllocator<char>(&arena_)),
                    std::make_tuple(ArenaAllocator<char>(&arena_)));
    parser_->header_limit(static_cast<uint32_t>(options.header_bytes_max));
    parser_->body_limit(options.body_bytes_max);
    return *parser_;
  }
  Parser& parser() { return *parser_; }

  // The parsed request, as handlers see it.
  Request& BuildRequest() {
    auto& msg = parser_->get();
    request_.method = ToMethod(msg.method());
    std::string_view target(msg.target().data(), msg.target().size());
    request_.target = target;
    size_t q = target.find('?');
    request_.path = target.substr(0, q);
    request_.query = q == std::string_view::npos ? std::string_view{} : target.substr(q + 1);
    request_.body = std::string_view(msg.body().data(), msg.body().size());
    request_.headers.clear();
    for (const auto& field : msg)
      request_.headers.emplace_back(std::string_view(field.name_string().data(), field.name_string().size()),
                                    std::string_view(field.value().data(), field.value().size()));
    request_.spare_body = &spare_;
    keep_alive_ = msg.keep_alive();
    http10_keep_alive_ = keep_alive_ && msg.version() < 11;
    return request_;
  }
  bool keep_alive() const { return keep_alive_; }

  // The response as two buffers (head, body), valid until Written().
  std::array<asio::const_buffer, 2> Serialize(Response&& r, bool close) {
    // The head is written here rather than through beast::http::response:
    // Beast's fields container allocates per header, and these few fixed
    // headers need no container.
    head_.clear();
    AppendHead(head_, r, close, http10_keep_alive_ && !close);
    body_ = std::move(r.body);
    return {asio::buffer(head_), asio::buffer(body_)};
  }

  // The response was sent: keep its body's buffer for the next one, unless
  // it is large (a rare long page should not pin its memory per connection).
  static constexpr size_t kSpareBodyMax = 64 * 1024;
  void Written() {
    if (pooling::Enabled()) {
      if (body_.capacity() > spare_.capacity() && body_.capacity() <= kSpareBodyMax) spare_.swap(body_);
      spare_.clear();
    }
    body_ = std::string();
  }

  static void AppendHead(std::string& out, const Response& r, bool close, bool keep_alive_header);

 private:
  Arena arena_;  // declared before parser_: the parser's memory lives here
  std::optional<Parser> parser_;
  Request request_;
  std::string head_, body_, spare_;
  bool keep_alive_ = true;
  bool http10_keep_alive_ = false;  // an HTTP/1.0 client asked for keep-alive
};

void Codec::AppendHead(std::string& out, const Response& r, bool close, bool keep_alive_header) {
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

// ---------------------------------------------------------------------------
// Handler memory: where a connection's asynchronous operations live.
//
// Asio allocates each pending operation (a socket read or write, a dispatch
// from another thread) through the handler's associated allocator. Boost
// 1.74's default keeps one recycled block per thread and purpose, and a
// keep-alive request has two operations pending at once (the socket
// operation and the stream's timer), so one of them allocated on every
// request, and a response posted from the writer thread always did. Here
// every handler of a session carries an allocator over a few fixed slots
// inside the session; a request beyond them (or a larger operation) falls
// back to the heap. Slots are claimed with an atomic bitmap because the
// writer thread posts into them too. Safe lifetime: each handler holds the
// session (a shared_ptr), and Asio moves the handler out of an operation
// before it frees the operation's memory.
// ---------------------------------------------------------------------------

class HandlerMemory {
 public:
  static constexpr size_t kSlots = 4;
  static constexpr size_t kSlotBytes = 1024;

  void* Allocate(size_t n) {
    if (n <= kSlotBytes && pooling::Enabled()) {
      uint32_t used = used_.load(std::memory_order_relaxed);
      while (true) {
        uint32_t free_bits = ~used & ((1u << kSlots) - 1);
        if (!free_bits) break;
        uint32_t bit = free_bits & (~free_bits + 1);
        if (used_.compare_exchange_weak(used, used | bit, std::memory_order_acquire))
          return slots_[__builtin_ctz(bit)];
      }
    }
    return ::operator new(n);
  }
  void Deallocate(void* p) {
    auto* c = static_cast<unsigned char*>(p);
    if (c >= &slots_[0][0] && c < &slots_[0][0] + sizeof slots_) {
      size_t i = static_cast<size_t>(c - &slots_[0][0]) / kSlotBytes;
      used_.fetch_and(~(1u << i), std::memory_order_release);
      return;
    }
    ::operator delete(p);
  }

 private:
  alignas(std::max_align_t) unsigned char slots_[kSlots][kSlotBytes];
  std::atomic<uint32_t> used_{0};
};

template <typename T>
struct HandlerAllocator {
  using value_type = T;
  HandlerMemory* memory;
  explicit HandlerAllocator(HandlerMemory* m) : memory(m) {}
  template <typename U>
  HandlerAllocator(const HandlerAllocator<U>& other) : memory(other.memory) {}  // NOLINT: rebinding
  T* allocate(size_t n) { return static_cast<T*>(memory->Allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t) { memory->Deallocate(p); }
  template <typename U>
  bool operator==(const HandlerAllocator<U>& o) const {
    return memory == o.memory;
  }
  template <typename U>
  bool operator!=(const HandlerAllocator<U>& o) const {
    return memory != o.memory;
  }
};

// A handler with HandlerMemory as its associated allocator.
template <typename Handler>
struct AllocHandler {
  HandlerMemory* memory;
  Handler handler;
  using allocator_type = HandlerAllocator<Handler>;
  allocator_type get_allocator() const noexcept { return allocator_type(memory); }
  template <typename... Args>
  void operator()(Args&&... args) {
    handler(std::forward<Args>(args)...);
  }
};

template <typename Handler>
AllocHandler<std::decay_t<Handler>> WithMemory(HandlerMemory& memory, Handler&& handler) {
  return {&memory, std::forward<Handler>(handler)};
}

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
};

// ---------------------------------------------------------------------------
// Session: one connection, one request at a time.
// ---------------------------------------------------------------------------

class Session : public std::enable_shared_from_this<Session>, public ResponseSink {
 public:
  Session(tcp::socket&& socket, ServerState& server, Worker& worker)
      : stream_(std::move(socket)), watchdog_(worker.io), server_(server), worker_(worker) {
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

 private:
  enum class State { kReading, kHandling, kWriting, kClosing };

  void ReadRequest() {
    state_ = State::kReading;
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
    deadline_ = Clock::time_point::max();  // a handler takes what it takes (a grant: seconds)
    Request& request = codec_.BuildRequest();
    try {
      server_.handler(request, Responder(shared_from_this()));
    } catch (const std::exception& e) {
      log::Error("handler for {} threw: {}", std::string(request.target), e.what());
      if (state_ == State::kHandling) Write(ErrorResponse(Status::Internal("internal error")));
    }
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
  bool watchdog_armed_ = false;
  bool closed_ = false;
  beast::flat_buffer buffer_;
  Codec codec_;
  ServerState& server_;
  Worker& worker_;
  State state_ = State::kReading;
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

  impl.signals = signals ? &*signals : nullptr;
  impl.control_guard.emplace(impl.control.get_executor());
  impl.control.run();
  impl.signals = nullptr;

  if (before_stop) before_stop();
  for (auto& w : impl.workers) {
    w->guard.reset();
    w->io.stop();
  }
  for (auto& w : impl.workers) w->thread.join();
}

// ---------------------------------------------------------------------------
// InProcessConnection
// ---------------------------------------------------------------------------

namespace {
// Receives the response, from whichever thread answers.
class WaitingSink final : public ResponseSink {
 public:
  void Send(Response&& r) override {
    std::lock_guard lock(mutex_);
    response_ = std::move(r);
    ready_ = true;
    cv_.notify_one();
  }
  Response Wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return ready_; });
    ready_ = false;
    return std::move(response_);
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool ready_ = false;
  Response response_;
};
}  // namespace

struct InProcessConnection::Impl {
  Handler handler;
  ServerOptions options;
  Codec codec;
  std::shared_ptr<WaitingSink> sink = std::make_shared<WaitingSink>();
};

InProcessConnection::InProcessConnection(Handler handler, ServerOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->handler = std::move(handler);
  impl_->options = std::move(options);
}

InProcessConnection::~InProcessConnection() = default;

int InProcessConnection::Exchange(std::string_view raw, std::string* out) {
  auto& impl = *impl_;
  Parser& parser = impl.codec.Begin(impl.options);
  parser.eager(true);
  error_code ec;
  asio::const_buffer input(raw.data(), raw.size());
  while (input.size() > 0 && !parser.is_done()) {
    size_t used = parser.put(input, ec);
    if (ec) return 0;
    input += used;
  }
  if (!parser.is_done()) return 0;
  Request& request = impl.codec.BuildRequest();
  impl.handler(request, Responder(impl.sink));
  Response response = impl.sink->Wait();
  int status = response.status;
  auto buffers = impl.codec.Serialize(std::move(response), false);
  out->clear();
  for (const auto& b : buffers) out->append(static_cast<const char*>(b.data()), b.size());
  impl.codec.Written();
  return status;
}

}  // namespace hotrow::http
