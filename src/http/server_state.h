// What the acceptor (server.cc) and the connections (session.cc) share:
// the server's state and each worker thread's. Internal to src/http.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>
#include <utility>  // before Asio: g++ 12 in C++20 mode needs it for awaitable.hpp
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "http/server.h"

namespace hotrow::http {

// One connection (session.cc); the server reaches it through the functions
// below only.
class Session;

struct Worker {
  // Declared before io so that sessions destroyed with io can still
  // unregister themselves.
  std::mutex mutex;
  std::unordered_set<Session*> sessions;
  boost::asio::io_context io{1};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard;
  // Every kSweepInterval: answers for the handlers past their deadline.
  std::optional<boost::asio::steady_timer> sweep;
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
  std::atomic<bool> unready{false};  // the drain delay began
  std::atomic<uint64_t> refused{0};
  // Signals and shutdown run here; kept running by control_guard until the
  // drain ends.
  boost::asio::io_context control{1};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> control_guard;
  boost::asio::signal_set* signals = nullptr;
  std::optional<boost::asio::steady_timer> drain_poll;
  std::chrono::steady_clock::time_point drain_deadline;
  std::vector<std::unique_ptr<Worker>> workers;
  std::optional<boost::asio::ip::tcp::acceptor> acceptor;
  size_t next_worker = 0;
  uint16_t port = 0;
  std::once_flag shutdown_once;

  ServerState(ServerOptions o, Handler h) : options(std::move(o)), handler(std::move(h)) {}
  void Accept();
  // The drain delay (when `delay`), then BeginShutdown; a second call ends
  // the delay.
  void BeginDrain(bool delay);
  void BeginShutdown();
  std::optional<boost::asio::steady_timer> drain_delay_timer;
  void PollDrain();
  // Runs `fn` on every open session, each on its own worker.
  template <typename Fn>
  void ForEachSession(Fn fn);
  // Waits (on the calling thread) until no connection is open or `bound`
  // passes; true when none is.
  bool WaitForNoConnections(std::chrono::milliseconds bound);
};

// A connection's read buffer: room for a whole header, and for a chunk
// header or a trailer section of up to 32 KiB, never near the 64 KiB at
// which Beast's field container throws.
inline size_t ReadBufferMax(const ServerOptions& options) {
  return std::max<size_t>(32 * 1024, options.header_bytes_max * 2);
}

// session.cc. Each runs on the session's own worker.
// A new connection, already counted in ServerState::connections.
void StartSession(boost::asio::ip::tcp::socket&& socket, ServerState& server, Worker& worker);
// Shutdown: an idle connection closes now, a busy one after its response.
void DrainSession(Session& session);
// The end of shutdown: whatever the connection is doing, it closes now.
void ForceCloseSession(Session& session);
// From the worker's sweep: answers for a handler past its deadline.
void CheckHandlerDeadline(Session& session, boost::asio::steady_timer::clock_type::time_point now);
// The session, or null when it is being destroyed (under Worker::mutex).
std::shared_ptr<Session> LockSession(Session* session);

}  // namespace hotrow::http
