// Refunds on SQLite, inside the writer's transaction: the writer runs one
// write at a time, so two refunds of one payment are decided one after
// the other (store.h, PointCardStore::Refund).
#include "pointcard/sqlite_store.h"

namespace hotrow::pointcard {

namespace sqlite = db::sqlite;

namespace {

// The refunded row, as the refund needs it.
struct Original {
  int64_t time_us = 0;
  int64_t store_id = 0;
  int64_t amount = 0;
  std::string kind;
};

// The card's row with this id (the TRANSACTION_ID index), or not_found.
Result<Original> FindOriginal(sqlite::Connection& c, int64_t card_id, int64_t transaction_id) {
  auto q = c.Prepare(
      "SELECT PAYMENT_TIME, STORE_ID, AMOUNT, KIND FROM H_TRANSACTION WHERE TRANSACTION_ID = ?1 "
      "AND CARD_ID = ?2");
  if (!q.ok()) return q.status();
  auto row = q->Bind(1, transaction_id).Bind(2, card_id).Step();
  if (!row.ok()) return row.status();
  if (!*row) return NoSuchTransaction(card_id, transaction_id);
  Original o{q->Int(0), q->Int(1), q->Int(2), std::string(q->Text(3))};
  if (Status s = q->Run(); !s.ok()) return s;
  return o;
}

// What the row's refunds returned so far: the card's rows after it (the
// card index) that name it.
Result<int64_t> Refunded(sqlite::Connection& c, int64_t card_id, int64_t transaction_id, int64_t after_us) {
  auto q = c.Prepare(
      "SELECT COALESCE(SUM(AMOUNT), 0) FROM H_TRANSACTION WHERE CARD_ID = ?1 AND PAYMENT_TIME > ?2 "
      "AND REFUND_OF = ?3");
  if (!q.ok()) return q.status();
  auto row = q->Bind(1, card_id).Bind(2, after_us).Bind(3, transaction_id).Step();
  if (!row.ok()) return row.status();
  int64_t sum = q->Int(0);
  if (Status s = q->Run(); !s.ok()) return s;
  return sum;
}

}  // namespace

Result<PaymentOutcome> SqlitePointCardStore::ApplyRefund(sqlite::Connection& c, const RefundRequest& r,
                                                         const std::string& fp) {
  // Who asks first, as for a payment; the key's store is compared with the
  // refunded row's once that is read.
  std::optional<int64_t> key_store;
  if (r.key) {
    auto checked = CheckStoreKey(c, *r.key, NextTime());
    if (!checked.ok()) return checked.status();
    key_store = *checked;
  }
  // A closed card takes refunds: its status is not read.
  auto read = c.Prepare("SELECT BALANCE FROM S_ACCOUNT WHERE CARD_ID = ?1");
  if (!read.ok()) return read.status();
  auto card = read->Bind(1, r.card_id).Step();
  if (!card.ok()) return card.status();
  if (!*card) return NoSuchCard(r.card_id);
  int64_t balance = read->Int(0);
  if (Status s = read->Run(); !s.ok()) return s;
  auto original = FindOriginal(c, r.card_id, r.transaction_id);
  if (!original.ok()) return original.status();
  // Another store's row is that store's business (403) before its kind; a
  // grant's row is no store's, so its kind answers for any key. A kind
  // never changes, so a replay, always of a payment, is unaffected.
  if (key_store && original->store_id != 0 && *key_store != original->store_id)
    return KeyOfAnotherStore(*key_store, original->store_id);
  if (original->kind != "payment" && original->kind != "capture")
    return NotRefundable(r.transaction_id, original->kind);
  auto earlier = FindCardKey(c, r.card_id, r.idempotency_key, fp);
  if (!earlier.ok()) return earlier.status();
  if (*earlier) return **earlier;
  auto refunded = Refunded(c, r.card_id, r.transaction_id, original->time_us);
  if (!refunded.ok()) return refunded.status();
  const int64_t remaining = -original->amount - *refunded;
  const int64_t amount = r.amount.value_or(remaining);
  if (amount > remaining || amount <= 0) return RefundExceedsOriginal(r.transaction_id, remaining, amount);
  // With lots, what expired by now leaves first (sqlite_lots.cc).
  if (Status s = SettleCard(c, r.card_id, NextTime(), balance); !s.ok()) return s;
  auto credit = PendingCredit(c, r.card_id);
  if (!credit.ok()) return credit.status();
  auto folded = *credit > 0 ? FoldCard(c, r.card_id, balance) : Result<int64_t>(balance);  // the grant's row first
  if (!folded.ok()) return folded.status();
  PaymentOutcome out;
  out.row = {.card_id = r.card_id,
             .store_id = original->store_id,
             .amount = amount,
             .balance = *folded + amount,
             .kind = "refund",
             .actor = r.actor,
             .reference = r.reference,
             .reason = r.reason,
             .refund_of = r.transaction_id};
  if (Status s = AppendRow(c, out.row); !s.ok()) return s;
  int64_t after = out.row.balance;
  if (Status s = RestoreLots(c, r.card_id, r.transaction_id, original->amount, *refunded, amount,
                             out.row.transaction_id, after);
      !s.ok())
    return s;
  if (Status s = RememberCardKey(c, r.card_id, r.idempotency_key, fp, out, out.row.payment_time_us); !s.ok()) return s;
  return out;
}

}  // namespace hotrow::pointcard
