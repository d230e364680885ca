// The grant on PostgreSQL: staged credits, one small atomic apply, a fold
// after the answer. The protocol and why it is serializable are at the top
// of postgres_store.h; this file drives the grant's steps 1-4 (its SQL:
// postgres_grant_sql.cc), postgres_fold.cc step 5 and the folder.
#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>

#include "ops/failpoint.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "pointcard/postgres_store.h"

namespace hotrow::pointcard {

namespace pg = db::pg;

// Advisory lock keys (another store's are 72720001-72720004).
constexpr int64_t kGrantLock = 72720005;  // begin and apply, cluster-wide
// (72720006, grant id) is taken shared by every fold chunk (in the SQL):
// held exclusive, it pauses the grant's fold (the tests hold one off so).

namespace {

constexpr pg::NamedSql kGrantLockXact{"pointcard_grant_lock_xact", "SELECT pg_advisory_xact_lock($1::bigint)"};
constexpr pg::NamedSql kGrantLockSession{"pointcard_grant_lock", "SELECT pg_advisory_lock($1::bigint)"};
constexpr pg::NamedSql kGrantUnlockSession{"pointcard_grant_unlock", "SELECT pg_advisory_unlock($1::bigint)"};
constexpr pg::NamedSql kBegin{"pointcard_grant_begin",
                              "SELECT outcome, grant_id, cards, points, query_ms, update_ms, commit_ms "
                              "FROM hotrow_grant_begin_v2($1, $2, $3, $4, $5, $6, $7, $8, $9)"};
constexpr pg::NamedSql kBarrier{"pointcard_grant_barrier",
                                "SELECT r, cardinality(r) FROM hotrow_grant_barrier_v2($1::text[], $2) r"};
constexpr pg::NamedSql kGrantRow{"pointcard_grant_row",
                                 "SELECT CARDS, POINTS, QUERY_MS, UPDATE_MS FROM P_GRANT WHERE GRANT_ID = $1"};
constexpr pg::NamedSql kStageRange{
    "pointcard_grant_stage_range",
    "SELECT cards, points, query_ms, update_ms FROM hotrow_grant_stage_range_v1($1, $2, $3, $4, $5, $6)"};
constexpr pg::NamedSql kStageHold{"pointcard_grant_stage_hold",
                                  "SELECT pg_export_snapshot() FROM P_GRANT WHERE GRANT_ID = $1 AND STATE = 'staging' "
                                  "FOR NO KEY UPDATE"};
constexpr pg::NamedSql kStageTotals{
    "pointcard_grant_stage_totals",
    "UPDATE P_GRANT SET CARDS = $2, POINTS = $3, QUERY_MS = $4, UPDATE_MS = $5, "
    "LEASE_UNTIL = clock_timestamp() AT TIME ZONE 'UTC' + $6 * interval '1 millisecond' "
    "WHERE GRANT_ID = $1"};
constexpr pg::NamedSql kStageClear{"pointcard_grant_stage_clear", "DELETE FROM P_GRANT_CREDIT WHERE GRANT_ID = $1"};
constexpr pg::NamedSql kApply{"pointcard_grant_apply",
                              "SELECT outcome, other_id, from_us, to_us, dropped_cards, dropped_points "
                              "FROM hotrow_grant_apply_v2($1, $2)"};
constexpr pg::NamedSql kAbandon{"pointcard_grant_abandon", "SELECT hotrow_grant_abandon_v1($1)"};
constexpr pg::NamedSql kHeartbeat{"pointcard_grant_heartbeat",
                                  "UPDATE P_GRANT SET LEASE_UNTIL = clock_timestamp() AT TIME ZONE 'UTC' + "
                                  "$2 * interval '1 millisecond' WHERE GRANT_ID = $1 AND STATE = 'staging'"};
constexpr pg::NamedSql kRecordCommitTime{"pointcard_grant_commit_ms",
                                         "UPDATE P_GRANT SET COMMIT_MS = $1 WHERE GRANT_ID = $2"};
// A (auto)vacuum or analyze of S_ACCOUNT: the apply's SHARE request would
// queue behind it, and every payment behind that request.
constexpr pg::NamedSql kAccountsVacuuming{
    "pointcard_accounts_vacuuming",
    "SELECT COUNT(*) FROM pg_locks l WHERE l.locktype = 'relation' AND l.relation = 's_account'::regclass "
    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND l.mode = 'ShareUpdateExclusiveLock' AND l.granted"};

enum class BeginResult : int64_t { kBegun = 0, kReplayed, kMismatch, kFuture, kOverlap, kStaging, kBadExpiry };
enum class ApplyResult : int64_t {
  kApplied = 0,
  kOverlap = 4,
  kLeaseLost = 6,
  kPreviousFolding = 7,
  kAppliedBefore = 8,
  kNotLocked = 9
};

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// How long a grant waits for the barrier and for the previous fold, as on
// SQLite (then 503, nothing granted).
constexpr int64_t kWaitMaxMs = 60000;

Status LeaseLost(int64_t grant_id) {
  return Status::Unavailable("grant " + std::to_string(grant_id) +
                             " lost its staging lease (its heartbeat could not renew it in time); nothing was "
                             "granted, retry");
}

}  // namespace

// InTransaction and RangeSpan: postgres_store.h.
Result<pg::Rows> InTransaction(pg::Connection& c, const std::string& begin,
                               std::vector<pg::Connection::Statement> work) {
  std::vector<pg::Connection::Statement> all;
  all.emplace_back(begin);
  all.emplace_back("SET LOCAL statement_timeout = 0");  // admin batch work, not a request
  size_t last = all.size() + work.size() - 1;
  for (auto& w : work) all.push_back(std::move(w));
  all.emplace_back("COMMIT");
  auto rows = c.Pipeline(all);
  if (!rows.ok()) {
    if (Status rolled = c.Exec("ROLLBACK"); !rolled.ok()) c.MarkBroken();
    return rows.status();
  }
  return std::move((*rows)[last]);
}

int64_t RangeSpan(int64_t top, int64_t workers) {
  int64_t span = top / workers;
  return span < std::numeric_limits<int64_t>::max() ? span + 1 : span;
}

// Step 3: a leader transaction holds the grant's row and exports its
// REPEATABLE READ snapshot; stage workers, one per card range, import it
// and each commit their range's credits; the leader then records the
// totals (and the lease) and commits. One range by default: every
// backend staging takes CPU from the payments beside it; stage_workers
// gives a database server with cores to spare more of them.
Result<PostgresPointCardStore::StageTotals> PostgresPointCardStore::Stage(int64_t id, const GrantRequest& r,
                                                                          const std::string& lease_ms,
                                                                          bool clear_first) {
  const std::string id_text = std::to_string(id);
  if (clear_first) {  // ranges an earlier attempt committed
    auto cleared = grants().Run<pg::Rows>([&](pg::Connection& c) { return c.Query(kStageClear, {id_text}); },
                                          /*unbounded=*/true);
    if (!cleared.ok()) return cleared.status();
  }
  auto top = grants().Run<pg::Rows>([](pg::Connection& c) { return c.Query(kTopCard); }, /*unbounded=*/true);
  if (!top.ok()) return top.status();
  const int64_t workers = StageWorkers();
  const int64_t span = RangeSpan(top->Int(0, 0), workers);
  return grants().Run<StageTotals>(
      [&](pg::Connection& leader) -> Result<StageTotals> {
        // A bound on idling here: a leader left open would hold the
        // grant's row and its snapshot.
        auto held = leader.Pipeline({{"BEGIN ISOLATION LEVEL REPEATABLE READ"},
                                     {"SET LOCAL statement_timeout = 0"},
                                     {"SET LOCAL idle_in_transaction_session_timeout = '120s'"},
                                     // A backend whose instance died stops within a second
                                     // (and lets go of the grant's row) instead of staging on.
                                     {"SET LOCAL client_connection_check_interval = '1s'"},
                                     {kStageHold, {id_text}}});
        auto rollback = [&](Status why) -> Result<StageTotals> {
          if (Status rolled = leader.Exec("ROLLBACK"); !rolled.ok()) leader.MarkBroken();
          return why;
        };
        if (!held.ok()) return rollback(held.status());
        if (held->back().empty()) return rollback(LeaseLost(id));
        const std::string snapshot(held->back().Text(0, 0));
        auto range = [&](int64_t w) {
          return std::vector<pg::Param>{id_text,
                                        std::to_string(r.from_us),
                                        std::to_string(r.to_us),
                                        std::to_string(r.rate_percent),
                                        std::to_string(w == 0 ? std::numeric_limits<int64_t>::min() : w * span),
                                        w + 1 < workers ? pg::Param(std::to_string((w + 1) * span)) : pg::Param()};
        };
        // Range 0 in the leader's own transaction, the others each on a
        // connection of its own (so one worker needs no second connection).
        std::vector<Result<pg::Rows>> ranges;
        for (int64_t w = 0; w < workers; ++w) ranges.emplace_back(Status::Internal("unset"));
        {
          std::vector<std::thread> threads;
          for (int64_t w = 1; w < workers; ++w) {
            threads.emplace_back([&, w] {
              ranges[w] = grants().Run<pg::Rows>(
                  [&](pg::Connection& c) {
                    return InTransaction(c, "BEGIN ISOLATION LEVEL REPEATABLE READ",
                                         {{"SET TRANSACTION SNAPSHOT '" + snapshot + "'"},
                                          {"SET LOCAL client_connection_check_interval = '1s'"},
                                          {kStageRange, range(w)}});
                  },
                  /*unbounded=*/true);
            });
          }
          ranges[0] = leader.Query(kStageRange, range(0));
          for (auto& t : threads) t.join();
        }
        StageTotals totals;
        for (auto& range : ranges) {
          if (!range.ok()) return rollback(range.status());
          totals.cards += range->Int(0, 0);
          totals.points += range->Int(0, 1);
          totals.query_ms = std::max(totals.query_ms, range->Double(0, 2));
          totals.update_ms = std::max(totals.update_ms, range->Double(0, 3));
        }
        auto recorded =
            leader.Pipeline({{kStageTotals,
                              {id_text, std::to_string(totals.cards), std::to_string(totals.points),
                               std::to_string(totals.query_ms), std::to_string(totals.update_ms), lease_ms}},
                             {"COMMIT"}});
        if (!recorded.ok()) return rollback(recorded.status());
        return totals;
      },
      /*unbounded=*/true);
}

int64_t PostgresPointCardStore::StageWorkers() const {
  // The leader stages one range itself. Never the whole pool: the leader
  // holds a connection while the other ranges wait for theirs.
  return std::clamp<int64_t>(options_.stage_workers, 1, std::max<int64_t>(1, grants().size() - 1));
}

Result<GrantOutcome> PostgresPointCardStore::RunGrant(const GrantRequest& r, const std::string& fp) {
  const std::string lease_ms = std::to_string(options_.lease.count());
  // 1. begin
  std::vector<pg::Param> params = {std::to_string(r.from_us),
                                   std::to_string(r.to_us),
                                   std::to_string(r.rate_percent),
                                   r.idempotency_key ? pg::Param(*r.idempotency_key) : pg::Param(),
                                   fp,
                                   r.allow_overlap ? "true" : "false",
                                   lease_ms,
                                   r.expires_in_days ? pg::Param(std::to_string(*r.expires_in_days)) : pg::Param(),
                                   r.expires_at_us ? pg::Param(std::to_string(*r.expires_at_us)) : pg::Param()};
  auto begun = grants().Run<pg::Rows>(
      [&](pg::Connection& c) {
        return InTransaction(c, "BEGIN", {{kGrantLockXact, {std::to_string(kGrantLock)}}, {kBegin, params}});
      },
      /*unbounded=*/true);
  if (!begun.ok()) return begun.status();
  switch (static_cast<BeginResult>(begun->Int(0, 0))) {
    case BeginResult::kBegun:
      break;
    case BeginResult::kReplayed:
      return GrantOutcome{.grant_id = begun->Int(0, 1),
                          .cards = begun->Int(0, 2),
                          .points = begun->Int(0, 3),
                          .query_ms = begun->Double(0, 4),
                          .update_ms = begun->Double(0, 5),
                          .commit_ms = begun->Double(0, 6),
                          .replayed = true};
    case BeginResult::kMismatch:
      return Status(ErrorCode::kIdempotencyMismatch, "Idempotency-Key was used for a different grant",
                    "Idempotency-Key");
    case BeginResult::kFuture:
      return PeriodNotEnded();
    case BeginResult::kOverlap:
      return PeriodAlreadyGranted(begun->Int(0, 1), begun->Int(0, 2), begun->Int(0, 3));
    case BeginResult::kStaging:
      return Status(ErrorCode::kGrantInProgress, "grant " + std::to_string(begun->Int(0, 1)) +
                                                     " is being prepared (on this or another instance); retry when it "
                                                     "has answered");
    case BeginResult::kBadExpiry: {  // the error SQLite gives, from the grant's time
      auto expires = LotExpiry(r, begun->Int(0, 2));
      if (!expires.ok()) return expires.status();
      return Status::Internal("hotrow_grant_begin_v2 refused an expiry LotExpiry accepts");
    }
    default:
      return Status::Internal("hotrow_grant_begin_v2 answered outcome " + std::to_string(begun->Int(0, 0)));
  }
  const int64_t id = begun->Int(0, 1);
  const std::string id_text = std::to_string(id);
  // Drops the grant unless it applied after all (an apply whose answer was
  // lost): then it answers that grant, applied, as if the answer had come.
  // `maybe_applied`: an apply was sent whose outcome is unknown; if the
  // drop fails too, the answer must not say that nothing was granted.
  auto abandon = [&](Status why, bool maybe_applied = false) -> Result<GrantOutcome> {
    Result<pg::Rows> gone = Status::Internal("unset");
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (attempt > 0) RetryBackoff(attempt);
      gone = grants().Run<pg::Rows>([&](pg::Connection& c) { return c.Query(kAbandon, {id_text}); },
                                    /*unbounded=*/true);
      if (gone.ok()) break;
    }
    if (!gone.ok()) {
      log::Warn("grant {}: cannot drop its staged credits now (its lease expiry will, unless it applied): {}", id,
                gone.status().ToString());
      if (maybe_applied)
        return Status::Unavailable("grant " + id_text + ": the database was lost while it applied (" + why.message() +
                                   "), so whether it applied is unknown; retry with the same Idempotency-Key, "
                                   "which answers it if it did");
      return why;
    }
    if (gone->Int(0, 0) >= 0) {
      // Dropped: whatever `why` says of an unknown outcome, nothing was granted.
      if (why.code() == ErrorCode::kUnavailable && why.message().find("unknown") != std::string::npos)
        return Status::Unavailable("grant " + id_text +
                                   " lost its database connection before its apply and was dropped; nothing was "
                                   "granted, retry");
      return why;
    }
    auto row = grants().Run<pg::Rows>([&](pg::Connection& c) { return c.Query(kGrantRow, {id_text}); },
                                      /*unbounded=*/true);
    if (!row.ok() || row->empty()) return why;
    log::Warn("grant {}: its apply committed though its answer was lost ({})", id, why.ToString());
    KickFolder();
    return GrantOutcome{.grant_id = id,
                        .cards = row->Int(0, 0),
                        .points = row->Int(0, 1),
                        .query_ms = row->Double(0, 2),
                        .update_ms = row->Double(0, 3),
                        .commit_ms = 0,
                        .replayed = false};
  };
  auto stopping = [this] {
    std::lock_guard lock(grant_mutex_);
    return grants_stopped_;
  };
  // The lease, renewed while this grant waits to stage and to apply (while
  // it stages, its transaction holds the row).
  auto paused = std::make_shared<std::atomic<bool>>(false);
  auto heartbeat =
      std::make_unique<PeriodicTask>(options_.lease / 5, options_.lease / 5, [this, id_text, lease_ms, paused] {
        if (paused->load()) return;
        auto beat = grants().Run<pg::Rows>(
            [&](pg::Connection& c) {
              return c.Query(kHeartbeat, {id_text, lease_ms});
            },
            /*unbounded=*/true);
        if (!beat.ok()) log::Warn("grant {}: lease not renewed: {}", id_text, beat.status().ToString());
      });
  // 2. barrier, in one-second calls so that a shutdown is seen between
  // them; each call gets what is left of the set the first one took.
  const auto barrier_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMaxMs);
  pg::Param inflight;  // NULL: the first call takes the set in flight
  for (;;) {
    auto barrier = grants().Run<pg::Rows>(
        [&](pg::Connection& c) {
          return c.Query(kBarrier, {inflight, "1000"});
        },
        /*unbounded=*/true);
    if (!barrier.ok()) return abandon(barrier.status());
    if (barrier->Int(0, 1) == 0) break;
    inflight = pg::Param(std::string(barrier->Text(0, 0)));
    if (stopping()) return abandon(Status::Unavailable("the server is shutting down; nothing was granted, retry"));
    if (std::chrono::steady_clock::now() > barrier_until)
      return abandon(Status::Unavailable("the grant waited " + std::to_string(kWaitMaxMs / 1000) +
                                         " s for a transaction on S_ACCOUNT to end (a session idle in a "
                                         "transaction?); nothing was granted, retry"));
  }
  failpoint::MaybeDelay("grant.slow");
  // 3. query and stage (again if a heartbeat in flight made it fail)
  paused->store(true);
  Result<StageTotals> staged = Status::Internal("unset");
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (attempt > 0) RetryBackoff(attempt);
    staged = Stage(id, r, lease_ms, /*clear_first=*/attempt > 0);
    if (!staged.ok() && staged.status().sqlstate() == "HR001") staged = LeaseLost(id);
    if (staged.ok() || !pg::IsRetryable(staged.status())) break;
    pg::CountRetry(staged.status());
  }
  paused->store(false);
  if (!staged.ok()) return abandon(staged.status());
  failpoint::MaybeCrash("grant.stage");
  GrantOutcome outcome{.grant_id = id,
                       .cards = staged->cards,
                       .points = staged->points,
                       .query_ms = staged->query_ms,
                       .update_ms = staged->update_ms,
                       .commit_ms = 0,
                       .replayed = false};
  failpoint::MaybeDelay("grant.apply.slow");
  // 4. apply, once the previous grant has folded (the folders fold it).
  const std::string lock_key = std::to_string(kGrantLock);
  const auto wait_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMaxMs);
  std::chrono::steady_clock::time_point vacuum_wait_until{};  // set once the previous fold has ended
  // Counts failed applies only: the waits above them (the previous fold,
  // a vacuum) spend no retry.
  int attempt = 0;
  for (;;) {
    if (stopping()) return abandon(Status::Unavailable("the server is shutting down; nothing was granted, retry"));
    // The previous fold first, without the lock: a SHARE request that
    // waited for fold chunks would hold every payment queued behind it.
    auto folding =
        grants().Run<pg::Rows>([](pg::Connection& c) { return c.Query(kOldestApplied); }, /*unbounded=*/true);
    if (folding.ok() && !folding->empty()) {
      if (stopping() || std::chrono::steady_clock::now() > wait_until)
        return abandon(Status::Unavailable("grant " + std::string(folding->Text(0, 0)) +
                                           " is still folding (or the server is shutting down); nothing was "
                                           "granted, retry"));
      KickFolder();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (vacuum_wait_until == std::chrono::steady_clock::time_point{})
      vacuum_wait_until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    // Then a vacuum of S_ACCOUNT (a fold updates most of it, so autovacuum
    // often starts right then): waited out without queueing, up to 10 s,
    // since PostgreSQL cancels it only after deadlock_timeout (1 s), longer
    // than the lock_timeout below.
    if (std::chrono::steady_clock::now() < vacuum_wait_until) {
      auto vacuuming =
          grants().Run<pg::Rows>([](pg::Connection& c) { return c.Query(kAccountsVacuuming); }, /*unbounded=*/true);
      if (vacuuming.ok() && vacuuming->Int(0, 0) > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
    }
    auto start = std::chrono::steady_clock::now();
    auto applied = grants().Run<pg::Rows>(
        [&](pg::Connection& c) -> Result<pg::Rows> {
          const pg::Connection::Statement take[] = {{kGrantLockSession, {lock_key}}};
          // SHARE waits for the point uses in flight (milliseconds) and
          // holds new ones for this one small commit: none straddles the
          // apply, so commit order is the serial order a READ COMMITTED
          // reader sees. It also waits for autovacuum: lock_timeout, retry.
          const pg::Connection::Statement work[] = {{"BEGIN ISOLATION LEVEL SERIALIZABLE"},
                                                    {"SET LOCAL lock_timeout = '500ms'"},
                                                    {"LOCK TABLE S_ACCOUNT IN SHARE MODE"},
                                                    {kApply, {id_text, r.allow_overlap ? "true" : "false"}}};
          // Commits, or ends a block a failure aborted (as RunSerializable's).
          const pg::Connection::Statement end[] = {{"COMMIT"}};
          const pg::Connection::Statement release[] = {{kGrantUnlockSession, {lock_key}}};
          const std::span<const pg::Connection::Statement> segments[] = {take, work, end, release};
          auto results = c.PipelineSegments(segments);
          if (!results[0].ok()) return results[0].status();
          if (!results[3].ok()) c.MarkBroken();  // never hand out a connection that holds the lock
          if (!results[1].ok()) return results[1].status();
          if (!results[2].ok()) return results[2].status();
          return std::move((*results[1])[3]);
        },
        /*unbounded=*/true);
    outcome.commit_ms = MsSince(start);
    if (!applied.ok()) {
      bool lock_timeout = applied.status().sqlstate() == "55P03";
      if ((pg::IsRetryable(applied.status()) || lock_timeout) && attempt < 20 && !stopping()) {
        pg::CountRetry(applied.status());
        RetryBackoff(++attempt);
        continue;
      }
      // Unknown outcome on a lost connection: the grant is applied or
      // still staging; abandon deletes it only in the second case.
      return abandon(applied.status(), /*maybe_applied=*/true);
    }
    auto what = static_cast<ApplyResult>(applied->Int(0, 0));
    if (what == ApplyResult::kApplied) {
      // Cards closed while the grant staged get nothing.
      outcome.cards -= applied->Int(0, 4);
      outcome.points -= applied->Int(0, 5);
      break;
    }
    if (what == ApplyResult::kAppliedBefore) {
      // An earlier call committed (its answer was lost): its totals, after
      // its drop, are the row's.
      auto row = grants().Run<pg::Rows>([&](pg::Connection& c) { return c.Query(kGrantRow, {id_text}); },
                                        /*unbounded=*/true);
      if (row.ok() && !row->empty()) {
        outcome.cards = row->Int(0, 0);
        outcome.points = row->Int(0, 1);
      }
      break;
    }
    if (what == ApplyResult::kNotLocked && attempt < 20) {
      RetryBackoff(++attempt);
      continue;
    }
    if (what == ApplyResult::kLeaseLost) return LeaseLost(id);
    if (what == ApplyResult::kOverlap)
      return abandon(PeriodAlreadyGranted(applied->Int(0, 1), applied->Int(0, 2), applied->Int(0, 3)));
    if (what != ApplyResult::kPreviousFolding)
      return abandon(Status::Internal("hotrow_grant_apply_v2 answered outcome " + std::to_string(applied->Int(0, 0))));
    if (stopping() || std::chrono::steady_clock::now() > wait_until)
      return abandon(Status::Unavailable("grant " + std::to_string(applied->Int(0, 1)) +
                                         " is still folding (or the server is shutting down); nothing was granted, "
                                         "retry"));
    KickFolder();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    attempt = 0;
  }
  heartbeat.reset();
  failpoint::MaybeCrash("grant.commit");
  KickFolder();
  auto timed = grants().Run<pg::Rows>([&](pg::Connection& c) {
    return c.Query(kRecordCommitTime, {std::to_string(outcome.commit_ms), id_text});
  });
  if (!timed.ok()) log::Warn("grant {}: cannot record its commit time: {}", id, timed.status().ToString());
  return outcome;
}

}  // namespace hotrow::pointcard
