// A small RAII layer over the SQLite C API: connections with a cache of
// prepared statements, and statements that reset themselves after use.
// Only this file and sqlite.cc include <sqlite3.h>.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "db/migration.h"

struct sqlite3;
struct sqlite3_stmt;

namespace hotrow::db::sqlite {

class Connection;

// A prepared statement in use. Binds are 1-based, columns 0-based. The
// statement is reset (and its bindings cleared) when the Query goes out of
// scope, so the cached statement can be used again.
class Query {
 public:
  Query(Query&& other) noexcept : stmt_(std::exchange(other.stmt_, nullptr)), conn_(other.conn_) {}
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;
  ~Query();

  Query& Bind(int index, int64_t value);
  Query& Bind(int index, int value) { return Bind(index, static_cast<int64_t>(value)); }
  Query& Bind(int index, std::string_view text);
  Query& BindBlob(int index, std::string_view bytes);
  Query& BindNull(int index);
  Query& BindDouble(int index, double value);

  // Makes the statement ready to bind and step again (keeps the bindings),
  // for a statement reused in a loop.
  void Reset();

  // Advances: true when a row is available, false when done.
  Result<bool> Step();
  // Runs to completion, ignoring any rows.
  Status Run();

  int64_t Int(int column) const;
  std::string_view Text(int column) const;
  std::string_view Blob(int column) const;
  double Double(int column) const;
  bool IsNull(int column) const;

 private:
  friend class Connection;
  Query(sqlite3_stmt* stmt, Connection* conn) : stmt_(stmt), conn_(conn) {}
  sqlite3_stmt* stmt_;
  Connection* conn_;
};

enum class OpenMode { kReadWrite, kReadOnly };

// Every connection's busy timeout: how long a statement waits for a lock.
inline constexpr int kBusyTimeoutMs = 5000;

class Connection {
 public:
  // Opens (creating when kReadWrite) the database at `path` with WAL,
  // synchronous=FULL, foreign keys on and a 5 s busy timeout.
  static Result<std::unique_ptr<Connection>> Open(const std::string& path, OpenMode mode);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs one or more statements without results.
  Status Exec(std::string_view sql);
  // A cached prepared statement for `sql` (compiled on first use). Fails
  // only when `sql` does not compile, which is a bug: such errors abort in
  // debug builds.
  Result<Query> Prepare(std::string_view sql);

  int64_t LastInsertRowid() const;
  int Changes() const;
  bool InTransaction() const;
  const std::string& path() const { return path_; }

  // The error status for the last failed call, with the statement's context.
  Status LastError(std::string_view context) const;

  sqlite3* raw() { return db_; }

 private:
  Connection(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_;
  std::string path_;
  // Looked up by string_view: finding a cached statement allocates nothing.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::unordered_map<std::string, sqlite3_stmt*, Hash, std::equal_to<>> statements_;
};

// Reads from one snapshot for a scope: BEGIN when made, COMMIT (a failure
// logged) when it ends, whichever way the reads leave.
class ReadSnapshot {
 public:
  explicit ReadSnapshot(Connection& c) : c_(c), begun_(c.Exec("BEGIN")) {}
  ~ReadSnapshot();
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;
  // Why BEGIN failed (then nothing is ended).
  const Status& status() const { return begun_; }

 private:
  Connection& c_;
  Status begun_;
};

// Runs `sql` once (prepared, not cached) and returns its first column of
// the first row as an integer; for PRAGMAs and counts.
Result<int64_t> QueryInt(Connection& conn, std::string_view sql);

// Schema migrations of the embedded store (the rules: db/migration.h).
// PRAGMA user_version counts the steps applied to the file (it is per file,
// so every component's steps share one list). Runs steps[user_version..] in
// one transaction each, bumping user_version with each; a contract step
// also records in schema_compat the oldest schema a binary must know. A
// database with more steps than `steps` is used as it is (its extra steps
// were expand steps of a newer release) unless schema_compat refuses this
// binary. `file` names the file's contents in that refusal ("the date plans
// and leaderboard schema needs hotrow 0.5.0 ...").
Status Migrate(Connection& conn, const std::vector<MigrationStep>& steps, std::string_view file = "database");

// The file-wide list's step (the main file's third, a contract step) from
// which components other than the date plans record their own steps.
inline constexpr int64_t kComponentRecordsStep = 3;

// Schema migrations of one component of a file that records its steps per
// component: the rows (component, version) of schema_migrations, as on
// PostgreSQL, and its oldest allowed schema in schema_component_compat. A
// contract step also raises the file-wide schema_compat to at least
// kComponentRecordsStep, so that a binary from before per-component records
// (which would read none of them) is refused too.
Status MigrateComponent(Connection& conn, std::string_view component, const std::vector<MigrationStep>& steps,
                        std::string_view file);

}  // namespace hotrow::db::sqlite
