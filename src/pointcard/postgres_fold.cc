// The fold (grant step 5) and the folder on PostgreSQL: any instance
// folds an applied grant to its end, in chunks on fold_workers card
// ranges, and its folder also drops expired staging grants and sweeps the
// lots due (postgres_lots.cc). The protocol is at the top of
// postgres_store.h; the SQL is postgres_grant_sql.cc's.
#include <algorithm>
#include <chrono>
#include <thread>

#include "ops/failpoint.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "pointcard/postgres_store.h"

namespace hotrow::pointcard {

namespace pg = db::pg;

namespace {

constexpr pg::NamedSql kFold{"pointcard_grant_fold",
                             "SELECT outcome, cards, last_card, fold_ms FROM hotrow_grant_fold_v1($1, $2, $3, $4)"};
constexpr pg::NamedSql kExpire{"pointcard_grant_expire", "SELECT hotrow_grant_expire_v1()"};

}  // namespace

PostgresPointCardStore::FoldStep PostgresPointCardStore::FoldChunk(int64_t grant_id, int64_t* after,
                                                                   std::optional<int64_t> before) {
  auto rows = grants().Run<pg::Rows>(
      [&](pg::Connection& c) {
        return InTransaction(
            c, "BEGIN",
            {{kFold,
              {std::to_string(grant_id), std::to_string(*after),
               before ? pg::Param(std::to_string(*before)) : pg::Param(), std::to_string(options_.fold_chunk)}}});
      },
      /*unbounded=*/true);
  if (!rows.ok()) {
    log::Warn("grant {}: a fold chunk failed (it is retried): {}", grant_id, rows.status().ToString());
    return FoldStep::kFailed;
  }
  switch (rows->Int(0, 0)) {
    case 0:
      *after = rows->Int(0, 2);
      failpoint::MaybeCrash("grant.fold", fold_chunks_.fetch_add(1) + 1);
      return FoldStep::kMore;
    case 1:
      GrantFoldSeconds().Observe(static_cast<uint64_t>(rows->Double(0, 3) * 1e6));
      log::Info("grant {}: folded in {:.0f} ms", grant_id, rows->Double(0, 3));
      return FoldStep::kDone;
    case 2:
      return FoldStep::kBusy;
    case 4:
      return FoldStep::kRangeDone;
    default:
      return FoldStep::kDone;  // not applied: folded already, here or by another instance
  }
}

PostgresPointCardStore::FoldStep PostgresPointCardStore::FoldRange(int64_t grant_id, int64_t after,
                                                                   std::optional<int64_t> before,
                                                                   const std::function<bool()>& stopping) {
  int failures = 0;
  while (!stopping()) {
    FoldStep step = FoldChunk(grant_id, &after, before);
    switch (step) {
      case FoldStep::kMore:
        failures = 0;
        break;
      case FoldStep::kBusy:
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        break;
      case FoldStep::kFailed:
        if (++failures > 8) return step;  // the folder's next pass (1 s) tries again
        RetryBackoff(failures);
        break;
      default:
        return step;
    }
  }
  return FoldStep::kFailed;
}

// The card ids split into fold_workers ranges, one worker each (one by
// default: each backend the fold keeps busy takes CPU from the payments
// beside it). Then passes from the start take what the workers skipped,
// until one finds nothing left.
bool PostgresPointCardStore::FoldToEnd(int64_t grant_id, const std::function<bool()>& stopping) {
  auto top = grants().Run<pg::Rows>([](pg::Connection& c) { return c.Query(kTopCard); }, /*unbounded=*/true);
  // On the shared pool at most half of it: requests keep the rest. The
  // lane is sized for them.
  const int64_t workers = lane_ ? std::max<int64_t>(1, options_.fold_workers)
                                : std::clamp<int64_t>(pool_.size() / 2, 1, std::max<int64_t>(1, options_.fold_workers));
  if (top.ok() && workers > 1) {
    const int64_t span = RangeSpan(top->Int(0, 0), workers);
    std::vector<std::thread> threads;
    for (int64_t w = 0; w < workers; ++w) {
      std::optional<int64_t> before;
      if (w + 1 < workers) before = (w + 1) * span;
      threads.emplace_back(
          [this, grant_id, w, span, before, &stopping] { FoldRange(grant_id, w * span - 1, before, stopping); });
    }
    for (auto& t : threads) t.join();
  }
  for (int pass = 0; !stopping(); ++pass) {
    // What the passes after the first find is what point uses held: a
    // pause for them to end, not a loop over the credits' index.
    if (pass > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    FoldStep step = FoldRange(grant_id, -1, std::nullopt, stopping);
    if (step == FoldStep::kDone) return true;
    if (step == FoldStep::kFailed) return false;
  }
  return false;
}

// The folder: woken by an apply on this instance, and every second, it
// drops expired staging grants, folds an applied grant to its end (any
// instance's, so a fold resumes after its instance died) and sweeps the
// lots due (postgres_lots.cc).
void PostgresPointCardStore::FoldLoop() {
  std::unique_lock lock(fold_mutex_);
  while (!folder_stopped_) {
    fold_wake_.wait_for(lock, std::chrono::seconds(1), [this] { return folder_stopped_ || fold_kicked_; });
    if (folder_stopped_) break;
    fold_kicked_ = false;
    lock.unlock();
    auto expired = grants().Run<pg::Rows>([](pg::Connection& c) { return c.Query(kExpire); }, /*unbounded=*/true);
    if (expired.ok() && expired->Int(0, 0) > 0)
      log::Warn("dropped {} staged credit(s) of grants whose lease ran out (never applied)", expired->Int(0, 0));
    auto stopping = [this] {
      std::lock_guard l(fold_mutex_);
      return folder_stopped_;
    };
    auto applied =
        grants().Run<pg::Rows>([](pg::Connection& c) { return c.Query(kOldestApplied); }, /*unbounded=*/true);
    if (applied.ok() && !applied->empty()) FoldToEnd(applied->Int(0, 0), stopping);
    SweepLots(stopping);
    lock.lock();
  }
}

void PostgresPointCardStore::KickFolder() {
  {
    std::lock_guard lock(fold_mutex_);
    fold_kicked_ = true;
  }
  fold_wake_.notify_all();
}

}  // namespace hotrow::pointcard
