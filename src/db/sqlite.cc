#include "db/sqlite.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <string>

#include <sqlite3.h>

#include "base/version.h"
#include "ops/alloc_counter.h"
#include "ops/log.h"

namespace hotrow::db::sqlite {

namespace {
// SQLite's own text for `rc` (the connection's, when there is one).
std::string Reason(sqlite3* db, int rc) { return db ? sqlite3_errmsg(db) : sqlite3_errstr(rc); }

// True when the file system holding `db`'s main file has (almost) no room
// left. An I/O error there is a full disk whatever errno SQLite kept: the
// -shm file's growth and the WAL's sync report ENOSPC as "disk I/O error",
// and errno has often moved on by the time the error is reported.
bool DiskFull(sqlite3* db) {
  const char* file = db ? sqlite3_db_filename(db, "main") : nullptr;
  if (!file || !*file) return false;
  std::string dir(file);
  dir.erase(dir.find_last_of('/') == std::string::npos ? 0 : dir.find_last_of('/') + 1);
  struct statvfs fs {};
  if (statvfs(dir.empty() ? "." : dir.c_str(), &fs) != 0) return false;
  // root may write into the blocks reserved for it: count them then.
  auto free_blocks = geteuid() == 0 ? fs.f_bfree : fs.f_bavail;
  return static_cast<unsigned long long>(free_blocks) * fs.f_frsize < (1ULL << 20);
}

// The statement and SQLite's own text go into the detail, which is logged;
// the message, which a response may carry, says only what happened.
Status ErrorFor(sqlite3* db, int rc, std::string_view context) {
  std::string detail = "SQLite: " + std::string(context) + ": " + Reason(db, rc);
  if (db) detail += " (extended code " + std::to_string(sqlite3_extended_errcode(db)) + ")";
  int primary = rc & 0xFF;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED)
    return Status::Unavailable("the database is locked by another connection or process").WithDetail(std::move(detail));
  if (primary == SQLITE_CONSTRAINT)
    return Status::Conflict("the change breaks a rule of the database").WithDetail(std::move(detail));
  // COMMIT in WAL mode writes every frame of the transaction, the commit
  // frame last, and syncs them before it updates the -shm index. An error
  // after the frames are in the file (the index cannot grow, the sync
  // fails) leaves a transaction that the next open recovers: whether the
  // write took effect is unknown, not "nothing was written". Only a COMMIT
  // that could not write its frames (SQLITE_FULL) or take its lock is
  // definite. Both correctness reviews of issue 11 found this.
  if (context == "COMMIT" && primary != SQLITE_FULL && primary != SQLITE_BUSY && primary != SQLITE_LOCKED) {
    return Status::Unavailable(DiskFull(db)
                                   ? "the disk holding the database is full; the outcome of a write is unknown"
                                   : "the database could not confirm the commit; the outcome of a write is unknown")
        .WithDetail(std::move(detail));
  }
  // A full disk is an operator's problem, not a bug: 503 with Retry-After.
  // SQLite has rolled the statement (or the transaction) back by then. A
  // write that meets a full disk is SQLITE_FULL, or "disk I/O error" when
  // the -shm file cannot grow (seen in the fault rig, on a full tmpfs).
  if (primary == SQLITE_FULL || (primary == SQLITE_IOERR && (sqlite3_system_errno(db) == ENOSPC || DiskFull(db))))
    return Status::Unavailable("the disk holding the database is full; nothing was written")
        .WithDetail(std::move(detail));
  return Status::Internal("SQLite error").WithDetail(std::move(detail));
}
}  // namespace

Query::~Query() {
  if (stmt_) {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
}

Query& Query::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}
Query& Query::Bind(int index, std::string_view text) {
  sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  return *this;
}
Query& Query::BindBlob(int index, std::string_view bytes) {
  sqlite3_bind_blob(stmt_, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
  return *this;
}
Query& Query::BindDouble(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}

void Query::Reset() { sqlite3_reset(stmt_); }

Query& Query::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

Result<bool> Query::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return ErrorFor(sqlite3_db_handle(stmt_), rc, sqlite3_sql(stmt_));
}

Status Query::Run() {
  while (true) {
    auto r = Step();
    if (!r.ok()) return r.status();
    if (!*r) return Status::Ok();
  }
}

int64_t Query::Int(int column) const { return sqlite3_column_int64(stmt_, column); }
double Query::Double(int column) const { return sqlite3_column_double(stmt_, column); }
bool Query::IsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
std::string_view Query::Text(int column) const {
  auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  return p ? std::string_view(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, column))) : std::string_view{};
}
std::string_view Query::Blob(int column) const {
  auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, column));
  return p ? std::string_view(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, column))) : std::string_view{};
}

namespace {
// Process-wide settings, applied once before SQLite initialises. Memory
// statistics cost a global mutex around every allocation SQLite makes (9% of
// a point grant's write phase in a profile); hotrow never reads them.
//
// SQLite's allocations are counted (ops/alloc_counter.h) so that the
// benchmarks can report them apart from hotrow's own.
sqlite3_mem_methods default_memory;
void* CountedMalloc(int n) {
  alloc::RecordSqliteAllocation();
  return default_memory.xMalloc(n);
}
void* CountedRealloc(void* p, int n) {
  alloc::RecordSqliteAllocation();
  return default_memory.xRealloc(p, n);
}

void ConfigureOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    sqlite3_config(SQLITE_CONFIG_GETMALLOC, &default_memory);
    sqlite3_mem_methods counted = default_memory;
    counted.xMalloc = CountedMalloc;
    counted.xRealloc = CountedRealloc;
    sqlite3_config(SQLITE_CONFIG_MALLOC, &counted);
  });
}
}  // namespace

Result<std::unique_ptr<Connection>> Connection::Open(const std::string& path, OpenMode mode) {
  ConfigureOnce();
  sqlite3* db = nullptr;
  int flags = SQLITE_OPEN_NOMUTEX;  // one thread per connection at a time
  flags |= mode == OpenMode::kReadWrite ? (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) : SQLITE_OPEN_READONLY;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    // No SQL here: the message names the file and SQLite's reason (start-up
    // and the CLI print it).
    Status s = Status::Unavailable("cannot open " + path + ": " + Reason(db, rc));
    sqlite3_close(db);
    return s;
  }
  std::unique_ptr<Connection> conn(new Connection(db, path));
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  sqlite3_extended_result_codes(db, 1);
  Status s = conn->Exec(mode == OpenMode::kReadWrite
                            ? "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;"
                            : "PRAGMA foreign_keys=ON;");
  if (!s.ok()) return s;
  return conn;
}

Connection::~Connection() {
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

Status Connection::Exec(std::string_view sql) {
  std::string text(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string message = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    return ErrorFor(nullptr, rc, message + " in: " + text.substr(0, 200));
  }
  return Status::Ok();
}

Result<Query> Connection::Prepare(std::string_view sql) {
  auto it = statements_.find(sql);
  if (it == statements_.end()) {
    sqlite3_stmt* stmt = nullptr;
    int rc =
        sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    // Not an assert: besides a typo (which every store's tests would meet
    // at once), preparing fails at run time too (NOMEM, IOERR, a schema
    // changed under an older binary), and that is a 503, not a crash.
    if (rc != SQLITE_OK) return ErrorFor(db_, rc, "prepare");
    it = statements_.emplace(std::string(sql), stmt).first;
  }
  return Query(it->second, this);
}

int64_t Connection::LastInsertRowid() const { return sqlite3_last_insert_rowid(db_); }
int Connection::Changes() const { return sqlite3_changes(db_); }
bool Connection::InTransaction() const { return !sqlite3_get_autocommit(db_); }
Status Connection::LastError(std::string_view context) const { return ErrorFor(db_, sqlite3_errcode(db_), context); }

ReadSnapshot::~ReadSnapshot() {
  if (begun_.ok()) log::WarnIfFailed(c_.Exec("COMMIT"), "sqlite: ending a read transaction");
}

Result<int64_t> QueryInt(Connection& conn, std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(conn.raw(), sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return conn.LastError("prepare");
  rc = sqlite3_step(stmt);
  int64_t v = rc == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : 0;
  sqlite3_finalize(stmt);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return conn.LastError(sql);
  return v;
}

namespace {

Result<SchemaCompat> ReadCompat(Connection& conn) {
  if (Status s = conn.Exec("CREATE TABLE IF NOT EXISTS schema_compat (id INTEGER PRIMARY KEY CHECK (id = 1), "
                           "oldest_schema INTEGER NOT NULL, oldest_binary TEXT NOT NULL)");
      !s.ok())
    return s;
  auto q = conn.Prepare("SELECT oldest_schema, oldest_binary FROM schema_compat WHERE id = 1");
  if (!q.ok()) return q.status();
  auto row = q->Step();
  if (!row.ok()) return row.status();
  if (!*row) return SchemaCompat{};
  return SchemaCompat{.oldest_schema = q->Int(0), .oldest_binary = std::string(q->Text(1))};
}

}  // namespace

Status Migrate(Connection& conn, const std::vector<MigrationStep>& steps, std::string_view file) {
  auto known = static_cast<int64_t>(steps.size());
  auto compat = ReadCompat(conn);
  if (!compat.ok()) return compat.status();
  if (compat->oldest_schema > known) return TooOldForDatabase(file, *compat, known, Version());
  auto at = QueryInt(conn, "PRAGMA user_version");
  if (!at.ok()) return at.status();
  for (auto step = static_cast<size_t>(*at); step < steps.size(); ++step) {
    if (Status s = conn.Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
    // Read again under the write lock: another process (one without the
    // file lock, such as `hotrow check`) may have applied this step since.
    auto now = QueryInt(conn, "PRAGMA user_version");
    if (!now.ok() || *now > static_cast<int64_t>(step)) {
      log::WarnIfFailed(conn.Exec("ROLLBACK"), "SQLite: ROLLBACK of a migration applied elsewhere");
      if (!now.ok()) return now.status();
      step = static_cast<size_t>(*now) - 1;  // the loop's ++ resumes after it
      continue;
    }
    Status s = conn.Exec(steps[step].sql);
    if (s.ok()) s = conn.Exec("PRAGMA user_version = " + std::to_string(step + 1));
    if (s.ok() && steps[step].contract) {
      // Only ever raised: a component's contract step may have set it
      // higher already (MigrateComponent), and lowering it would let an
      // older binary in.
      auto record = conn.Prepare(
          "INSERT INTO schema_compat (id, oldest_schema, oldest_binary) VALUES (1, ?1, ?2) "
          "ON CONFLICT (id) DO UPDATE SET oldest_schema = excluded.oldest_schema, "
          "oldest_binary = excluded.oldest_binary WHERE schema_compat.oldest_schema < excluded.oldest_schema");
      s = record.ok() ? record->Bind(1, static_cast<int64_t>(step + 1)).Bind(2, std::string(Version())).Run()
                      : record.status();
    }
    if (s.ok()) s = conn.Exec("COMMIT");
    if (!s.ok()) {
      log::WarnIfFailed(conn.Exec("ROLLBACK"), "SQLite: ROLLBACK of a failed migration");
      return Status::Internal("schema migration " + std::to_string(step + 1) + " failed").WithDetail(s.ToString());
    }
  }
  return Status::Ok();
}

Status MigrateComponent(Connection& conn, std::string_view component, const std::vector<MigrationStep>& steps,
                        std::string_view file) {
  const std::string name(component);
  auto known = static_cast<int64_t>(steps.size());
  if (Status s =
          conn.Exec("CREATE TABLE IF NOT EXISTS schema_migrations (component TEXT NOT NULL, version INTEGER NOT NULL, "
                    "PRIMARY KEY (component, version)); "
                    "CREATE TABLE IF NOT EXISTS schema_component_compat (component TEXT PRIMARY KEY, "
                    "oldest_schema INTEGER NOT NULL, oldest_binary TEXT NOT NULL)");
      !s.ok())
    return s;
  // schema_compat, which a contract step raises (below), exists from here on.
  if (auto file_compat = ReadCompat(conn); !file_compat.ok()) return file_compat.status();
  auto compat = conn.Prepare("SELECT oldest_schema, oldest_binary FROM schema_component_compat WHERE component = ?1");
  if (!compat.ok()) return compat.status();
  auto row = compat->Bind(1, name).Step();
  if (!row.ok()) return row.status();
  if (*row && compat->Int(0) > known)
    return TooOldForDatabase(file, SchemaCompat{compat->Int(0), std::string(compat->Text(1))}, known, Version());
  compat->Reset();
  auto applied = [&]() -> Result<int64_t> {
    auto q = conn.Prepare("SELECT COALESCE(MAX(version), 0) FROM schema_migrations WHERE component = ?1");
    if (!q.ok()) return q.status();
    auto r = q->Bind(1, name).Step();
    if (!r.ok()) return r.status();
    int64_t v = q->Int(0);
    q->Reset();
    return v;
  };
  auto at = applied();
  if (!at.ok()) return at.status();
  for (auto step = static_cast<size_t>(*at); step < steps.size(); ++step) {
    if (Status s = conn.Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
    // Again under the write lock, as Migrate does.
    auto now = applied();
    if (!now.ok() || *now > static_cast<int64_t>(step)) {
      log::WarnIfFailed(conn.Exec("ROLLBACK"), "SQLite: ROLLBACK of a migration applied elsewhere");
      if (!now.ok()) return now.status();
      step = static_cast<size_t>(*now) - 1;
      continue;
    }
    const auto number = static_cast<int64_t>(step + 1);
    Status s = conn.Exec(steps[step].sql);
    if (s.ok()) {
      auto record = conn.Prepare("INSERT INTO schema_migrations (component, version) VALUES (?1, ?2)");
      s = record.ok() ? record->Bind(1, name).Bind(2, number).Run() : record.status();
    }
    if (s.ok() && steps[step].contract) {
      auto record = conn.Prepare("INSERT OR REPLACE INTO schema_component_compat VALUES (?1, ?2, ?3)");
      s = record.ok() ? record->Bind(1, name).Bind(2, number).Bind(3, std::string(Version())).Run() : record.status();
      if (s.ok()) {
        auto floor = conn.Prepare(
            "INSERT INTO schema_compat (id, oldest_schema, oldest_binary) VALUES (1, ?1, ?2) "
            "ON CONFLICT (id) DO UPDATE SET oldest_schema = excluded.oldest_schema, "
            "oldest_binary = excluded.oldest_binary WHERE schema_compat.oldest_schema < excluded.oldest_schema");
        s = floor.ok() ? floor->Bind(1, kComponentRecordsStep).Bind(2, std::string(Version())).Run() : floor.status();
      }
    }
    if (s.ok()) s = conn.Exec("COMMIT");
    if (!s.ok()) {
      log::WarnIfFailed(conn.Exec("ROLLBACK"), "SQLite: ROLLBACK of a failed migration");
      return Status::Internal("schema migration " + name + " " + std::to_string(number) + " failed")
          .WithDetail(s.ToString());
    }
  }
  return Status::Ok();
}

}  // namespace hotrow::db::sqlite
