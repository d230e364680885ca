// The online point use's functions on PostgreSQL: hotrow_pay_v7, which
// this release calls, and the versions instances of earlier releases still
// call during a rolling upgrade (each a wrapper of a later one; v2,
// 0.1.0-0.5.x's, too since 0.14.0), (re)created at every start after the schema's steps
// (postgres_schema.cc). Why the rule lives in PL/pgSQL as well as in C++:
// postgres_store.cc, above PayResult.
#include "pointcard/postgres_store.h"

namespace hotrow::pointcard {

Status CreatePostgresPaymentFunctions(db::pg::Connection& conn) {
  return conn.Exec(R"sql(
    -- The online point use of v0.2.0-v0.5.0, kept for instances of those
    -- releases still running beside this one during an upgrade. With the
    -- row's time and balance. outcome is a small integer, the contract
    -- with PayResult in postgres_store.cc:
    -- 0 ok, 1 refused, 2 no card, 3 key mismatch, 4 replayed, 5 replayed
    -- refusal.
    -- (On every function here) enable_seqscan = off: SSI locks what a scan reads at the scan's
    -- granularity, and a sequential scan (the planner's choice on a small
    -- table) locks the whole relation, so every other point use's write
    -- becomes a read/write conflict. Index lookups lock the tuple and its
    -- B-tree page. Measured with pgbench, 4 clients on 200 cards: 72% of
    -- point uses failed with 40001 before, 1% after.
    CREATE OR REPLACE FUNCTION hotrow_pay_v2(p_card bigint, p_store int, p_amount bigint, p_key text, p_fp text)
    RETURNS TABLE (outcome smallint, time_us bigint, new_balance bigint) LANGUAGE plpgsql AS $$
    BEGIN
      -- v0.14.0: v3's (so v7's: holds, lots), as every later release's is;
      -- PL/pgSQL, so that it may be created before v3.
      RETURN QUERY SELECT * FROM hotrow_pay_v3(p_card, p_store, p_amount, p_key, p_fp);
    END $$;
    -- The point use (v0.8.0): the card's row locked first (every writer of
    -- a card does, the fold too), then an applied grant's credit not folded
    -- yet is folded here -- the grant's row, then this one, each at its own
    -- time -- so no balance is ever written with credit still staged. At
    -- most one grant is applied and not folded at a time (the apply waits
    -- for the previous fold). The row keeps its actor, reference and
    -- reason; the answer has its TRANSACTION_ID (a replay's from the row
    -- the key's first request wrote, found by its primary key). Outcomes as
    -- hotrow_pay_v2's, and 6: the card is closed (v0.9.0; nothing written,
    -- a key's earlier answer still replays), 7: no such store (checked
    -- here, first, since stores are made while serving: one another
    -- instance made counts at once). v0.10.0 (v6): the store key, when one
    -- came (p_key_id, p_key_sha: hex of SHA-256 of its secret), checked
    -- first, in this transaction: 8, unknown, revoked or not this secret;
    -- 9, the key is another store's (its store in new_balance). A used
    -- key's LAST_USED_TIME moves on, at most once a minute, when the answer
    -- commits something (0, 1, 4, 5), and the key stays held until this
    -- commits (hotrow_store_key_check_v1). A payment refused for its key
    -- does not lock the card's row; every other outcome is as v5's.
    -- v0.12.0 (v7): holds. A payment takes from what is available, the
    -- balance less the card's open holds unexpired at its time, which is
    -- after the card's newest hold decision (S_ACCOUNT.HOLD_TIME) as well as
    -- its newest row; a refusal's new_balance is what was available. A
    -- card that never had a hold reads no P_HOLD. A charge is never
    -- refused. v6 is its wrapper, so a 0.10.0 or 0.11.0 instance in a
    -- rolling upgrade respects holds too.
    -- v0.14.0, same signature (instances of 0.12.0 and 0.13.0 still
    -- running call it too): a card with lots or expiring credit is settled
    -- first, and a payment takes from its lots, soonest-expiring first.
    CREATE OR REPLACE FUNCTION hotrow_pay_v7(p_card bigint, p_store int, p_amount bigint, p_key text, p_fp text,
                                             p_actor text, p_reference text, p_reason text, p_key_id text,
                                             p_key_sha text)
    RETURNS TABLE (outcome smallint, time_us bigint, new_balance bigint, transaction_id bigint, actor text,
                   reference text, reason text) LANGUAGE plpgsql
    SET enable_seqscan = off SET jit = off AS $$
    DECLARE
      key_store int;
      k P_IDEMPOTENCY%ROWTYPE;
      h H_TRANSACTION%ROWTYPE;
      b bigint;
      v_last timestamp;
      t timestamp;
      credit bigint;
      credit_grant bigint;
      id bigint;
      st text;
      v_hold timestamp;
      held bigint := 0;
      v_lots timestamp;
      credit_expires timestamp;
      settled boolean;
    BEGIN
      IF p_key_id IS NOT NULL THEN
        key_store := hotrow_store_key_check_v1(p_key_id, p_key_sha);
        IF key_store = 0 THEN
          RETURN QUERY SELECT 8::smallint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::text, NULL::text,
                              NULL::text;
          RETURN;
        END IF;
        IF key_store <> p_store THEN
          RETURN QUERY SELECT 9::smallint, NULL::bigint, key_store::bigint, NULL::bigint, NULL::text, NULL::text,
                              NULL::text;
          RETURN;
        END IF;
      END IF;
      IF NOT EXISTS (SELECT 1 FROM M_STORE m WHERE m.STORE_ID = p_store) THEN
        RETURN QUERY SELECT 7::smallint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::text, NULL::text, NULL::text;
        RETURN;
      END IF;
      IF p_key IS NOT NULL THEN
        SELECT * INTO k FROM P_IDEMPOTENCY WHERE CARD_ID = p_card AND KEY = p_key;
        IF FOUND THEN
          IF k.FINGERPRINT <> p_fp THEN
            RETURN QUERY SELECT 3::smallint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::text, NULL::text,
                                NULL::text;
          ELSIF k.REFUSED THEN
            RETURN QUERY SELECT 5::smallint, NULL::bigint, k.BALANCE, NULL::bigint, NULL::text, NULL::text,
                                NULL::text;
          ELSE
            SELECT * INTO h FROM H_TRANSACTION x
              WHERE x.PAYMENT_TIME = k.PAYMENT_TIME AND x.CARD_ID = p_card AND x.STORE_ID = k.STORE_ID;
            RETURN QUERY SELECT 4::smallint, hotrow_us(k.PAYMENT_TIME), k.BALANCE, h.TRANSACTION_ID, h.ACTOR,
                                h.REFERENCE, h.REASON;
          END IF;
          IF p_key_id IS NOT NULL AND k.FINGERPRINT = p_fp THEN
            PERFORM hotrow_store_key_touch_v1(p_key_id);  -- what commits counts as the key's use
          END IF;
          RETURN;
        END IF;
      END IF;
      SELECT a.BALANCE, a.LAST_UPDATE, a.STATUS, a.HOLD_TIME, a.LOT_TIME INTO b, v_last, st, v_hold, v_lots
        FROM S_ACCOUNT a WHERE a.CARD_ID = p_card FOR UPDATE;
      IF NOT FOUND THEN
        RETURN QUERY SELECT 2::smallint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::text, NULL::text, NULL::text;
        RETURN;
      END IF;
      IF st <> 'active' THEN
        RETURN QUERY SELECT 6::smallint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::text, NULL::text, NULL::text;
        RETURN;
      END IF;
      SELECT c.GRANT_ID, c.POINTS, g.EXPIRES_TIME INTO credit_grant, credit, credit_expires FROM P_GRANT_CREDIT c
        JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID WHERE c.CARD_ID = p_card AND g.STATE = 'applied'
        ORDER BY c.GRANT_ID LIMIT 1;
      credit := COALESCE(credit, 0);
      -- Strictly increasing per card, whatever the clock does.
      t := GREATEST(clock_timestamp() AT TIME ZONE 'UTC', v_last + interval '1 microsecond',
                    v_hold + interval '1 microsecond');
      -- v0.14.0: a card with lots, or expiring credit (its lot to be), is
      -- settled first (postgres_lots.cc): what settling writes commits
      -- whatever this answers.
      IF v_lots IS NOT NULL OR credit_expires IS NOT NULL THEN
        SELECT * INTO b, t, settled, v_lots FROM hotrow_card_settle_v1(p_card, b, t);
        IF credit_expires IS NOT NULL THEN  -- folded: a lot now
          credit := 0;
        END IF;
      END IF;
      IF p_amount < 0 AND v_hold IS NOT NULL THEN
        SELECT COALESCE(SUM(-x.AMOUNT), 0) INTO held FROM P_HOLD x
          WHERE x.CARD_ID = p_card AND x.STATUS = 'open' AND x.EXPIRES_TIME > t;
      END IF;
      IF p_amount < 0 AND b + credit - held + p_amount < 0 THEN
        IF v_hold IS NOT NULL THEN  -- it decided which holds had expired at t: the card's time moves on
          UPDATE S_ACCOUNT SET HOLD_TIME = t WHERE CARD_ID = p_card;
        END IF;
        IF p_key IS NOT NULL THEN
          INSERT INTO P_IDEMPOTENCY VALUES (p_card, p_key, p_fp, clock_timestamp() AT TIME ZONE 'UTC', true, NULL,
                                            p_store, p_amount, b + credit - held);
        END IF;
        IF p_key_id IS NOT NULL THEN
          PERFORM hotrow_store_key_touch_v1(p_key_id);
        END IF;
        RETURN QUERY SELECT 1::smallint, NULL::bigint, b + credit - held, NULL::bigint, NULL::text, NULL::text,
                            NULL::text;
        RETURN;
      END IF;
      IF credit > 0 THEN
        DELETE FROM P_GRANT_CREDIT WHERE CARD_ID = p_card AND GRANT_ID = credit_grant;
        b := b + credit;
        INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND, ACTOR)
          VALUES (t, p_card, 0, credit, b, 'grant', 'system');
        t := t + interval '1 microsecond';  -- after the settle's t: nothing comes due between
      END IF;
      UPDATE S_ACCOUNT SET BALANCE = b + p_amount, LAST_UPDATE = t WHERE CARD_ID = p_card;
      INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND, ACTOR, REFERENCE, REASON)
        VALUES (t, p_card, p_store, p_amount, b + p_amount, CASE WHEN p_amount > 0 THEN 'charge' ELSE 'payment' END,
                p_actor, p_reference, p_reason)
        RETURNING H_TRANSACTION.TRANSACTION_ID INTO id;
      IF v_lots IS NOT NULL AND p_amount < 0 THEN  -- from its lots first, soonest-expiring first
        PERFORM hotrow_lots_take_v1(p_card, -p_amount, id, NULL, NULL);
      END IF;
      IF p_key IS NOT NULL THEN
        INSERT INTO P_IDEMPOTENCY VALUES (p_card, p_key, p_fp, clock_timestamp() AT TIME ZONE 'UTC', false, t,
                                          p_store, p_amount, b + p_amount);
      END IF;
      IF p_key_id IS NOT NULL THEN
        PERFORM hotrow_store_key_touch_v1(p_key_id);
      END IF;
      RETURN QUERY SELECT 0::smallint, hotrow_us(t), b + p_amount, id, p_actor, p_reference, p_reason;
    END $$;
    -- v0.10.0-v0.11.0's point use, kept for instances of those releases
    -- still running beside this one: v7, so they respect holds.
    CREATE OR REPLACE FUNCTION hotrow_pay_v6(p_card bigint, p_store int, p_amount bigint, p_key text, p_fp text,
                                             p_actor text, p_reference text, p_reason text, p_key_id text,
                                             p_key_sha text)
    RETURNS TABLE (outcome smallint, time_us bigint, new_balance bigint, transaction_id bigint, actor text,
                   reference text, reason text) LANGUAGE sql AS $$
      SELECT * FROM hotrow_pay_v7(p_card, p_store, p_amount, p_key, p_fp, p_actor, p_reference, p_reason, p_key_id,
                                  p_key_sha) $$;
    -- v0.9.0's point use, kept for instances of that release still running
    -- beside this one: no store key.
    CREATE OR REPLACE FUNCTION hotrow_pay_v5(p_card bigint, p_store int, p_amount bigint, p_key text, p_fp text,
                                             p_actor text, p_reference text, p_reason text)
    RETURNS TABLE (outcome smallint, time_us bigint, new_balance bigint, transaction_id bigint, actor text,
                   reference text, reason text) LANGUAGE sql AS $$
      SELECT * FROM hotrow_pay_v6(p_card, p_store, p_amount, p_key, p_fp, p_actor, p_reference, p_reason, NULL,
                                  NULL) $$;
    -- v0.8.0's point use, kept for instances of that release still running
    -- beside this one: v0.9.0's without the closed outcome, which it does
    -- not know (an error instead), nor a missing store (it checked its
    -- stores in memory before calling).
    CREATE OR REPLACE FUNCTION hotrow_pay_v4(p_card bigint, p_store int, p_amount bigint, p_key text, p_fp text,
                                             p_actor text, p_reference text, p_reason text)
    RETURNS TABLE (outcome smallint, time_us bigint, new_balance bigint, transaction_id bigint, actor text,
                   reference text, reason text) LANGUAGE sql AS $$
      SELECT CASE v.outcome WHEN 6 THEN hotrow_card_closed(p_card) WHEN 7 THEN hotrow_no_store(p_store)
                  ELSE v.outcome END, v.time_us, v.new_balance,
             v.transaction_id, v.actor, v.reference, v.reason
      FROM hotrow_pay_v5(p_card, p_store, p_amount, p_key, p_fp, p_actor, p_reference, p_reason) v $$;
    -- v0.6.0's point use, kept for instances of 0.6.0-0.7.x still running
    -- beside this one: v0.8.0's with no actor, reference or reason (the
    -- KIND trigger makes the row's actor anonymous, as the migration did
    -- for the rows they wrote before). Outcomes as hotrow_pay_v2's.
    CREATE OR REPLACE FUNCTION hotrow_pay_v3(p_card bigint, p_store int, p_amount bigint, p_key text, p_fp text)
    RETURNS TABLE (outcome smallint, time_us bigint, new_balance bigint) LANGUAGE sql AS $$
      SELECT v.outcome, v.time_us, v.new_balance FROM hotrow_pay_v4(p_card, p_store, p_amount, p_key, p_fp, NULL, NULL,
                                                                    NULL) v $$;
    -- v0.1.0's function, its outcome as text, kept for instances of that
    -- release still running beside this one during an upgrade.
    CREATE OR REPLACE FUNCTION hotrow_pay(p_card bigint, p_store int, p_amount bigint, p_key text, p_fp text)
    RETURNS TABLE (outcome text, time_us bigint, new_balance bigint) LANGUAGE sql AS $$
      SELECT (ARRAY['ok', 'refused', 'no-card', 'mismatch', 'replayed', 'replayed-refused'])[v.outcome + 1],
             v.time_us, v.new_balance
      FROM hotrow_pay_v2(p_card, p_store, p_amount, p_key, p_fp) v $$;
  )sql");
}

}  // namespace hotrow::pointcard
