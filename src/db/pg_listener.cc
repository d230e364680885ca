// db::pg::Listener (postgres.h): LISTEN on its own connection, a reload
// after every reconnect, and a heartbeat that notices a silent server.
#include <sys/select.h>

#include <chrono>
#include <optional>

#include <libpq-fe.h>

#include "db/postgres.h"
#include "ops/log.h"

namespace hotrow::db::pg {

Result<std::unique_ptr<Listener>> Listener::Start(const std::string& url, std::vector<std::string> channels,
                                                  OnNotify on_notify, std::function<Status()> on_connect) {
  // No probe connection: the loop retries until PostgreSQL answers, and
  // GET /readyz says where it is meanwhile.
  std::unique_ptr<Listener> l(new Listener());
  l->url_ = url;
  l->channels_ = std::move(channels);
  l->on_notify_ = std::move(on_notify);
  l->on_connect_ = std::move(on_connect);
  l->thread_ = std::thread([p = l.get()] { p->Loop(); });
  return l;
}

void Listener::Hear() {
  last_heard_ns_.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
}

std::chrono::steady_clock::duration Listener::silence() const {
  return std::chrono::steady_clock::now().time_since_epoch() -
         std::chrono::steady_clock::duration(last_heard_ns_.load(std::memory_order_relaxed));
}

Listener::~Listener() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void Listener::Loop() {
  auto backoff = std::chrono::milliseconds(50);
  std::optional<std::chrono::steady_clock::time_point> warned;  // the last "cannot connect"
  auto stopping = [this] {
    std::lock_guard lock(mutex_);
    return stopping_;
  };
  while (!stopping()) {
    // kConnecting only before the first connection (the read models are
    // not followed yet); a reconnect after a loss or a failed attempt stays
    // kUnreachable until it connects: while PostgreSQL is away, every
    // instance waits alike (a shared outage, not this instance's).
    auto conn = Connection::Connect(url_);
    state_.store(conn.ok() ? State::kReloading : State::kUnreachable, std::memory_order_relaxed);
    // Said at once and then every 30 s: a listener that never connects
    // (max_connections taken by the pools) showed only in GET /readyz.
    if (!conn.ok() && (!warned || std::chrono::steady_clock::now() - *warned > std::chrono::seconds(30))) {
      warned = std::chrono::steady_clock::now();
      log::Warn("PostgreSQL listener: cannot connect, so other instances' changes are not followed until it does: {}",
                conn.status().ToString());
    }
    if (conn.ok()) warned.reset();
    bool listening = conn.ok() && (*conn)->Exec("SET application_name = 'hotrow-listener'").ok();
    for (const auto& ch : channels_) listening = listening && (*conn)->Exec("LISTEN \"" + ch + "\"").ok();
    // LISTEN first, then reload: a change committed during the reload is
    // both in the reload and in a notification, never in neither.
    Status loaded = listening ? on_connect_() : Status::Unavailable("not listening");
    connects_.fetch_add(1);
    if (!loaded.ok()) {
      if (listening) log::Warn("PostgreSQL listener: reload failed, retrying: {}", loaded.ToString());
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
      continue;
    }
    backoff = std::chrono::milliseconds(50);
    Hear();
    state_.store(State::kListening, std::memory_order_relaxed);
    Listen(**conn);
    state_.store(State::kUnreachable, std::memory_order_relaxed);
    if (!stopping()) log::Warn("PostgreSQL listener: reconnecting and reloading");
  }
}

void Listener::Listen(Connection& conn) {
  using Clock = std::chrono::steady_clock;
  PGconn* c = conn.raw();
  auto last_heard = Clock::now();
  std::optional<Clock::time_point> probe_sent;
  while (true) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
    }
    int fd = PQsocket(c);
    fd_set set;
    FD_ZERO(&set);
    FD_SET(fd, &set);
    timeval tv{0, 200000};  // wake up to notice Stop and the heartbeat
    int ready = select(fd + 1, &set, nullptr, nullptr, &tv);
    if (ready < 0 || PQconsumeInput(c) != 1) return;
    if (ready > 0) {
      last_heard = Clock::now();
      Hear();
    }
    while (PGnotify* n = PQnotifies(c)) {
      Status s = on_notify_(n->relname, n->extra);
      PQfreemem(n);
      if (!s.ok()) {
        log::Warn("PostgreSQL listener: a change could not be applied ({}); reloading", s.ToString());
        return;
      }
    }
    // Read again: a slow callback above may have let the answer arrive.
    if (probe_sent && PQconsumeInput(c) != 1) return;
    if (probe_sent && !PQisBusy(c)) {  // the heartbeat's answer is in
      while (PGresult* r = PQgetResult(c)) PQclear(r);
      probe_sent.reset();
    }
    auto now = Clock::now();
    if (probe_sent && now - *probe_sent > kHeartbeatTimeout) {
      log::Warn("PostgreSQL listener: no answer to a heartbeat in {} ms", kHeartbeatTimeout.count());
      return;
    }
    if (!probe_sent && now - last_heard > kHeartbeatInterval) {
      if (PQsendQuery(c, "SELECT 1") != 1) return;
      probe_sent = now;
    }
  }
}

}  // namespace hotrow::db::pg
