#include "pointcard/sqlite_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/version.h"
#include "ops/failpoint.h"
#include "ops/log.h"
#include "pointcard/sqlite_store.h"

namespace hotrow::pointcard {

namespace fs = std::filesystem;
namespace sqlite = db::sqlite;

namespace {

// Every table the point card keeps, in the order they are copied.
constexpr const char* kTables[] = {"M_REGION", "M_STORE", "S_ACCOUNT", "H_TRANSACTION", "P_IDEMPOTENCY", "P_GRANT"};

Result<bool> HasTable(sqlite::Connection& c, std::string_view schema, std::string_view table) {
  auto q =
      c.Prepare("SELECT COUNT(*) FROM " + std::string(schema) + ".sqlite_master WHERE type = 'table' AND name = ?1");
  if (!q.ok()) return q.status();
  auto row = q->Bind(1, std::string(table)).Step();
  if (!row.ok()) return row.status();
  return q->Int(0) > 0;
}

// "A, B, C": the columns `table` has in `schema` (an older release's table
// may lack columns added since; the copy's defaults fill them).
Result<std::string> Columns(sqlite::Connection& c, std::string_view schema, std::string_view table) {
  auto q = c.Prepare("SELECT name FROM pragma_table_info(?1, ?2) ORDER BY cid");
  if (!q.ok()) return q.status();
  q->Bind(1, std::string(table)).Bind(2, std::string(schema));
  std::string out;
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    if (!out.empty()) out += ", ";
    out += '"' + std::string(q->Text(0)) + '"';
  }
  if (out.empty()) return Status::Internal("no columns in " + std::string(table));
  return out;
}

Status FsyncPath(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return Status::Unavailable("cannot open " + path + ": " + std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return Status::Unavailable("cannot fsync " + path + ": " + std::strerror(err));
  return Status::Ok();
}

// What a point card holds, in a few numbers: the copy records its
// source's, so that a point card found in the main file beside the moved
// one can be told apart -- the leftover of an interrupted move (equal), or
// another point card (a restored old backup: never dropped).
constexpr const char* kFingerprintSql =
    "SELECT (SELECT COUNT(*) FROM {s}.S_ACCOUNT) || ' card(s), balances ' || "
    "(SELECT COALESCE(SUM(BALANCE), 0) FROM {s}.S_ACCOUNT) || ', ' || (SELECT COUNT(*) FROM {s}.H_TRANSACTION) || "
    "' history row(s), the last at ' || (SELECT COALESCE(MAX(PAYMENT_TIME), 0) FROM {s}.H_TRANSACTION)";

Result<std::string> Fingerprint(sqlite::Connection& c, std::string_view schema) {
  std::string sql = kFingerprintSql;
  for (size_t at; (at = sql.find("{s}")) != std::string::npos;) sql.replace(at, 3, schema);
  auto q = c.Prepare(sql);
  if (!q.ok()) return q.status();
  auto row = q->Step();
  if (!row.ok()) return row.status();
  return std::string(q->Text(0));
}

void RemoveFileSet(const std::string& path) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(path + suffix, ec);
}

// Step 1: PATH.pointcard.db.tmp with a copy of every point-card table.
Status CopyTables(const std::string& main_path, const std::string& tmp, int64_t* cards, int64_t* rows) {
  RemoveFileSet(tmp);
  auto conn = sqlite::Connection::Open(tmp, sqlite::OpenMode::kReadWrite);
  if (!conn.ok()) return conn.status();
  auto& c = **conn;
  // The shape the rows come from; the store's Open migrates the file next.
  if (Status s = CreatePointCardTables(c); !s.ok()) return s;
  {
    auto attach = c.Prepare("ATTACH DATABASE ?1 AS old");
    if (!attach.ok()) return attach.status();
    if (Status s = attach->Bind(1, main_path).Run(); !s.ok()) return s;
  }
  if (Status s = c.Exec("BEGIN"); !s.ok()) return s;
  int64_t copied = 0;
  for (const char* table : kTables) {
    auto has = HasTable(c, "old", table);
    if (!has.ok()) return has.status();
    if (!*has) continue;
    auto columns = Columns(c, "old", table);
    if (!columns.ok()) return columns.status();
    std::string t(table);
    if (Status s = c.Exec("INSERT INTO main." + t + " (" + *columns + ") SELECT " + *columns + " FROM old." + t);
        !s.ok())
      return std::move(s).WithDetail("copying " + t + ": " + s.detail());
    failpoint::MaybeCrash("split.copy", ++copied);
  }
  auto source = Fingerprint(c, "old");
  if (!source.ok()) return source.status();
  if (Status s = c.Exec("CREATE TABLE P_MOVED_FROM (ID INTEGER PRIMARY KEY CHECK (ID = 1), FINGERPRINT TEXT NOT NULL)");
      !s.ok())
    return s;
  {
    auto mark = c.Prepare("INSERT INTO P_MOVED_FROM VALUES (1, ?1)");
    if (!mark.ok()) return mark.status();
    if (Status s = mark->Bind(1, *source).Run(); !s.ok()) return s;
  }  // statements end before the connection does
  if (Status s = c.Exec("COMMIT"); !s.ok()) return s;
  auto n = sqlite::QueryInt(c, "SELECT COUNT(*) FROM main.S_ACCOUNT");
  auto h = sqlite::QueryInt(c, "SELECT COUNT(*) FROM main.H_TRANSACTION");
  if (!n.ok()) return n.status();
  if (!h.ok()) return h.status();
  *cards = *n;
  *rows = *h;
  if (Status s = c.Exec("DETACH DATABASE old"); !s.ok()) return s;
  // Fold the WAL into the file and leave one self-contained file to rename
  // (a -wal left beside the .tmp would not follow it).
  if (Status s = c.Exec("PRAGMA journal_mode=DELETE"); !s.ok()) return s;
  conn->reset();
  return FsyncPath(tmp, O_RDONLY);
}

// Step 3: the main file's copies go (or the leftovers of a move a crash
// interrupted after the rename). In the same transaction the main file
// records that releases before this one may no longer open it (what its
// migration step 2 records too): one would find no point card here and
// serve an empty one.
Status DropFromMain(sqlite::Connection& main) {
  if (Status s = main.Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  Status s;
  for (const char* table : kTables) {
    if (s = main.Exec("DROP TABLE IF EXISTS main." + std::string(table)); !s.ok()) break;
  }
  if (s.ok())
    s = main.Exec(
        "CREATE TABLE IF NOT EXISTS schema_compat (id INTEGER PRIMARY KEY CHECK (id = 1), "
        "oldest_schema INTEGER NOT NULL, oldest_binary TEXT NOT NULL)");
  if (s.ok()) {
    auto record = main.Prepare(
        "INSERT INTO schema_compat (id, oldest_schema, oldest_binary) VALUES (1, 2, ?1) "
        "ON CONFLICT (id) DO UPDATE SET oldest_schema = 2, oldest_binary = excluded.oldest_binary "
        "WHERE oldest_schema < 2");
    s = record.ok() ? record->Bind(1, std::string(Version())).Run() : record.status();
  }
  if (s.ok()) s = main.Exec("COMMIT");
  if (!s.ok()) log::WarnIfFailed(main.Exec("ROLLBACK"), "SQLite: ROLLBACK of a failed drop");
  return s;
}

}  // namespace

std::string PointCardPath(std::string_view main_path) { return std::string(main_path) + ".pointcard.db"; }

std::string PointCardPathToRead(const std::string& main_path) {
  std::error_code ec;
  std::string sibling = PointCardPath(main_path);
  return fs::exists(sibling, ec) ? sibling : main_path;
}

Status MovePointCardTables(sqlite::Connection& main, const std::string& main_path) {
  auto has = HasTable(main, "main", "S_ACCOUNT");
  if (!has.ok()) return has.status();
  const std::string target = PointCardPath(main_path), tmp = target + ".tmp";
  std::error_code ec;
  bool moved = fs::exists(target, ec);
  if (!*has) {
    if (!moved) RemoveFileSet(tmp);  // an attempt that never reached the rename
    return Status::Ok();
  }
  if (moved) {
    // The leftovers of a move interrupted before its drop, or another
    // point card (an old single-file backup restored over PATH alone).
    auto here = Fingerprint(main, "main");
    if (!here.ok()) return here.status();
    std::string copied;
    {
      auto conn = sqlite::Connection::Open(target, sqlite::OpenMode::kReadOnly);
      if (!conn.ok()) return conn.status();
      auto has_mark = HasTable(**conn, "main", "P_MOVED_FROM");
      if (!has_mark.ok()) return has_mark.status();
      if (*has_mark) {
        auto q = (*conn)->Prepare("SELECT FINGERPRINT FROM P_MOVED_FROM WHERE ID = 1");
        if (!q.ok()) return q.status();
        auto row = q->Step();
        if (!row.ok()) return row.status();
        if (*row) copied = std::string(q->Text(0));
      }
    }
    if (copied != *here)
      return Status::Unavailable(main_path + " holds a point card (" + *here + ") that is not the one " + target +
                                 " was moved from" + (copied.empty() ? "" : " (" + copied + ")") +
                                 ": restore both files of a backup together, or move one of them aside; nothing "
                                 "was changed");
    log::Warn(
        "{} still holds the point-card tables {} was moved from (a move interrupted before its drop): "
        "dropping them",
        main_path, target);
    return DropFromMain(main);
  }
  log::Info("moving the point card from {} into its own file {}", main_path, target);
  int64_t cards = 0, rows = 0;
  if (Status s = CopyTables(main_path, tmp, &cards, &rows); !s.ok()) {
    RemoveFileSet(tmp);
    return Status(s.code(), "cannot move the point card into " + target + ": " + s.message()).WithDetail(s.detail());
  }
  failpoint::MaybeCrash("split.rename");
  fs::rename(tmp, target, ec);
  if (ec) return Status::Unavailable("cannot rename " + tmp + " to " + target + ": " + ec.message());
  auto dir = fs::path(target).parent_path();
  if (Status s = FsyncPath(dir.empty() ? "." : dir.string(), O_RDONLY | O_DIRECTORY); !s.ok()) return s;
  failpoint::MaybeCrash("split.drop");
  if (Status s = DropFromMain(main); !s.ok()) return s;
  log::Info("moved {} card(s) and {} history row(s) into {}", cards, rows, target);
  return Status::Ok();
}

Result<std::unique_ptr<sqlite::Database>> OpenPointCardDatabase(sqlite::Database& main,
                                                                sqlite::DatabaseOptions options) {
  if (Status s = MovePointCardTables(main.writer().connection(), main.path()); !s.ok()) return s;
  options.lock = false;  // main's lock covers both files
  options.writer.name = "pointcard";
  return sqlite::Database::Open(PointCardPath(main.path()), std::move(options));
}

}  // namespace hotrow::pointcard
