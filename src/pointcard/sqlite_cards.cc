// Cards on SQLite: reading one, issuing one, closing one
// (sqlite_store.h). Writes run on the writer, each in its op's savepoint.
#include <algorithm>

#include "pointcard/sqlite_store.h"

namespace hotrow::pointcard {

namespace sqlite = db::sqlite;

namespace {

// What open holds unexpired at ?2 reserve of lot l.
#define HOTROW_LOT_RESERVED                                                                      \
  "(SELECT COALESCE(SUM(r.AMOUNT), 0) FROM P_LOT_HOLD r JOIN P_HOLD h ON h.HOLD_ID = r.HOLD_ID " \
  "WHERE r.LOT_ID = l.LOT_ID AND h.STATUS = 'open' AND h.EXPIRES_TIME > ?2)"

// A card as reads show it, ?1 selecting it: the balance with its applied
// credit unexpired at ?2 (ReadTime), less what its lots due by ?2 lose
// (all that open, unexpired holds do not reserve: written out or not, it
// has left), and what its open holds unexpired at ?2 keep; one statement,
// one snapshot. Whole literals (no string built per read:
// GET /api/v1/cards/{id} allocates nothing, tests/alloc).
#define HOTROW_SELECT_CARD                                                                                     \
  "SELECT a.CARD_ID, a.BALANCE, a.REGION_ID, a.LAST_UPDATE, "                                                  \
  "(SELECT COALESCE(SUM(c.POINTS), 0) FROM P_GRANT_CREDIT c JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID "        \
  "WHERE c.CARD_ID = a.CARD_ID AND g.STATE = 'applied' AND (g.EXPIRES_TIME IS NULL OR g.EXPIRES_TIME > ?2)), " \
  "a.EXTERNAL_REF, a.STATUS, a.CLOSED_TIME, "                                                                  \
  "(SELECT COALESCE(SUM(-h.AMOUNT), 0) FROM P_HOLD h WHERE h.CARD_ID = a.CARD_ID AND h.STATUS = 'open' "       \
  "AND h.EXPIRES_TIME > ?2), "                                                                                 \
  "(SELECT COALESCE(SUM(l.REMAINING - " HOTROW_LOT_RESERVED                                                    \
  "), 0) FROM P_LOT l WHERE l.CARD_ID = a.CARD_ID "                                                            \
  "AND l.REMAINING > 0 AND l.EXPIRES_TIME <= ?2) FROM S_ACCOUNT a WHERE "
constexpr const char* kSelectCardById = HOTROW_SELECT_CARD "a.CARD_ID = ?1";
constexpr const char* kSelectCardByRef = HOTROW_SELECT_CARD "a.EXTERNAL_REF = ?1";
#undef HOTROW_SELECT_CARD

// A card's lots with points left after the lot ?3 (0: from the first), in
// the order payments take them, with what open holds unexpired at ?2
// reserve of each.
constexpr const char* kSelectLots =
    "SELECT l.LOT_ID, l.GRANT_ID, l.AMOUNT, l.REMAINING, " HOTROW_LOT_RESERVED
    ", l.CREATED_TIME, l.EXPIRES_TIME FROM P_LOT l WHERE l.CARD_ID = ?1 AND l.REMAINING > 0 "
    "AND (?3 = 0 OR (l.EXPIRES_TIME, l.LOT_ID) > (SELECT EXPIRES_TIME, LOT_ID FROM P_LOT WHERE LOT_ID = ?3)) "
    "ORDER BY l.EXPIRES_TIME, l.LOT_ID";
// What all of them have left and reserve at ?2 (past its expiry a lot has
// left only what holds keep).
constexpr const char* kSumLots =
    "SELECT COALESCE(SUM(CASE WHEN EXPIRES_TIME <= ?2 THEN RES ELSE REMAINING END), 0), COALESCE(SUM(RES), 0) "
    "FROM (SELECT l.REMAINING AS REMAINING, l.EXPIRES_TIME AS EXPIRES_TIME, " HOTROW_LOT_RESERVED
    " AS RES FROM P_LOT l WHERE l.CARD_ID = ?1 AND l.REMAINING > 0)";
// Its applied, unfolded expiring credits unexpired at ?2: lots to be.
constexpr const char* kSelectPendingLots =
    "SELECT c.GRANT_ID, c.POINTS, g.APPLIED_TIME, g.EXPIRES_TIME FROM P_GRANT_CREDIT c JOIN P_GRANT g "
    "ON g.GRANT_ID = c.GRANT_ID WHERE c.CARD_ID = ?1 AND g.STATE = 'applied' AND g.EXPIRES_TIME > ?2";
#undef HOTROW_LOT_RESERVED

Result<std::optional<Card>> ReadCard(sqlite::Connection& conn, const char* sql, int64_t id, std::string_view ref,
                                     int64_t at_us) {
  auto q = conn.Prepare(sql);
  if (!q.ok()) return q.status();
  if (ref.empty())
    q->Bind(1, id);
  else
    q->Bind(1, ref);
  q->Bind(2, at_us);
  auto row = q->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<Card>();
  Card card{.card_id = q->Int(0),
            .balance = q->Int(1) + q->Int(4) - q->Int(9),
            .region_id = q->Int(2),
            .last_update_us = q->Int(3),
            .pending_points = q->Int(4)};
  if (!q->IsNull(5)) card.external_ref = std::string(q->Text(5));
  card.status = std::string(q->Text(6));
  if (!q->IsNull(7)) card.closed_at_us = q->Int(7);
  card.held = q->Int(8);
  if (Status s = q->Run(); !s.ok()) return s;
  return std::optional<Card>(std::move(card));
}

Result<Card> CardById(sqlite::Connection& conn, int64_t card_id, int64_t at_us) {
  auto card = ReadCard(conn, kSelectCardById, card_id, {}, at_us);
  if (!card.ok()) return card.status();
  if (!*card) return NoSuchCard(card_id);
  return std::move(**card);
}

}  // namespace

// What an earlier request on `route` with this key made (its id; 0 for a
// refusal kept with the key), if any (sqlite_store.h).
Result<std::optional<int64_t>> FindRequestKey(sqlite::Connection& c, std::string_view route, const std::string& key,
                                              const std::string& fp) {
  auto q = c.Prepare("SELECT FINGERPRINT, RESULT_ID FROM P_REQUEST_KEY WHERE ROUTE = ?1 AND KEY = ?2");
  if (!q.ok()) return q.status();
  auto row = q->Bind(1, route).Bind(2, key).Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<int64_t>();
  if (q->Text(0) != fp)
    return Status(ErrorCode::kIdempotencyMismatch, "Idempotency-Key '" + key + "' was used for a different request",
                  "Idempotency-Key");
  int64_t id = q->Int(1);
  if (Status s = q->Run(); !s.ok()) return s;
  return std::optional<int64_t>(id);
}

void SqlitePointCardStore::GetCard(int64_t card_id, StoreCallback<Result<Card>> done) {
  auto conn = db_.Reader();
  if (!conn.ok()) return done(conn.status());
  done(CardById(**conn, card_id, ReadTime()));
}

void SqlitePointCardStore::ListLots(int64_t card_id, int64_t limit, std::optional<int64_t> after_id,
                                    std::function<void(Result<LotPage>)> done) {
  auto conn = db_.Reader();
  if (!conn.ok()) return done(conn.status());
  if (Status s = BeginCardRead(**conn, card_id); !s.ok()) return done(s);
  const int64_t now = ReadTime();
  auto card = CardById(**conn, card_id, now);  // the same snapshot
  if (!card.ok()) return done(card.status());
  limit = std::clamp<int64_t>(limit, 1, kLotListLimitMax);
  if (after_id) {  // a cursor is a lot of this card
    auto cursor = (*conn)->Prepare("SELECT 1 FROM P_LOT WHERE LOT_ID = ?1 AND CARD_ID = ?2");
    if (!cursor.ok()) return done(cursor.status());
    auto found = cursor->Bind(1, *after_id).Bind(2, card_id).Step();
    if (!found.ok()) return done(found.status());
    if (!*found) return done(Status::InvalidField("after", "after must be a cursor from a previous page of this card"));
  }
  LotPage page{.lots = {},
               .pending = {},
               .never_expiring = card->balance,
               .never_expiring_reserved = card->held,
               .next_after_id = {}};
  auto sums = (*conn)->Prepare(kSumLots);
  if (!sums.ok()) return done(sums.status());
  auto summed = sums->Bind(1, card_id).Bind(2, now).Step();
  if (!summed.ok()) return done(summed.status());
  page.never_expiring -= sums->Int(0);
  page.never_expiring_reserved -= sums->Int(1);
  auto q = (*conn)->Prepare(kSelectLots);
  if (!q.ok()) return done(q.status());
  q->Bind(1, card_id).Bind(2, now).Bind(3, after_id.value_or(0));
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return done(row.status());
    if (!*row) break;
    Lot l{.lot_id = q->Int(0),
          .card_id = card_id,
          .grant_id = q->Int(1),
          .amount = q->Int(2),
          .remaining = q->Int(3),
          .reserved = q->Int(4),
          .created_us = q->Int(5),
          .expires_us = q->Int(6),
          .expired = false};
    // Past its expiry only what open holds reserve is left, for them.
    l.expired = l.expires_us <= now;
    if (l.expired) l.remaining = l.reserved;
    if (l.remaining == 0) continue;
    if (static_cast<int64_t>(page.lots.size()) == limit) {  // one more: there is a next page
      page.next_after_id = page.lots.back().lot_id;
      break;
    }
    page.lots.push_back(l);
  }
  // Credits to be lots, for the seconds until their fold: apart, every
  // page (they have no id to page by yet).
  auto pending = (*conn)->Prepare(kSelectPendingLots);
  if (!pending.ok()) return done(pending.status());
  pending->Bind(1, card_id).Bind(2, now);
  while (true) {
    auto row = pending->Step();
    if (!row.ok()) return done(row.status());
    if (!*row) break;
    page.never_expiring -= pending->Int(1);
    page.pending.push_back({.lot_id = 0,  // numbered when folded
                            .card_id = card_id,
                            .grant_id = pending->Int(0),
                            .amount = pending->Int(1),
                            .remaining = pending->Int(1),
                            .reserved = 0,
                            .created_us = pending->Int(2),
                            .expires_us = pending->Int(3),
                            .expired = false});
  }
  done(std::move(page));
}

void SqlitePointCardStore::FindCard(std::string external_ref, std::function<void(Result<std::optional<Card>>)> done) {
  auto conn = db_.Reader();
  if (!conn.ok()) return done(conn.status());
  done(ReadCard(**conn, kSelectCardByRef, 0, external_ref, ReadTime()));
}

void SqlitePointCardStore::CreateCard(NewCard card, std::string fingerprint, std::function<void(Result<Card>)> done) {
  // What the op comes to: a card, or (nullopt) a refusal that a key keeps,
  // so the op's savepoint commits it.
  using Issued = std::optional<Card>;
  const std::string ref = card.external_ref.value_or("");
  sqlite::SubmitCall<Issued>(
      db_.writer(),
      [this, card = std::move(card), fp = std::move(fingerprint)](sqlite::Connection& c) -> Result<Issued> {
        const int64_t now = NextTime();
        if (card.key) {  // any store's key issues cards
          auto key_store = CheckStoreKey(c, *card.key, now);
          if (!key_store.ok()) return key_store.status();
        }
        // A store key's idempotency keys are its own (two stores' tills that
        // number their requests alike never get each other's cards); the
        // admin's are route "cards", as before.
        const std::string route = card.key ? "cards:key:" + card.key->key_id : std::string("cards");
        auto remember = [&](int64_t id) -> Status {
          if (!card.idempotency_key) return Status::Ok();
          auto key = c.Prepare(
              "INSERT INTO P_REQUEST_KEY (ROUTE, KEY, FINGERPRINT, CREATED, RESULT_ID) VALUES (?5, ?1, ?2, ?3, ?4)");
          if (!key.ok()) return key.status();
          return key->Bind(1, *card.idempotency_key).Bind(2, fp).Bind(3, now).Bind(4, id).Bind(5, route).Run();
        };
        if (card.idempotency_key) {
          auto earlier = FindRequestKey(c, route, *card.idempotency_key, fp);
          if (!earlier.ok()) return earlier.status();
          if (*earlier) {
            if (**earlier == 0) return Issued();  // refused then: refused again
            auto made = CardById(c, **earlier, ReadTime());
            if (!made.ok()) return made.status();
            made->replayed = true;
            return Issued(std::move(made).value());
          }
        }
        if (card.external_ref) {
          auto taken = c.Prepare("SELECT 1 FROM S_ACCOUNT WHERE EXTERNAL_REF = ?1");
          if (!taken.ok()) return taken.status();
          auto row = taken->Bind(1, *card.external_ref).Step();
          if (!row.ok()) return row.status();
          if (*row) {
            if (Status s = remember(0); !s.ok()) return s;
            return Issued();
          }
        }
        auto last = sqlite::QueryInt(c, "SELECT COALESCE(MAX(CARD_ID), 0) FROM S_ACCOUNT");
        if (!last.ok()) return last.status();
        if (*last == INT64_MAX) return Status::Internal("no card id is left");
        const int64_t id = *last + 1;
        auto insert = c.Prepare(
            "INSERT INTO S_ACCOUNT (CARD_ID, BALANCE, REGION_ID, LAST_UPDATE, EXTERNAL_REF, STATUS) "
            "VALUES (?1, 0, ?2, ?3, ?4, 'active')");
        if (!insert.ok()) return insert.status();
        insert->Bind(1, id).Bind(2, card.region_id).Bind(3, now);
        if (card.external_ref) insert->Bind(4, *card.external_ref);
        if (Status s = insert->Run(); !s.ok()) return s;
        if (Status s = remember(id); !s.ok()) return s;
        return Issued(Card{.card_id = id,
                           .balance = 0,
                           .region_id = card.region_id,
                           .last_update_us = now,
                           .pending_points = 0,
                           .external_ref = card.external_ref});
      },
      [ref, done = std::move(done)](Result<Issued> r) {
        if (!r.ok()) return done(r.status());
        if (!*r) return done(ExternalRefTaken(ref));
        done(std::move(**r));
      });
}

void SqlitePointCardStore::CloseCard(CardClose close, std::string fingerprint, std::function<void(Result<Card>)> done) {
  sqlite::SubmitCall<Card>(
      db_.writer(),
      [this, close = std::move(close), fp = std::move(fingerprint)](sqlite::Connection& c) -> Result<Card> {
        bool replayed = false;
        if (close.idempotency_key) {
          // The payments' keys: the same key on this card for a payment is
          // another request (its fingerprint differs).
          auto q = c.Prepare("SELECT FINGERPRINT FROM P_IDEMPOTENCY WHERE CARD_ID = ?1 AND KEY = ?2");
          if (!q.ok()) return q.status();
          auto row = q->Bind(1, close.card_id).Bind(2, *close.idempotency_key).Step();
          if (!row.ok()) return row.status();
          if (*row && q->Text(0) != fp) return CardKeyMismatch(*close.idempotency_key);
          replayed = *row;
        }
        auto card = CardById(c, close.card_id, ReadTime());
        if (!card.ok()) return card.status();
        card->replayed = replayed;
        if (replayed) return card;
        const int64_t now = NextTime();
        const bool already = card->status == kCardClosed;
        if (!already) {
          auto update = c.Prepare("UPDATE S_ACCOUNT SET STATUS = 'closed', CLOSED_TIME = ?1 WHERE CARD_ID = ?2");
          if (!update.ok()) return update.status();
          if (Status s = update->Bind(1, now).Bind(2, close.card_id).Run(); !s.ok()) return s;
        }
        // A key is kept whether this request closed the card or found it
        // closed: its retry is a replay, and the key is this request's.
        if (close.idempotency_key) {
          auto key = c.Prepare(
              "INSERT INTO P_IDEMPOTENCY (CARD_ID, KEY, FINGERPRINT, CREATED, REFUSED, PAYMENT_TIME, STORE_ID, AMOUNT, "
              "BALANCE) VALUES (?1, ?2, ?3, ?4, 0, ?4, 0, 0, ?5)");
          if (!key.ok()) return key.status();
          if (Status s = key->Bind(1, close.card_id)
                             .Bind(2, *close.idempotency_key)
                             .Bind(3, fp)
                             .Bind(4, now)
                             .Bind(5, card->balance)
                             .Run();
              !s.ok())
            return s;
        }
        if (already) return card;
        card->status = std::string(kCardClosed);
        card->closed_at_us = now;
        return card;
      },
      std::move(done));
}

}  // namespace hotrow::pointcard
