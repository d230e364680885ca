// Holds on SQLite (store.h, PointCardStore::CreateHold, EndHold), inside the
// writer's transaction: the writer runs one write at a time, so every
// decision about a card's holds and balance is taken in one order, at the
// writer's clock (which only moves forward).
#include "pointcard/sqlite_store.h"

namespace hotrow::pointcard {

namespace sqlite = db::sqlite;

namespace {

#define HOTROW_HOLD_COLUMNS                                                                                 \
  "SELECT HOLD_ID, CARD_ID, STORE_ID, AMOUNT, STATUS, CREATED_TIME, EXPIRES_TIME, ENDED_TIME, CAPTURE_ID, " \
  "CAPTURED_AMOUNT, ACTOR FROM P_HOLD "
constexpr const char* kSelectHold = HOTROW_HOLD_COLUMNS "WHERE HOLD_ID = ?1 AND CARD_ID = ?2";
constexpr const char* kSelectHolds =
    HOTROW_HOLD_COLUMNS "WHERE CARD_ID = ?1 AND HOLD_ID < ?2 ORDER BY HOLD_ID DESC LIMIT ?3";
#undef HOTROW_HOLD_COLUMNS

Hold ReadHold(const sqlite::Query& q) {
  Hold h{.hold_id = q.Int(0),
         .card_id = q.Int(1),
         .store_id = q.Int(2),
         .amount = q.Int(3),
         .status = std::string(q.Text(4)),
         .created_us = q.Int(5),
         .expires_us = q.Int(6),
         .actor = std::string(q.Text(10))};
  if (!q.IsNull(7)) h.ended_us = q.Int(7);
  if (!q.IsNull(8)) h.capture_id = q.Int(8);
  if (!q.IsNull(9)) h.captured_amount = q.Int(9);
  return h;
}

// The card's hold with this id, or not_found.
Result<Hold> FindHold(sqlite::Connection& c, int64_t card_id, int64_t hold_id) {
  auto q = c.Prepare(kSelectHold);
  if (!q.ok()) return q.status();
  auto row = q->Bind(1, hold_id).Bind(2, card_id).Step();
  if (!row.ok()) return row.status();
  if (!*row) return NoSuchHold(card_id, hold_id);
  Hold h = ReadHold(*q);
  if (Status s = q->Run(); !s.ok()) return s;
  return h;
}

// The capture row of a captured hold (its TRANSACTION_ID).
Result<HistoryRow> CaptureRow(sqlite::Connection& c, const Hold& h) {
  auto q = c.Prepare("SELECT PAYMENT_TIME, AMOUNT, BALANCE, ACTOR FROM H_TRANSACTION WHERE TRANSACTION_ID = ?1");
  if (!q.ok()) return q.status();
  auto row = q->Bind(1, h.capture_id.value_or(0)).Step();
  if (!row.ok()) return row.status();
  if (!*row)  // history is append-only: only a hand edit gets here
    return Status::Internal("the capture row of hold " + std::to_string(h.hold_id) + " is missing");
  HistoryRow r{.payment_time_us = q->Int(0),
               .card_id = h.card_id,
               .store_id = h.store_id,
               .amount = q->Int(1),
               .balance = q->Int(2),
               .transaction_id = *h.capture_id,
               .kind = "capture",
               .actor = std::string(q->Text(3))};
  if (Status s = q->Run(); !s.ok()) return s;
  return r;
}

// The hold an earlier hold, capture or void with this key answered, if any
// (P_IDEMPOTENCY.HOLD_ID); idempotency_mismatch for another fingerprint (a
// payment's or refund's key among them: their fingerprints never match).
Result<std::optional<int64_t>> FindHoldKey(sqlite::Connection& c, int64_t card_id, const std::string& key,
                                           const std::string& fp) {
  auto q = c.Prepare("SELECT FINGERPRINT, HOLD_ID FROM P_IDEMPOTENCY WHERE CARD_ID = ?1 AND KEY = ?2");
  if (!q.ok()) return q.status();
  auto row = q->Bind(1, card_id).Bind(2, key).Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<int64_t>();
  if (q->Text(0) != fp || q->IsNull(1)) return CardKeyMismatch(key);
  int64_t id = q->Int(1);
  if (Status s = q->Run(); !s.ok()) return s;
  return std::optional<int64_t>(id);
}

Status RememberHoldKey(sqlite::Connection& c, const std::string& key, const std::string& fp, const Hold& h,
                       int64_t now_us) {
  auto q = c.Prepare(
      "INSERT INTO P_IDEMPOTENCY (CARD_ID, KEY, FINGERPRINT, CREATED, REFUSED, PAYMENT_TIME, STORE_ID, AMOUNT, "
      "BALANCE, HOLD_ID) VALUES (?1, ?2, ?3, ?4, 0, ?4, ?5, ?6, 0, ?7)");
  if (!q.ok()) return q.status();
  return q->Bind(1, h.card_id)
      .Bind(2, key)
      .Bind(3, fp)
      .Bind(4, now_us)
      .Bind(5, h.store_id)
      .Bind(6, h.amount)
      .Bind(7, h.hold_id)
      .Run();
}

// A replay: the hold as it is now (and a capture's row).
Result<HoldOutcome> Replay(sqlite::Connection& c, int64_t card_id, int64_t hold_id, int64_t now_us) {
  auto h = FindHold(c, card_id, hold_id);
  if (!h.ok()) return h.status();
  HoldOutcome out{.hold = std::move(h).value(), .replayed = true};
  ShowExpiry(out.hold, now_us);
  if (out.hold.capture_id) {
    auto row = CaptureRow(c, out.hold);
    if (!row.ok()) return row.status();
    out.row = std::move(row).value();
  }
  return out;
}

}  // namespace

Status StampExpiredHolds(sqlite::Connection& c, int64_t card_id, int64_t t_us) {
  auto q = c.Prepare(
      "UPDATE P_HOLD SET STATUS = 'expired', ENDED_TIME = EXPIRES_TIME WHERE CARD_ID = ?1 AND STATUS = 'open' "
      "AND EXPIRES_TIME <= ?2");
  if (!q.ok()) return q.status();
  return q->Bind(1, card_id).Bind(2, t_us).Run();
}

Result<int64_t> HeldAt(sqlite::Connection& c, int64_t card_id, int64_t t_us) {
  auto q = c.Prepare(
      "SELECT COALESCE(SUM(-AMOUNT), 0) FROM P_HOLD WHERE CARD_ID = ?1 AND STATUS = 'open' AND EXPIRES_TIME > ?2");
  if (!q.ok()) return q.status();
  auto row = q->Bind(1, card_id).Bind(2, t_us).Step();
  if (!row.ok()) return row.status();
  int64_t held = q->Int(0);
  if (Status s = q->Run(); !s.ok()) return s;
  return held;
}

Result<HoldOutcome> SqlitePointCardStore::ApplyCreateHold(sqlite::Connection& c, const NewHold& h,
                                                          const std::string& fp) {
  if (h.key) {
    auto key_store = CheckStoreKey(c, *h.key, NextTime());
    if (!key_store.ok()) return key_store.status();
    if (*key_store != h.store_id) return KeyOfAnotherStore(*key_store, h.store_id);
  }
  if (Status s = StoreExists(c, h.store_id); !s.ok()) return s;
  if (h.idempotency_key) {
    auto earlier = FindHoldKey(c, h.card_id, *h.idempotency_key, fp);
    if (!earlier.ok()) return earlier.status();
    if (*earlier) return Replay(c, h.card_id, **earlier, NextTime());
  }
  auto read = c.Prepare("SELECT BALANCE, STATUS FROM S_ACCOUNT WHERE CARD_ID = ?1");
  if (!read.ok()) return read.status();
  auto card = read->Bind(1, h.card_id).Step();
  if (!card.ok()) return card.status();
  if (!*card) return NoSuchCard(h.card_id);
  if (read->Text(1) != kCardActive) return CardIsClosed(h.card_id);
  int64_t balance = read->Int(0);
  if (Status s = read->Run(); !s.ok()) return s;
  const int64_t t = NextTime();
  if (Status s = SettleCard(c, h.card_id, t, balance); !s.ok()) return s;
  auto credit = PendingCredit(c, h.card_id);
  if (!credit.ok()) return credit.status();
  auto held = HeldAt(c, h.card_id, t);
  if (!held.ok()) return held.status();
  const int64_t available = balance + *credit - *held;
  if (available + h.amount < 0) return NotAvailable(h.card_id, available, h.amount, "a hold");
  auto last = sqlite::QueryInt(c, "SELECT COALESCE(MAX(HOLD_ID), 0) FROM P_HOLD");
  if (!last.ok()) return last.status();
  HoldOutcome out{.hold = {.hold_id = *last + 1,
                           .card_id = h.card_id,
                           .store_id = h.store_id,
                           .amount = h.amount,
                           .created_us = t,
                           .expires_us = t + h.expires_in_seconds * 1'000'000,
                           .actor = h.actor}};
  holds_possible_ = true;  // from here on payments read what cards hold
  auto insert = c.Prepare(
      "INSERT INTO P_HOLD (HOLD_ID, CARD_ID, STORE_ID, AMOUNT, STATUS, CREATED_TIME, EXPIRES_TIME, ACTOR) "
      "VALUES (?1, ?2, ?3, ?4, 'open', ?5, ?6, ?7)");
  if (!insert.ok()) return insert.status();
  insert->Bind(1, out.hold.hold_id).Bind(2, h.card_id).Bind(3, h.store_id).Bind(4, h.amount);
  if (Status s = insert->Bind(5, t).Bind(6, out.hold.expires_us).Bind(7, h.actor).Run(); !s.ok()) return s;
  if (Status s = ReserveLots(c, h.card_id, out.hold.hold_id, -h.amount, out.hold.expires_us); !s.ok()) return s;
  if (h.idempotency_key) {
    if (Status s = RememberHoldKey(c, *h.idempotency_key, fp, out.hold, t); !s.ok()) return s;
  }
  return out;
}

Result<HoldOutcome> SqlitePointCardStore::ApplyEndHold(sqlite::Connection& c, const HoldAction& a,
                                                       const std::string& fp) {
  std::optional<int64_t> key_store;
  if (a.key) {
    auto checked = CheckStoreKey(c, *a.key, NextTime());
    if (!checked.ok()) return checked.status();
    key_store = *checked;
  }
  // A closed card still captures and voids: its status is not read.
  auto read = c.Prepare("SELECT BALANCE FROM S_ACCOUNT WHERE CARD_ID = ?1");
  if (!read.ok()) return read.status();
  auto card = read->Bind(1, a.card_id).Step();
  if (!card.ok()) return card.status();
  if (!*card) return NoSuchCard(a.card_id);
  int64_t balance = read->Int(0);
  if (Status s = read->Run(); !s.ok()) return s;
  auto hold = FindHold(c, a.card_id, a.hold_id);
  if (!hold.ok()) return hold.status();
  if (key_store && *key_store != hold->store_id) return KeyOfAnotherStore(*key_store, hold->store_id);
  const int64_t t = NextTime();
  if (a.idempotency_key) {
    auto earlier = FindHoldKey(c, a.card_id, *a.idempotency_key, fp);
    if (!earlier.ok()) return earlier.status();
    if (*earlier) return Replay(c, a.card_id, **earlier, t);
  }
  if (hold->status == kHoldCaptured || hold->status == kHoldVoided) return HoldNotOpen(a.hold_id, hold->status);
  HoldOutcome out{.hold = std::move(hold).value()};
  if (out.hold.status != kHoldOpen || out.hold.expires_us <= t) {
    // Expired: stamped now (the refusal commits), so no later action,
    // whatever the clock does, finds it open.
    if (Status s = SettleCard(c, a.card_id, t, balance); !s.ok()) return s;
    ShowExpiry(out.hold, t);
    out.refusal = HoldExpired(a.hold_id, out.hold.expires_us);
    return out;
  }
  if (Status s = SettleCard(c, a.card_id, t, balance); !s.ok()) return s;  // the card's others
  out.hold.ended_us = t;
  if (a.capture) {
    const int64_t amount = a.amount.value_or(out.hold.amount);
    if (amount < out.hold.amount || amount > -1) return CaptureTooLarge(a.hold_id, out.hold.amount);
    auto credit = PendingCredit(c, a.card_id);
    if (!credit.ok()) return credit.status();
    auto held = HeldAt(c, a.card_id, t);  // this hold among them
    if (!held.ok()) return held.status();
    const int64_t available = balance + *credit - (*held + out.hold.amount);
    if (available + amount < 0) return NotAvailable(a.card_id, available, amount, "a capture");
    auto folded = *credit > 0 ? FoldCard(c, a.card_id, balance) : Result<int64_t>(balance);  // the grant's row first
    if (!folded.ok()) return folded.status();
    out.row = HistoryRow{.card_id = a.card_id,
                         .store_id = out.hold.store_id,
                         .amount = amount,
                         .balance = *folded + amount,
                         .kind = "capture",
                         .actor = a.actor};
    if (Status s = AppendRow(c, *out.row); !s.ok()) return s;
    out.hold.status = std::string(kHoldCaptured);
    out.hold.capture_id = out.row->transaction_id;
    out.hold.captured_amount = amount;
    int64_t after = out.row->balance;
    if (Status s = EndReservations(c, a.card_id, a.hold_id, -amount, out.row->transaction_id, after); !s.ok()) return s;
  } else {
    out.hold.status = std::string(kHoldVoided);
    if (Status s = EndReservations(c, a.card_id, a.hold_id, 0, 0, balance); !s.ok()) return s;
  }
  auto end = c.Prepare(
      "UPDATE P_HOLD SET STATUS = ?1, ENDED_TIME = ?2, CAPTURE_ID = ?3, CAPTURED_AMOUNT = ?4 WHERE HOLD_ID = ?5");
  if (!end.ok()) return end.status();
  end->Bind(1, out.hold.status).Bind(2, t).Bind(5, a.hold_id);
  if (out.hold.capture_id) end->Bind(3, *out.hold.capture_id).Bind(4, *out.hold.captured_amount);
  if (Status s = end->Run(); !s.ok()) return s;
  if (a.idempotency_key) {
    if (Status s = RememberHoldKey(c, *a.idempotency_key, fp, out.hold, t); !s.ok()) return s;
  }
  return out;
}

void SqlitePointCardStore::ListHolds(int64_t card_id, int64_t limit, std::optional<int64_t> before_id,
                                     std::function<void(Result<HoldPage>)> done) {
  auto conn = db_.Reader();
  if (!conn.ok()) return done(conn.status());
  if (Status s = BeginCardRead(**conn, card_id); !s.ok()) return done(s);
  auto q = (*conn)->Prepare(kSelectHolds);
  if (!q.ok()) return done(q.status());
  q->Bind(1, card_id).Bind(2, before_id.value_or(INT64_MAX)).Bind(3, limit + 1);
  HoldPage page;
  const int64_t now = ReadTime();
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return done(row.status());
    if (!*row) break;
    page.holds.push_back(ReadHold(*q));
    ShowExpiry(page.holds.back(), now);
  }
  if (static_cast<int64_t>(page.holds.size()) > limit) {
    page.holds.pop_back();
    page.next_before_id = page.holds.back().hold_id;
  }
  done(std::move(page));
}

}  // namespace hotrow::pointcard
