#include "db/sqlite_writer.h"

#include <algorithm>
#include <iterator>
#include <vector>

#include "ops/failpoint.h"
#include "ops/log.h"

namespace hotrow::db::sqlite {

GroupWriter::GroupWriter(std::unique_ptr<sqlite::Connection> conn, GroupWriterOptions options)
    : conn_(std::move(conn)), options_(options), queue_(options_.queue_ops_max, "write queue is full; retry later") {
  groups_.reserve(options_.batch_ops_max);
  outcome_.reserve(options_.batch_ops_max);
  size_t table = 1;
  while (table < options_.batch_ops_max * 2) table <<= 1;
  group_table_.resize(table);
  auto& r = metrics::Registry::Default();
  metrics::Labels l = {{"writer", options_.name}};
  metrics_.batch_ops =
      &r.GetHistogram("hotrow_sqlite_writer_batch_ops", "Ops per group commit.", l, metrics::CountBuckets(), 1);
  metrics_.commit_seconds =
      &r.GetHistogram("hotrow_sqlite_writer_commit_seconds", "Time of a group commit's COMMIT (its fsync).", l,
                      metrics::LatencyBuckets(), 1e9);
  auto outcome = [&](const char* o) {
    metrics::Labels lo = l;
    lo.emplace_back("outcome", o);
    return &r.GetCounter("hotrow_sqlite_writer_ops_total",
                         "Writes by outcome: ok, failed (its own error or the batch's), refused (queue full or "
                         "stopped), expired (waited past the queue bound).",
                         lo);
  };
  metrics_.ops_ok = outcome("ok");
  metrics_.ops_failed = outcome("failed");
  metrics_.ops_refused = outcome("refused");
  metrics_.ops_expired = outcome("expired");
  metrics_.queue = r.AddCallback("hotrow_sqlite_writer_queue_ops", "Writes waiting for the writer.", "gauge", l,
                                 [this] { return static_cast<double>(queue_.size()); });
}

GroupWriter::~GroupWriter() { Stop(); }

void GroupWriter::Start() {
  std::lock_guard lock(lifecycle_mutex_);
  if (started_ || queue_.stopped()) return;
  std::vector<OpPtr> batch;
  batch.reserve(options_.batch_ops_max);
  thread_ = std::thread([this, batch = std::move(batch)]() mutable { Loop(std::move(batch)); });
  started_ = true;
}

void GroupWriter::Submit(OpPtr op) {
  if (!started_) {
    metrics_.ops_refused->Add();
    return op->FinishOnce(Status::Unavailable("the server is shutting down"));
  }
  if (options_.op_wait_max.count() > 0) op->submitted_at_ = std::chrono::steady_clock::now();
  // A refused op is finished here, on the calling thread, outside the lock.
  if (Status s = queue_.Push(op); !s.ok()) {
    metrics_.ops_refused->Add();
    op->FinishOnce(s);
  }
}

void GroupWriter::SubmitUpkeep(OpPtr op) {
  op->upkeep_ = true;
  Submit(std::move(op));
}

void GroupWriter::FailExpired(std::vector<OpPtr>& batch) {
  if (options_.op_wait_max.count() == 0) return;
  auto oldest_allowed = std::chrono::steady_clock::now() - options_.op_wait_max;
  size_t kept = 0, expired = 0;
  for (auto& op : batch) {
    if (op->submitted_at_ < oldest_allowed && op->upkeep_) {
      op->FinishOnce(Status::Unavailable("upkeep skipped: the writer is backed up"));  // not a client's write
    } else if (op->submitted_at_ < oldest_allowed) {
      op->FinishOnce(Status::Unavailable("the write waited longer than " +
                                         std::to_string(options_.op_wait_max.count()) +
                                         " ms for the store; nothing was written"));
      ++expired;
    } else {
      batch[kept++] = std::move(op);
    }
  }
  batch.resize(kept);
  if (expired > 0) {
    metrics_.ops_expired->Add(expired);
    std::lock_guard lock(stats_mutex_);
    stats_.expired_ops += expired;
  }
}

void GroupWriter::Stop() {
  std::lock_guard lock(lifecycle_mutex_);
  queue_.Stop();  // the thread applies what is queued, then returns
  if (thread_.joinable()) thread_.join();
}

std::string GroupWriter::last_failure() const {
  std::lock_guard lock(stats_mutex_);
  // A failure no later batch has cleared stops counting after a while: with
  // the instance out of the balancer no write may come to clear it (the
  // disk was freed, say), and a write that fails again renews it.
  if (std::chrono::steady_clock::now() - last_failure_at_ > kFailureShown) return "";
  return last_failure_;
}

GroupWriterStats GroupWriter::stats() const {
  std::lock_guard lock(stats_mutex_);
  return stats_;
}

void GroupWriter::Loop(std::vector<OpPtr> batch) {
  while (queue_.PopBatch(batch, options_.batch_ops_max)) {
    FailExpired(batch);
    // Upkeep ops (rare, so the common batch allocates nothing) go after the
    // batch's transaction.
    std::vector<OpPtr> upkeep;
    if (std::any_of(batch.begin(), batch.end(), [](const OpPtr& op) { return op->upkeep_; })) {
      auto first = std::stable_partition(batch.begin(), batch.end(), [](const OpPtr& op) { return !op->upkeep_; });
      upkeep.assign(std::make_move_iterator(first), std::make_move_iterator(batch.end()));
      batch.erase(first, batch.end());
    }
    if (!batch.empty()) RunBatch(batch);
    for (auto& op : upkeep) RunOutsideTransaction(*op);
    batch.clear();
  }
}

void GroupWriter::RunOutsideTransaction(WriteOp& op) {
  WriteOp* self = &op;
  Status s = conn_->InTransaction() ? Status::Internal("a transaction is open on the write connection")
                                    : op.Apply(*conn_, std::span<WriteOp* const>(&self, 1));
  op.FinishOnce(s);
}

namespace {
size_t HashKey(const WriteOp::CoalesceKey& k) {
  return std::hash<const void*>()(k.kind) ^ (static_cast<size_t>(k.id) * 0x9E3779B97F4A7C15ull);
}

Status RunStatement(sqlite::Connection& conn, std::string_view sql) {
  auto q = conn.Prepare(sql);
  if (!q.ok()) return q.status();
  return q->Run();
}
}  // namespace

void GroupWriter::RunBatch(std::vector<OpPtr>& batch) {
  // Group ops by coalesce key, keeping the order of first appearance. The
  // groups, their member lists and the open-addressing table that finds a
  // key's group keep their capacity from batch to batch; the table starts
  // empty and only the slots this batch used are cleared after it.
  size_t group_count = 0;
  const size_t mask = group_table_.size() - 1;
  auto new_group = [&](size_t slot) -> size_t {
    if (group_count == groups_.size()) groups_.emplace_back();
    groups_[group_count].ops.clear();
    groups_[group_count].members.clear();
    groups_[group_count].slot = slot;
    return group_count++;
  };
  for (size_t i = 0; i < batch.size(); ++i) {
    WriteOp::CoalesceKey key = batch[i]->coalesce_key();
    size_t g;
    if (!key.kind) {
      g = new_group(kNoSlot);
    } else {
      size_t slot = HashKey(key) & mask;
      while (group_table_[slot].first.kind && !(group_table_[slot].first == key)) slot = (slot + 1) & mask;
      if (!group_table_[slot].first.kind) group_table_[slot] = {key, new_group(slot)};
      g = group_table_[slot].second;
    }
    groups_[g].ops.push_back(batch[i].get());
    groups_[g].members.push_back(i);
  }
  for (size_t g = 0; g < group_count; ++g)
    if (groups_[g].slot != kNoSlot) group_table_[groups_[g].slot].first = {};

  outcome_.assign(batch.size(), Status::Ok());
  Status batch_status = RunStatement(*conn_, "BEGIN IMMEDIATE");
  if (batch_status.ok()) {
    for (size_t g = 0; g < group_count; ++g) {
      Group& group = groups_[g];
      Status s = RunStatement(*conn_, "SAVEPOINT op");
      if (s.ok()) {
        s = group.ops.front()->Apply(*conn_, group.ops);
        // SQLite may have rolled back the whole transaction (SQLITE_FULL,
        // IOERR, NOMEM on a statement with no statement journal): then the
        // groups before this one are gone too, and a SAVEPOINT now would
        // begin a transaction of its own that RELEASE commits. Fail the
        // whole batch, the rest unrun; nothing of it was written.
        if (!conn_->InTransaction()) {
          batch_status = Status::Unavailable("the store rolled back the batch's transaction; nothing was written")
                             .WithDetail(s.ToString());
          log::Error("write transaction rolled back by SQLite after {}: {} op(s) failed unrun", s.ToString(),
                     batch.size());
          break;
        }
        if (!s.ok()) log::WarnIfFailed(RunStatement(*conn_, "ROLLBACK TO op"), "writer: ROLLBACK TO op");
        Status released = RunStatement(*conn_, "RELEASE op");
        if (s.ok() && !released.ok()) s = released;
      }
      if (!s.ok())
        for (size_t i : group.members) outcome_[i] = s;
    }
    if (batch_status.ok()) {
      auto commit_start = std::chrono::steady_clock::now();
      batch_status = RunStatement(*conn_, "COMMIT");
      auto commit_us =
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - commit_start);
      for (auto& op : batch) op->commit_duration_ = commit_us;
      metrics_.commit_seconds->ObserveDuration(std::chrono::steady_clock::now() - commit_start);
      if (!batch_status.ok()) log::Error("group commit of {} op(s) failed: {}", batch.size(), batch_status.ToString());
      // Committed, and nobody told yet: a crash here must lose nothing.
      if (batch_status.ok()) failpoint::MaybeCrash("writer.commit", ++commits_);
    }
    if (!batch_status.ok() && conn_->InTransaction())
      log::WarnIfFailed(RunStatement(*conn_, "ROLLBACK"), "writer: ROLLBACK of a failed batch");
  } else {
    log::Error("cannot begin a write transaction: {}", batch_status.ToString());
  }

  {
    std::lock_guard lock(stats_mutex_);
    ++stats_.batches;
    stats_.ops += batch.size();
    stats_.batch_ops_largest = std::max<uint64_t>(stats_.batch_ops_largest, batch.size());
    if (!batch_status.ok()) ++stats_.failed_commits;
    if (batch_status.ok())
      last_failure_.clear();
    else
      last_failure_ = batch_status.ToString(), last_failure_at_ = std::chrono::steady_clock::now();
  }
  metrics_.batch_ops->Observe(batch.size());
  size_t failed = 0;
  for (size_t i = 0; i < batch.size(); ++i) failed += batch_status.ok() && outcome_[i].ok() ? 0 : 1;
  metrics_.ops_ok->Add(batch.size() - failed);
  metrics_.ops_failed->Add(failed);
  // An op that failed on its own was rolled back to its savepoint: its own
  // error stays definite even when the batch's COMMIT then fails.
  for (size_t i = 0; i < batch.size(); ++i)
    batch[i]->FinishOnce(batch_status.ok() || !outcome_[i].ok() ? outcome_[i] : batch_status);
}

}  // namespace hotrow::db::sqlite
