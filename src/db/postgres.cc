#include "db/postgres.h"

#include <poll.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <libpq-fe.h>

#include "base/version.h"
#include "ops/log.h"

namespace hotrow::db::pg {

// ---------------------------------------------------------------------------
// Rows
// ---------------------------------------------------------------------------

Rows::Rows(pg_result* r) : result_(r) {}
Rows::Rows(Rows&& o) noexcept : result_(std::exchange(o.result_, nullptr)) {}
Rows& Rows::operator=(Rows&& o) noexcept {
  if (this != &o) {
    if (result_) PQclear(result_);
    result_ = std::exchange(o.result_, nullptr);
  }
  return *this;
}
Rows::~Rows() {
  if (result_) PQclear(result_);
}
int Rows::size() const { return result_ ? PQntuples(result_) : 0; }
bool Rows::IsNull(int row, int col) const { return PQgetisnull(result_, row, col) != 0; }
std::string_view Rows::Text(int row, int col) const {
  return {PQgetvalue(result_, row, col), static_cast<size_t>(PQgetlength(result_, row, col))};
}
int64_t Rows::Int(int row, int col) const { return std::strtoll(PQgetvalue(result_, row, col), nullptr, 10); }
double Rows::Double(int row, int col) const { return std::strtod(PQgetvalue(result_, row, col), nullptr); }
std::string Rows::Bytes(int row, int col) const {
  size_t n = 0;
  unsigned char* raw = PQunescapeBytea(reinterpret_cast<const unsigned char*>(PQgetvalue(result_, row, col)), &n);
  std::string out(reinterpret_cast<char*>(raw), n);
  PQfreemem(raw);
  return out;
}

// ---------------------------------------------------------------------------
// Connection
// ---------------------------------------------------------------------------

namespace {

// One map from a PostgreSQL failure to hotrow's codes (docs/api.md,
// "Which errors are definite"). The client's message says what kind of
// failure it was; the server's text and the statement go into the detail,
// which is logged, never sent.
Status ErrorOf(PGconn* conn, const PGresult* r, std::string_view context) {
  const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  std::string message = r ? PQresultErrorMessage(r) : PQerrorMessage(conn);
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  const char* detail = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL) : nullptr;
  std::string text = "SQLSTATE " + std::string(state ? state : "?????") + ": " + message;
  if (detail && message.find(detail) == std::string::npos) text += " DETAIL: " + std::string(detail);
  if (!context.empty()) text += " (" + std::string(context.substr(0, 120)) + ")";
  std::string_view s = state ? state : "";
  std::string_view cls = s.substr(0, 2);
  auto typed = [&](Status st) { return std::move(st).WithDetail(text).WithSqlState(s); };
  if (PQstatus(conn) != CONNECTION_OK)
    return typed(Status::Unavailable("the database connection was lost; the outcome of a write is unknown"));
  if (cls == "08" || s == "57P01" || s == "57P02" || s == "57P03" || cls == "53")
    return typed(Status::Unavailable("the database is unavailable (shutting down, restarting or out of resources)"));
  if (s == "25006") return typed(Status::Unavailable("the database is read-only (a replica); nothing was written"));
  if (s == "40001" || s == "40P01")
    return typed(Status::Unavailable("a conflict with concurrent requests; nothing was written, retry"));
  // 57014 is also a cancel request's (pg_cancel_backend, an admin tool, a
  // pooler; never PostgreSQL's own shutdown, which is 57P01): only the
  // server's primary text, when not translated, tells them apart.
  const char* primary = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
  if (s == "57014" && primary && std::string_view(primary) == "canceling statement due to user request")
    return typed(
        Status::Unavailable("the database canceled the statement (a cancel from outside hotrow, such as "
                            "pg_cancel_backend); nothing was written"));
  if (s == "57014" || s == "55P03")
    return typed(Status::Unavailable("the database did not answer in time; nothing was written"));
  if (cls == "22") return typed(Status::BadRequest("a value in the request is out of the range the store can hold"));
  if (cls == "23") return typed(Status::Conflict("the change conflicts with the data's constraints"));
  return typed(Status::Internal("unexpected database error"));
}

bool ResultOk(const PGresult* r) {
  auto st = PQresultStatus(r);
  return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

void Collect(const std::vector<Param>& params, std::vector<const char*>* values) {
  values->clear();
  for (const auto& p : params) values->push_back(p ? p->c_str() : nullptr);
}

}  // namespace

Result<std::unique_ptr<Connection>> Connection::Connect(const std::string& url) {
  // Defaults first, the URL last: whatever the URL sets wins (libpq: a
  // later keyword overrides an earlier one; dbname is expanded in place).
  // connect_timeout: an outage must not hold a connect for minutes.
  // keepalives and tcp_user_timeout: a peer that vanished is noticed in
  // about 15 s, not after the kernel's two hours.
  static const char* const kKeywords[] = {
      "connect_timeout",  "keepalives",       "keepalives_idle", "keepalives_interval",
      "keepalives_count", "tcp_user_timeout", "dbname",          nullptr};
  const char* values[] = {"5", "1", "5", "2", "3", "15000", url.c_str(), nullptr};
  PGconn* c = PQconnectdbParams(kKeywords, values, 1);
  if (!c || PQstatus(c) != CONNECTION_OK) {
    std::string message = c ? PQerrorMessage(c) : "out of memory";
    if (c) PQfinish(c);
    while (!message.empty() && message.back() == '\n') message.pop_back();
    // libpq's text names hosts and ports: the log's, not a response's.
    return Status::Unavailable("cannot connect to PostgreSQL").WithDetail(std::move(message));
  }
  // "relation already exists, skipping" and friends: not for the log.
  PQsetNoticeProcessor(
      c, [](void*, const char*) {}, nullptr);
  return std::unique_ptr<Connection>(new Connection(c));
}

Connection::~Connection() { PQfinish(conn_); }

bool Connection::Check() {
  if (broken_ || PQstatus(conn_) != CONNECTION_OK) return false;
  // An idle connection hears nothing but its end: a terminated backend
  // (57P01, a failover) sends its FATAL message and closes a moment later,
  // so the end may not be readable yet when the message is. Anything
  // readable while idle means replace it (rarely, a notice: a reconnect
  // costs nothing there, as no transaction is open between jobs).
  // (A reported setting changed by a reload, ParameterStatus, costs one
  // reconnect per pooled connection.) poll() failing (EINTR) says nothing.
  pollfd p{PQsocket(conn_), POLLIN, 0};
  return poll(&p, 1, 0) <= 0;
}

Status Connection::CopyIn(const std::string& copy_sql, const std::string& data) {
  PGresult* r = PQexec(conn_, copy_sql.c_str());
  if (PQresultStatus(r) != PGRES_COPY_IN) {
    Status s = ErrorOf(conn_, r, copy_sql);
    PQclear(r);
    return s;
  }
  PQclear(r);
  if (PQputCopyData(conn_, data.data(), static_cast<int>(data.size())) != 1 || PQputCopyEnd(conn_, nullptr) != 1)
    return ErrorOf(conn_, nullptr, copy_sql);
  Status s = Status::Ok();
  while (PGresult* done = PQgetResult(conn_)) {
    if (s.ok() && !ResultOk(done)) s = ErrorOf(conn_, done, copy_sql);
    PQclear(done);
  }
  return s;
}

Status Connection::Exec(const std::string& sql) {
  PGresult* r = PQexec(conn_, sql.c_str());
  Status s = ResultOk(r) ? Status::Ok() : ErrorOf(conn_, r, sql);
  PQclear(r);
  return s;
}

Result<Rows> Connection::Query(const std::string& sql, const std::vector<Param>& params) {
  std::vector<const char*> values;
  Collect(params, &values);
  PGresult* r =
      PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr, 0);
  if (!ResultOk(r)) {
    Status s = ErrorOf(conn_, r, sql);
    PQclear(r);
    return s;
  }
  return Rows(r);
}

Status Connection::Prepare(const NamedSql& sql) {
  if (std::find(prepared_.begin(), prepared_.end(), sql.name) != prepared_.end()) return Status::Ok();
  PGresult* r = PQprepare(conn_, sql.name, sql.text, 0, nullptr);
  if (!ResultOk(r)) {
    Status s = NoteStatementLoss(ErrorOf(conn_, r, sql.text));
    PQclear(r);
    return s;
  }
  PQclear(r);
  prepared_.push_back(sql.name);
  return Status::Ok();
}

Result<Rows> Connection::Query(const NamedSql& sql, const std::vector<Param>& params) {
  if (Status s = Prepare(sql); !s.ok()) return s;
  std::vector<const char*> values;
  Collect(params, &values);
  PGresult* r = PQexecPrepared(conn_, sql.name, static_cast<int>(values.size()), values.data(), nullptr, nullptr, 0);
  if (!ResultOk(r)) {
    Status s = NoteStatementLoss(ErrorOf(conn_, r, sql.text));
    PQclear(r);
    return s;
  }
  return Rows(r);
}

Result<std::vector<Rows>> Connection::Pipeline(const std::vector<Statement>& statements) {
  std::span<const Statement> one(statements);
  auto results = PipelineSegments(std::span<const std::span<const Statement>>(&one, 1));
  return std::move(results[0]);
}

std::vector<Result<std::vector<Rows>>> Connection::PipelineSegments(
    std::span<const std::span<const Statement>> segments) {
  auto all_broken = [&](std::string_view what) {
    Status s = Broken(what);
    std::vector<Result<std::vector<Rows>>> failed;
    for (size_t i = 0; i < segments.size(); ++i) failed.emplace_back(s);
    return failed;
  };
  // Named statements are prepared first, outside the pipeline (a round trip
  // each, the first time on this connection only).
  for (const auto& segment : segments)
    for (const auto& st : segment)
      if (st.named) {
        if (Status s = Prepare(*st.named); !s.ok()) {
          std::vector<Result<std::vector<Rows>>> failed;
          for (size_t i = 0; i < segments.size(); ++i) failed.emplace_back(s);
          return failed;
        }
      }
  if (PQenterPipelineMode(conn_) != 1) return all_broken("enter pipeline mode");
  std::vector<const char*> values;
  for (const auto& segment : segments) {
    for (const auto& st : segment) {
      Collect(st.params, &values);
      int sent = st.named ? PQsendQueryPrepared(conn_, st.named->name, static_cast<int>(values.size()), values.data(),
                                                nullptr, nullptr, 0)
                          : PQsendQueryParams(conn_, st.sql.c_str(), static_cast<int>(values.size()), nullptr,
                                              values.data(), nullptr, nullptr, 0);
      if (sent != 1) return all_broken(st.text());
    }
    if (PQpipelineSync(conn_) != 1) return all_broken("pipeline sync");
  }
  std::vector<Result<std::vector<Rows>>> out;
  out.reserve(segments.size());
  // Each statement yields its result then a NULL; statements after an error
  // yield PGRES_PIPELINE_ABORTED up to their segment's Sync. At each Sync
  // the segment's implicit transaction commits, and a failing commit (a
  // deferred constraint) yields an error result, then a NULL, before
  // PGRES_PIPELINE_SYNC. Anything else is a protocol surprise, and the
  // connection is not trusted again.
  for (const auto& segment : segments) {
    std::vector<Rows> rows;
    rows.reserve(segment.size());
    std::optional<Status> failure;
    for (const auto& st : segment) {
      PGresult* r = PQgetResult(conn_);
      if (!r) return all_broken("pipeline: a statement without a result");
      if (!failure && !ResultOk(r)) failure = NoteStatementLoss(ErrorOf(conn_, r, st.text()));
      rows.emplace_back(r);
      if (PGresult* extra = PQgetResult(conn_)) {
        PQclear(extra);
        return all_broken("pipeline: a statement with two results");
      }
    }
    for (int results = 0;; ++results) {
      PGresult* r = PQgetResult(conn_);
      if (!r && (PQstatus(conn_) != CONNECTION_OK || results > 4)) return all_broken("pipeline: no sync");
      if (!r) continue;
      ExecStatusType st = PQresultStatus(r);
      if (st == PGRES_PIPELINE_SYNC) {
        PQclear(r);
        break;
      }
      if (!failure && st == PGRES_FATAL_ERROR) failure = ErrorOf(conn_, r, "COMMIT at pipeline sync");
      PQclear(r);
    }
    if (failure)
      out.emplace_back(std::move(*failure));
    else
      out.emplace_back(std::move(rows));
  }
  if (PQexitPipelineMode(conn_) != 1) return all_broken("exit pipeline mode");
  // A failed statement inside BEGIN leaves the session in an aborted
  // transaction, which Sync does not end. (A transaction left open on
  // purpose, as the grant's, is the caller's to end.)
  if (PQtransactionStatus(conn_) == PQTRANS_INERROR)
    log::WarnIfFailed(Exec("ROLLBACK"), "PostgreSQL: ROLLBACK of a failed transaction");
  return out;
}

Status Connection::NoteStatementLoss(Status s) {
  // 26000: a statement this connection prepared is gone (DISCARD ALL or
  // DEALLOCATE from elsewhere, a pooler in between); 42P05: a name it has
  // not prepared exists. Either way prepared_ no longer matches the server,
  // so the pool replaces the connection instead of failing every later call.
  if (s.sqlstate() == "26000" || s.sqlstate() == "42P05") {
    log::Warn("PostgreSQL: the server's prepared statements differ from this connection's ({}); replacing it",
              s.sqlstate());
    broken_ = true;
  }
  return s;
}

Status Connection::Broken(std::string_view what) {
  broken_ = true;
  return Status::Unavailable("the database connection was lost; the outcome of a write is unknown")
      .WithDetail("libpq pipeline: " + std::string(what) + ": " + PQerrorMessage(conn_));
}

bool IsRetryable(const Status& status) { return status.sqlstate() == "40001" || status.sqlstate() == "40P01"; }

void CountRetry(const Status& status) {
  // Resolved once: a retry allocates nothing.
  static const auto counters = [] {
    std::array<std::pair<std::string_view, metrics::Counter*>, 7> c;
    size_t i = 0;
    for (std::string_view cls : {"40", "55", "57", "08", "53", "23", "other"})
      c[i++] = {cls, &metrics::Registry::Default().GetCounter(
                         "hotrow_pg_retries_total",
                         "Transactions retried, by the SQLSTATE class of the failure (40: serialization failure "
                         "or deadlock).",
                         {{"sqlstate_class", std::string(cls)}})};
    return c;
  }();
  std::string_view cls = status.sqlstate().substr(0, 2);
  for (const auto& [name, counter] : counters)
    if (name == cls || name == "other") return counter->Add();
}

// ---------------------------------------------------------------------------
// Pool
// ---------------------------------------------------------------------------

Pool::Pool(PoolOptions options)
    : options_(std::move(options)),
      queue_(options_.queue_max, "all database connections are busy and the queue is full; retry later") {
  auto& r = metrics::Registry::Default();
  const metrics::Labels pool{{"pool", options_.name}};
  metrics_.busy = &r.GetGauge("hotrow_pg_pool_busy", "PostgreSQL connections running a job.", pool);
  metrics_.wait_seconds =
      &r.GetHistogram("hotrow_pg_pool_wait_seconds", "Time a job waited for a PostgreSQL connection.", pool,
                      metrics::LatencyBuckets(), 1e9);
  metrics_.reconnects =
      &r.GetCounter("hotrow_pg_pool_reconnects_total", "PostgreSQL connections replaced after one broke.", pool);
  metrics_.connect_failures =
      &r.GetCounter("hotrow_pg_pool_connect_failures_total", "Failed attempts to connect to PostgreSQL.", pool);
  metrics_.size = r.AddCallback("hotrow_pg_pool_connections", "PostgreSQL connections of the pool.", "gauge", pool,
                                [this] { return static_cast<double>(options_.size); });
  metrics_.queued = r.AddCallback("hotrow_pg_pool_queue_jobs", "Jobs waiting for a PostgreSQL connection.", "gauge",
                                  pool, [this] { return static_cast<double>(queue_.size()); });
}

std::string Pool::last_error() const {
  std::lock_guard lock(error_mutex_);
  return last_error_;
}

Result<std::unique_ptr<Pool>> Pool::Open(PoolOptions options) {
  std::unique_ptr<Pool> pool(new Pool(std::move(options)));
  std::vector<std::unique_ptr<Connection>> conns;
  for (int i = 0; i < pool->options_.size; ++i) {
    auto c = pool->Reconnect();
    if (!c.ok()) return c.status();
    conns.push_back(std::move(c).value());
  }
  for (auto& c : conns)
    pool->threads_.emplace_back([p = pool.get(), c = std::move(c)]() mutable { p->Loop(std::move(c)); });
  return pool;
}

Pool::~Pool() { Stop(); }

void Pool::Stop() {
  std::lock_guard lock(stop_mutex_);
  queue_.Stop();  // the connections run what is queued, then return
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

Result<std::unique_ptr<Connection>> Pool::Reconnect() {
  auto c = Connection::Connect(options_.url);
  if (!c.ok()) {
    metrics_.connect_failures->Add();
    {
      std::lock_guard lock(error_mutex_);
      last_error_ = c.status().message();  // libpq's text (hosts, users) is for the log only
    }
    reachable_.store(false, std::memory_order_relaxed);
    return c.status();
  }
  reachable_.store(true, std::memory_order_relaxed);
  if (options_.on_connect) {
    if (Status s = options_.on_connect(**c); !s.ok()) return s;
  }
  if (Status s = LiftTimeouts(**c, false); !s.ok()) return s;
  return c;
}

Status Pool::LiftTimeouts(Connection& c, bool lift) {
  if (options_.statement_timeout.count() == 0) return Status::Ok();
  return c.Exec("SET statement_timeout = " + std::to_string(lift ? 0 : options_.statement_timeout.count()));
}

void Pool::Submit(Job job) {
  Queued q{std::move(job), std::chrono::steady_clock::now()};
  if (Status s = queue_.Push(q); !s.ok()) q.job(std::move(s));
}

void Pool::Loop(std::unique_ptr<Connection> conn) {
  std::vector<Queued> one;
  one.reserve(1);
  while (queue_.PopBatch(one, 1)) {
    Job job = std::move(one.front().job);
    auto queued_at = one.front().at;
    one.clear();
    metrics_.wait_seconds->ObserveDuration(std::chrono::steady_clock::now() - queued_at);
    if (options_.queue_wait_max.count() > 0 && std::chrono::steady_clock::now() - queued_at > options_.queue_wait_max) {
      job(Status::Unavailable("waited longer than " + std::to_string(options_.queue_wait_max.count()) +
                              " ms for a database connection; nothing was written"));
      continue;
    }
    if (!conn || !conn->Check()) {
      conn.reset();
      auto c = Reconnect();
      if (!c.ok()) {
        job(c.status());
        std::this_thread::sleep_for(std::chrono::milliseconds(100));  // do not spin on a dead server
        continue;
      }
      conn = std::move(c).value();
      metrics_.reconnects->Add();
      log::Info("reconnected to PostgreSQL ({} pool)", options_.name);
    }
    metrics_.busy->Add(1);
    job(conn.get());
    metrics_.busy->Add(-1);
    // Closed now, not at this thread's next job: an idle pool thread would
    // keep what it holds (a card's session lock) until then.
    if (conn->broken()) conn.reset();
  }
}

Status WithSchemaLock(Connection& conn, int64_t key, Status (*create)(Connection&)) {
  std::string id = std::to_string(key);
  if (Status s = conn.Exec("SELECT pg_advisory_lock(" + id + ")"); !s.ok()) return s;
  Status s = create(conn);
  if (Status unlocked = conn.Exec("SELECT pg_advisory_unlock(" + id + ")"); !unlocked.ok()) {
    // Still held (an aborted transaction, say): a pooled connection must
    // not keep it, or every other instance would wait for it for ever.
    log::Warn("PostgreSQL: releasing the schema lock: {}; dropping the connection", unlocked.ToString());
    conn.MarkBroken();
  }
  return s;
}

Status CreateSchemaLocked(Pool& pool, int64_t key, Status (*create)(Connection&)) {
  auto created = pool.Run<bool>(
      [&](Connection& c) -> Result<bool> {
        if (Status s = WithSchemaLock(c, key, create); !s.ok()) return s;
        return true;
      },
      /*unbounded=*/true);
  return created.status();
}

Status Migrate(Connection& conn, std::string_view component, const std::vector<MigrationStep>& steps) {
  const std::string name(component);
  auto known = static_cast<int64_t>(steps.size());
  if (Status s =
          conn.Exec("CREATE TABLE IF NOT EXISTS schema_migrations (component text NOT NULL, version int NOT NULL, "
                    "applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (component, version)); "
                    "CREATE TABLE IF NOT EXISTS schema_compat (component text PRIMARY KEY, oldest_schema int NOT NULL, "
                    "oldest_binary text NOT NULL)");
      !s.ok())
    return s;
  auto compat = conn.Query("SELECT oldest_schema, oldest_binary FROM schema_compat WHERE component = $1", {name});
  if (!compat.ok()) return compat.status();
  if (!compat->empty() && compat->Int(0, 0) > known)
    return TooOldForDatabase(
        name, SchemaCompat{.oldest_schema = compat->Int(0, 0), .oldest_binary = std::string(compat->Text(0, 1))}, known,
        Version());
  auto at = conn.Query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations WHERE component = $1", {name});
  if (!at.ok()) return at.status();
  for (auto step = static_cast<size_t>(at->Int(0, 0)); step < steps.size(); ++step) {
    std::string number = std::to_string(step + 1);
    Status s = conn.Exec("BEGIN");
    if (s.ok()) s = conn.Exec(std::string(steps[step].sql));
    if (s.ok())
      s = conn.Query("INSERT INTO schema_migrations (component, version) VALUES ($1, $2)", {name, number}).status();
    if (s.ok() && steps[step].contract)
      s = conn.Query(
                  "INSERT INTO schema_compat VALUES ($1, $2, $3) ON CONFLICT (component) DO UPDATE "
                  "SET oldest_schema = excluded.oldest_schema, oldest_binary = excluded.oldest_binary",
                  {name, number, std::string(Version())})
              .status();
    if (s.ok()) s = conn.Exec("COMMIT");
    if (!s.ok()) {
      log::WarnIfFailed(conn.Exec("ROLLBACK"), "PostgreSQL: ROLLBACK of a failed migration");
      return Status::Internal(
                 std::string("schema migration ").append(name).append(" ").append(number).append(" failed"))
          .WithDetail(s.ToString());
    }
  }
  return Status::Ok();
}

void AppendCopyText(std::string& out, std::string_view text) {
  for (char c : text) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out.push_back(c);
    }
  }
}

std::string WithDatabase(const std::string& url, const std::string& db) {
  size_t scheme = url.find("://");
  size_t slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  if (slash == std::string::npos) return url + "/" + db;
  size_t query = url.find('?', slash);
  return url.substr(0, slash + 1) + db + (query == std::string::npos ? "" : url.substr(query));
}

}  // namespace hotrow::db::pg
