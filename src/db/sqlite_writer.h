// The SQLite writer: one thread, one write connection, group commit.
//
// Design
// ------
// Every write request becomes a WriteOp queued here. The writer thread takes
// everything that is waiting (at most batch_ops_max, 2,048), opens one
// transaction (BEGIN IMMEDIATE), applies each op inside its own SAVEPOINT
// so that an op that fails (not found, constraint) is rolled back alone
// without spoiling the others, COMMITs once, and only then calls each op's Finish. With
// synchronous=FULL in WAL mode the COMMIT fsyncs the log, so an op that
// finishes OK survives kill -9 and power loss: nothing is acknowledged before
// the fsync that covers it (LevelDB's DBImpl::Write does the same with its
// writer queue). While one batch commits, the next one queues up, so the
// fsync cost is shared by every op that arrived during the previous fsync:
// the batch size adapts to the load by itself, with no timer and no added
// latency at low load.
//
// Coalescing: ops whose coalesce_key() is equal within one batch are applied
// together by one Apply call (the first op's, given the whole group), in
// submission order. Likes on one plan become a single
//   UPDATE datePlans SET "like" = "like" + k WHERE id = ? RETURNING "like"
// and its k requests receive the counts N-k+1 ... N in submission order, so
// every 200 carries a distinct count and the final count equals the number
// of 200s. Ops in one batch were all in flight at once, so applying a group
// at the position of its first op is a valid serial order.
//
// Invariants
//   - Finish is called exactly once per submitted op, on the writer thread,
//     in batch order, after the COMMIT returned (or after the batch failed).
//     Finish updates the read models and then answers the client, so they
//     change exactly when the commit that changed the data is done: never
//     before, never later.
//   - An op whose Apply failed has written nothing (its savepoint is rolled
//     back); if COMMIT fails, every op of the batch fails.
//   - If SQLite rolls back the whole transaction under an op (SQLITE_FULL,
//     IOERR, NOMEM), every op of the batch fails with unavailable and the
//     groups after it never run: nothing of the batch was written, and no
//     op is ever committed outside the batch's transaction.
//   - The queue holds at most queue_ops_max ops; Submit beyond that answers
//     overloaded at once (503 with Retry-After). Nothing waits without
//     bound. hotrow serve sets queue_ops_max to --max-connections + 1,024:
//     every allowed connection can have one write waiting (HTTP/1.1 without
//     pipelined writes has at most one request in flight per connection), so
//     only beyond that is a write refused.
//
// Cost: one fsync per batch (its time is the disk's; measured in
// docs/design.md), plus a SAVEPOINT/RELEASE pair and the op's own
// statements per group, all on cached prepared statements.
#pragma once

#include <atomic>
#include <cassert>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>

#include "base/batch_queue.h"
#include "base/status.h"
#include "db/sqlite.h"
#include "ops/metrics.h"

namespace hotrow::db::sqlite {

class WriteOp {
 public:
  // Ops in one batch with equal, non-null keys are applied together.
  struct CoalesceKey {
    const void* kind = nullptr;  // the address of a per-kind tag
    int64_t id = 0;
    bool operator==(const CoalesceKey&) const = default;
  };

  virtual ~WriteOp() = default;
  virtual CoalesceKey coalesce_key() const { return {}; }

  // Applies `group` (this op first, then the ops coalesced with it; just
  // this op when it has no key) inside the batch's transaction. Runs on the
  // writer thread. An error rolls the group's savepoint back and becomes the
  // status each op of the group finishes with.
  virtual Status Apply(sqlite::Connection& conn, std::span<WriteOp* const> group) = 0;

  // Called once per op after the batch's COMMIT (or its failure).
  virtual void Finish(const Status& status) = 0;

  // How long the COMMIT of this op's batch took (set before Finish).
  std::chrono::microseconds commit_duration() const { return commit_duration_; }

 private:
  friend class GroupWriter;
  // Every path that ends an op goes through this: Finish exactly once
  // (asserted, in release builds too).
  void FinishOnce(const Status& status) {
    assert(!finished_ && "a WriteOp finished twice");
    finished_ = true;
    Finish(status);
  }
  std::chrono::microseconds commit_duration_{0};
  std::chrono::steady_clock::time_point submitted_at_;
  bool finished_ = false;
  bool upkeep_ = false;  // submitted with SubmitUpkeep
};

using OpPtr = std::unique_ptr<WriteOp>;

template <typename T, typename... Args>
OpPtr MakeOp(Args&&... args) {
  return OpPtr(new T(std::forward<Args>(args)...));
}

struct GroupWriterOptions {
  size_t queue_ops_max = 10000;
  size_t batch_ops_max = 2048;
  // An op that waited in the queue longer than this is finished with
  // unavailable, unrun, when the writer reaches it: its client's deadline
  // (--handler-timeout-ms) is near, and an answer that says "not written"
  // beats one that comes too late to mean anything. Zero: no bound.
  std::chrono::milliseconds op_wait_max{0};
  // The writer="..." label of its metrics (hotrow_sqlite_writer_*).
  std::string name = "main";
};

struct GroupWriterStats {
  uint64_t batches = 0;
  uint64_t ops = 0;
  uint64_t failed_commits = 0;
  uint64_t batch_ops_largest = 0;
  uint64_t expired_ops = 0;  // finished unrun after op_wait_max
};

class GroupWriter {
 public:
  // Takes the write connection. Until Start(), connection() may be used by
  // the caller (schema setup); afterwards only the writer thread uses it.
  GroupWriter(std::unique_ptr<sqlite::Connection> conn, GroupWriterOptions options);
  ~GroupWriter();
  GroupWriter(const GroupWriter&) = delete;
  GroupWriter& operator=(const GroupWriter&) = delete;

  sqlite::Connection& connection() { return *conn_; }

  void Start();

  // Queues `op`. When the queue is full (overloaded) or the writer has
  // stopped (unavailable), calls op->Finish with that error on the calling
  // thread instead. Thread-safe.
  void Submit(OpPtr op);

  // Queues upkeep of the file itself (the WAL RESTART): its Apply runs on
  // the write connection with no transaction open, alone, after the ops of
  // the batch it was taken with have committed and finished. One that waits
  // past op_wait_max is skipped (unavailable), and not counted as a write.
  void SubmitUpkeep(OpPtr op);

  // Applies and commits everything already queued, then stops the thread.
  // Idempotent; Submit after Stop fails with unavailable.
  void Stop();

  GroupWriterStats stats() const;
  const std::string& name() const { return options_.name; }
  bool started() const { return started_; }

  // Empty while the last batch committed (or none ran yet); else why it did
  // not, for kFailureShown after it (GET /readyz: the file is unusable while
  // writes fail).
  std::string last_failure() const;
  static constexpr std::chrono::seconds kFailureShown{10};

 private:
  // `batch` comes reserved from Start, so that the thread allocates nothing
  // of its own after Start returns.
  void Loop(std::vector<OpPtr> batch);
  // Finishes (unavailable, unrun) the ops that waited past op_wait_max.
  void FailExpired(std::vector<OpPtr>& batch);
  void RunBatch(std::vector<OpPtr>& batch);
  void RunOutsideTransaction(WriteOp& op);

  std::unique_ptr<sqlite::Connection> conn_;
  const GroupWriterOptions options_;
  BatchQueue<OpPtr>
      queue_;  // at most queue_ops_max slots; the ring doubles up to that bound, then queuing never allocates

  // The writer thread's scratch space for grouping a batch, reused so that
  // a batch allocates nothing once warm.
  struct Group {
    std::vector<WriteOp*> ops;
    std::vector<size_t> members;
    size_t slot;  // its entry in group_table_, or kNoSlot
  };
  static constexpr size_t kNoSlot = ~size_t{0};
  std::vector<Group> groups_;
  std::vector<std::pair<WriteOp::CoalesceKey, size_t>> group_table_;  // open addressing
  std::vector<Status> outcome_;
  std::mutex lifecycle_mutex_;  // Start and Stop
  std::atomic<bool> started_{false};
  std::thread thread_;
  mutable std::mutex stats_mutex_;
  GroupWriterStats stats_;    // guarded by stats_mutex_
  int64_t commits_ = 0;       // the writer thread's: batches committed, for the writer.commit failpoint
  std::string last_failure_;  // guarded by stats_mutex_
  std::chrono::steady_clock::time_point last_failure_at_;
  // GET /metrics, writer="<name>".
  struct Metrics {
    metrics::Histogram* batch_ops;
    metrics::Histogram* commit_seconds;
    metrics::Counter* ops_ok;
    metrics::Counter* ops_failed;
    metrics::Counter* ops_refused;
    metrics::Counter* ops_expired;
    metrics::Registration queue;
  } metrics_;
};

// An op built from two functions, for writes that need no coalescing:
// apply(conn) -> Result<T> runs in the batch; done(Result<T>) runs after the
// commit with apply's result, or with the batch's error if the commit failed.
template <typename T, typename ApplyFn, typename DoneFn>
class CallOp final : public WriteOp {
 public:
  CallOp(ApplyFn apply, DoneFn done) : apply_(std::move(apply)), done_(std::move(done)) {}
  Status Apply(sqlite::Connection& conn, std::span<WriteOp* const>) override {
    result_.emplace(apply_(conn));
    return result_->status();
  }
  void Finish(const Status& status) override {
    if (status.ok() && result_ && result_->ok())
      done_(std::move(*result_));
    else
      done_(Result<T>(status.ok() ? Status::Internal("write was not applied") : status));
  }

 private:
  ApplyFn apply_;
  DoneFn done_;
  std::optional<Result<T>> result_;
};

template <typename T, typename ApplyFn, typename DoneFn>
void SubmitCall(GroupWriter& writer, ApplyFn apply, DoneFn done) {
  writer.Submit(MakeOp<CallOp<T, ApplyFn, DoneFn>>(std::move(apply), std::move(done)));
}

// The value of a write that returns nothing but success.
struct Unit {};

}  // namespace hotrow::db::sqlite
