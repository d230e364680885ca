// PostgreSQL through libpq: connections, a bounded pool, and a listener.
//
// Pool: `size` connections (--db-pool), each owned by one thread, and one
// bounded queue of jobs. A job runs on whichever connection thread is free,
// with a healthy connection: one the server closed is noticed before use (a
// zero-timeout poll of its socket, Connection::Check) and replaced, as is
// one that broke. The pool never opens more
// than `size` connections -- PostgreSQL's max_connections is shared by every
// instance, and "FATAL: sorry, too many clients already" is the failure the
// reference met at 100 concurrent likes -- so requests wait in the queue,
// and a full queue answers overloaded (503) at once instead of waiting
// without bound.
//
// Statements: every statement of a request path is a NamedSql constant at
// the top of its store, prepared on a connection the first time it runs
// there (in a pipeline too: just before it) and then sent as name and
// parameters, so PostgreSQL neither parses nor plans it per call and no SQL
// text is built per request. A row's column list is written once per table
// (HOTROW_PLAN_COLUMNS in dateplan/postgres_store.cc), and rows are built
// with designated initializers.
//
// Listener: one more connection in LISTEN mode on a set of channels; a
// thread hands every notification (delivered by PostgreSQL when the
// notifying transaction commits) to a callback, and calls on_connect (the
// services reload everything) after every (re)connect, since notifications
// sent meanwhile are lost. LISTEN comes first, then the reload, so a change
// committed during the reload is in the reload or in a notification, never
// in neither. A callback or a reload that fails (a re-read that could not
// run) makes the listener reconnect and call on_connect again, with backoff
// (50 ms doubling to 2 s), until it succeeds: a read model is never left
// behind for good. A connection that went silent (a stopped server process,
// a peer that vanished without a FIN or RST) is found by a heartbeat: after
// kHeartbeatInterval (1 s) without traffic the listener sends SELECT 1, and
// one unanswered within kHeartbeatTimeout (3 s) counts as lost. Every
// connection also sets connect_timeout=5, TCP keepalives (idle 5 s, every
// 2 s, 3 probes) and tcp_user_timeout=15000 (Connection::Connect), so the
// kernel gives up on a dead peer in seconds, not two hours.
//
// Staleness bound: while PostgreSQL is reachable, another instance's
// committed change reaches this instance's read models within a few
// milliseconds (the notification), and in the worst case within 5 s plus one
// reload of the commit (heartbeat interval + timeout + the reconnect, then
// the reload; its time is measured in docs/design.md). While PostgreSQL is
// unreachable the read models keep their last state and catch up by the
// reload once it is back.
//
// Only this file and postgres.cc include libpq.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/await.h"
#include "base/batch_queue.h"
#include "base/inline_function.h"
#include "base/status.h"
#include "db/migration.h"
#include "ops/metrics.h"

struct pg_conn;
struct pg_result;

namespace hotrow::db::pg {

// A query's rows, owned. Values are text (libpq's text format).
class Rows {
 public:
  Rows() = default;
  explicit Rows(pg_result* r);
  Rows(Rows&& other) noexcept;
  Rows& operator=(Rows&& other) noexcept;
  ~Rows();

  int size() const;
  bool empty() const { return size() == 0; }
  bool IsNull(int row, int col) const;
  std::string_view Text(int row, int col) const;
  int64_t Int(int row, int col) const;
  double Double(int row, int col) const;
  // BYTEA in hex format ("\x0a1b...") decoded to bytes.
  std::string Bytes(int row, int col) const;

 private:
  pg_result* result_ = nullptr;
};

// A parameter: text, or SQL NULL.
using Param = std::optional<std::string>;

// A statement defined once, by name, at namespace scope (userver's style):
//   constexpr pg::NamedSql kSelectPlan{"select_plan", "SELECT ... WHERE id = $1"};
// Prepared on a connection the first time it runs there, then sent as its
// name and parameters: no SQL text is parsed, planned or assembled per call.
// `name` is the statement's identity (a connection keeps the names it has
// prepared), so two statements never share one.
struct NamedSql {
  const char* name;
  const char* text;
};

class Connection {
 public:
  static Result<std::unique_ptr<Connection>> Connect(const std::string& url);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // One or more statements without parameters (simple protocol).
  Status Exec(const std::string& sql);
  // COPY ... FROM STDIN with `data` in COPY's text format (tab-separated
  // columns, one row per line); for seeding.
  Status CopyIn(const std::string& copy_sql, const std::string& data);
  // One statement with text parameters ($1, $2, ...).
  Result<Rows> Query(const std::string& sql, const std::vector<Param>& params = {});
  // A named statement, prepared here on first use.
  Result<Rows> Query(const NamedSql& sql, const std::vector<Param>& params = {});

  // Sends `statements` in one round trip (libpq pipeline mode), as one
  // implicit transaction unless they BEGIN/COMMIT themselves, and returns
  // each statement's rows. The first failing statement's error is returned
  // (or the implicit COMMIT's, at the end); statements after it did not
  // run. A protocol surprise marks the connection broken (Check() is false
  // from then on, so the pool replaces it) and is unavailable.
  // A named statement (prepared before the pipeline starts, the first time
  // only), or plain text for the likes of BEGIN and SET LOCAL.
  struct Statement {
    std::string sql;
    std::vector<Param> params;
    const NamedSql* named = nullptr;
    Statement(std::string text, std::vector<Param> p = {}) : sql(std::move(text)), params(std::move(p)) {}
    Statement(const NamedSql& n, std::vector<Param> p = {}) : params(std::move(p)), named(&n) {}
    std::string_view text() const { return named ? std::string_view(named->text) : std::string_view(sql); }
  };
  Result<std::vector<Rows>> Pipeline(const std::vector<Statement>& statements);
  // Several pipelines in one round trip: a Sync after each segment, so a
  // failure aborts only the rest of its own segment and the later segments
  // still run (a lock's release after the work it guarded). One result per
  // segment, as Pipeline's.
  std::vector<Result<std::vector<Rows>>> PipelineSegments(std::span<const std::span<const Statement>> segments);

  // Notices, without blocking, a connection the server has closed (a
  // restart, an idle timeout): false when it is no longer usable.
  bool Check();
  // From now on Check() is false: the pool closes the connection when the
  // job that marked it ends (a session lock it still holds goes with it).
  void MarkBroken() { broken_ = true; }
  bool broken() const { return broken_; }
  pg_conn* raw() { return conn_; }

 private:
  explicit Connection(pg_conn* c) : conn_(c) {}
  Status Broken(std::string_view what);
  // Marks the connection broken when `s` says its prepared statements and
  // the server's differ; returns `s`.
  Status NoteStatementLoss(Status s);
  // PQprepare unless this connection has prepared `sql` already.
  Status Prepare(const NamedSql& sql);
  pg_conn* conn_;
  bool broken_ = false;
  std::vector<const char*> prepared_;  // NamedSql::name of each statement prepared here
};

// 40001 (serialization_failure) or 40P01 (deadlock_detected): retry.
bool IsRetryable(const Status& status);
// A statement about to be retried after `status`, counted in
// hotrow_pg_retries_total{sqlstate_class}.
void CountRetry(const Status& status);

struct PoolOptions {
  std::string url;
  int size = 4;
  // The `pool` label of its metrics: "requests" for the pool every store
  // shares, "grants" for the point-card grant's lane.
  std::string name = "requests";
  size_t queue_max = 11024;
  // A job that waited longer than this for a connection runs with
  // unavailable instead (nothing was sent to PostgreSQL): part of the
  // per-request bound (--handler-timeout-ms). Zero: no bound.
  std::chrono::milliseconds queue_wait_max{0};
  // statement_timeout of every request's statements (0: none), set on each
  // connection after on_connect. Run(fn, unbounded = true) lifts it for
  // start-up, reloads and maintenance.
  std::chrono::milliseconds statement_timeout{0};
  // Runs on each new connection (session settings).
  std::function<Status(Connection&)> on_connect;
};

class Pool {
 public:
  // Connects all `size` connections up front (a wrong URL fails at start-up).
  static Result<std::unique_ptr<Pool>> Open(PoolOptions options);
  ~Pool();

  // Inline up to 640 bytes: a point use with its store key, texts and callback
  // is the largest job (pointcard/postgres_store.cc).
  using Job = InlineFunction<void(Result<Connection*>), 640>;
  // Runs `job` on a pool thread with a connection, or with the reason there
  // is none (overloaded when the queue is full, unavailable when stopping or
  // when PostgreSQL cannot be reached). Thread-safe.
  void Submit(Job job);

  // Runs `fn(conn)` on a pool thread and waits for its result. For
  // start-up and tools; request paths use Submit.
  // `unbounded`: without the request statement_timeout, for start-up,
  // reloads and maintenance (loading a large table is not a request).
  template <typename T, typename Fn>
  Result<T> Run(Fn fn, bool unbounded = false) {
    return Await<Result<T>>([&](auto done) {
      Submit([&, done](Result<Connection*> c) {
        if (!c.ok()) return done(c.status());
        if (!unbounded) return done(fn(**c));
        if (Status s = LiftTimeouts(**c, true); !s.ok()) return done(s);
        Result<T> r = fn(**c);
        if (Status s = LiftTimeouts(**c, false); !s.ok()) (**c).MarkBroken();  // never hand it out unbounded
        done(std::move(r));
      });
    });
  }

  void Stop();
  int size() const { return options_.size; }
  // False after a connection attempt failed, until one succeeds: the
  // server is unreachable from here (GET /readyz names it).
  bool reachable() const { return reachable_.load(std::memory_order_relaxed); }
  // Why the last attempt failed (when !reachable()).
  std::string last_error() const;

 private:
  explicit Pool(PoolOptions options);
  // lift: statement_timeout 0; else back to options_.statement_timeout.
  Status LiftTimeouts(Connection& c, bool lift);
  void Loop(std::unique_ptr<Connection> conn);
  Result<std::unique_ptr<Connection>> Reconnect();

  PoolOptions options_;
  struct Queued {
    Job job;
    std::chrono::steady_clock::time_point at;
  };
  BatchQueue<Queued> queue_;
  std::mutex stop_mutex_;
  std::vector<std::thread> threads_;
  std::atomic<bool> reachable_{true};
  mutable std::mutex error_mutex_;
  std::string last_error_;  // guarded by error_mutex_
  struct Metrics {
    metrics::Gauge* busy;
    metrics::Histogram* wait_seconds;
    metrics::Counter* reconnects;
    metrics::Counter* connect_failures;
    metrics::Registration size, queued;
  } metrics_;
};

// Runs `create` on `conn` while holding the session advisory lock `key`:
// of several processes creating a schema at once (instances starting, a
// `hotrow seed`), one runs `create` (which creates the schema if absent and
// runs its Migrate steps) and the others wait and then find it done. Each
// store's exported Create...Schema takes its lock this way.
Status WithSchemaLock(Connection& conn, int64_t key, Status (*create)(Connection&));
// The same on a pooled connection, without the request deadline (start-up).
Status CreateSchemaLocked(Pool& pool, int64_t key, Status (*create)(Connection&));

// Schema migrations on PostgreSQL (the rules: db/migration.h):
// schema_migrations(component, version) records the steps applied; runs
// `component`'s steps not yet recorded, in order, each with its record in
// one transaction; a contract step also records in schema_compat the oldest
// schema of `component` a binary must know. Call it inside
// CreateSchemaLocked (its advisory lock keeps instances from racing). A
// database ahead of `steps` is used as it is unless schema_compat refuses
// this binary.
Status Migrate(Connection& conn, std::string_view component, const std::vector<MigrationStep>& steps);

class Listener {
 public:
  using OnNotify = std::function<Status(const std::string& channel, const std::string& payload)>;
  static constexpr std::chrono::milliseconds kHeartbeatInterval{1000};
  static constexpr std::chrono::milliseconds kHeartbeatTimeout{3000};
  static Result<std::unique_ptr<Listener>> Start(const std::string& url, std::vector<std::string> channels,
                                                 OnNotify on_notify, std::function<Status()> on_connect);
  ~Listener();

  // (Re)connects so far, for tests and logs.
  int64_t connects() const { return connects_.load(); }

  // Where the listener is (GET /readyz): kListening once LISTEN and the
  // reload after it succeeded, until the connection breaks or a heartbeat
  // goes unanswered.
  enum class State { kConnecting, kUnreachable, kReloading, kListening };
  State state() const { return state_.load(std::memory_order_relaxed); }
  // Since the connection last showed it was alive (a heartbeat's answer, a
  // notification).
  std::chrono::steady_clock::duration silence() const;

 private:
  Listener() = default;
  void Loop();
  void Hear();  // the connection showed it is alive
  // Serves one connection until it breaks, a callback fails or Stop.
  void Listen(Connection& conn);
  std::string url_;
  std::vector<std::string> channels_;
  OnNotify on_notify_;
  std::function<Status()> on_connect_;
  std::mutex mutex_;
  bool stopping_ = false;
  std::atomic<int64_t> connects_{0};
  std::atomic<State> state_{State::kConnecting};
  std::atomic<int64_t> last_heard_ns_{0};  // steady_clock, since its epoch
  std::thread thread_;
};

}  // namespace hotrow::db::pg

namespace hotrow::db::pg {

// `url` with its database name replaced: postgresql://u@h:p/old?x -> .../db?x
std::string WithDatabase(const std::string& url, const std::string& db);

// Appends `text` to a COPY text-format buffer, escaping backslash, tab,
// newline and carriage return.
void AppendCopyText(std::string& out, std::string_view text);

}  // namespace hotrow::db::pg
