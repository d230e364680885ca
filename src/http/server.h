// The HTTP/1.1 server: Boost.Beast over Boost.Asio.
//
// Threads: one io_context per worker thread (--threads, default one per
// core). One acceptor hands new connections to the workers round-robin, and a
// connection lives on its worker for good, so a session needs no locks.
// Handlers may answer later from any thread (the group-commit writer does);
// the Responder posts the response back to the connection's worker.
//
// Bounds (each answered with the error named, then a graceful close):
//   header block   > header_bytes_max (8 KiB)   -> 431 headers_too_large
//   body           > body_bytes_max   (64 KiB)  -> 413 payload_too_large
//   a chunk header (its extensions) or the trailer section larger than the
//   read buffer (32 KiB, or twice header_bytes_max) -> 431 headers_too_large
//   open conns     > connections_max  (10,000)  -> 503 overloaded (canned, by a
//                                                  Rejector, while fewer than 1,024
//                                                  rejections are in progress; past
//                                                  that the connection is dropped)
//   a request not complete request_timeout (30 s) after its first read began,
//   or an idle keep-alive connection past it     -> closed without a response
// After an error response the server shuts down its sending side and reads
// and discards up to drain_bytes_max for at most drain_timeout, so the client
// reads the response instead of a connection reset.
//
// Shutdown (SIGTERM/SIGINT or Shutdown()): first the drain delay
// (drain_delay: everything is served, ready() is false); then stop accepting; close idle
// connections; let in-flight requests finish and answer with
// "Connection: close". Once no connection is left (or the grace period,
// shutdown_timeout_max, --shutdown-grace-ms, 15 s, has passed) call
// before_stop while the event loops still run: hotrow serve stops its work
// sources there, in the one order written at Backends in cmd/serve.cc, and
// each answers what it holds. Then wait up to drain_timeout (2 s) for those
// answers to be written, close what is left, stop the workers and return
// from Run() (hotrow serve then exits 0). The services and stores are
// destroyed only after that, so no thread calls into a freed object. Should
// a handler still hold a connection at the end (a work source that was not
// stopped: a bug), Run() returns false, and hotrow serve logs it and leaves
// with _exit(1) rather than free what that handler will touch; everything
// acknowledged is committed by then.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/auth.h"
#include "base/status.h"
#include "http/router.h"

namespace hotrow::http {

struct ServerState;

struct ServerOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 8080;  // 0 picks a free port; see Server::port()
  int threads = 0;       // 0: one per core
  int connections_max = 10000;
  std::chrono::milliseconds request_timeout{30000};
  // A handler must answer within this (unless it marks the request
  // long_running); past it the connection answers 503 itself, an
  // indeterminate outcome, and closes. The stores' own bounds (queue waits,
  // statement and lock timeouts) sit below it, so this is a backstop.
  std::chrono::milliseconds handler_timeout{10000};
  size_t body_bytes_max = 64 * 1024;
  // All connections' request bodies together: a body is reserved whole
  // when its header arrives (Content-Length, or body_bytes_max when
  // chunked) and released when its request is answered; one that does not
  // fit is refused at once with 503 overloaded. Bounds what slow senders
  // can make the server hold (3,000 partly sent 60 KB bodies took 212 MiB).
  size_t body_bytes_in_flight_max = 64 * 1024 * 1024;
  size_t header_bytes_max = 8 * 1024;
  size_t drain_bytes_max = 1024 * 1024;
  std::chrono::milliseconds drain_timeout{2000};
  std::chrono::milliseconds shutdown_timeout_max{15000};
  // On SIGTERM (or Shutdown()), how long the server stays up answering
  // every route, with ready() false (GET /readyz answers 503), so that
  // balancers stop sending before the acceptor closes. A second signal ends
  // the delay at once; SIGINT (Ctrl-C at a terminal) skips it. hotrow
  // serve: --drain-delay-ms, 5 s.
  std::chrono::milliseconds drain_delay{0};
  // Called once when the drain delay begins (sd_notify STOPPING=1), on the
  // control thread.
  std::function<void()> on_drain;
  // Called once by Run when the server is ready for traffic: after its
  // signal handling is installed, so a SIGTERM sent on readiness (systemd's
  // READY=1) drains instead of killing the process.
  std::function<void()> on_ready;
  bool handle_signals = true;
  // Origins whose browser requests get CORS headers ("*": any origin);
  // empty: no CORS headers at all.
  std::vector<std::string> cors_origins;
  // Failed credentials: every 401 and 403 answered to a request that had an
  // Authorization header counts against its client (AuthThrottleClient,
  // message.h); a client past the limit gets 429 with
  // Retry-After for any request with an Authorization header, before its
  // handler runs. Requests without one pass. Null: no throttle. Owned by
  // the caller; outlives the server.
  AuthFailureThrottle* auth_throttle = nullptr;
};

class Server {
 public:
  Server(ServerOptions options, Handler handler);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens. After it, port() is the bound port.
  Status Listen();
  uint16_t port() const;
  int threads() const;

  // Serves until shutdown completes. before_stop runs once no connection is
  // left or the grace period (shutdown_timeout_max) has passed, on the
  // calling thread, while the event loops still run: it must stop every
  // source of responses (writer, pool, grant threads), which answer what
  // they hold. Run then waits for those responses to be written (closing
  // what is left after drain_timeout) and stops the loops. False when a
  // handler still held a connection at the end: the caller must then not
  // destroy the server (it would free what that handler will call).
  bool Run(const std::function<void()>& before_stop);

  // Begins a graceful shutdown (after drain_delay). Thread-safe; idempotent.
  void Shutdown();

  // False from the start of the drain delay on.
  bool ready() const;

  // Connections open right now.
  int connections() const;
  // Connections refused past connections_max so far.
  uint64_t refused() const;
  // Request-body bytes reserved by connections right now.
  int64_t body_bytes_in_flight() const;

 private:
  std::unique_ptr<struct ServerState> impl_;
};

// Runs requests through the same parsing, routing and response writing as a
// connection, without a socket: for allocation counts and micro-benchmarks
// (bench/request_bench.cc, tests/alloc/). Not thread-safe; one request at a
// time.
class InProcessConnection {
 public:
  explicit InProcessConnection(Handler handler, ServerOptions options = {});
  ~InProcessConnection();

  // Parses the first request of `raw` as a connection does (the header,
  // the framing rules of Codec::CheckHeader, then the body), dispatches it,
  // waits for its response (a handler may answer from another thread) and
  // writes the response, head and body, into `out`. Returns the status code
  // (0 when `raw` does not begin with a complete request). `used` gets the
  // bytes that request took, so pipelined requests can follow, and `close`
  // whether the connection would close after this answer.
  int Exchange(std::string_view raw, std::string* out, size_t* used = nullptr, bool* close = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hotrow::http
