// Holds on PostgreSQL (store.h, PointCardStore::CreateHold, EndHold): two
// functions, each one transaction behind the card's advisory lock with the
// card's row FOR UPDATE (RunSerializable), so every decision about a card's
// holds and balance, on any instance, is taken one after the other. They
// run at READ COMMITTED: everything they read is the card's own (changed
// only under its lock), immutable (a store), or locked on its own (a store
// key's row, its advisory lock), so the card's lock makes them serializable
// (Isolation::kCardLocked); SSI would only abort them for other cards'
// holds sharing P_HOLD's index pages. The card's time:
// after its newest row (LAST_UPDATE) and its newest hold decision
// (HOLD_TIME), so it only moves forward. Why the rule lives in PL/pgSQL as
// well as in C++ (sqlite_holds.cc): postgres_store.cc, above PayResult.
#include "pointcard/postgres_store.h"

namespace hotrow::pointcard {

namespace pg = db::pg;

Status CreatePostgresHoldFunctions(pg::Connection& conn) {
  return conn.Exec(R"sql(
    -- The answer of a hold's write (v0.12.0): an outcome, a number that
    -- goes with it (o_extra), and the hold as it is now with its capture
    -- row, if any (NULL columns for no hold).
    CREATE OR REPLACE FUNCTION hotrow_hold_answer_v1(p_outcome smallint, p_extra bigint, p_hold_id bigint)
    RETURNS TABLE (outcome smallint, o_extra bigint, h_id bigint, h_card bigint, h_store bigint, h_amount bigint,
                   h_status text, h_created_us bigint, h_expires_us bigint, h_ended_us bigint, h_capture bigint,
                   h_captured bigint, h_actor text, r_time_us bigint, r_balance bigint, r_actor text)
    LANGUAGE sql AS $$
      SELECT p_outcome, p_extra, h.HOLD_ID, h.CARD_ID, h.STORE_ID::bigint, h.AMOUNT, h.STATUS,
             hotrow_us(h.CREATED_TIME), hotrow_us(h.EXPIRES_TIME), hotrow_us(h.ENDED_TIME), h.CAPTURE_ID,
             h.CAPTURED_AMOUNT, h.ACTOR, hotrow_us(x.PAYMENT_TIME), x.BALANCE, x.ACTOR
      FROM (SELECT 1) one LEFT JOIN P_HOLD h ON h.HOLD_ID = p_hold_id
        LEFT JOIN H_TRANSACTION x ON x.TRANSACTION_ID = h.CAPTURE_ID $$;

    -- A new hold (v0.12.0). outcome: 0 made, 1 more than is available
    -- (o_extra: what is), 2 no such card, 3 key mismatch, 4 replayed (the
    -- hold as it is now), 6 the card is closed, 7 no such store, 8 bad
    -- store key, 9 the key is another store's (o_extra: its store). A
    -- refusal keeps no key. v0.14.0, same signature: the card settled
    -- first, and a hold reserves lot points first, soonest-expiring first.
    CREATE OR REPLACE FUNCTION hotrow_hold_create_v1(p_card bigint, p_store int, p_amount bigint, p_seconds bigint,
                                                     p_key text, p_fp text, p_actor text, p_key_id text,
                                                     p_key_sha text)
    RETURNS SETOF record LANGUAGE plpgsql SET enable_seqscan = off SET jit = off AS $$
    DECLARE
      key_store int;
      k P_IDEMPOTENCY%ROWTYPE;
      b bigint;
      v_last timestamp;
      v_hold timestamp;
      st text;
      t timestamp;
      credit bigint;
      held bigint;
      id bigint;
      v_lots timestamp;
      settled boolean;
    BEGIN
      IF p_key_id IS NOT NULL THEN
        key_store := hotrow_store_key_check_v1(p_key_id, p_key_sha);
        IF key_store = 0 THEN
          RETURN QUERY SELECT * FROM hotrow_hold_answer_v1(8::smallint, NULL, NULL);
          RETURN;
        END IF;
        IF key_store <> p_store THEN
          RETURN QUERY SELECT * FROM hotrow_hold_answer_v1(9::smallint, key_store::bigint, NULL);
          RETURN;
        END IF;
      END IF;
      IF NOT EXISTS (SELECT 1 FROM M_STORE m WHERE m.STORE_ID = p_store) THEN
        RETURN QUERY SELECT * FROM hotrow_hold_answer_v1(7::smallint, NULL, NULL);
        RETURN;
      END IF;
      IF p_key IS NOT NULL THEN
        SELECT * INTO k FROM P_IDEMPOTENCY i WHERE i.CARD_ID = p_card AND i.KEY = p_key;
        IF FOUND THEN
          IF k.FINGERPRINT <> p_fp OR k.HOLD_ID IS NULL THEN
            RETURN QUERY SELECT * FROM hotrow_hold_answer_v1(3::smallint, NULL, NULL);
            RETURN;
          END IF;
          IF p_key_id IS NOT NULL THEN
            PERFORM hotrow_store_key_touch_v1(p_key_id);
          END IF;
          RETURN QUERY SELECT * FROM hotrow_hold_answer_v1(4::smallint, NULL, k.HOLD_ID);
          RETURN;
        END IF;
      END IF;
      SELECT a.BALANCE, a.LAST_UPDATE, a.HOLD_TIME, a.STATUS INTO b, v_last, v_hold, st FROM S_ACCOUNT a
        WHERE a.CARD_ID = p_card FOR UPDATE;
      IF NOT FOUND THEN
        RETURN QUERY SELECT * FROM hotrow_hold_answer_v1(2::smallint, NULL, NULL);
        RETURN;
      END IF;
      IF st <> 'active' THEN
        RETURN QUERY SELECT * FROM hotrow_hold_answer_v1(6::smallint, NULL, NULL);
        RETURN;
      END IF;
      t := GREATEST(clock_timestamp() AT TIME ZONE 'UTC', v_last + interval '1 microsecond',
                    v_hold + interval '1 microsecond');
      -- v0.14.0: settled first (hotrow_pay_v7), whatever this answers.
      SELECT * INTO b, t, settled, v_lots FROM hotrow_card_settle_v1(p_card, b, t);
      UPDATE P_HOLD x SET STATUS = 'expired', ENDED_TIME = x.EXPIRES_TIME
        WHERE x.CARD_ID = p_card AND x.STATUS = 'open' AND x.EXPIRES_TIME <= t;
      IF FOUND THEN  -- an expiry decided at t: the card's time moves on, whatever this answers
        UPDATE S_ACCOUNT SET HOLD_TIME = t WHERE CARD_ID = p_card;
      END IF;
      SELECT COALESCE(SUM(c.POINTS), 0) INTO credit FROM P_GRANT_CREDIT c JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID
        WHERE c.CARD_ID = p_card AND g.STATE = 'applied';
      SELECT COALESCE(SUM(-x.AMOUNT), 0) INTO held FROM P_HOLD x
        WHERE x.CARD_ID = p_card AND x.STATUS = 'open' AND x.EXPIRES_TIME > t;
      IF b + credit - held + p_amount < 0 THEN
        RETURN QUERY SELECT * FROM hotrow_hold_answer_v1(1::smallint, b + credit - held, NULL);
        RETURN;
      END IF;
      INSERT INTO P_HOLD (CARD_ID, STORE_ID, AMOUNT, STATUS, CREATED_TIME, EXPIRES_TIME, ACTOR)
        VALUES (p_card, p_store, p_amount, 'open', t, t + p_seconds * interval '1 second', p_actor)
        RETURNING HOLD_ID INTO id;
      UPDATE S_ACCOUNT SET HOLD_TIME = t WHERE CARD_ID = p_card;
      IF v_lots IS NOT NULL THEN  -- it reserves lot points first, soonest-expiring first
        PERFORM hotrow_lots_take_v1(p_card, -p_amount, NULL, id, t + p_seconds * interval '1 second');
      END IF;
      IF p_key IS NOT NULL THEN
        INSERT INTO P_IDEMPOTENCY (CARD_ID, KEY, FINGERPRINT, CREATED, REFUSED, PAYMENT_TIME, STORE_ID, AMOUNT,
                                   BALANCE, HOLD_ID)
          VALUES (p_card, p_key, p_fp, clock_timestamp() AT TIME ZONE 'UTC', false, t, p_store, p_amount, 0, id);
      END IF;
      IF p_key_id IS NOT NULL THEN
        PERFORM hotrow_store_key_touch_v1(p_key_id);
      END IF;
      RETURN QUERY SELECT * FROM hotrow_hold_answer_v1(0::smallint, NULL, id);
    END $$;

    -- A capture (p_capture) or void of a hold (v0.12.0). outcome: 0 done,
    -- 1 a capture of more than is available (o_extra: what is, this hold's
    -- points included), 2 no such card, 3 key mismatch, 4 replayed (the hold
    -- as it is now), 8 bad store key, 9 the key is another store's
    -- (o_extra: its store), 13 the card has no such hold, 14 captured or
    -- voided already, 15 expired at the card's time (stamped: this commits),
    -- 16 a capture's amount outside hold.amount..-1. A capture writes one
    -- 'capture' row at the hold's store, the card's pending grant credit
    -- folded first (as hotrow_pay_v7). A closed card still captures and
    -- voids. A refusal keeps no key. v0.14.0, same signature: the card
    -- settled first, and what the hold reserved of lots taken or released.
    CREATE OR REPLACE FUNCTION hotrow_hold_end_v1(p_card bigint, p_hold_id bigint, p_capture boolean, p_amount bigint,
                                                  p_key text, p_fp text, p_actor text, p_key_id text,
                                                  p_key_sha text)
    RETURNS SETOF record LANGUAGE plpgsql SET enable_seqscan = off SET jit = off AS $$
    DECLARE
      key_store int;
      k P_IDEMPOTENCY%ROWTYPE;
      h P_HOLD%ROWTYPE;
      b bigint;
      v_last timestamp;
      v_hold timestamp;
      t timestamp;
      rt timestamp;
      credit bigint;
      credit_grant bigint;
      held bigint;
      n bigint;
      rid bigint;
      v_lots timestamp;
      settled boolean;
      b2 bigint;
      t2 timestamp;
    BEGIN
      IF p_key_id IS NOT NULL THEN
        key_store := hotrow_store_key_check_v1(p_key_id, p_key_sha);
        IF key_store = 0 THEN
          RETURN QUERY SELECT * FROM hotrow_hold_answer_v1(8::smallint, NULL, NULL);
          RETURN;
        END IF;
      END IF;
      SELECT a.BALANCE, a.LAST_UPDATE, a.HOLD_TIME INTO b, v_last, v_hold FROM S_ACCOUNT a
        WHERE a.CARD_ID = p_card FOR UPDATE;
      IF NOT FOUND THEN
        RETURN QUERY SELECT * FROM hotrow_hold_answer_v1(2::smallint, NULL, NULL);
        RETURN;
      END IF;
      SELECT * INTO h FROM P_HOLD x WHERE x.HOLD_ID = p_hold_id AND x.CARD_ID = p_card;
      IF NOT FOUND THEN
        RETURN QUERY SELECT * FROM hotrow_hold_answer_v1(13::smallint, NULL, NULL);
        RETURN;
      END IF;
      IF key_store IS NOT NULL AND key_store <> h.STORE_ID THEN
        RETURN QUERY SELECT * FROM hotrow_hold_answer_v1(9::smallint, key_store::bigint, p_hold_id);
        RETURN;
      END IF;
      IF p_key IS NOT NULL THEN
        SELECT * INTO k FROM P_IDEMPOTENCY i WHERE i.CARD_ID = p_card AND i.KEY = p_key;
        IF FOUND THEN
          IF k.FINGERPRINT <> p_fp OR k.HOLD_ID IS NULL THEN
            RETURN QUERY SELECT * FROM hotrow_hold_answer_v1(3::smallint, NULL, NULL);
            RETURN;
          END IF;
          IF p_key_id IS NOT NULL THEN
            PERFORM hotrow_store_key_touch_v1(p_key_id);
          END IF;
          RETURN QUERY SELECT * FROM hotrow_hold_answer_v1(4::smallint, NULL, k.HOLD_ID);
          RETURN;
        END IF;
      END IF;
      IF h.STATUS IN ('captured', 'voided') THEN
        RETURN QUERY SELECT * FROM hotrow_hold_answer_v1(14::smallint, NULL, p_hold_id);
        RETURN;
      END IF;
      t := GREATEST(clock_timestamp() AT TIME ZONE 'UTC', v_last + interval '1 microsecond',
                    v_hold + interval '1 microsecond');
      -- v0.14.0: settled first (hotrow_pay_v7), whatever this answers.
      SELECT * INTO b, t, settled, v_lots FROM hotrow_card_settle_v1(p_card, b, t);
      UPDATE P_HOLD x SET STATUS = 'expired', ENDED_TIME = x.EXPIRES_TIME
        WHERE x.CARD_ID = p_card AND x.STATUS = 'open' AND x.EXPIRES_TIME <= t;
      IF FOUND THEN  -- an expiry decided at t: the card's time moves on, whatever this answers
        UPDATE S_ACCOUNT SET HOLD_TIME = t WHERE CARD_ID = p_card;
      END IF;
      IF h.STATUS <> 'open' OR h.EXPIRES_TIME <= t THEN
        UPDATE S_ACCOUNT SET HOLD_TIME = t WHERE CARD_ID = p_card;
        RETURN QUERY SELECT * FROM hotrow_hold_answer_v1(15::smallint, NULL, p_hold_id);
        RETURN;
      END IF;
      IF p_capture THEN
        n := COALESCE(p_amount, h.AMOUNT);
        IF n < h.AMOUNT OR n > -1 THEN
          RETURN QUERY SELECT * FROM hotrow_hold_answer_v1(16::smallint, NULL, p_hold_id);
          RETURN;
        END IF;
        SELECT c.GRANT_ID, c.POINTS INTO credit_grant, credit FROM P_GRANT_CREDIT c
          JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID WHERE c.CARD_ID = p_card AND g.STATE = 'applied'
          ORDER BY c.GRANT_ID LIMIT 1;
        credit := COALESCE(credit, 0);
        SELECT COALESCE(SUM(-x.AMOUNT), 0) INTO held FROM P_HOLD x
          WHERE x.CARD_ID = p_card AND x.STATUS = 'open' AND x.EXPIRES_TIME > t;
        IF b + credit - (held + h.AMOUNT) + n < 0 THEN
          RETURN QUERY SELECT * FROM hotrow_hold_answer_v1(1::smallint, b + credit - (held + h.AMOUNT), p_hold_id);
          RETURN;
        END IF;
        rt := t;
        IF credit > 0 THEN
          DELETE FROM P_GRANT_CREDIT WHERE CARD_ID = p_card AND GRANT_ID = credit_grant;
          b := b + credit;
          INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND, ACTOR)
            VALUES (rt, p_card, 0, credit, b, 'grant', 'system');
          rt := rt + interval '1 microsecond';  -- after the settle's t: nothing comes due between
        END IF;
        UPDATE S_ACCOUNT SET BALANCE = b + n, LAST_UPDATE = rt, HOLD_TIME = t WHERE CARD_ID = p_card;
        INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND, ACTOR)
          VALUES (rt, p_card, h.STORE_ID, n, b + n, 'capture', p_actor)
          RETURNING TRANSACTION_ID INTO rid;
        UPDATE P_HOLD SET STATUS = 'captured', ENDED_TIME = t, CAPTURE_ID = rid, CAPTURED_AMOUNT = n
          WHERE HOLD_ID = p_hold_id;
        b := b + n;
        t := rt + interval '1 microsecond';
      ELSE
        UPDATE P_HOLD SET STATUS = 'voided', ENDED_TIME = t WHERE HOLD_ID = p_hold_id;
        UPDATE S_ACCOUNT SET HOLD_TIME = t WHERE CARD_ID = p_card;
      END IF;
      -- v0.14.0: what it reserved of lots, taken by the capture (in the
      -- lots' order) or released; released from a lot written out, it
      -- leaves now, after this write's row.
      IF v_lots IS NOT NULL THEN
        SELECT * INTO b2, t2 FROM hotrow_lots_release_v1(p_card, p_hold_id, CASE WHEN p_capture THEN -n ELSE 0 END,
                                                         rid, b, t);
        IF t2 > t THEN
          UPDATE S_ACCOUNT SET BALANCE = b2, LAST_UPDATE = t2 - interval '1 microsecond' WHERE CARD_ID = p_card;
        END IF;
      END IF;
      IF p_key IS NOT NULL THEN
        INSERT INTO P_IDEMPOTENCY (CARD_ID, KEY, FINGERPRINT, CREATED, REFUSED, PAYMENT_TIME, STORE_ID, AMOUNT,
                                   BALANCE, HOLD_ID)
          VALUES (p_card, p_key, p_fp, clock_timestamp() AT TIME ZONE 'UTC', false, t, h.STORE_ID, h.AMOUNT, 0,
                  p_hold_id);
      END IF;
      IF p_key_id IS NOT NULL THEN
        PERFORM hotrow_store_key_touch_v1(p_key_id);
      END IF;
      RETURN QUERY SELECT * FROM hotrow_hold_answer_v1(0::smallint, NULL, p_hold_id);
    END $$;
  )sql");
}

namespace {

#define HOTROW_HOLD_ANSWER                                                                                        \
  " AS (outcome smallint, o_extra bigint, h_id bigint, h_card bigint, h_store bigint, h_amount bigint, h_status " \
  "text, h_created_us bigint, h_expires_us bigint, h_ended_us bigint, h_capture bigint, h_captured bigint, "      \
  "h_actor text, r_time_us bigint, r_balance bigint, r_actor text)"
constexpr pg::NamedSql kCreateHold{
    "pointcard_hold_create",
    "SELECT * FROM hotrow_hold_create_v1($1, $2, $3, $4, $5, $6, $7, $8, $9)" HOTROW_HOLD_ANSWER};
constexpr pg::NamedSql kEndHold{
    "pointcard_hold_end", "SELECT * FROM hotrow_hold_end_v1($1, $2, $3, $4, $5, $6, $7, $8, $9)" HOTROW_HOLD_ANSWER};
#undef HOTROW_HOLD_ANSWER
// One statement, one snapshot: the card's existence and its page, and the
// card's time (the database's, never before its newest row or hold
// decision): an open hold past it is shown expired.
constexpr pg::NamedSql kSelectHolds{"pointcard_holds", R"(
  SELECT h.HOLD_ID, h.CARD_ID, h.STORE_ID, h.AMOUNT, h.STATUS, hotrow_us(h.CREATED_TIME), hotrow_us(h.EXPIRES_TIME),
         hotrow_us(h.ENDED_TIME), h.CAPTURE_ID, h.CAPTURED_AMOUNT, h.ACTOR,
         hotrow_us(GREATEST(clock_timestamp() AT TIME ZONE 'UTC', a.LAST_UPDATE + interval '1 microsecond',
                            a.HOLD_TIME + interval '1 microsecond'))
  FROM S_ACCOUNT a LEFT JOIN LATERAL (SELECT * FROM P_HOLD x WHERE x.CARD_ID = a.CARD_ID AND x.HOLD_ID < $2
                                      ORDER BY x.HOLD_ID DESC LIMIT $3) h ON true
  WHERE a.CARD_ID = $1 ORDER BY h.HOLD_ID DESC)"};

// A hold in the columns from `at` on (hold_answer's from 2, kSelectHolds'
// from 0).
Hold ReadHold(const pg::Rows& rows, int row, int at) {
  Hold h{.hold_id = rows.Int(row, at),
         .card_id = rows.Int(row, at + 1),
         .store_id = rows.Int(row, at + 2),
         .amount = rows.Int(row, at + 3),
         .status = std::string(rows.Text(row, at + 4)),
         .created_us = rows.Int(row, at + 5),
         .expires_us = rows.Int(row, at + 6),
         .actor = std::string(rows.Text(row, at + 10))};
  if (!rows.IsNull(row, at + 7)) h.ended_us = rows.Int(row, at + 7);
  if (!rows.IsNull(row, at + 8)) h.capture_id = rows.Int(row, at + 8);
  if (!rows.IsNull(row, at + 9)) h.captured_amount = rows.Int(row, at + 9);
  return h;
}

// The outcome columns' numbers (the functions' contract, written beside
// them).
enum class HoldResult : int64_t {
  kOk = 0,
  kNotAvailable = 1,
  kNoCard = 2,
  kMismatch = 3,
  kReplayed = 4,
  kClosed = 6,
  kNoStore = 7,
  kBadKey = 8,
  kKeyOfAnotherStore = 9,
  kNoHold = 13,
  kNotOpen = 14,
  kExpired = 15,
  kBadAmount = 16,
};

Result<HoldOutcome> ReadAnswer(const pg::Rows& rows, int64_t card_id, int64_t hold_id, int64_t store_id, int64_t amount,
                               const std::optional<std::string>& key, const char* function) {
  if (rows.empty()) return Status::Internal(std::string(function) + " answered no row");
  const auto outcome = static_cast<HoldResult>(rows.Int(0, 0));
  const bool has_hold = !rows.IsNull(0, 2);
  const int64_t extra = rows.IsNull(0, 1) ? 0 : rows.Int(0, 1);
  HoldOutcome out;
  if (has_hold) {
    out.hold = ReadHold(rows, 0, 2);
    if (!rows.IsNull(0, 13))
      out.row = HistoryRow{.payment_time_us = rows.Int(0, 13),
                           .card_id = out.hold.card_id,
                           .store_id = out.hold.store_id,
                           .amount = out.hold.captured_amount.value_or(0),
                           .balance = rows.Int(0, 14),
                           .transaction_id = out.hold.capture_id.value_or(0),
                           .kind = "capture",
                           .actor = std::string(rows.Text(0, 15))};
  }
  switch (outcome) {
    case HoldResult::kOk:
    case HoldResult::kReplayed:
      if (!has_hold) return Status::Internal(std::string(function) + " answered no hold");
      out.replayed = outcome == HoldResult::kReplayed;
      if (out.replayed) ShowExpiry(out.hold, NowUs());
      return out;
    case HoldResult::kNotAvailable:
      return NotAvailable(card_id, extra, amount != 0 ? amount : out.hold.amount,
                          hold_id == 0 ? "a hold" : "a capture");
    case HoldResult::kNoCard:
      return NoSuchCard(card_id);
    case HoldResult::kMismatch:
      return CardKeyMismatch(key.value_or(""));
    case HoldResult::kClosed:
      return CardIsClosed(card_id);
    case HoldResult::kNoStore:
      return NoSuchStore(store_id);
    case HoldResult::kBadKey:
      return BadStoreKey();
    case HoldResult::kKeyOfAnotherStore:
      return KeyOfAnotherStore(extra, has_hold ? out.hold.store_id : store_id);
    case HoldResult::kNoHold:
      return NoSuchHold(card_id, hold_id);
    case HoldResult::kNotOpen:
      return HoldNotOpen(hold_id, out.hold.status);
    case HoldResult::kExpired:
      return HoldExpired(hold_id, out.hold.expires_us);
    case HoldResult::kBadAmount:
      return CaptureTooLarge(hold_id, out.hold.amount);
  }
  return Status::Internal(std::string(function) + " answered outcome " + std::to_string(rows.Int(0, 0)));
}

}  // namespace

void PostgresPointCardStore::CreateHold(NewHold hold, std::string fingerprint,
                                        std::function<void(Result<HoldOutcome>)> done) {
  pool_.Submit([h = std::move(hold), fp = std::move(fingerprint), done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = RunSerializableRetried(
        **c, h.card_id, kCreateHold,
        {std::to_string(h.card_id), std::to_string(h.store_id), std::to_string(h.amount),
         std::to_string(h.expires_in_seconds), OptionalParam(h.idempotency_key), fp, h.actor,
         h.key ? pg::Param(h.key->key_id) : pg::Param(), h.key ? pg::Param(h.key->secret_sha256) : pg::Param()},
        /*retry_unique_race=*/true, Isolation::kCardLocked);
    if (!rows.ok()) return done(rows.status());
    done(ReadAnswer(*rows, h.card_id, 0, h.store_id, h.amount, h.idempotency_key, "hotrow_hold_create_v1"));
  });
}

void PostgresPointCardStore::EndHold(HoldAction action, std::string fingerprint,
                                     std::function<void(Result<HoldOutcome>)> done) {
  pool_.Submit([a = std::move(action), fp = std::move(fingerprint), done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = RunSerializableRetried(
        **c, a.card_id, kEndHold,
        {std::to_string(a.card_id), std::to_string(a.hold_id), a.capture ? "true" : "false",
         a.amount ? pg::Param(std::to_string(*a.amount)) : pg::Param(), OptionalParam(a.idempotency_key), fp, a.actor,
         a.key ? pg::Param(a.key->key_id) : pg::Param(), a.key ? pg::Param(a.key->secret_sha256) : pg::Param()},
        /*retry_unique_race=*/true, Isolation::kCardLocked);
    if (!rows.ok()) return done(rows.status());
    done(ReadAnswer(*rows, a.card_id, a.hold_id, 0, a.amount.value_or(0), a.idempotency_key, "hotrow_hold_end_v1"));
  });
}

void PostgresPointCardStore::ListHolds(int64_t card_id, int64_t limit, std::optional<int64_t> before_id,
                                       std::function<void(Result<HoldPage>)> done) {
  pool_.Submit([card_id, limit, before_id, done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = (*c)->Query(kSelectHolds, {std::to_string(card_id), std::to_string(before_id.value_or(INT64_MAX)),
                                           std::to_string(limit + 1)});
    if (!rows.ok()) return done(rows.status());
    if (rows->empty()) return done(NoSuchCard(card_id));
    HoldPage page;
    for (int i = 0; i < rows->size(); ++i) {
      if (rows->IsNull(i, 0)) continue;  // a card without holds
      page.holds.push_back(ReadHold(*rows, i, 0));
      ShowExpiry(page.holds.back(), rows->Int(i, 11));
    }
    if (static_cast<int64_t>(page.holds.size()) > limit) {
      page.holds.pop_back();
      page.next_before_id = page.holds.back().hold_id;
    }
    done(std::move(page));
  });
}

}  // namespace hotrow::pointcard
