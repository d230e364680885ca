// Expiring lots on SQLite (model.h, Lot; docs/pointcard.md, "Expiring
// lots"). Writes run inside the writer's transaction: one write at a time,
// at the writer's clock, so every decision about a card's lots is taken in
// one order. Only credit that expires is a lot (P_LOT); the rest of a
// balance never expires and is taken last.
#include <algorithm>

#include "ops/log.h"
#include "pointcard/sqlite_store.h"

namespace hotrow::pointcard {

namespace sqlite = db::sqlite;

namespace {

// A lot's part a write takes, keeps or gives back.
struct LotPart {
  int64_t lot_id = 0;
  int64_t amount = 0;
  bool expired = false;  // EXPIRED_TIME is set: what is released leaves the card
};

// The rows of `q` as (lot, amount, expired) parts, the statement done with
// before the caller writes (a cached statement is not stepped while
// another write prepares it again).
Result<std::vector<LotPart>> ReadParts(sqlite::Query& q) {
  std::vector<LotPart> parts;
  while (true) {
    auto row = q.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    parts.push_back({q.Int(0), q.Int(1), q.Int(2) != 0});
  }
  return parts;
}

Status RecordUse(sqlite::Connection& c, int64_t transaction_id, int64_t lot_id, int64_t amount) {
  auto q = c.Prepare("INSERT INTO P_LOT_USE (TRANSACTION_ID, LOT_ID, AMOUNT) VALUES (?1, ?2, ?3)");
  if (!q.ok()) return q.status();
  return q->Bind(1, transaction_id).Bind(2, lot_id).Bind(3, amount).Run();
}

// REMAINING += delta_remaining, RESERVED += delta_reserved.
Status MoveLot(sqlite::Connection& c, int64_t lot_id, int64_t delta_remaining, int64_t delta_reserved) {
  auto q = c.Prepare("UPDATE P_LOT SET REMAINING = REMAINING + ?2, RESERVED = RESERVED + ?3 WHERE LOT_ID = ?1");
  if (!q.ok()) return q.status();
  return q->Bind(1, lot_id).Bind(2, delta_remaining).Bind(3, delta_reserved).Run();
}

// The card's lots with points free to take (REMAINING - RESERVED), unexpired
// at the writer's time (a write settles its card first, so a lot due is
// stamped already), in the order payments take them.
constexpr const char* kFreeLots =
    "SELECT LOT_ID, REMAINING - RESERVED, 0 FROM P_LOT WHERE CARD_ID = ?1 AND REMAINING > 0 "
    "AND EXPIRED_TIME IS NULL AND REMAINING > RESERVED ORDER BY EXPIRES_TIME, LOT_ID";

}  // namespace

Status SqlitePointCardStore::LeaveLot(sqlite::Connection& c, int64_t card_id, int64_t lot_id, int64_t points,
                                      int64_t& balance) {
  HistoryRow row{.card_id = card_id,
                 .store_id = 0,
                 .amount = -points,
                 .balance = balance - points,
                 .kind = "expiry",
                 .actor = "system"};
  if (Status s = AppendRow(c, row); !s.ok()) return s;
  balance = row.balance;
  if (Status s = RecordUse(c, row.transaction_id, lot_id, -points); !s.ok()) return s;
  auto q =
      c.Prepare("UPDATE P_LOT SET REMAINING = REMAINING - ?2, EXPIRY_ID = COALESCE(EXPIRY_ID, ?3) WHERE LOT_ID = ?1");
  if (!q.ok()) return q.status();
  return q->Bind(1, lot_id).Bind(2, points).Bind(3, row.transaction_id).Run();
}

Status SqlitePointCardStore::SettleCard(sqlite::Connection& c, int64_t card_id, int64_t t, int64_t& balance) {
  if (lots_possible_) {
    // The card's applied grant credit first: an expiring grant's becomes
    // its lot, which may be due already.
    auto credit = PendingCredit(c, card_id);
    if (!credit.ok()) return credit.status();
    if (*credit > 0) {
      auto folded = FoldCard(c, card_id, balance);
      if (!folded.ok()) return folded.status();
      balance = *folded;
    }
    // Holds past their expiry give back what they reserve; from a lot past
    // its own, that leaves the card now.
    std::vector<int64_t> ended;
    {
      auto q = c.Prepare(
          "SELECT DISTINCT h.HOLD_ID FROM P_HOLD h JOIN P_LOT_HOLD r ON r.HOLD_ID = h.HOLD_ID WHERE h.CARD_ID = ?1 "
          "AND h.STATUS = 'open' AND h.EXPIRES_TIME <= ?2 ORDER BY h.HOLD_ID");
      if (!q.ok()) return q.status();
      q->Bind(1, card_id).Bind(2, t);
      while (true) {
        auto row = q->Step();
        if (!row.ok()) return row.status();
        if (!*row) break;
        ended.push_back(q->Int(0));
      }
    }
    for (int64_t hold_id : ended)
      if (Status s = EndReservations(c, card_id, hold_id, 0, 0, balance); !s.ok()) return s;
  }
  if (Status s = StampExpiredHolds(c, card_id, t); !s.ok()) return s;
  if (!lots_possible_) return Status::Ok();
  // Lots due at t: what no open hold reserves leaves in one expiry row
  // each, stamped in the same transaction (EXPIRED_TIME IS NULL is the
  // guard: a lot is written out once).
  std::vector<LotPart> due;
  {
    auto q = c.Prepare(
        "SELECT LOT_ID, REMAINING - RESERVED, 0 FROM P_LOT WHERE CARD_ID = ?1 AND EXPIRED_TIME IS NULL "
        "AND EXPIRES_TIME <= ?2 ORDER BY EXPIRES_TIME, LOT_ID");
    if (!q.ok()) return q.status();
    q->Bind(1, card_id).Bind(2, t);
    auto parts = ReadParts(*q);
    if (!parts.ok()) return parts.status();
    due = std::move(parts).value();
  }
  for (const LotPart& lot : due) {
    auto stamp = c.Prepare("UPDATE P_LOT SET EXPIRED_TIME = ?2 WHERE LOT_ID = ?1 AND EXPIRED_TIME IS NULL");
    if (!stamp.ok()) return stamp.status();
    if (Status s = stamp->Bind(1, lot.lot_id).Bind(2, t).Run(); !s.ok()) return s;
    if (lot.amount > 0)
      if (Status s = LeaveLot(c, card_id, lot.lot_id, lot.amount, balance); !s.ok()) return s;
  }
  return Status::Ok();
}

namespace {

// `points` from the card's free lot parts in the order payments take them,
// `part(lot, n)` for each lot that gives n; the rest is never-expiring.
template <typename Part>
Status FromFreeLots(sqlite::Connection& c, int64_t card_id, int64_t points, Part part) {
  auto q = c.Prepare(kFreeLots);
  if (!q.ok()) return q.status();
  q->Bind(1, card_id);
  auto free = ReadParts(*q);
  if (!free.ok()) return free.status();
  for (const LotPart& lot : *free) {
    if (points == 0) break;
    const int64_t n = std::min(points, lot.amount);
    points -= n;
    if (Status s = part(lot.lot_id, n); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace

Status SqlitePointCardStore::TakeFromLots(sqlite::Connection& c, int64_t card_id, int64_t points,
                                          int64_t transaction_id) {
  if (!lots_possible_ || points <= 0) return Status::Ok();
  return FromFreeLots(c, card_id, points, [&](int64_t lot_id, int64_t take) {
    if (Status s = MoveLot(c, lot_id, -take, 0); !s.ok()) return s;
    return RecordUse(c, transaction_id, lot_id, -take);
  });
}

Status SqlitePointCardStore::ReserveLots(sqlite::Connection& c, int64_t card_id, int64_t hold_id, int64_t points,
                                         int64_t expires_us) {
  if (!lots_possible_ || points <= 0) return Status::Ok();
  return FromFreeLots(c, card_id, points, [&](int64_t lot_id, int64_t keep) {
    if (Status s = MoveLot(c, lot_id, 0, keep); !s.ok()) return s;
    auto r = c.Prepare("INSERT INTO P_LOT_HOLD (HOLD_ID, LOT_ID, AMOUNT, EXPIRES_TIME) VALUES (?1, ?2, ?3, ?4)");
    if (!r.ok()) return r.status();
    DueAt(expires_us);
    return r->Bind(1, hold_id).Bind(2, lot_id).Bind(3, keep).Bind(4, expires_us).Run();
  });
}

Status SqlitePointCardStore::EndReservations(sqlite::Connection& c, int64_t card_id, int64_t hold_id, int64_t taken,
                                             int64_t transaction_id, int64_t& balance) {
  if (!lots_possible_) return Status::Ok();
  std::vector<LotPart> kept;
  {
    auto q = c.Prepare(
        "SELECT r.LOT_ID, r.AMOUNT, l.EXPIRED_TIME IS NOT NULL FROM P_LOT_HOLD r JOIN P_LOT l ON l.LOT_ID = r.LOT_ID "
        "WHERE r.HOLD_ID = ?1 ORDER BY l.EXPIRES_TIME, l.LOT_ID");
    if (!q.ok()) return q.status();
    q->Bind(1, hold_id);
    auto parts = ReadParts(*q);
    if (!parts.ok()) return parts.status();
    kept = std::move(parts).value();
  }
  for (const LotPart& lot : kept) {
    // A capture takes from what its hold reserved, in the lots' order; the
    // rest of its amount comes from the never-expiring points it reserved.
    const int64_t take = std::min(taken, lot.amount);
    taken -= take;
    if (Status s = MoveLot(c, lot.lot_id, -take, -lot.amount); !s.ok()) return s;
    if (take > 0)
      if (Status s = RecordUse(c, transaction_id, lot.lot_id, -take); !s.ok()) return s;
    // Released from a lot written out already: it leaves now.
    if (lot.expired && lot.amount > take)
      if (Status s = LeaveLot(c, card_id, lot.lot_id, lot.amount - take, balance); !s.ok()) return s;
  }
  auto drop = c.Prepare("DELETE FROM P_LOT_HOLD WHERE HOLD_ID = ?1");
  if (!drop.ok()) return drop.status();
  return drop->Bind(1, hold_id).Run();
}

Status SqlitePointCardStore::RestoreLots(sqlite::Connection& c, int64_t card_id, int64_t original_id,
                                         int64_t original_amount, int64_t refunded_before, int64_t amount,
                                         int64_t refund_id, int64_t& balance) {
  if (!lots_possible_) return Status::Ok();
  // What the original took from each lot, less what its earlier refunds
  // gave back, latest-expiring first: a refund undoes the original's takes
  // in reverse, so the never-expiring points it took come back first.
  std::vector<LotPart> taken;
  {
    auto q = c.Prepare(
        "SELECT u.LOT_ID, -u.AMOUNT - COALESCE((SELECT SUM(v.AMOUNT) FROM P_LOT_USE v JOIN H_TRANSACTION h "
        "ON h.TRANSACTION_ID = v.TRANSACTION_ID WHERE v.LOT_ID = u.LOT_ID AND h.KIND = 'refund' "
        "AND h.REFUND_OF = ?1), 0), l.EXPIRED_TIME IS NOT NULL FROM P_LOT_USE u JOIN P_LOT l ON l.LOT_ID = u.LOT_ID "
        "WHERE u.TRANSACTION_ID = ?1 ORDER BY l.EXPIRES_TIME DESC, l.LOT_ID DESC");
    if (!q.ok()) return q.status();
    q->Bind(1, original_id);
    auto parts = ReadParts(*q);
    if (!parts.ok()) return parts.status();
    taken = std::move(parts).value();
  }
  // |original| = what it took from lots (-Σ its uses) + its never-expiring
  // part; its refunds so far gave back `refunded_before`, to lots what
  // their uses say and the rest to the never-expiring part.
  int64_t left_in_lots = 0;
  for (const LotPart& lot : taken) left_in_lots += lot.amount;
  int64_t from_lots = 0;
  {
    auto q = c.Prepare("SELECT COALESCE(-SUM(AMOUNT), 0) FROM P_LOT_USE WHERE TRANSACTION_ID = ?1");
    if (!q.ok()) return q.status();
    auto row = q->Bind(1, original_id).Step();
    if (!row.ok()) return row.status();
    from_lots = q->Int(0);
  }
  const int64_t never_taken = -original_amount - from_lots;
  const int64_t never_given_back = refunded_before - (from_lots - left_in_lots);
  amount -= std::min(amount, std::max<int64_t>(0, never_taken - never_given_back));
  for (const LotPart& lot : taken) {
    if (amount == 0) break;
    const int64_t give = std::min(amount, lot.amount);
    if (give <= 0) continue;
    amount -= give;
    if (Status s = MoveLot(c, lot.lot_id, give, 0); !s.ok()) return s;
    if (Status s = RecordUse(c, refund_id, lot.lot_id, give); !s.ok()) return s;
    // Given back to a lot written out already: it leaves again, in this
    // transaction.
    if (lot.expired)
      if (Status s = LeaveLot(c, card_id, lot.lot_id, give, balance); !s.ok()) return s;
  }
  return Status::Ok();
}

void SqlitePointCardStore::SweepLots() {
  // The lots due now, a few cards per op: each card settled as its next
  // write would settle it (its expiry rows before anything else).
  // Its answer: whether more may be due (a full batch was settled).
  sqlite::SubmitCall<bool>(
      db_.writer(),
      [this](sqlite::Connection& c) -> Result<bool> {
        if (!lots_possible_) return false;
        const int64_t t = NextTime();
        std::vector<int64_t> cards;  // of the first kSweepCardsMax lots due
        int64_t due = 0, settled = 0;
        // Lots due, and holds past their expiry that still reserve part of
        // a lot (what they release from a lot written out leaves then).
        for (const char* sql :
             {"SELECT CARD_ID FROM P_LOT WHERE EXPIRED_TIME IS NULL AND EXPIRES_TIME <= ?1 ORDER BY EXPIRES_TIME "
              "LIMIT ?2",
              "SELECT h.CARD_ID FROM P_LOT_HOLD r JOIN P_HOLD h ON h.HOLD_ID = r.HOLD_ID WHERE r.EXPIRES_TIME <= ?1 "
              "ORDER BY r.EXPIRES_TIME LIMIT ?2"}) {
          auto q = c.Prepare(sql);
          if (!q.ok()) return q.status();
          q->Bind(1, t).Bind(2, kSweepCardsMax);
          int64_t found = 0;
          while (true) {
            auto row = q->Step();
            if (!row.ok()) return row.status();
            if (!*row) break;
            ++found;
            if (std::find(cards.begin(), cards.end(), q->Int(0)) == cards.end()) cards.push_back(q->Int(0));
          }
          due = std::max(due, found);
        }
        for (int64_t card_id : cards) {
          int64_t balance = 0;
          {
            auto q = c.Prepare("SELECT BALANCE FROM S_ACCOUNT WHERE CARD_ID = ?1");
            if (!q.ok()) return q.status();
            auto row = q->Bind(1, card_id).Step();
            if (!row.ok()) return row.status();
            if (!*row) continue;  // cards are never deleted; a lot without one is the checker's
            balance = q->Int(0);
          }
          if (Status s = SettleCard(c, card_id, NextTime(), balance); !s.ok()) return s;
          ++settled;
        }
        // When the timer needs to sweep next: the earliest lot not written
        // out, or reservation, by expiry (both indexes' first entry).
        auto next = sqlite::QueryInt(c,
                                     "SELECT COALESCE(MIN(T), 9223372036854775807) FROM (SELECT MIN(EXPIRES_TIME) AS T "
                                     "FROM P_LOT WHERE EXPIRED_TIME IS NULL UNION ALL SELECT MIN(EXPIRES_TIME) "
                                     "FROM P_LOT_HOLD)");
        if (!next.ok()) return next.status();
        next_due_us_.store(*next);
        return due == kSweepCardsMax && settled > 0;
      },
      [this](const Result<bool>& r) {
        if (!r.ok()) {
          log::Warn("lot sweep failed (the next pass retries): {}", r.status().ToString());
          next_due_us_.store(0);  // what it set may have rolled back with it
        }
        // More may be due: go on at once, an op at a time (writes queue
        // between them).
        bool more = false;
        if (r.ok() && *r) {
          std::lock_guard lock(sweep_mutex_);
          more = !sweep_stopped_;
        }
        if (more) return SweepLots();  // outside the lock: a refused op answers on this thread
        EndSweep();
      });
}

void SqlitePointCardStore::StartSweep() {
  {
    std::lock_guard lock(sweep_mutex_);
    if (sweeping_ || sweep_stopped_) return;
    sweeping_ = true;
  }
  SweepLots();
}

void SqlitePointCardStore::EndSweep() {
  // Notified under the lock: once Stop sees the chain ended it may free
  // the store, condition variable included.
  std::lock_guard lock(sweep_mutex_);
  sweeping_ = false;
  sweep_cv_.notify_all();
}

}  // namespace hotrow::pointcard
