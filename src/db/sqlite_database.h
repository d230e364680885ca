// One SQLite database file as a server (or the seeder) uses it: an exclusive
// process lock, the group-commit writer with the write connection, a pool of
// read-only connections, and a background checkpointer.
//
// Lock: flock(2) on PATH.lock, held for the object's lifetime and released by
// the kernel if the process dies, so "is a server running on this file?" has
// a reliable answer. A second server or `hotrow seed` on the same file is
// refused with a message naming the holder's pid: two writers would each
// keep a read model the other does not update. A sibling file opened under
// another Database's lock (DatabaseOptions::lock false) takes none.
//
// Readers: WAL lets any number of readers run beside the writer, each on a
// snapshot taken when its read transaction starts, so a read that starts
// after a commit returned sees it. Connections are opened on demand up to
// readers_max and reused; a caller beyond that waits for one.
//
// Checkpoints: no commit checkpoints (wal_autocheckpoint=0), because an
// inline checkpoint after a large commit (a point grant adds hundreds of
// thousands of rows) would stall every queued write behind it. A background
// thread runs PASSIVE checkpoints -- which neither block nor wait for the
// writer -- whenever the log in use (the writer's WAL hook reports it after
// each commit) passes checkpoint_wal_bytes, and, when it has grown large,
// has the writer run a RESTART between two batches at a lull, which lets the
// WAL start over (see CheckpointLoop), and reports what it did.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "db/sqlite.h"
#include "db/sqlite_writer.h"
#include "ops/metrics.h"

namespace hotrow::db::sqlite {

struct DatabaseOptions {
  GroupWriterOptions writer;
  size_t readers_max = 64;
  int64_t writer_cache_bytes = 256ll << 20;
  int64_t mmap_bytes = 4ll << 30;
  // Thresholds on the log in use (frames since the WAL last started over),
  // as the writer's WAL hook reports it after each commit.
  int64_t checkpoint_wal_bytes = 64ll << 20;
  int64_t restart_wal_bytes = 256ll << 20;
  // A RESTART holds the writer while it copies what the writer wrote since
  // the last PASSIVE pass, so it waits for a lull: a pass (200 ms) in which
  // the log grew by less than restart_lull_bytes, unless the log in use is
  // past restart_wal_bytes_max.
  int64_t restart_lull_bytes = 4ll << 20;
  int64_t restart_wal_bytes_max = 1ll << 30;
  // journal_size_limit: after a restart the writer truncates the WAL file
  // to this only if it grew past it. Truncating on every restart freed
  // ~200 MB of blocks in the commit after it, which stalled that commit
  // (and the other file's) by 60 ms; a WAL file kept at its size is
  // overwritten in place.
  int64_t wal_file_keep_bytes = 1ll << 30;
  // How long a RESTART, which holds the writer, waits for readers to leave
  // the WAL before it is put off to the next pass.
  std::chrono::milliseconds restart_wait{10};
  bool checkpointer = true;
  // false: the caller already holds the lock that covers this file (the
  // point card's file beside a database it opened: one flock for both).
  bool lock = true;
};

// Sets the WAL's thresholds from the size at which it is started over even
// without a lull (restart_wal_bytes_max, and the file kept at most that):
// checkpoints from 1/16 of it, restarts at a lull from 1/4, a lull under
// 1/256 of it a pass, none above its default. 1 GiB gives the defaults.
void ScaleWal(DatabaseOptions& options, int64_t wal_bytes_max);

struct CheckpointStats {
  uint64_t checkpoints = 0;
  uint64_t restarts = 0;          // times the WAL was started over
  uint64_t restarts_put_off = 0;  // RESTARTs that gave up: a reader stayed past restart_wait
  uint64_t frames_checkpointed = 0;
  int64_t wal_bytes_largest = 0;
  int64_t wal_bytes_now = 0;
  double checkpoint_seconds = 0;
};

class Database {
 public:
  // Creates the parent directory if needed, takes the lock, opens the file.
  static Result<std::unique_ptr<Database>> Open(const std::string& path, DatabaseOptions options = {});
  ~Database();

  const std::string& path() const { return path_; }
  GroupWriter& writer() { return *writer_; }

  // A read-only connection from the pool, returned when the lease ends.
  class ReaderLease {
   public:
    ReaderLease(Database* db, std::unique_ptr<sqlite::Connection> conn) : db_(db), conn_(std::move(conn)) {}
    ReaderLease(ReaderLease&&) = default;
    ~ReaderLease();
    sqlite::Connection& operator*() { return *conn_; }
    sqlite::Connection* operator->() { return conn_.get(); }

   private:
    Database* db_;
    std::unique_ptr<sqlite::Connection> conn_;
  };
  Result<ReaderLease> Reader();
  // A fresh read-only connection outside the pool (long scans, start-up).
  Result<std::unique_ptr<sqlite::Connection>> OpenReader() const;

  CheckpointStats checkpoint_stats() const;

 private:
  Database() = default;
  Status Lock();  // flock(2) on PATH.lock, or unavailable naming the holder
  // `conn` is opened by Open, before the thread starts (null if it could
  // not be: the loop tries again when it first needs it).
  void CheckpointLoop(std::unique_ptr<sqlite::Connection> conn);
  static int OnWalCommit(void* db, sqlite3* conn, const char* schema, int frames);

  std::string path_;
  std::string wal_path_;  // path_ + "-wal"
  DatabaseOptions options_;
  int lock_fd_ = -1;
  std::unique_ptr<GroupWriter> writer_;
  std::atomic<int64_t> wal_frames_{0};  // in the log, after the last commit
  int64_t frame_bytes_ = 4096 + 24;     // a page and its frame header

  std::mutex readers_mutex_;
  std::condition_variable reader_returned_;
  std::vector<std::unique_ptr<sqlite::Connection>> idle_readers_;
  size_t readers_open_ = 0;

  mutable std::mutex checkpoint_mutex_;
  std::condition_variable checkpoint_wake_;
  bool stopping_ = false;
  CheckpointStats checkpoint_stats_;
  // hotrow_sqlite_wal_* and hotrow_sqlite_checkpoints_total, labelled with
  // the writer's name (DatabaseOptions::writer.name).
  struct Metrics {
    metrics::Counter* checkpoints[3];  // ok, busy, failed
    metrics::Counter* restarts[4];     // restarted, put_off, failed, not_run
    metrics::Histogram* restart_writer_seconds;
    metrics::Registration wal_bytes, wal_file_bytes;
  } metrics_;
  void RegisterMetrics();
  std::thread checkpointer_;
};

}  // namespace hotrow::db::sqlite
