#include "db/sqlite_writer.h"

#include <future>
#include <latch>
#include <thread>

#include <gtest/gtest.h>

#include "db/sqlite_database.h"
#include "harness/metrics_sample.h"
#include "harness/server_process.h"
#include "ops/metrics.h"

namespace hotrow::db::sqlite {
namespace {

using testing::TempDir;

// Inserts `value` into t(v); fails (constraint) when value < 0.
class InsertOp : public WriteOp {
 public:
  InsertOp(int64_t value, std::promise<Status>* done, std::function<void()> on_finish = {})
      : value_(value), done_(done), on_finish_(std::move(on_finish)) {}
  Status Apply(sqlite::Connection& c, std::span<WriteOp* const>) override {
    auto q = c.Prepare("INSERT INTO t(v) VALUES (?1)");
    if (!q.ok()) return q.status();
    return q->Bind(1, value_).Run();
  }
  void Finish(const Status& s) override {
    if (on_finish_) on_finish_();
    done_->set_value(s);
  }

 private:
  int64_t value_;
  std::promise<Status>* done_;
  std::function<void()> on_finish_;
};

// Adds to a counter; ops with the same key coalesce.
class AddOp : public WriteOp {
 public:
  AddOp(int64_t key, std::atomic<int>* applies, std::promise<Status>* done)
      : key_(key), applies_(applies), done_(done) {}
  CoalesceKey coalesce_key() const override { return {&kKind, key_}; }
  Status Apply(sqlite::Connection& c, std::span<WriteOp* const> group) override {
    ++*applies_;
    auto q = c.Prepare("UPDATE counters SET n = n + ?1 WHERE k = ?2");
    if (!q.ok()) return q.status();
    return q->Bind(1, static_cast<int64_t>(group.size())).Bind(2, key_).Run();
  }
  void Finish(const Status& s) override { done_->set_value(s); }

 private:
  static constexpr char kKind = 0;
  int64_t key_;
  std::atomic<int>* applies_;
  std::promise<Status>* done_;
};

// Inserts a blob of `bytes` into b(x): with a small max_page_count, it
// fails with SQLITE_FULL, and SQLite rolls back the whole transaction (a
// one-row INSERT keeps no statement journal to undo just itself).
class BlobOp : public WriteOp {
 public:
  BlobOp(int64_t bytes, std::promise<Status>* done) : bytes_(bytes), done_(done) {}
  Status Apply(sqlite::Connection& c, std::span<WriteOp* const>) override {
    auto q = c.Prepare("INSERT INTO b(x) VALUES (randomblob(?1))");
    if (!q.ok()) return q.status();
    return q->Bind(1, bytes_).Run();
  }
  void Finish(const Status& s) override { done_->set_value(s); }

 private:
  int64_t bytes_;
  std::promise<Status>* done_;
};

// Blocks the writer thread until released.
class GateOp : public WriteOp {
 public:
  GateOp(std::latch* entered, std::latch* release) : entered_(entered), release_(release) {}
  Status Apply(sqlite::Connection&, std::span<WriteOp* const>) override {
    entered_->count_down();
    release_->wait();
    return Status::Ok();
  }
  void Finish(const Status&) override {}

 private:
  std::latch* entered_;
  std::latch* release_;
};

// Upkeep: records whether a transaction was open and what was committed.
class UpkeepOp : public WriteOp {
 public:
  UpkeepOp(bool* in_transaction, int64_t* rows, std::promise<Status>* done)
      : in_transaction_(in_transaction), rows_(rows), done_(done) {}
  Status Apply(sqlite::Connection& c, std::span<WriteOp* const>) override {
    *in_transaction_ = c.InTransaction();
    *rows_ = sqlite::QueryInt(c, "SELECT COUNT(*) FROM t").value();
    return Status::Ok();
  }
  void Finish(const Status& s) override { done_->set_value(s); }

 private:
  bool* in_transaction_;
  int64_t* rows_;
  std::promise<Status>* done_;
};

class WriterTest : public ::testing::Test {
 protected:
  void Open(GroupWriterOptions writer_options = {}) {
    DatabaseOptions options;
    options.writer = writer_options;
    auto db = Database::Open(dir.File("w.db"), options);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    database = std::move(db).value();
    ASSERT_TRUE(database->writer()
                    .connection()
                    .Exec("CREATE TABLE t(v INTEGER CHECK (v >= 0)); CREATE TABLE counters(k INTEGER PRIMARY KEY, n "
                          "INTEGER); INSERT INTO counters VALUES (1, 0), (2, 0);")
                    .ok());
    database->writer().Start();
  }
  int64_t Count(const char* sql) {
    auto r = database->OpenReader();
    return sqlite::QueryInt(**r, sql).value();
  }

  TempDir dir;
  std::unique_ptr<Database> database;
};

TEST_F(WriterTest, AFailingOpIsRolledBackAloneAndFinishRunsAfterCommit) {
  Open();
  std::latch entered(1), release(1);
  database->writer().Submit(MakeOp<GateOp>(&entered, &release));
  entered.wait();  // the next three ops queue up and land in one batch
  std::promise<Status> a, b, c;
  int64_t visible_at_finish = -1;
  database->writer().Submit(MakeOp<InsertOp>(1, &a));
  database->writer().Submit(MakeOp<InsertOp>(-1, &b));
  database->writer().Submit(MakeOp<InsertOp>(3, &c, [&] { visible_at_finish = Count("SELECT COUNT(*) FROM t"); }));
  release.count_down();
  EXPECT_TRUE(a.get_future().get().ok());
  Status sb = b.get_future().get();
  EXPECT_EQ(sb.code(), ErrorCode::kConflict) << sb.ToString();
  // The message may reach a response: no SQL and no SQLite text in it,
  // both in the detail, which only the log sees.
  EXPECT_EQ(sb.message().find("INSERT"), std::string::npos) << sb.message();
  EXPECT_EQ(sb.message().find("CHECK constraint"), std::string::npos) << sb.message();
  EXPECT_NE(sb.detail().find("INSERT INTO t"), std::string::npos) << sb.detail();
  EXPECT_TRUE(c.get_future().get().ok());
  EXPECT_EQ(visible_at_finish, 2) << "Finish must run after the commit, with the data visible to readers";
  EXPECT_EQ(Count("SELECT COUNT(*) FROM t"), 2);
  EXPECT_EQ(Count("SELECT SUM(v) FROM t"), 4);
}

// When SQLite rolls back the whole transaction mid-batch (SQLITE_FULL,
// IOERR, NOMEM), the ops before the failure are gone with it and the ops
// after it must not run: before the fix, each later op's SAVEPOINT began a
// transaction of its own and RELEASE committed it, while every op of the
// batch was answered with the failed COMMIT's error (issue 9, item 9). Seen
// failing: op c was in the table, answered 500.
TEST_F(WriterTest, AWholeTransactionRollbackFailsTheRestOfTheBatchUnrun) {
  Open();
  ASSERT_TRUE(database->writer().connection().Exec("CREATE TABLE b(x BLOB)").ok());
  std::latch entered(1), release(1);
  database->writer().Submit(MakeOp<GateOp>(&entered, &release));
  entered.wait();
  int64_t pages = Count("PRAGMA page_count");
  // Set on the writer's own connection while the writer waits in GateOp
  // (the PRAGMA is per connection and takes effect at once).
  ASSERT_TRUE(database->writer().connection().Exec("PRAGMA max_page_count = " + std::to_string(pages + 8)).ok());
  std::promise<Status> a, blob, c;
  database->writer().Submit(MakeOp<InsertOp>(1, &a));
  database->writer().Submit(MakeOp<BlobOp>(1 << 20, &blob));
  database->writer().Submit(MakeOp<InsertOp>(3, &c));
  release.count_down();
  Status sa = a.get_future().get(), sblob = blob.get_future().get(), sc = c.get_future().get();
  // A full disk is 503 (definite: nothing was written), not a 500 that
  // reads as a bug. Seen failing before the fix: internal "SQLite error".
  EXPECT_EQ(sblob.code(), ErrorCode::kUnavailable) << sblob.ToString();
  EXPECT_NE(sblob.message().find("nothing was written"), std::string::npos) << sblob.message();
  EXPECT_EQ(sa.ok(), Count("SELECT COUNT(*) FROM t WHERE v = 1") == 1) << "a answered " << sa.ToString();
  EXPECT_EQ(sc.ok(), Count("SELECT COUNT(*) FROM t WHERE v = 3") == 1) << "c answered " << sc.ToString();
  EXPECT_EQ(Count("SELECT COUNT(*) FROM t"), 0) << "the rollback took a, and c must not have run";
  EXPECT_FALSE(database->writer().connection().InTransaction());
  // The writer goes on: the next batch commits.
  ASSERT_TRUE(database->writer().connection().Exec("PRAGMA max_page_count = 1073741823").ok());
  std::promise<Status> d;
  database->writer().Submit(MakeOp<InsertOp>(4, &d));
  EXPECT_TRUE(d.get_future().get().ok());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM t"), 1);
}

TEST_F(WriterTest, OpsWithEqualKeysCoalesceIntoOneApply) {
  Open();
  std::latch entered(1), release(1);
  database->writer().Submit(MakeOp<GateOp>(&entered, &release));
  entered.wait();
  std::atomic<int> applies{0};
  std::vector<std::promise<Status>> done(30);
  for (int i = 0; i < 30; ++i) database->writer().Submit(MakeOp<AddOp>(i % 3 == 0 ? 2 : 1, &applies, &done[i]));
  release.count_down();
  for (auto& d : done) EXPECT_TRUE(d.get_future().get().ok());
  EXPECT_EQ(applies.load(), 2);
  EXPECT_EQ(Count("SELECT n FROM counters WHERE k = 1"), 20);
  EXPECT_EQ(Count("SELECT n FROM counters WHERE k = 2"), 10);
  EXPECT_GE(database->writer().stats().batch_ops_largest, 30u);
}

TEST_F(WriterTest, AFullQueueAnswersOverloadedAtOnce) {
  GroupWriterOptions options;
  options.queue_ops_max = 5;
  Open(options);
  std::latch entered(1), release(1);
  database->writer().Submit(MakeOp<GateOp>(&entered, &release));
  entered.wait();
  std::vector<std::promise<Status>> done(7);
  for (auto& d : done) database->writer().Submit(MakeOp<InsertOp>(1, &d));
  // The sixth and seventh are refused while the writer is blocked.
  EXPECT_EQ(done[5].get_future().get().code(), ErrorCode::kOverloaded);
  EXPECT_EQ(done[6].get_future().get().code(), ErrorCode::kOverloaded);
  release.count_down();
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(done[i].get_future().get().ok());
}

// An op that waited past op_wait_max is answered unavailable and never
// runs: the answer is definite, and it comes before the client's deadline
// (issue 9, item 8).
TEST_F(WriterTest, OpsThatWaitedTooLongFailUnrun) {
  GroupWriterOptions options;
  // A second, so that the fresh op below is not also past it on a loaded
  // machine that runs the writer late.
  options.op_wait_max = std::chrono::milliseconds(1000);
  Open(options);
  std::latch entered(1), release(1);
  database->writer().Submit(MakeOp<GateOp>(&entered, &release));
  entered.wait();
  std::promise<Status> waited;
  database->writer().Submit(MakeOp<InsertOp>(1, &waited));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  release.count_down();
  Status s = waited.get_future().get();
  EXPECT_EQ(s.code(), ErrorCode::kUnavailable) << s.ToString();
  std::promise<Status> fresh;
  database->writer().Submit(MakeOp<InsertOp>(2, &fresh));
  EXPECT_TRUE(fresh.get_future().get().ok());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM t WHERE v = 1"), 0) << "an expired op must not run";
  EXPECT_EQ(Count("SELECT COUNT(*) FROM t WHERE v = 2"), 1);
  EXPECT_EQ(database->writer().stats().expired_ops, 1u);
}

TEST_F(WriterTest, StopAppliesEverythingQueuedThenRefuses) {
  Open();
  std::latch entered(1), release(1);
  database->writer().Submit(MakeOp<GateOp>(&entered, &release));
  entered.wait();
  std::vector<std::promise<Status>> done(50);
  for (auto& d : done) database->writer().Submit(MakeOp<InsertOp>(7, &d));
  std::thread stopper([&] { database->writer().Stop(); });
  release.count_down();
  stopper.join();
  for (auto& d : done) EXPECT_TRUE(d.get_future().get().ok());
  std::promise<Status> late;
  database->writer().Submit(MakeOp<InsertOp>(7, &late));
  EXPECT_EQ(late.get_future().get().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM t"), 50);
}

TEST_F(WriterTest, AnUpkeepOpRunsOutsideTheTransactionAfterTheOpsTakenWithIt) {
  Open();
  std::latch entered(1), release(1);
  database->writer().Submit(MakeOp<GateOp>(&entered, &release));
  entered.wait();  // the three below queue up and make one batch
  std::promise<Status> first, upkeep, last;
  bool finished_first = false;
  bool in_transaction = true;
  int64_t rows = -1;
  database->writer().Submit(MakeOp<InsertOp>(1, &first, [&] { finished_first = true; }));
  database->writer().SubmitUpkeep(MakeOp<UpkeepOp>(&in_transaction, &rows, &upkeep));
  database->writer().Submit(MakeOp<InsertOp>(2, &last));
  release.count_down();
  EXPECT_TRUE(upkeep.get_future().get().ok());
  EXPECT_FALSE(in_transaction);
  EXPECT_EQ(rows, 2);  // both inserts committed first, the one queued after it too
  EXPECT_TRUE(finished_first);
  EXPECT_TRUE(first.get_future().get().ok());
  EXPECT_TRUE(last.get_future().get().ok());
  EXPECT_EQ(database->writer().stats().batches, 2u);  // the gate's, then the inserts'
}

// The WAL in use passes restart_wal_bytes over and over under steady writes
// and short reads: it is started over each time, and the file is not
// truncated after it (it stays under wal_file_keep_bytes). Truncating freed
// the file's blocks in the commit after each restart, which stalled it.
// Seen failing with the old journal_size_limit (64 KiB here): the smallest
// file after a restart was 65536 bytes. The writes are paced (and bounded)
// so that the checkpointer's 200 ms passes keep up on a tmpfs too.
TEST(Database, TheWalStartsOverUnderLoadAndKeepsItsFile) {
  TempDir dir;
  DatabaseOptions options;
  options.checkpoint_wal_bytes = 64 << 10;
  options.restart_wal_bytes = 512 << 10;
  options.wal_file_keep_bytes = 256 << 20;
  options.restart_lull_bytes = INT64_MAX;  // these writes never pause
  auto db = Database::Open(dir.File("r.db"), options);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  ASSERT_TRUE((*db)->writer().connection().Exec("CREATE TABLE b(x BLOB)").ok());
  (*db)->writer().Start();
  std::atomic<bool> stop{false};
  std::thread reader([&] {  // short read transactions of constant cost, back to back
    while (!stop) {
      auto r = (*db)->Reader();
      if (!r.ok() || !sqlite::QueryInt(**r, "SELECT COALESCE(MAX(rowid), 0) FROM b").ok()) ADD_FAILURE() << "read";
    }
  });
  struct Join {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Join() {
      stop = true;
      t.join();
    }
  } join{stop, reader};
  constexpr int64_t kBlob = 16 << 10, kWritesMax = (64 << 20) / kBlob;
  // The file's size after every commit once the WAL has started over: a
  // truncation shows in the commit right after the restart.
  int64_t smallest_after_restart = INT64_MAX, writes = 0;
  while ((*db)->checkpoint_stats().restarts < 3 && writes < kWritesMax) {
    bool restarted = (*db)->checkpoint_stats().restarts > 0;
    std::promise<Status> done;
    (*db)->writer().Submit(MakeOp<BlobOp>(kBlob, &done));
    ASSERT_TRUE(done.get_future().get().ok());
    ++writes;
    if (restarted) smallest_after_restart = std::min(smallest_after_restart, (*db)->checkpoint_stats().wal_bytes_now);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // ~8 MB/s: a few restarts a second
  }
  auto stats = (*db)->checkpoint_stats();
  ASSERT_GE(stats.restarts, 3u) << "the WAL never started over in " << writes << " writes";
  EXPECT_GE(smallest_after_restart, static_cast<int64_t>(options.restart_wal_bytes));
  EXPECT_LT(stats.wal_bytes_largest, static_cast<int64_t>(options.wal_file_keep_bytes));
  EXPECT_EQ(sqlite::QueryInt(**(*db)->OpenReader(), "SELECT COUNT(*) FROM b").value(), writes);  // nothing lost
}

// The value of one series in the registry's text, or -1 when absent.
double MetricValue(const std::string& series) { return testing::Sample(metrics::Registry::Default().Expose(), series); }

// A reader on an old snapshot keeps the WAL from being copied back, so it
// is not started over and grows past restart_wal_bytes_max (checkpoint
// starvation: SQLite's, not a bound hotrow can hold). /metrics shows it:
// the log in use past the bound, no restart meanwhile; once the reader
// ends, the next pass starts it over. (The review that found the WAL at
// 3.4 GB beside the concurrent checker saw nothing of it above debug.)
TEST(Database, AWalKeptFromStartingOverByAReaderShowsInTheMetrics) {
  TempDir dir;
  DatabaseOptions options;
  options.writer.name = "starved";
  options.checkpoint_wal_bytes = 64 << 10;
  options.restart_wal_bytes = 256 << 10;
  options.restart_wal_bytes_max = 1 << 20;
  options.restart_lull_bytes = INT64_MAX;  // every pass is a lull
  auto db = Database::Open(dir.File("s.db"), options);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  ASSERT_TRUE((*db)->writer().connection().Exec("CREATE TABLE b(x BLOB)").ok());
  (*db)->writer().Start();
  const std::string in_use = R"(hotrow_sqlite_wal_bytes{writer="starved"})";
  const std::string restarted = R"(hotrow_sqlite_wal_restarts_total{writer="starved",outcome="restarted"})";
  auto write = [&](int n) {
    for (int i = 0; i < n; ++i) {
      std::promise<Status> done;
      (*db)->writer().Submit(MakeOp<BlobOp>(64 << 10, &done));
      ASSERT_TRUE(done.get_future().get().ok());
    }
  };
  write(2);
  auto reader = (*db)->OpenReader();
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE((*reader)->Exec("BEGIN").ok());
  ASSERT_TRUE(sqlite::QueryInt(**reader, "SELECT COUNT(*) FROM b").ok());  // its snapshot: 2 rows
  const double restarts_before = MetricValue(restarted);
  ASSERT_GE(restarts_before, 0) << "no restart counter for the writer";
  write(32);                                                    // 2 MiB of log, twice the bound
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // three passes or more
  EXPECT_GE(MetricValue(in_use), static_cast<double>(options.restart_wal_bytes_max));
  EXPECT_EQ(MetricValue(restarted), restarts_before) << "started over under a reader's snapshot";
  ASSERT_TRUE((*reader)->Exec("COMMIT").ok());
  for (int i = 0; i < 50 && MetricValue(restarted) == restarts_before; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_GT(MetricValue(restarted), restarts_before) << "not started over after the reader ended";
  EXPECT_GE(MetricValue(R"(hotrow_sqlite_checkpoints_total{writer="starved",outcome="ok"})"), 1);
  EXPECT_GE(MetricValue(R"(hotrow_sqlite_wal_file_bytes{writer="starved"})"),
            static_cast<double>(options.restart_wal_bytes_max))
      << "the file is kept at its size";
}

// Writes that never leave a lull still get the WAL started over, at
// restart_wal_bytes_max (serve --sqlite-wal-mb through ScaleWal), and the
// file is shrunk back to that size: it does not grow with what was written.
// Each such restart holds the writer (its time is in the histogram).
TEST(Database, WithoutALullTheWalStartsOverAtItsBound) {
  TempDir dir;
  DatabaseOptions options;
  options.writer.name = "no-lull";
  ScaleWal(options, 2 << 20);
  ASSERT_EQ(options.restart_wal_bytes, 512 << 10);
  ASSERT_EQ(options.restart_lull_bytes, 8 << 10);
  DatabaseOptions large;
  ScaleWal(large, int64_t{64} << 30);
  EXPECT_EQ(large.checkpoint_wal_bytes, DatabaseOptions().checkpoint_wal_bytes) << "never above the defaults";
  EXPECT_EQ(large.restart_wal_bytes, DatabaseOptions().restart_wal_bytes);
  options.restart_lull_bytes = 0;  // no pass is a lull
  auto db = Database::Open(dir.File("n.db"), options);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  ASSERT_TRUE((*db)->writer().connection().Exec("CREATE TABLE b(x BLOB)").ok());
  (*db)->writer().Start();
  const std::string restarted = R"(hotrow_sqlite_wal_restarts_total{writer="no-lull",outcome="restarted"})";
  const double before = MetricValue(restarted);
  constexpr int64_t kBlob = 16 << 10, kWritesMax = (32 << 20) / kBlob;
  int64_t writes = 0;
  while ((*db)->checkpoint_stats().restarts < 3 && writes < kWritesMax) {
    std::promise<Status> done;
    (*db)->writer().Submit(MakeOp<BlobOp>(kBlob, &done));
    ASSERT_TRUE(done.get_future().get().ok());
    ++writes;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // ~8 MB/s
  }
  auto stats = (*db)->checkpoint_stats();
  ASSERT_GE(stats.restarts, 3u) << "the WAL never started over in " << writes << " writes";
  EXPECT_GE(MetricValue(restarted) - before, 3);
  // The bound, plus what a pass or two of writes adds before the restart
  // runs and the commit after it shrinks the file.
  EXPECT_LT(stats.wal_bytes_largest, 6 << 20);
  EXPECT_LT(MetricValue(R"(hotrow_sqlite_wal_file_bytes{writer="no-lull"})"), 6 << 20);
  EXPECT_EQ(sqlite::QueryInt(**(*db)->OpenReader(), "SELECT COUNT(*) FROM b").value(), writes);  // nothing lost
}

// A full disk (SQLITE_FULL: here max_page_count, in production the file
// system) is 503 naming the cause and saying nothing was written, not a 500
// that reads as a bug. Seen failing before the fix: internal "SQLite error".
TEST(SqliteErrors, AFullDiskIsUnavailableAndNamed) {
  TempDir dir;
  auto conn = Connection::Open(dir.File("full.db"), OpenMode::kReadWrite);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  ASSERT_TRUE((*conn)->Exec("CREATE TABLE b(x BLOB)").ok());
  int64_t pages = QueryInt(**conn, "PRAGMA page_count").value();
  ASSERT_TRUE((*conn)->Exec("PRAGMA max_page_count = " + std::to_string(pages + 2)).ok());
  auto q = (*conn)->Prepare("INSERT INTO b(x) VALUES (randomblob(1000000))");
  ASSERT_TRUE(q.ok());
  Status s = q->Run();
  EXPECT_EQ(s.code(), ErrorCode::kUnavailable) << s.ToString();
  EXPECT_EQ(s.message(), "the disk holding the database is full; nothing was written");
  EXPECT_NE(s.detail().find("database or disk is full"), std::string::npos) << s.detail();
  EXPECT_EQ(QueryInt(**conn, "SELECT COUNT(*) FROM b").value(), 0);
}

TEST(Database, ASecondOpenOfTheSameFileIsRefused) {
  TempDir dir;
  auto first = Database::Open(dir.File("x.db"));
  ASSERT_TRUE(first.ok());
  auto second = Database::Open(dir.File("x.db"));
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("in use by a running hotrow server"), std::string::npos)
      << second.status().message();
  first.value().reset();
  EXPECT_TRUE(Database::Open(dir.File("x.db")).ok());
}

}  // namespace
}  // namespace hotrow::db::sqlite
