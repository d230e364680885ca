#include "http/server.h"

#include <sys/resource.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>  // before Asio: g++ 12 in C++20 mode needs it for awaitable.hpp
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "http/errors.h"
#include "http/rejector.h"
#include "http/server_state.h"
#include "ops/log.h"

namespace hotrow::http {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

namespace {

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
      refused.fetch_add(1, std::memory_order_relaxed);
      // Past the limit: answer 503 while the rejectors stay few, else drop.
      if (rejecting.load(std::memory_order_relaxed) < 1024)
        asio::post(w.io, [this, s = std::move(socket)]() mutable {
          std::make_shared<Rejector>(std::move(s), rejecting)->Start();
        });
    } else {
      asio::post(w.io, [this, &w, s = std::move(socket)]() mutable { StartSession(std::move(s), *this, w); });
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
uint64_t Server::refused() const { return impl_->refused.load(std::memory_order_relaxed); }
int64_t Server::body_bytes_in_flight() const { return impl_->body_bytes_in_flight.load(std::memory_order_relaxed); }
bool Server::ready() const { return !impl_->unready.load(std::memory_order_relaxed); }

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
  asio::post(impl_->control, [this] { impl_->BeginDrain(true); });
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
        if (auto sp = LockSession(s)) w.sweep_due.push_back(std::move(sp));
    }
    for (auto& s : w.sweep_due) CheckHandlerDeadline(*s, now);
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
          if (auto sp = LockSession(s)) sessions.push_back(std::move(sp));
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

void ServerState::BeginDrain(bool delay) {
  if (draining.load()) return;
  bool first = !unready.exchange(true);
  if (first && options.on_drain) options.on_drain();
  if (!first || !delay || options.drain_delay.count() == 0) {
    if (drain_delay_timer) drain_delay_timer->cancel();
    return BeginShutdown();
  }
  log::Info("draining: /readyz answers 503 for {} ms, then the server stops accepting", options.drain_delay.count());
  drain_delay_timer.emplace(control, options.drain_delay);
  drain_delay_timer->async_wait([this](error_code) { BeginShutdown(); });
  if (signals) {
    // A second signal ends the delay.
    signals->async_wait([this](error_code ec, int sig) {
      if (ec) return;
      log::Info("received signal {} again; not waiting for the drain delay", sig);
      BeginDrain(true);
    });
  }
}

void ServerState::BeginShutdown() {
  if (draining.exchange(true)) return;
  log::Info("shutting down: {} connection(s) open", connections.load());
  asio::post(workers[0]->io, [this] {
    error_code ignored;
    acceptor->close(ignored);
  });
  ForEachSession([](Session& s) { DrainSession(s); });
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
  // SIGTERM drains from before the first connection is accepted: a signal
  // sent once /healthz answers (or on READY=1) must not find the default
  // action, which kills the process undrained.
  std::optional<asio::signal_set> signals;
  if (impl.options.handle_signals) {
    signals.emplace(impl.control, SIGINT, SIGTERM);
    signals->async_wait([&impl](error_code ec, int sig) {
      if (!ec) {
        log::Info("received signal {}", sig);
        // SIGINT is someone at a terminal (Ctrl-C): no balancer to wait for.
        impl.BeginDrain(sig != SIGINT);
      }
    });
  }
  for (auto& w : impl.workers) {
    w->guard.emplace(w->io.get_executor());
    w->sweep.emplace(w->io);
    asio::post(w->io, [w = w.get()] { SweepHandlers(*w); });
    w->thread = std::thread([w = w.get()] { RunEventLoop(w->io); });
  }
  asio::post(impl.workers[0]->io, [&impl] { impl.Accept(); });

  impl.signals = signals ? &*signals : nullptr;
  impl.control_guard.emplace(impl.control.get_executor());
  if (impl.options.on_ready) impl.options.on_ready();
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
    impl.ForEachSession([](Session& s) { ForceCloseSession(s); });
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
