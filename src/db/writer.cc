#include "db/writer.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "ops/log.h"

namespace hotrow::db {

Writer::Writer(std::unique_ptr<sqlite::Connection> conn, WriterOptions options)
    : conn_(std::move(conn)), options_(options) {}

Writer::~Writer() { Stop(); }

void Writer::Start() {
  std::lock_guard lock(mutex_);
  if (started_) return;
  started_ = true;
  thread_ = std::thread([this] { Loop(); });
}

void Writer::Submit(std::unique_ptr<WriteOp> op) {
  {
    std::unique_lock lock(mutex_);
    if (stopping_ || !started_) {
      lock.unlock();
      op->Finish(Status::Unavailable("the server is shutting down"));
      return;
    }
    if (queue_.size() >= options_.queue_ops_max) {
      lock.unlock();
      op->Finish(Status::Overloaded("write queue is full; retry later"));
      return;
    }
    queue_.push_back(std::move(op));
  }
  wake_.notify_one();
}

void Writer::Stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

size_t Writer::queued() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

WriterStats Writer::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Writer::Loop() {
  std::vector<std::unique_ptr<WriteOp>> batch;
  batch.reserve(options_.batch_ops_max);
  while (true) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;  // stopping, and everything is applied
      size_t n = std::min(queue_.size(), options_.batch_ops_max);
      for (size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    RunBatch(batch);
    batch.clear();
  }
}

namespace {
struct KeyHash {
  size_t operator()(const WriteOp::CoalesceKey& k) const {
    return std::hash<const void*>()(k.kind) ^ (std::hash<int64_t>()(k.id) * 0x9E3779B97F4A7C15ull);
  }
};

Status RunStatement(sqlite::Connection& conn, std::string_view sql) {
  auto q = conn.Prepare(sql);
  if (!q.ok()) return q.status();
  return q->Run();
}
}  // namespace

void Writer::RunBatch(std::vector<std::unique_ptr<WriteOp>>& batch) {
  // Group ops by coalesce key, keeping the order of first appearance.
  std::vector<std::vector<WriteOp*>> groups;
  std::vector<std::vector<size_t>> members;
  std::unordered_map<WriteOp::CoalesceKey, size_t, KeyHash> group_of;
  for (size_t i = 0; i < batch.size(); ++i) {
    WriteOp::CoalesceKey key = batch[i]->coalesce_key();
    size_t g = groups.size();
    if (key.kind) g = group_of.try_emplace(key, groups.size()).first->second;
    if (g == groups.size()) groups.emplace_back(), members.emplace_back();
    groups[g].push_back(batch[i].get());
    members[g].push_back(i);
  }

  std::vector<Status> outcome(batch.size());
  Status batch_status = RunStatement(*conn_, "BEGIN IMMEDIATE");
  if (batch_status.ok()) {
    for (size_t g = 0; g < groups.size(); ++g) {
      Status s = RunStatement(*conn_, "SAVEPOINT op");
      if (s.ok()) {
        s = groups[g].front()->Apply(*conn_, groups[g]);
        if (!s.ok()) (void)RunStatement(*conn_, "ROLLBACK TO op");
        Status released = RunStatement(*conn_, "RELEASE op");
        if (s.ok() && !released.ok()) s = released;
      }
      for (size_t i : members[g]) outcome[i] = s;
    }
    auto commit_start = std::chrono::steady_clock::now();
    batch_status = RunStatement(*conn_, "COMMIT");
    auto commit_us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - commit_start);
    for (auto& op : batch) op->commit_duration_ = commit_us;
    if (!batch_status.ok()) {
      log::Error("group commit of {} op(s) failed: {}", batch.size(), batch_status.ToString());
      if (conn_->InTransaction()) (void)RunStatement(*conn_, "ROLLBACK");
    }
  } else {
    log::Error("cannot begin a write transaction: {}", batch_status.ToString());
  }

  {
    std::lock_guard lock(mutex_);
    ++stats_.batches;
    stats_.ops += batch.size();
    stats_.batch_ops_largest = std::max<uint64_t>(stats_.batch_ops_largest, batch.size());
    if (!batch_status.ok()) ++stats_.failed_commits;
  }
  for (size_t i = 0; i < batch.size(); ++i) batch[i]->Finish(batch_status.ok() ? outcome[i] : batch_status);
}

}  // namespace hotrow::db
