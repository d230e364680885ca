// The point grant on SQLite: begin, query, stage, apply and the fold (the
// protocol and why it is serializable are in sqlite_store.h); cards,
// history and payments are in sqlite_store.cc.
#include <algorithm>
#include <chrono>
#include <deque>
#include <future>
#include <memory>

#include "base/await.h"
#include "ops/failpoint.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "pointcard/sqlite_grant_query.h"
#include "pointcard/sqlite_store.h"

namespace hotrow::pointcard {

namespace sqlite = db::sqlite;

namespace {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

// ---------------------------------------------------------------------------
// The point grant (see the protocol in sqlite_store.h).
// ---------------------------------------------------------------------------

namespace {

// Runs `apply` on the writer and waits for its commit.
template <typename T, typename Apply>
Result<T> OnWriter(db::sqlite::GroupWriter& writer, Apply apply) {
  return Await<Result<T>>([&](auto done) { db::sqlite::SubmitCall<T>(writer, std::move(apply), done); });
}

// An earlier grant with this key, answered again (or idempotency_mismatch).
Result<std::optional<GrantOutcome>> FindGrantKey(sqlite::Connection& c, const std::string& key,
                                                 const std::string& fingerprint) {
  auto q = c.Prepare(
      "SELECT GRANT_ID, CARDS, POINTS, QUERY_MS, UPDATE_MS, COMMIT_MS, FINGERPRINT FROM P_GRANT "
      "WHERE IDEMPOTENCY_KEY = ?1 AND STATE <> 'staging'");
  if (!q.ok()) return q.status();
  auto row = q->Bind(1, key).Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<GrantOutcome>();
  if (q->Text(6) != fingerprint)
    return Status(ErrorCode::kIdempotencyMismatch, "Idempotency-Key was used for a different grant", "Idempotency-Key");
  GrantOutcome out{q->Int(0), q->Int(1), q->Int(2), q->Double(3), q->Double(4), q->Double(5), true};
  if (Status s = q->Run(); !s.ok()) return s;
  return std::optional<GrantOutcome>(out);
}

// period_already_granted when an applied or folded grant overlaps.
Status CheckOverlap(sqlite::Connection& c, const GrantRequest& r) {
  if (r.allow_overlap) return Status::Ok();
  auto q = c.Prepare(
      "SELECT GRANT_ID, FROM_TIME, TO_TIME FROM P_GRANT WHERE FROM_TIME < ?1 AND TO_TIME > ?2 "
      "AND STATE <> 'staging' ORDER BY GRANT_ID LIMIT 1");
  if (!q.ok()) return q.status();
  auto row = q->Bind(1, r.to_us).Bind(2, r.from_us).Step();
  if (!row.ok()) return row.status();
  if (*row) return PeriodAlreadyGranted(q->Int(0), q->Int(1), q->Int(2));
  return q->Run();
}

// Writes a grant's credit into a card: its balance and LAST_UPDATE, and
// the history row (STORE_ID 0, KIND 'grant'), both at `now`.
class GrantRowWriter {
 public:
  static Result<GrantRowWriter> Prepare(sqlite::Connection& c) {
    auto update = c.Prepare("UPDATE S_ACCOUNT SET BALANCE = ?1, LAST_UPDATE = ?2 WHERE CARD_ID = ?3");
    if (!update.ok()) return update.status();
    auto insert = c.Prepare(
        "INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND, TRANSACTION_ID, ACTOR) "
        "VALUES (?1, ?2, 0, ?3, ?4, 'grant', ?5, 'system')");
    if (!insert.ok()) return insert.status();
    return GrantRowWriter(std::move(update).value(), std::move(insert).value());
  }
  Status Write(int64_t card_id, int64_t points, int64_t balance_after, int64_t now, int64_t transaction_id) {
    update_.Reset();
    insert_.Reset();
    if (Status s = update_.Bind(1, balance_after).Bind(2, now).Bind(3, card_id).Run(); !s.ok()) return s;
    return insert_.Bind(1, now).Bind(2, card_id).Bind(3, points).Bind(4, balance_after).Bind(5, transaction_id).Run();
  }

 private:
  GrantRowWriter(sqlite::Query update, sqlite::Query insert) : update_(std::move(update)), insert_(std::move(insert)) {}
  sqlite::Query update_, insert_;
};

struct Begun {
  int64_t grant_id = 0;
  std::optional<GrantOutcome> replay;  // a twin with this key answered before
  int64_t grant_time_us = 0;           // GRANT_TIME, on the writer's clock
};

struct Applied {
  GrantOutcome outcome;
  bool wait_for_fold = false;  // the previous grant is still folding: nothing was written
};

// Step 4 as an op of its own: its commit time is the grant's commit_ms.
class ApplyOp final : public db::sqlite::WriteOp {
 public:
  ApplyOp(std::function<Result<Applied>(sqlite::Connection&)> apply, std::function<void(Result<Applied>)> done)
      : apply_(std::move(apply)), done_(std::move(done)) {}
  Status Apply(sqlite::Connection& c, std::span<WriteOp* const>) override {
    result_ = apply_(c);
    return result_.status();
  }
  void Finish(const Status& status) override {
    if (!status.ok()) return done_(status);
    if (!result_->wait_for_fold) {
      failpoint::MaybeCrash("grant.commit");
      result_->outcome.commit_ms = static_cast<double>(commit_duration().count()) / 1000.0;
    }
    done_(std::move(result_));
  }

 private:
  std::function<Result<Applied>(sqlite::Connection&)> apply_;
  std::function<void(Result<Applied>)> done_;
  Result<Applied> result_ = Status::Internal("not applied");
};

}  // namespace

void SqlitePointCardStore::Grant(GrantRequest request, std::string fingerprint,
                                 std::function<void(Result<GrantOutcome>)> done) {
  // One at a time: the service's gate (service.h) admits a grant only when
  // the previous one has answered.
  std::lock_guard lock(grant_mutex_);
  if (grants_stopped_) return done(Status::Unavailable("the server is shutting down"));
  if (grant_thread_.joinable()) grant_thread_.join();  // the previous one, finished
  // The query phase takes a while: it runs on its own thread, never on an
  // event loop.
  grant_thread_ = std::thread([this, r = std::move(request), fp = std::move(fingerprint),
                               done = std::move(done)]() mutable { RunGrant(std::move(r), std::move(fp), done); });
}

void SqlitePointCardStore::RunGrant(GrantRequest request, std::string fingerprint,
                                    const std::function<void(Result<GrantOutcome>)>& done) {
  auto start = std::chrono::steady_clock::now();
  // 1. Begin: after it, no row with PAYMENT_TIME < to can still appear.
  auto begun = OnWriter<Begun>(db_.writer(), [&](sqlite::Connection& c) -> Result<Begun> {
    int64_t now = NextTime();
    // The writer's clock stamps every payment: a period it has not passed
    // has not ended.
    if (now < request.to_us) return PeriodNotEnded();
    if (request.idempotency_key) {
      auto twin = FindGrantKey(c, *request.idempotency_key, fingerprint);
      if (!twin.ok()) return twin.status();
      if (*twin) return Begun{0, **twin, 0};
    }
    if (Status s = CheckOverlap(c, request); !s.ok()) return s;  // early; decided again at the apply
    // Its lots' expiry, from the grant's time on the writer's clock.
    auto expires = LotExpiry(request, now);
    if (!expires.ok()) return expires.status();
    auto q = c.Prepare(
        "INSERT INTO P_GRANT (GRANT_TIME, FROM_TIME, TO_TIME, RATE_PERCENT, CARDS, POINTS, QUERY_MS, UPDATE_MS, "
        "STATE, EXPIRES_TIME) VALUES (?1, ?2, ?3, ?4, 0, 0, 0, 0, 'staging', ?5)");
    if (!q.ok()) return q.status();
    q->Bind(1, now).Bind(2, request.from_us).Bind(3, request.to_us).Bind(4, request.rate_percent);
    if (*expires) q->Bind(5, **expires);
    if (Status s = q->Run(); !s.ok()) return s;
    return Begun{c.LastInsertRowid(), std::nullopt, now};
  });
  if (!begun.ok()) return done(begun.status());
  if (begun->replay) return done(*begun->replay);
  const int64_t grant_id = begun->grant_id, grant_time = begun->grant_time_us;
  auto fail = [&](Status s) {
    Discard(grant_id);
    done(std::move(s));
  };

  failpoint::MaybeDelay("grant.slow");
  // 2. Query on a snapshot taken after the begin.
  std::vector<Bonus> bonuses;
  {
    auto conn = db_.Reader();
    if (!conn.ok()) return fail(conn.status());
    auto queried = QueryBonuses(**conn, request);
    if (!queried.ok()) return fail(queried.status());
    bonuses = std::move(queried).value();
  }
  int64_t points = 0;
  for (const Bonus& b : bonuses) points += b.points;
  const auto cards = static_cast<int64_t>(bonuses.size());
  double query_ms = MsSince(start);

  // 3. Stage the credits, a chunk per op: point uses run between chunks.
  // Two chunks in flight, so that the next is queued while one commits (a
  // batch may carry both: 8,192 cards, a few ms), without a round trip
  // between them.
  auto stage_start = std::chrono::steady_clock::now();
  std::deque<std::future<Result<db::sqlite::Unit>>> in_flight;
  Status staging;
  auto collect = [&] {
    auto r = in_flight.front().get();
    in_flight.pop_front();
    if (!r.ok() && staging.ok()) staging = r.status();
  };
  for (size_t at = 0; at < bonuses.size() && staging.ok(); at += static_cast<size_t>(options_.stage_chunk)) {
    size_t end = std::min(bonuses.size(), at + static_cast<size_t>(options_.stage_chunk));
    auto promise = std::make_shared<std::promise<Result<db::sqlite::Unit>>>();
    in_flight.push_back(promise->get_future());
    db::sqlite::SubmitCall<db::sqlite::Unit>(
        db_.writer(),
        [&bonuses, at, end, grant_id](sqlite::Connection& c) -> Result<db::sqlite::Unit> {
          if (Status s = StageCredits(c, bonuses, at, end, grant_id); !s.ok()) return s;
          return db::sqlite::Unit{};
        },
        [promise](Result<db::sqlite::Unit> r) { promise->set_value(std::move(r)); });
    if (in_flight.size() >= kStageInFlight) collect();
  }
  while (!in_flight.empty()) collect();
  if (!staging.ok()) return fail(staging);
  double update_ms = MsSince(stage_start);
  bonuses = {};

  failpoint::MaybeDelay("grant.apply.slow");
  // 4. Apply: one small commit makes all of it visible.
  Result<Applied> applied = Status::Internal("not applied");
  while (true) {
    if (Status s = WaitForFold(); !s.ok()) return fail(s);
    applied = Await<Result<Applied>>([&](auto answer) {
      db_.writer().Submit(db::sqlite::MakeOp<ApplyOp>(
          [&](sqlite::Connection& c) -> Result<Applied> {
            auto folding = sqlite::QueryInt(c, "SELECT COUNT(*) FROM P_GRANT WHERE STATE = 'applied'");
            if (!folding.ok()) return folding.status();
            if (*folding > 0) return Applied{{}, true};
            if (Status s = CheckOverlap(c, request); !s.ok()) return s;  // decided here, on the writer
            // Cards closed while the grant ran get nothing. The query left
            // out those closed before its begin (its snapshot came after
            // it), so only those closed since are looked at: the closed
            // cards' index by CLOSED_TIME, a few rows.
            auto dropped = c.Prepare(
                "SELECT COUNT(*), COALESCE(SUM(c.POINTS), 0) FROM S_ACCOUNT a JOIN P_GRANT_CREDIT c "
                "ON c.CARD_ID = a.CARD_ID AND c.GRANT_ID = ?1 WHERE a.STATUS = 'closed' AND a.CLOSED_TIME >= ?2");
            if (!dropped.ok()) return dropped.status();
            auto found = dropped->Bind(1, grant_id).Bind(2, grant_time).Step();
            if (!found.ok()) return found.status();
            const int64_t dropped_cards = dropped->Int(0), dropped_points = dropped->Int(1);
            if (Status s = dropped->Run(); !s.ok()) return s;
            if (dropped_cards > 0) {
              auto drop = c.Prepare(
                  "DELETE FROM P_GRANT_CREDIT WHERE GRANT_ID = ?1 AND CARD_ID IN "
                  "(SELECT CARD_ID FROM S_ACCOUNT WHERE STATUS = 'closed' AND CLOSED_TIME >= ?2)");
              if (!drop.ok()) return drop.status();
              if (Status s = drop->Bind(1, grant_id).Bind(2, grant_time).Run(); !s.ok()) return s;
            }
            const int64_t kept_cards = cards - dropped_cards, kept_points = points - dropped_points;
            int64_t now = NextTime();
            auto q = c.Prepare(
                "UPDATE P_GRANT SET STATE = 'applied', APPLIED_TIME = ?1, CARDS = ?2, POINTS = ?3, QUERY_MS = ?4, "
                "UPDATE_MS = ?5, IDEMPOTENCY_KEY = ?6, FINGERPRINT = ?7 WHERE GRANT_ID = ?8 AND STATE = 'staging'");
            if (!q.ok()) return q.status();
            q->Bind(1, now).Bind(2, kept_cards).Bind(3, kept_points).BindDouble(4, query_ms).BindDouble(5, update_ms);
            if (request.idempotency_key)
              q->Bind(6, *request.idempotency_key).Bind(7, fingerprint);
            else
              q->BindNull(6).BindNull(7);
            if (Status s = q->Bind(8, grant_id).Run(); !s.ok()) return s;
            if (c.Changes() != 1) return Status::Internal("grant " + std::to_string(grant_id) + " is not staging");
            credit_possible_ = true;  // from this op on, point uses fold first
            // An expiring grant: from this op on, writes settle lots first.
            if (request.expires_in_days || request.expires_at_us) LotsPossible();
            ++credit_epoch_;
            return Applied{{grant_id, kept_cards, kept_points, query_ms, update_ms, 0, false}, false};
          },
          answer));
    });
    if (!applied.ok() || !applied->wait_for_fold) break;
    WakeFolder();  // the writer says a grant is still applied: make sure the fold sees it
  }
  if (!applied.ok()) return fail(applied.status());
  GrantOutcome outcome = applied->outcome;
  WakeFolder();
  // Keep the commit time with the grant, so a replay answers the same.
  db::sqlite::SubmitCall<db::sqlite::Unit>(
      db_.writer(),
      [id = grant_id, commit_ms = outcome.commit_ms](sqlite::Connection& c) -> Result<db::sqlite::Unit> {
        auto q = c.Prepare("UPDATE P_GRANT SET COMMIT_MS = ?1 WHERE GRANT_ID = ?2");
        if (!q.ok()) return q.status();
        q->BindDouble(1, commit_ms).Bind(2, id);
        if (Status s = q->Run(); !s.ok()) return s;
        return db::sqlite::Unit{};
      },
      [id = grant_id](const Result<db::sqlite::Unit>& r) {
        // The grant has committed: only its recorded commit time is lost.
        if (!r.ok()) log::Warn("grant {}: cannot record its commit time: {}", id, r.status().ToString());
      });
  log::Info("grant {}: {} card(s), {} point(s); query {:.0f} ms, staging {:.0f} ms, apply commit {:.0f} ms",
            outcome.grant_id, outcome.cards, outcome.points, outcome.query_ms, outcome.update_ms, outcome.commit_ms);
  done(outcome);
}

void SqlitePointCardStore::Discard(int64_t grant_id) {
  // In chunks along the key, like the fold: point uses run between them.
  // If the writer fails now, Open deletes what is left at the next start;
  // until then every reader ignores a grant that is not applied.
  struct Gone {
    int64_t cards = 0, last_card = 0;
  };
  int64_t after = INT64_MIN;
  while (true) {
    auto gone = OnWriter<Gone>(db_.writer(), [this, grant_id, after](sqlite::Connection& c) -> Result<Gone> {
      auto q = c.Prepare(
          "SELECT CARD_ID FROM P_GRANT_CREDIT WHERE CARD_ID > ?1 AND GRANT_ID = ?2 ORDER BY CARD_ID LIMIT ?3");
      if (!q.ok()) return q.status();
      q->Bind(1, after).Bind(2, grant_id).Bind(3, options_.stage_chunk);
      Gone out{0, after};
      while (true) {
        auto row = q->Step();
        if (!row.ok()) return row.status();
        if (!*row) break;
        ++out.cards;
        out.last_card = q->Int(0);
      }
      if (out.cards > 0) {
        auto del = c.Prepare("DELETE FROM P_GRANT_CREDIT WHERE CARD_ID > ?1 AND CARD_ID <= ?2 AND GRANT_ID = ?3");
        if (!del.ok()) return del.status();
        if (Status s = del->Bind(1, after).Bind(2, out.last_card).Bind(3, grant_id).Run(); !s.ok()) return s;
      }
      if (out.cards < options_.stage_chunk) {
        auto row = c.Prepare("DELETE FROM P_GRANT WHERE GRANT_ID = ?1 AND STATE = 'staging'");
        if (!row.ok()) return row.status();
        if (Status s = row->Bind(1, grant_id).Run(); !s.ok()) return s;
      }
      return out;
    });
    if (!gone.ok()) {
      log::Warn("grant {}: cannot delete its staged credits now (the next start does): {}", grant_id,
                gone.status().ToString());
      return;
    }
    if (gone->cards < options_.stage_chunk) return;
    after = gone->last_card;
  }
}

Result<int64_t> SqlitePointCardStore::FoldCard(sqlite::Connection& c, int64_t card_id, int64_t balance) {
  auto q = c.Prepare(
      "SELECT c.GRANT_ID, c.POINTS, g.EXPIRES_TIME, g.APPLIED_TIME FROM P_GRANT_CREDIT c JOIN P_GRANT g "
      "ON g.GRANT_ID = c.GRANT_ID "
      "WHERE c.CARD_ID = ?1 AND g.STATE = 'applied' ORDER BY c.GRANT_ID");
  if (!q.ok()) return q.status();
  q->Bind(1, card_id);
  struct Credit {
    int64_t grant_id, points;
    std::optional<int64_t> expires_us;
    int64_t applied_us;
  };
  std::vector<Credit> credits;  // one, almost always
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    credits.push_back(
        {q->Int(0), q->Int(1), q->IsNull(2) ? std::nullopt : std::optional<int64_t>(q->Int(2)), q->Int(3)});
  }
  auto writer = GrantRowWriter::Prepare(c);
  if (!writer.ok()) return writer.status();
  auto consume = c.Prepare("DELETE FROM P_GRANT_CREDIT WHERE CARD_ID = ?1 AND GRANT_ID = ?2");
  if (!consume.ok()) return consume.status();
  for (const Credit& credit : credits) {
    balance += credit.points;
    auto id = LastTransactionId(c);
    if (!id.ok()) return id.status();
    const int64_t now = NextTime();
    if (Status s = writer->Write(card_id, credit.points, balance, now, *id + 1); !s.ok()) return s;
    if (credit.expires_us) {  // an expiring grant's credit becomes the card's lot, made at its apply
      auto lot = c.Prepare(
          "INSERT INTO P_LOT (CARD_ID, GRANT_ID, SOURCE_ID, AMOUNT, REMAINING, RESERVED, CREATED_TIME, EXPIRES_TIME) "
          "VALUES (?1, ?2, ?3, ?4, ?4, 0, ?5, ?6)");
      if (!lot.ok()) return lot.status();
      lot->Bind(1, card_id).Bind(2, credit.grant_id).Bind(3, *id + 1).Bind(4, credit.points);
      if (Status s = lot->Bind(5, credit.applied_us).Bind(6, *credit.expires_us).Run(); !s.ok()) return s;
      DueAt(*credit.expires_us);
    }
    consume->Reset();
    if (Status s = consume->Bind(1, card_id).Bind(2, credit.grant_id).Run(); !s.ok()) return s;
  }
  return balance;
}

void SqlitePointCardStore::WakeFolder() {
  {
    std::lock_guard lock(fold_mutex_);
    ++fold_requests_;
  }
  fold_cv_.notify_all();
}

Status SqlitePointCardStore::WaitForFold() {
  std::unique_lock lock(fold_mutex_);
  if (!fold_cv_.wait_for(lock, kFoldWaitMax, [this] { return fold_stopped_ || fold_served_ == fold_requests_; }))
    return Status::Unavailable("the previous grant is still writing its history rows; retry later");
  if (fold_served_ == fold_requests_) return Status::Ok();  // nothing to wait for, stopping or not
  return Status::Unavailable("the server is shutting down");
}

// Step 5. One op per chunk of cards; the chunk that finds fewer than a full
// chunk left marks the grant folded in the same commit. One grant's fold in progress: its chunks chain on the writer
// (each submits the next from its Finish, so consecutive batches carry one each with no thread's round trip between
// them); the folder waits for `done`.
struct SqlitePointCardStore::FoldRun {
  int64_t grant_id = 0;
  int64_t applied_at = 0;
  int64_t after_card = INT64_MIN;  // the cursor: every credit up to it is folded
  int64_t folded_cards = 0;
  std::optional<int64_t> expires_us;  // its lots' expiry (P_GRANT.EXPIRES_TIME)
};

Result<SqlitePointCardStore::FoldChunk> SqlitePointCardStore::ApplyFoldChunk(sqlite::Connection& c, FoldRun& run) {
  const int64_t grant_id = run.grant_id, after_card = run.after_card, folded_cards = run.folded_cards,
                applied_at = run.applied_at;
  // The chunk: the next fold_chunk credits after the cursor, (after_card, last].
  auto q = c.Prepare(
      "SELECT COUNT(*), MAX(CARD_ID) FROM (SELECT CARD_ID FROM P_GRANT_CREDIT WHERE CARD_ID > ?1 AND GRANT_ID = ?2 "
      "ORDER BY CARD_ID LIMIT ?3)");
  if (!q.ok()) return q.status();
  auto counted = q->Bind(1, after_card).Bind(2, grant_id).Bind(3, options_.fold_chunk).Step();
  if (!counted.ok()) return counted.status();
  const int64_t cards = q->Int(0), last = cards > 0 ? q->Int(1) : after_card;
  int64_t now = NextTime();
  if (cards > 0) {
    // Set-based, three statements per chunk instead of three per card: the
    // fold of 632k cards took 1.9 s idle one card at a time. Each card's
    // row at the chunk's time, its balance after the credit (cards are never
    // deleted; a credit whose card is missing gets nothing).
    // ?1 the chunk's time, ?2/?3 its card range (after_card, last], ?4 the grant,
    // ?5 the largest TRANSACTION_ID (the rows are numbered after it, in card order).
    auto last_id = LastTransactionId(c);
    if (!last_id.ok()) return last_id.status();
    static constexpr const char* kWrite[] = {
        "INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND, TRANSACTION_ID, ACTOR) "
        "SELECT ?1, c.CARD_ID, 0, c.POINTS, a.BALANCE + c.POINTS, 'grant', ?5 + row_number() OVER (ORDER BY "
        "c.CARD_ID), 'system' FROM P_GRANT_CREDIT c JOIN S_ACCOUNT a ON a.CARD_ID = c.CARD_ID "
        "WHERE c.CARD_ID > ?2 AND c.CARD_ID <= ?3 AND c.GRANT_ID = ?4",
        "UPDATE S_ACCOUNT SET BALANCE = BALANCE + c.POINTS, LAST_UPDATE = ?1 FROM P_GRANT_CREDIT c "
        "WHERE c.CARD_ID = S_ACCOUNT.CARD_ID AND c.CARD_ID > ?2 AND c.CARD_ID <= ?3 AND c.GRANT_ID = ?4",
    };
    for (const char* sql : kWrite) {
      auto step = c.Prepare(sql);
      if (!step.ok()) return step.status();
      step->Bind(1, now).Bind(2, after_card).Bind(3, last).Bind(4, grant_id);
      if (sql == kWrite[0]) step->Bind(5, *last_id);
      if (Status s = step->Run(); !s.ok()) return s;
      // Inside the transaction, after the rows are written and before the
      // balances: the crash test's count is in folded cards.
      for (int64_t n = folded_cards + 1; sql == kWrite[0] && n <= folded_cards + cards; ++n)
        failpoint::MaybeCrash("grant.fold", n);
    }
    if (run.expires_us) {
      // An expiring grant's credits become lots, named by the rows just
      // written (the chunk's time, its cards, store 0), made at the
      // grant's apply (when reads began to count them).
      auto lots = c.Prepare(
          "INSERT INTO P_LOT (CARD_ID, GRANT_ID, SOURCE_ID, AMOUNT, REMAINING, RESERVED, CREATED_TIME, EXPIRES_TIME) "
          "SELECT c.CARD_ID, ?4, h.TRANSACTION_ID, c.POINTS, c.POINTS, 0, ?6, ?5 FROM P_GRANT_CREDIT c "
          "JOIN H_TRANSACTION h ON h.PAYMENT_TIME = ?1 AND h.CARD_ID = c.CARD_ID AND h.STORE_ID = 0 "
          "WHERE c.CARD_ID > ?2 AND c.CARD_ID <= ?3 AND c.GRANT_ID = ?4");
      if (!lots.ok()) return lots.status();
      lots->Bind(1, now)
          .Bind(2, after_card)
          .Bind(3, last)
          .Bind(4, grant_id)
          .Bind(5, *run.expires_us)
          .Bind(6, applied_at);
      if (Status s = lots->Run(); !s.ok()) return s;
      DueAt(*run.expires_us);
    }
    // Consumed: one range of the key, not a delete per card.
    auto consume = c.Prepare("DELETE FROM P_GRANT_CREDIT WHERE CARD_ID > ?1 AND CARD_ID <= ?2 AND GRANT_ID = ?3");
    if (!consume.ok()) return consume.status();
    if (Status s = consume->Bind(1, after_card).Bind(2, last).Bind(3, grant_id).Run(); !s.ok()) return s;
  }
  FoldChunk out{last, cards, cards < options_.fold_chunk, credit_epoch_};
  if (out.finished) {
    auto done = c.Prepare("UPDATE P_GRANT SET STATE = 'folded', FOLDED_TIME = ?1, FOLD_MS = ?2 WHERE GRANT_ID = ?3");
    if (!done.ok()) return done.status();
    // From the apply to now, wall clock: a fold a restart interrupted
    // counts whole, downtime included.
    done->Bind(1, now).BindDouble(2, static_cast<double>(now - applied_at) / 1000.0).Bind(3, grant_id);
    if (Status s = done->Run(); !s.ok()) return s;
  }
  return out;
}

void SqlitePointCardStore::SubmitFoldChunk(const std::shared_ptr<FoldRun>& run, const FoldDone& done) {
  db::sqlite::SubmitCall<FoldChunk>(
      db_.writer(), [this, run](sqlite::Connection& c) { return ApplyFoldChunk(c, *run); },
      [this, run, done](Result<FoldChunk> r) {
        // On the writer thread, after the commit (or on the submitting
        // thread, if the writer refused the op).
        if (!r.ok()) return done->set_value(r.status());
        run->after_card = r->last_card;
        run->folded_cards += r->cards;
        if (r->finished) {
          // No credit is left once the applied grant has folded (grants
          // apply one at a time), unless another applied after the chunk
          // ran, in its batch.
          if (credit_epoch_ == r->epoch) credit_possible_ = false;
          return done->set_value(true);
        }
        bool stopping;
        {
          std::lock_guard lock(fold_mutex_);
          stopping = fold_stopped_;
        }
        if (stopping) return done->set_value(false);  // between chunks; the next start resumes
        SubmitFoldChunk(run, done);
      });
}

// The folder: finds the applied grant and runs its chunks.
void SqlitePointCardStore::FoldLoop() {
  auto pause = [this] {
    std::unique_lock lock(fold_mutex_);
    fold_cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return fold_stopped_; });
  };
  std::shared_ptr<FoldRun> run;  // the grant being folded, kept across a paused attempt
  uint64_t seen = 0;             // fold_requests_ when this pass began looking
  auto started = std::chrono::steady_clock::now();
  while (true) {
    {
      std::unique_lock lock(fold_mutex_);
      if (!run) fold_cv_.wait(lock, [this] { return fold_stopped_ || fold_served_ != fold_requests_; });
      if (fold_stopped_) return;
      if (!run) seen = fold_requests_;
    }
    if (!run) {
      if (!db_.writer().started()) {  // Open runs before the writer starts
        pause();
        continue;
      }
      struct Next {
        int64_t grant_id = 0, applied_at = 0;
        std::optional<int64_t> expires_us;
      };
      auto next = OnWriter<Next>(db_.writer(), [](sqlite::Connection& c) -> Result<Next> {
        auto q = c.Prepare(
            "SELECT GRANT_ID, APPLIED_TIME, EXPIRES_TIME FROM P_GRANT WHERE STATE = 'applied' ORDER BY GRANT_ID "
            "LIMIT 1");
        if (!q.ok()) return q.status();
        auto row = q->Step();
        if (!row.ok()) return row.status();
        Next out;
        if (*row) out = {q->Int(0), q->Int(1), q->IsNull(2) ? std::nullopt : std::optional<int64_t>(q->Int(2))};
        if (Status s = q->Run(); !s.ok()) return s;
        return out;
      });
      if (!next.ok()) {  // the writer fails: try again
        pause();
        continue;
      }
      if (next->grant_id == 0) {  // nothing to fold for the requests seen so far
        {
          std::lock_guard lock(fold_mutex_);
          fold_served_ = seen;
        }
        fold_cv_.notify_all();
        continue;
      }
      run = std::make_shared<FoldRun>();
      run->grant_id = next->grant_id;
      run->applied_at = next->applied_at;
      run->expires_us = next->expires_us;
      started = std::chrono::steady_clock::now();
    }
    // One promise per attempt, held by its chain: a paused attempt's last
    // callback may still be returning from it.
    auto done = std::make_shared<std::promise<Result<bool>>>();
    auto future = done->get_future();
    SubmitFoldChunk(run, done);
    auto folded = future.get();
    if (!folded.ok()) {
      log::Warn("grant {}: folding paused (it resumes): {}", run->grant_id, folded.status().ToString());
      pause();
      continue;
    }
    if (!*folded) return;  // stopping
    double ms = MsSince(started);
    GrantFoldSeconds().Observe(static_cast<uint64_t>(ms * 1e6));
    log::Info("grant {}: {} history row(s) written (folded) in {:.0f} ms", run->grant_id, run->folded_cards, ms);
    run.reset();  // look again: the requests seen are served only when none is left
  }
}

}  // namespace hotrow::pointcard
