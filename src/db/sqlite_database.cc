#include "db/sqlite_database.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <optional>
#include <type_traits>

#include <fmt/format.h>
#include <sqlite3.h>

#include "ops/log.h"

namespace hotrow::db::sqlite {

namespace {
int64_t FileBytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

// The outcomes counted in /metrics (Database::Metrics), in label order.
enum CheckpointOutcome { kCheckpointOk, kCheckpointBusy, kCheckpointFailed, kCheckpointOutcomes };
const char* const kCheckpointLabels[] = {"ok", "busy", "failed"};
enum RestartOutcome { kRestarted, kRestartPutOff, kRestartFailed, kRestartNotRun, kRestartOutcomes };
const char* const kRestartLabels[] = {"restarted", "put_off", "failed", "not_run"};
static_assert(std::size(kCheckpointLabels) == kCheckpointOutcomes && std::size(kRestartLabels) == kRestartOutcomes);
}  // namespace

void ScaleWal(DatabaseOptions& options, int64_t wal_bytes_max) {
  // Only ever down from the defaults: a larger bound buys disk nothing, and
  // later checkpoints only lengthen a crash's replay.
  const DatabaseOptions defaults;
  options.checkpoint_wal_bytes = std::min(defaults.checkpoint_wal_bytes, wal_bytes_max / 16);
  options.restart_wal_bytes = std::min(defaults.restart_wal_bytes, wal_bytes_max / 4);
  // A lull in proportion, or a small bound would see one at nearly every pass.
  options.restart_lull_bytes = std::min(defaults.restart_lull_bytes, wal_bytes_max / 256);
  options.restart_wal_bytes_max = wal_bytes_max;
  options.wal_file_keep_bytes = wal_bytes_max;
}

Result<std::unique_ptr<Database>> Database::Open(const std::string& path, DatabaseOptions options) {
  std::unique_ptr<Database> db(new Database());
  db->path_ = path;
  db->wal_path_ = path + "-wal";
  db->options_ = options;
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);

  if (options.lock) {
    if (Status s = db->Lock(); !s.ok()) return s;
  }

  auto conn = sqlite::Connection::Open(path, sqlite::OpenMode::kReadWrite);
  if (!conn.ok()) return conn.status();
  Status s = (*conn)->Exec("PRAGMA wal_autocheckpoint=0; PRAGMA cache_size=-" +
                           std::to_string(options.writer_cache_bytes / 1024) +
                           "; PRAGMA mmap_size=" + std::to_string(options.mmap_bytes) +
                           "; PRAGMA journal_size_limit=" + std::to_string(options.wal_file_keep_bytes) + ";");
  if (!s.ok()) return s;
  auto page_bytes = QueryInt(**conn, "PRAGMA page_size");
  if (!page_bytes.ok()) return page_bytes.status();
  db->frame_bytes_ = *page_bytes + 24;
  // Replaces SQLite's own auto-checkpoint hook, which is off anyway. Until
  // the first commit, a log left from before counts as the whole file (an
  // overcount costs one PASSIVE pass).
  sqlite3_wal_hook((*conn)->raw(), &Database::OnWalCommit, db.get());
  db->wal_frames_ = std::max<int64_t>(0, FileBytes(db->wal_path_) - 32) / db->frame_bytes_;
  db->writer_ = std::make_unique<GroupWriter>(std::move(conn).value(), options.writer);
  db->RegisterMetrics();
  if (options.checkpointer) {
    // Its connection opened here, so that the first checkpoint (under load)
    // does not open one in the middle of the requests it serves, and so that
    // the thread allocates nothing of its own once Open has returned.
    std::unique_ptr<sqlite::Connection> checkpoint_conn;
    if (auto c = sqlite::Connection::Open(path, sqlite::OpenMode::kReadWrite); c.ok())
      checkpoint_conn = std::move(c).value();
    db->checkpointer_ =
        std::thread([p = db.get(), c = std::move(checkpoint_conn)]() mutable { p->CheckpointLoop(std::move(c)); });
  }
  return db;
}

Status Database::Lock() {
  std::string lock_path = path_ + ".lock";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) return Status::Unavailable("cannot open " + lock_path + ": " + std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {0};
    ssize_t n = ::pread(lock_fd_, pid, sizeof pid - 1, 0);
    std::string holder = n > 0 ? std::string(pid, static_cast<size_t>(n)) : "another process";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    return Status::Unavailable(path_ + " is in use by a running hotrow server (pid " + holder +
                               "); stop it first or use another --db");
  }
  std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, me.data(), me.size(), 0) < 0) {
    // The pid is informational only; the lock itself is what counts.
  }
  return Status::Ok();
}

Database::~Database() {
  // The checkpointer first: it submits RESTARTs to the writer.
  {
    std::lock_guard lock(checkpoint_mutex_);
    stopping_ = true;
  }
  checkpoint_wake_.notify_all();
  if (checkpointer_.joinable()) checkpointer_.join();
  writer_.reset();  // stops the writer and closes its connection
  idle_readers_.clear();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

Result<std::unique_ptr<sqlite::Connection>> Database::OpenReader() const {
  auto conn = sqlite::Connection::Open(path_, sqlite::OpenMode::kReadOnly);
  if (!conn.ok()) return conn.status();
  if (Status s = (*conn)->Exec("PRAGMA mmap_size=" + std::to_string(options_.mmap_bytes) + ";"); !s.ok()) return s;
  return conn;
}

Result<Database::ReaderLease> Database::Reader() {
  std::unique_lock lock(readers_mutex_);
  while (idle_readers_.empty() && readers_open_ >= options_.readers_max) reader_returned_.wait(lock);
  if (!idle_readers_.empty()) {
    auto conn = std::move(idle_readers_.back());
    idle_readers_.pop_back();
    return ReaderLease(this, std::move(conn));
  }
  ++readers_open_;
  lock.unlock();
  auto conn = OpenReader();
  if (!conn.ok()) {
    std::lock_guard again(readers_mutex_);
    --readers_open_;
    reader_returned_.notify_one();
    return conn.status();
  }
  return ReaderLease(this, std::move(conn).value());
}

Database::ReaderLease::~ReaderLease() {
  if (!conn_) return;
  if (conn_->InTransaction()) log::WarnIfFailed(conn_->Exec("ROLLBACK"), "SQLite: ROLLBACK");
  {
    std::lock_guard lock(db_->readers_mutex_);
    db_->idle_readers_.push_back(std::move(conn_));
  }
  db_->reader_returned_.notify_one();
}

void Database::RegisterMetrics() {
  static_assert(std::extent_v<decltype(Metrics::checkpoints)> == kCheckpointOutcomes &&
                std::extent_v<decltype(Metrics::restarts)> == kRestartOutcomes);
  auto& r = metrics::Registry::Default();
  const metrics::Labels l = {{"writer", options_.writer.name}};
  auto with = [&](const char* key, const char* value) {
    metrics::Labels lo = l;
    lo.emplace_back(key, value);
    return lo;
  };
  constexpr const char* kCheckpoints =
      "PASSIVE checkpoint passes by outcome (busy: another checkpoint held the file; failed: the log could not be "
      "copied back, e.g. the disk is full).";
  for (int o = 0; o < kCheckpointOutcomes; ++o)
    metrics_.checkpoints[o] =
        &r.GetCounter("hotrow_sqlite_checkpoints_total", kCheckpoints, with("outcome", kCheckpointLabels[o]));
  constexpr const char* kRestarts =
      "WAL restarts tried, by outcome: restarted, put_off (a reader stayed past the deadline), failed, not_run "
      "(the writer was backed up or stopping).";
  for (int o = 0; o < kRestartOutcomes; ++o)
    metrics_.restarts[o] =
        &r.GetCounter("hotrow_sqlite_wal_restarts_total", kRestarts, with("outcome", kRestartLabels[o]));
  metrics_.restart_writer_seconds = &r.GetHistogram(
      "hotrow_sqlite_wal_restart_writer_seconds",
      "Time a WAL restart held the writer (every write of the file waits for it).", l, metrics::LatencyBuckets(), 1e9);
  metrics_.wal_bytes = r.AddCallback(
      "hotrow_sqlite_wal_bytes", "The log in use: bytes written since the WAL last started over.", "gauge", l,
      [this] { return static_cast<double>(wal_frames_.load(std::memory_order_relaxed) * frame_bytes_); });
  metrics_.wal_file_bytes = r.AddCallback("hotrow_sqlite_wal_file_bytes", "The size of the WAL file on disk.", "gauge",
                                          l, [this] { return static_cast<double>(FileBytes(wal_path_)); });
}

CheckpointStats Database::checkpoint_stats() const {
  std::lock_guard lock(checkpoint_mutex_);
  auto stats = checkpoint_stats_;
  stats.wal_bytes_now = FileBytes(wal_path_);
  return stats;
}

int Database::OnWalCommit(void* db, sqlite3*, const char*, int frames) {
  static_cast<Database*>(db)->wal_frames_.store(frames, std::memory_order_relaxed);
  return SQLITE_OK;
}

namespace {
// A RESTART that did not run: the writer stopped, refused it (queue full) or
// it waited past op_wait_max.
constexpr int kNotRun = -1;

const char* const kRestartWords[] = {"restarted", "restart put off (readers)", "restart failed", ""};
RestartOutcome RestartOutcomeOf(int rc) {
  return rc == SQLITE_OK     ? kRestarted
         : rc == SQLITE_BUSY ? kRestartPutOff
         : rc == kNotRun     ? kRestartNotRun
                             : kRestartFailed;
}

// Few enough frames for a RESTART to copy with the writer held.
constexpr int kRestartLeftoverFrames = 256;

struct RestartResult {
  int rc = kNotRun;           // SQLite's result code
  double writer_seconds = 0;  // how long it held the writer
  int log_frames = 0;         // the log it found
};

// SQLITE_CHECKPOINT_RESTART on the write connection, between batches.
class RestartOp final : public WriteOp {
 public:
  struct Outcome {
    std::mutex mutex;
    std::condition_variable done;
    std::optional<RestartResult> result;  // set when the op finished
  };
  RestartOp(std::shared_ptr<Outcome> outcome, std::chrono::milliseconds reader_wait)
      : outcome_(std::move(outcome)), reader_wait_(reader_wait) {}
  Status Apply(sqlite::Connection& conn, std::span<WriteOp* const>) override {
    auto start = std::chrono::steady_clock::now();
    // Copy what is left first: no commit can come between this and the
    // RESTART (this is the writer's thread), so the RESTART has nothing to
    // copy, and its deadline for readers is theirs alone.
    result_.rc =
        sqlite3_wal_checkpoint_v2(conn.raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE, &result_.log_frames, nullptr);
    if (result_.rc == SQLITE_OK) {
      auto deadline = std::chrono::steady_clock::now() + reader_wait_;
      sqlite3_busy_handler(
          conn.raw(),
          [](void* p, int) {
            if (std::chrono::steady_clock::now() >= *static_cast<std::chrono::steady_clock::time_point*>(p)) return 0;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            return 1;
          },
          &deadline);
      result_.rc = sqlite3_wal_checkpoint_v2(conn.raw(), nullptr, SQLITE_CHECKPOINT_RESTART, nullptr, nullptr);
      sqlite3_busy_timeout(conn.raw(), sqlite::kBusyTimeoutMs);
    }
    result_.writer_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return Status::Ok();
  }
  void Finish(const Status&) override {
    std::lock_guard lock(outcome_->mutex);
    outcome_->result = result_;
    outcome_->done.notify_all();
  }

 private:
  std::shared_ptr<Outcome> outcome_;
  std::chrono::milliseconds reader_wait_;
  RestartResult result_;
};

RestartResult RunRestart(GroupWriter& writer, std::chrono::milliseconds reader_wait) {
  auto outcome = std::make_shared<RestartOp::Outcome>();
  writer.SubmitUpkeep(MakeOp<RestartOp>(outcome, reader_wait));
  std::unique_lock lock(outcome->mutex);
  // Stop() applies what is queued, so the op always finishes; the bound is
  // against a writer that is wedged in a commit.
  outcome->done.wait_for(lock, std::chrono::seconds(30), [&] { return outcome->result.has_value(); });
  return outcome->result.value_or(RestartResult{});
}
}  // namespace

void Database::CheckpointLoop(std::unique_ptr<sqlite::Connection> conn) {
  int64_t bytes_last_pass = 0;  // the log in use a pass ago
  // Warnings, at most one of each kind a minute (this thread's alone).
  using Clock = std::chrono::steady_clock;
  Clock::time_point warned_failed{}, warned_stall{}, warned_starved{};
  int starved_passes = 0;
  auto due = [](Clock::time_point& last) {
    auto now = Clock::now();
    if (last != Clock::time_point{} && now - last < std::chrono::minutes(1)) return false;
    last = now;
    return true;
  };
  std::unique_lock lock(checkpoint_mutex_);
  while (!stopping_) {
    checkpoint_wake_.wait_for(lock, std::chrono::milliseconds(200));
    if (stopping_) break;
    checkpoint_stats_.wal_bytes_largest = std::max(checkpoint_stats_.wal_bytes_largest, FileBytes(wal_path_));
    int64_t bytes = wal_frames_.load(std::memory_order_relaxed) * frame_bytes_;  // the log in use
    const bool lull = bytes - bytes_last_pass < options_.restart_lull_bytes;
    bytes_last_pass = bytes;
    if (bytes < options_.checkpoint_wal_bytes) {
      starved_passes = 0;
      continue;
    }
    lock.unlock();
    if (!conn) {
      auto c = sqlite::Connection::Open(path_, sqlite::OpenMode::kReadWrite);
      if (c.ok()) conn = std::move(c).value();
    }
    int log_frames = 0, done_frames = 0;
    std::string restarted;
    auto start = std::chrono::steady_clock::now();
    int rc = conn
                 ? sqlite3_wal_checkpoint_v2(conn->raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE, &log_frames, &done_frames)
                 : SQLITE_ERROR;
    // Under a steady stream of reads and writes the WAL never gets a moment
    // with every frame copied back and no reader using it, so SQLite never
    // starts it over and the file only grows (3 GiB in a 180 s point-card
    // run). Once a PASSIVE pass has copied everything and the log in use is
    // large, a RESTART waits for the readers of the moment to leave the WAL,
    // so that the next commit starts it from the beginning. It holds the
    // write lock throughout, so it runs on the writer itself, between two
    // batches (RestartOp), and at a lull: run from here, during a grant's
    // fold (~90 MB/s of log), it first polled for a gap between the
    // writer's batches, then copied and synced all that was written
    // meanwhile with the writer shut out -- 40 to 130 ms of stalled point
    // uses after every fold. It gives up after restart_wait if readers
    // stay, to try again on the next pass.
    // Readers kept this pass from copying everything back. Such a pass
    // takes no restart, so its counts stay for the warning below.
    const bool starved = rc == SQLITE_OK && done_frames < log_frames;
    if (rc == SQLITE_OK && done_frames == log_frames && bytes >= options_.restart_wal_bytes &&
        (lull || bytes >= options_.restart_wal_bytes_max) && writer_->started()) {
      // What is left to copy is copied with the writer held: a few more
      // PASSIVE passes here leave it only what was written during the last,
      // shorter one.
      for (int pass = 0; pass < 3; ++pass) {
        int before = log_frames;
        if (sqlite3_wal_checkpoint_v2(conn->raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE, &log_frames, &done_frames) !=
                SQLITE_OK ||
            log_frames - before < kRestartLeftoverFrames)
          break;
      }
      auto [restart, writer_seconds, restart_log_frames] = RunRestart(*writer_, options_.restart_wait);
      // Until the next commit reports the new log's size, the old one's
      // would ask for another RESTART on every pass (an undercount until
      // then is harmless).
      if (restart == SQLITE_OK) wal_frames_.store(0, std::memory_order_relaxed);
      lock.lock();
      if (restart == SQLITE_OK) ++checkpoint_stats_.restarts;
      if (restart == SQLITE_BUSY) ++checkpoint_stats_.restarts_put_off;
      lock.unlock();
      const RestartOutcome outcome = RestartOutcomeOf(restart);
      metrics_.restarts[outcome]->Add();
      if (outcome != kRestartNotRun) {
        metrics_.restart_writer_seconds->ObserveDuration(std::chrono::duration<double>(writer_seconds));
        // Past the bound there was no lull: what the writer wrote since the
        // last pass is copied, and the database file synced, with every
        // write of the file waiting (100-430 ms measured at 4k payments/s).
        if (writer_seconds >= 0.1 && due(warned_stall))
          log::Warn(
              "SQLite {}: a WAL restart held the writer for {:.0f} ms ({} MiB of log in use{}); writes of this "
              "file waited for it",
              path_, writer_seconds * 1000, bytes >> 20, lull ? "" : ", no lull in the writes");
      }
      restarted = outcome == kRestartNotRun
                      ? std::string(", WAL restart not run (the writer is backed up or stopping)")
                      : fmt::format(", WAL {} ({} frame(s) left to copy, {:.3f} s on the writer)",
                                    kRestartWords[outcome], restart_log_frames - log_frames, writer_seconds);
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    metrics_.checkpoints[rc == SQLITE_OK     ? kCheckpointOk
                         : rc == SQLITE_BUSY ? kCheckpointBusy
                                             : kCheckpointFailed]
        ->Add();
    if (rc == SQLITE_OK) {
      // Starved passes in a row past the bound: a reader that merely
      // overlaps one pass is not worth a warning.
      starved_passes = starved && bytes >= options_.restart_wal_bytes_max ? starved_passes + 1 : 0;
      if (starved_passes >= 5 && due(warned_starved))
        log::Warn(
            "SQLite {}: {} MiB of WAL in use, past the {} MiB at which it is started over: read transactions "
            "on older snapshots have kept SQLite from copying it back for {} passes ({} of {} frame(s) copied "
            "in the last); the file grows until they end",
            path_, bytes >> 20, options_.restart_wal_bytes_max >> 20, starved_passes, done_frames, log_frames);
    } else if (rc != SQLITE_BUSY && due(warned_failed)) {
      // (BUSY: another checkpoint holds the file's checkpoint lock, a
      // restart the writer still runs or an outside sqlite3 shell: not a
      // failure.)
      log::Warn(
          "SQLite {}: a checkpoint failed ({}); the WAL ({} MiB in use) cannot be copied back or started "
          "over until it succeeds",
          path_, conn ? sqlite3_errstr(rc) : "no connection", bytes >> 20);
    }
    lock.lock();
    if (rc == SQLITE_OK) {
      ++checkpoint_stats_.checkpoints;
      checkpoint_stats_.frames_checkpointed += static_cast<uint64_t>(done_frames);
      checkpoint_stats_.checkpoint_seconds += seconds;
    }
    // Growth is measured from the end of this pass's work, not its start.
    bytes_last_pass = wal_frames_.load(std::memory_order_relaxed) * frame_bytes_;
    log::Debug("checkpoint {}: WAL {} bytes in use, {} of {} frame(s) copied in {:.3f} s{}{}", options_.writer.name,
               bytes, done_frames, log_frames, seconds, restarted,
               rc == SQLITE_OK ? std::string() : fmt::format(", failed: {}", sqlite3_errstr(rc)));
  }
}

}  // namespace hotrow::db::sqlite
