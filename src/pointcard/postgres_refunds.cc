// Refunds on PostgreSQL (store.h, PointCardStore::Refund): one function,
// hotrow_refund_v1, in one transaction behind the card's advisory lock
// (RunSerializable), so two refunds of one payment, on any instances, are
// decided one after the other. Since 0.14.0 at READ COMMITTED
// (Isolation::kCardLocked, as holds): everything it reads is the card's
// own (its rows, keys, lots and their uses, its credit consumed under its
// row lock), immutable or locked on its own (a store key), so the card's
// lock makes it serializable by two-phase locking; under SSI a refund's
// reads of lot uses shared index pages with other cards' payments, and
// 14.5% of refunds on cards with lots answered 503 (docs/pointcard.md). Why the rule
// lives in PL/pgSQL as well as in C++ (sqlite_refunds.cc): postgres_store.cc,
// above PayResult.
#include "pointcard/postgres_store.h"

namespace hotrow::pointcard {

namespace pg = db::pg;

Status CreatePostgresRefundFunctions(pg::Connection& conn) {
  return conn.Exec(R"sql(
    -- A refund (v0.11.0). outcome: 0 refunded, 2 no such card, 3 key
    -- mismatch, 4 replayed, 8 bad store key, 9 the key is another store's
    -- (o_store: the key's, o_amount: the row's store), 10 the card has no
    -- row with that id, 11 not a payment (o_kind: what it is), 12 more than
    -- is left to refund (o_balance: what is left, o_amount: what was asked).
    -- Then the refund row as written (a replay's as the history holds it).
    -- The card's row FOR UPDATE before the sum of earlier refunds, and its
    -- pending grant credit folded first, as hotrow_pay_v6 does. v0.14.0,
    -- same signature: the card settled first, and the lots the original
    -- took from given back (postgres_lots.cc).
    CREATE OR REPLACE FUNCTION hotrow_refund_v1(p_card bigint, p_tx bigint, p_amount bigint, p_key text, p_fp text,
                                                p_actor text, p_reference text, p_reason text, p_key_id text,
                                                p_key_sha text)
    RETURNS TABLE (outcome smallint, o_time_us bigint, o_store bigint, o_amount bigint, o_balance bigint,
                   o_id bigint, o_kind text, o_actor text, o_reference text, o_reason text)
    LANGUAGE plpgsql SET enable_seqscan = off SET jit = off AS $$
    DECLARE
      key_store int;
      k P_IDEMPOTENCY%ROWTYPE;
      h H_TRANSACTION%ROWTYPE;
      orig H_TRANSACTION%ROWTYPE;
      b bigint;
      v_last timestamp;
      t timestamp;
      credit bigint;
      credit_grant bigint;
      remaining bigint;
      n bigint;
      v_hold timestamp;
      v_lots timestamp;
      credit_expires timestamp;
      settled boolean;
      b2 bigint;
      t2 timestamp;
    BEGIN
      IF p_key_id IS NOT NULL THEN
        key_store := hotrow_store_key_check_v1(p_key_id, p_key_sha);
        IF key_store = 0 THEN
          RETURN QUERY SELECT 8::smallint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
                              NULL::text, NULL::text, NULL::text, NULL::text;
          RETURN;
        END IF;
      END IF;
      SELECT a.BALANCE, a.LAST_UPDATE, a.HOLD_TIME, a.LOT_TIME INTO b, v_last, v_hold, v_lots FROM S_ACCOUNT a
        WHERE a.CARD_ID = p_card FOR UPDATE;
      IF NOT FOUND THEN
        RETURN QUERY SELECT 2::smallint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
                            NULL::text, NULL::text, NULL::text, NULL::text;
        RETURN;
      END IF;
      SELECT * INTO orig FROM H_TRANSACTION x WHERE x.TRANSACTION_ID = p_tx AND x.CARD_ID = p_card;
      IF NOT FOUND THEN
        RETURN QUERY SELECT 10::smallint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
                            NULL::text, NULL::text, NULL::text, NULL::text;
        RETURN;
      END IF;
      -- Another store's row is that store's business (9) before its kind
      -- (11); a grant's row is no store's, so its kind answers for any key.
      IF key_store IS NOT NULL AND orig.STORE_ID <> 0 AND key_store <> orig.STORE_ID THEN
        RETURN QUERY SELECT 9::smallint, NULL::bigint, key_store::bigint, orig.STORE_ID::bigint, NULL::bigint,
                            NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::text;
        RETURN;
      END IF;
      IF orig.KIND NOT IN ('payment', 'capture') THEN
        RETURN QUERY SELECT 11::smallint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
                            orig.KIND, NULL::text, NULL::text, NULL::text;
        RETURN;
      END IF;
      SELECT * INTO k FROM P_IDEMPOTENCY i WHERE i.CARD_ID = p_card AND i.KEY = p_key;
      IF FOUND THEN
        IF k.FINGERPRINT <> p_fp THEN
          RETURN QUERY SELECT 3::smallint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
                              NULL::text, NULL::text, NULL::text, NULL::text;
          RETURN;
        END IF;
        SELECT * INTO h FROM H_TRANSACTION x
          WHERE x.PAYMENT_TIME = k.PAYMENT_TIME AND x.CARD_ID = p_card AND x.STORE_ID = k.STORE_ID;
        IF p_key_id IS NOT NULL THEN
          PERFORM hotrow_store_key_touch_v1(p_key_id);
        END IF;
        RETURN QUERY SELECT 4::smallint, hotrow_us(h.PAYMENT_TIME), h.STORE_ID::bigint, h.AMOUNT, h.BALANCE,
                            h.TRANSACTION_ID, h.KIND, h.ACTOR, h.REFERENCE, h.REASON;
        RETURN;
      END IF;
      SELECT -orig.AMOUNT - COALESCE(SUM(x.AMOUNT), 0) INTO remaining FROM H_TRANSACTION x
        WHERE x.CARD_ID = p_card AND x.PAYMENT_TIME > orig.PAYMENT_TIME AND x.REFUND_OF = p_tx;
      n := COALESCE(p_amount, remaining);
      IF n > remaining OR n <= 0 THEN
        RETURN QUERY SELECT 12::smallint, NULL::bigint, NULL::bigint, n, remaining, NULL::bigint, NULL::text,
                            NULL::text, NULL::text, NULL::text;
        RETURN;
      END IF;
      SELECT c.GRANT_ID, c.POINTS, g.EXPIRES_TIME INTO credit_grant, credit, credit_expires FROM P_GRANT_CREDIT c
        JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID WHERE c.CARD_ID = p_card AND g.STATE = 'applied'
        ORDER BY c.GRANT_ID LIMIT 1;
      -- v0.14.0: after the card's newest hold decision too, and settled
      -- first (hotrow_pay_v7).
      t := GREATEST(clock_timestamp() AT TIME ZONE 'UTC', v_last + interval '1 microsecond',
                    v_hold + interval '1 microsecond');
      IF v_lots IS NOT NULL OR credit_expires IS NOT NULL THEN
        SELECT * INTO b, t, settled, v_lots FROM hotrow_card_settle_v1(p_card, b, t);
        IF credit_expires IS NOT NULL THEN  -- folded: a lot now
          credit := 0;
        END IF;
      END IF;
      IF COALESCE(credit, 0) > 0 THEN
        DELETE FROM P_GRANT_CREDIT WHERE CARD_ID = p_card AND GRANT_ID = credit_grant;
        b := b + credit;
        INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND, ACTOR)
          VALUES (t, p_card, 0, credit, b, 'grant', 'system');
        t := t + interval '1 microsecond';  -- after the settle's t: nothing comes due between
      END IF;
      UPDATE S_ACCOUNT SET BALANCE = b + n, LAST_UPDATE = t WHERE CARD_ID = p_card;
      INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND, ACTOR, REFERENCE, REASON,
                                 REFUND_OF)
        VALUES (t, p_card, orig.STORE_ID, n, b + n, 'refund', p_actor, p_reference, p_reason, p_tx)
        RETURNING * INTO h;
      -- v0.14.0: given back to the lots the original took from, in
      -- reverse; to a lot written out already, it leaves again now, after
      -- this row.
      IF v_lots IS NOT NULL THEN
        SELECT * INTO b2, t2 FROM hotrow_lots_restore_v1(p_card, p_tx, orig.AMOUNT, -orig.AMOUNT - remaining, n,
                                                         h.TRANSACTION_ID, b + n, t + interval '1 microsecond');
        IF t2 > t + interval '1 microsecond' THEN
          UPDATE S_ACCOUNT SET BALANCE = b2, LAST_UPDATE = t2 - interval '1 microsecond' WHERE CARD_ID = p_card;
        END IF;
      END IF;
      INSERT INTO P_IDEMPOTENCY VALUES (p_card, p_key, p_fp, clock_timestamp() AT TIME ZONE 'UTC', false, t,
                                        orig.STORE_ID, n, b + n);
      IF p_key_id IS NOT NULL THEN
        PERFORM hotrow_store_key_touch_v1(p_key_id);
      END IF;
      RETURN QUERY SELECT 0::smallint, hotrow_us(t), orig.STORE_ID::bigint, n, b + n, h.TRANSACTION_ID, h.KIND,
                          h.ACTOR, h.REFERENCE, h.REASON;
    END $$;
  )sql");
}

namespace {

constexpr pg::NamedSql kRefund{"pointcard_refund",
                               "SELECT * FROM hotrow_refund_v1($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"};

// hotrow_refund_v1's outcome column (its contract, written beside it).
enum class RefundResult : int64_t {
  kOk = 0,
  kNoCard = 2,
  kMismatch = 3,
  kReplayed = 4,
  kBadKey = 8,
  kKeyOfAnotherStore = 9,
  kNoRow = 10,
  kNotRefundable = 11,
  kExceeds = 12,
};

Result<PaymentOutcome> ReadRefund(const pg::Rows& rows, const RefundRequest& r) {
  switch (static_cast<RefundResult>(rows.Int(0, 0))) {
    case RefundResult::kOk:
    case RefundResult::kReplayed:
      break;
    case RefundResult::kNoCard:
      return NoSuchCard(r.card_id);
    case RefundResult::kMismatch:
      return CardKeyMismatch(r.idempotency_key);
    case RefundResult::kBadKey:
      return BadStoreKey();
    case RefundResult::kKeyOfAnotherStore:
      return KeyOfAnotherStore(rows.Int(0, 2), rows.Int(0, 3));
    case RefundResult::kNoRow:
      return NoSuchTransaction(r.card_id, r.transaction_id);
    case RefundResult::kNotRefundable:
      return NotRefundable(r.transaction_id, rows.Text(0, 6));
    case RefundResult::kExceeds:
      return RefundExceedsOriginal(r.transaction_id, rows.Int(0, 4), rows.Int(0, 3));
    default:
      return Status::Internal("hotrow_refund_v1 answered outcome " + std::to_string(rows.Int(0, 0)));
  }
  if (rows.IsNull(0, 5))  // history is append-only: only a hand edit gets here
    return Status::Internal("the history row of Idempotency-Key '" + r.idempotency_key + "' on card " +
                            std::to_string(r.card_id) + " is missing");
  PaymentOutcome out;
  out.replayed = static_cast<RefundResult>(rows.Int(0, 0)) == RefundResult::kReplayed;
  out.row = {.payment_time_us = rows.Int(0, 1),
             .card_id = r.card_id,
             .store_id = rows.Int(0, 2),
             .amount = rows.Int(0, 3),
             .balance = rows.Int(0, 4),
             .transaction_id = rows.Int(0, 5),
             .kind = std::string(rows.Text(0, 6)),
             .actor = std::string(rows.Text(0, 7)),
             .refund_of = r.transaction_id};
  if (!rows.IsNull(0, 8)) out.row.reference = std::string(rows.Text(0, 8));
  if (!rows.IsNull(0, 9)) out.row.reason = std::string(rows.Text(0, 9));
  return out;
}

}  // namespace

void PostgresPointCardStore::Refund(RefundRequest refund, std::string fingerprint,
                                    StoreCallback<Result<PaymentOutcome>> done) {
  pool_.Submit([r = std::move(refund), fp = std::move(fingerprint), done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = RunSerializableRetried(
        **c, r.card_id, kRefund,
        {std::to_string(r.card_id), std::to_string(r.transaction_id),
         r.amount ? pg::Param(std::to_string(*r.amount)) : pg::Param(), r.idempotency_key, fp, r.actor,
         OptionalParam(r.reference), OptionalParam(r.reason), r.key ? pg::Param(r.key->key_id) : pg::Param(),
         r.key ? pg::Param(r.key->secret_sha256) : pg::Param()},
        /*retry_unique_race=*/true, Isolation::kCardLocked);
    if (!rows.ok()) return done(rows.status());
    done(ReadRefund(*rows, r));
  });
}

}  // namespace hotrow::pointcard
