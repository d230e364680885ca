// Expiring lots on PostgreSQL (model.h, Lot; docs/pointcard.md, "Expiring
// lots"): the rules of sqlite_lots.cc in PL/pgSQL, called by every write of
// a card (postgres_pay_sql.cc, postgres_holds.cc, postgres_refunds.cc)
// under the card's row lock, and by the sweep, which any instance's folder
// runs every second. Only credit that expires is a lot (P_LOT); the rest of
// a balance never expires and is taken last. A card that never had a lot
// (S_ACCOUNT.LOT_TIME NULL) reads no P_LOT.
//
// Plans: the functions a SERIALIZABLE write calls read the card's lots by
// index only (no bitmap, hash or merge join; the correctness review saw a
// bitmap scan of all of P_LOT on a small table): SSI locks what a scan
// reads, and a scan of other cards' lots makes their writes conflicts.
//
// Times: a card's rows each have their own microsecond. The functions
// below take `t`, the time of the card's next row, and hand it back moved
// past every row they wrote; b is the card's balance as written so far.
#include <algorithm>

#include "ops/log.h"
#include "pointcard/postgres_store.h"

namespace hotrow::pointcard {

namespace pg = db::pg;

Status CreatePostgresLotFunctions(pg::Connection& conn) {
  return conn.Exec(R"sql(
    -- What card p_card's lots due at p_t have lost: all that open holds
    -- unexpired at p_t do not keep, written out or not (v0.14.0). 0 for a
    -- card that never had a lot (p_lot_time NULL), without reading P_LOT.
    -- Two parts, neither reading the card's written-out history: the lots
    -- due and not written out yet (P_LOT_OPEN) less what open unexpired
    -- holds keep of them; and of lots written out, what holds past their
    -- expiry still keep (all a written-out lot has left is reserved: its
    -- loss is what its holds no longer keep), through the card's open holds.
    CREATE OR REPLACE FUNCTION hotrow_lots_due_v1(p_card bigint, p_lot_time timestamp, p_t timestamp)
    RETURNS bigint LANGUAGE sql STABLE AS $$
      SELECT CASE WHEN p_lot_time IS NULL THEN 0 ELSE
        COALESCE((SELECT SUM(l.REMAINING - (SELECT COALESCE(SUM(r.AMOUNT), 0) FROM P_LOT_HOLD r
                                            JOIN P_HOLD h ON h.HOLD_ID = r.HOLD_ID
                                            WHERE r.LOT_ID = l.LOT_ID AND h.STATUS = 'open' AND h.EXPIRES_TIME > p_t))
                  FROM P_LOT l WHERE l.CARD_ID = p_card AND l.EXPIRED_TIME IS NULL AND l.REMAINING > 0
                    AND l.EXPIRES_TIME <= p_t), 0)::bigint
        + COALESCE((SELECT SUM(r.AMOUNT) FROM P_HOLD h JOIN P_LOT_HOLD r ON r.HOLD_ID = h.HOLD_ID
                    JOIN P_LOT l ON l.LOT_ID = r.LOT_ID
                    WHERE h.CARD_ID = p_card AND h.STATUS = 'open' AND h.EXPIRES_TIME <= p_t
                      AND l.EXPIRED_TIME IS NOT NULL), 0)::bigint
      END $$;

    -- p_points of lot p_lot_id leave card p_card in one 'expiry' row at t
    -- (v0.14.0), recorded as the lot's use; the lot's first expiry row is
    -- its EXPIRY_ID.
    CREATE OR REPLACE FUNCTION hotrow_lot_leave_v1(p_card bigint, p_lot_id bigint, p_points bigint, INOUT b bigint,
                                                   INOUT t timestamp)
    LANGUAGE plpgsql
    SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off AS $$
    DECLARE
      id bigint;
    BEGIN
      b := b - p_points;
      INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND, ACTOR)
        VALUES (t, p_card, 0, -p_points, b, 'expiry', 'system') RETURNING TRANSACTION_ID INTO id;
      INSERT INTO P_LOT_USE (TRANSACTION_ID, LOT_ID, AMOUNT) VALUES (id, p_lot_id, -p_points);
      UPDATE P_LOT SET REMAINING = REMAINING - p_points, EXPIRY_ID = COALESCE(EXPIRY_ID, id) WHERE LOT_ID = p_lot_id;
      t := t + interval '1 microsecond';
    END $$;

    -- Ends hold p_hold's reservations (v0.14.0): a capture (p_tx, its row)
    -- takes p_taken from what the hold reserved, in the lots' order (the
    -- rest of its amount is never-expiring); what is released from a lot
    -- written out already leaves the card now.
    CREATE OR REPLACE FUNCTION hotrow_lots_release_v1(p_card bigint, p_hold bigint, p_taken bigint, p_tx bigint,
                                                      INOUT b bigint, INOUT t timestamp)
    LANGUAGE plpgsql
    SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off AS $$
    DECLARE
      r record;
      take bigint;
    BEGIN
      FOR r IN SELECT x.LOT_ID, x.AMOUNT, l.EXPIRED_TIME IS NOT NULL AS expired FROM P_LOT_HOLD x
                 JOIN P_LOT l ON l.LOT_ID = x.LOT_ID WHERE x.HOLD_ID = p_hold ORDER BY l.EXPIRES_TIME, l.LOT_ID LOOP
        take := LEAST(p_taken, r.AMOUNT);
        p_taken := p_taken - take;
        UPDATE P_LOT SET REMAINING = REMAINING - take, RESERVED = RESERVED - r.AMOUNT WHERE LOT_ID = r.LOT_ID;
        IF take > 0 THEN
          INSERT INTO P_LOT_USE (TRANSACTION_ID, LOT_ID, AMOUNT) VALUES (p_tx, r.LOT_ID, -take);
        END IF;
        IF r.expired AND r.AMOUNT > take THEN
          SELECT * INTO b, t FROM hotrow_lot_leave_v1(p_card, r.LOT_ID, r.AMOUNT - take, b, t);
        END IF;
      END LOOP;
      DELETE FROM P_LOT_HOLD WHERE HOLD_ID = p_hold;
    END $$;

    -- p_points from the card's free lot points (REMAINING - RESERVED; the
    -- card settled, so none is due), soonest-expiring first (v0.14.0): a
    -- payment's or capture's take (p_tx, its row), or a new hold's
    -- reservation (p_hold, expiring at p_expires). The rest is
    -- never-expiring.
    CREATE OR REPLACE FUNCTION hotrow_lots_take_v1(p_card bigint, p_points bigint, p_tx bigint, p_hold bigint,
                                                   p_expires timestamp)
    RETURNS void LANGUAGE plpgsql
    SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off AS $$
    DECLARE
      r record;
      n bigint;
    BEGIN
      FOR r IN SELECT l.LOT_ID, l.REMAINING - l.RESERVED AS free FROM P_LOT l
                 WHERE l.CARD_ID = p_card AND l.REMAINING > 0 AND l.REMAINING > l.RESERVED AND l.EXPIRED_TIME IS NULL
                 ORDER BY l.EXPIRES_TIME, l.LOT_ID LOOP
        EXIT WHEN p_points <= 0;
        n := LEAST(p_points, r.free);
        p_points := p_points - n;
        IF p_hold IS NULL THEN
          UPDATE P_LOT SET REMAINING = REMAINING - n WHERE LOT_ID = r.LOT_ID;
          INSERT INTO P_LOT_USE (TRANSACTION_ID, LOT_ID, AMOUNT) VALUES (p_tx, r.LOT_ID, -n);
        ELSE
          UPDATE P_LOT SET RESERVED = RESERVED + n WHERE LOT_ID = r.LOT_ID;
          INSERT INTO P_LOT_HOLD (HOLD_ID, LOT_ID, AMOUNT, EXPIRES_TIME) VALUES (p_hold, r.LOT_ID, n, p_expires);
        END IF;
      END LOOP;
    END $$;

    -- What row p_orig took from each lot, less what its refunds p_refunds
    -- gave back (v0.14.0). Their uses are read by their primary key, whose
    -- pages are in TRANSACTION_ID order: not by lot, whose pages other
    -- cards' payments share (SSI).
    CREATE OR REPLACE FUNCTION hotrow_lots_taken_v1(p_orig bigint, p_refunds bigint[])
    RETURNS TABLE (lot_id bigint, left_in bigint, expired boolean, expires timestamp) LANGUAGE sql STABLE
    SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off AS $$
      SELECT u.LOT_ID, -u.AMOUNT - COALESCE((SELECT SUM(v.AMOUNT) FROM P_LOT_USE v
                                             WHERE v.TRANSACTION_ID = ANY (p_refunds) AND v.LOT_ID = u.LOT_ID),
                                            0)::bigint,
             l.EXPIRED_TIME IS NOT NULL, l.EXPIRES_TIME
      FROM P_LOT_USE u JOIN P_LOT l ON l.LOT_ID = u.LOT_ID WHERE u.TRANSACTION_ID = p_orig $$;

    -- A refund's give-back (v0.14.0): p_amount of refund p_refund of row
    -- p_orig (of p_orig_amount, refunded p_before so far) undoes the
    -- original's takes in reverse, so the never-expiring points it took
    -- come back first, then its lots, latest-expiring first. Given back to
    -- a lot written out already, it leaves again now.
    CREATE OR REPLACE FUNCTION hotrow_lots_restore_v1(p_card bigint, p_orig bigint, p_orig_amount bigint,
                                                      p_before bigint, p_amount bigint, p_refund bigint,
                                                      INOUT b bigint, INOUT t timestamp)
    LANGUAGE plpgsql
    SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off AS $$
    DECLARE
      r record;
      left_in_lots bigint;
      from_lots bigint;
      give bigint;
      refunds bigint[];
    BEGIN
      -- Its earlier refunds, through the card's own history.
      refunds := ARRAY(SELECT h.TRANSACTION_ID FROM H_TRANSACTION h
                       WHERE h.CARD_ID = p_card AND h.REFUND_OF = p_orig AND h.TRANSACTION_ID <> p_refund
                         AND h.PAYMENT_TIME > (SELECT o.PAYMENT_TIME FROM H_TRANSACTION o
                                               WHERE o.TRANSACTION_ID = p_orig));
      SELECT COALESCE(SUM(x.left_in), 0) INTO left_in_lots FROM hotrow_lots_taken_v1(p_orig, refunds) x;
      SELECT COALESCE(-SUM(u.AMOUNT), 0) INTO from_lots FROM P_LOT_USE u WHERE u.TRANSACTION_ID = p_orig;
      -- |original| = what it took from lots + its never-expiring part; its
      -- refunds so far gave back p_before, to lots what their uses say.
      p_amount := p_amount - LEAST(p_amount, GREATEST(0, (-p_orig_amount - from_lots)
                                                         - (p_before - (from_lots - left_in_lots))));
      FOR r IN SELECT * FROM hotrow_lots_taken_v1(p_orig, refunds) x ORDER BY x.expires DESC, x.lot_id DESC LOOP
        EXIT WHEN p_amount <= 0;
        give := LEAST(p_amount, r.left_in);
        CONTINUE WHEN give <= 0;
        p_amount := p_amount - give;
        UPDATE P_LOT SET REMAINING = REMAINING + give WHERE LOT_ID = r.lot_id;
        INSERT INTO P_LOT_USE (TRANSACTION_ID, LOT_ID, AMOUNT) VALUES (p_refund, r.lot_id, give);
        IF r.expired THEN
          SELECT * INTO b, t FROM hotrow_lot_leave_v1(p_card, r.lot_id, give, b, t);
        END IF;
      END LOOP;
    END $$;

    -- Settles a card before a write at t (v0.14.0), its row locked FOR
    -- UPDATE by the caller: an expiring grant's applied credit is folded
    -- (its grant row at t, and its lot); then, if the card has lots, holds
    -- past their expiry are stamped and give back what they reserve (from
    -- a lot written out, that leaves now), and the lots due at t are
    -- written out: what no open hold keeps leaves in one expiry row each,
    -- the lot stamped in the same transaction (EXPIRED_TIME IS NULL is the
    -- guard: a lot is written out once). Writes the card's BALANCE and
    -- LAST_UPDATE when it wrote a row; `wrote` says so, and lot_time is
    -- the card's LOT_TIME after it (NULL: the card has no lot).
    CREATE OR REPLACE FUNCTION hotrow_card_settle_v1(p_card bigint, INOUT b bigint, INOUT t timestamp,
                                                     OUT wrote boolean, OUT lot_time timestamp)
    LANGUAGE plpgsql
    SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off AS $$
    DECLARE
      t0 timestamp := t;
      cr record;
      r record;
      id bigint;
      v_lots timestamp;
      ended bigint[];
      t_pass timestamp;
      v_holds timestamp;
    BEGIN
      SELECT c.GRANT_ID, c.POINTS, g.APPLIED_TIME, g.EXPIRES_TIME INTO cr FROM P_GRANT_CREDIT c
        JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID
        WHERE c.CARD_ID = p_card AND g.STATE = 'applied' AND g.EXPIRES_TIME IS NOT NULL ORDER BY c.GRANT_ID LIMIT 1;
      IF FOUND THEN
        DELETE FROM P_GRANT_CREDIT WHERE CARD_ID = p_card AND GRANT_ID = cr.GRANT_ID;
        b := b + cr.POINTS;
        INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND, ACTOR)
          VALUES (t, p_card, 0, cr.POINTS, b, 'grant', 'system') RETURNING TRANSACTION_ID INTO id;
        INSERT INTO P_LOT (CARD_ID, GRANT_ID, SOURCE_ID, AMOUNT, REMAINING, RESERVED, CREATED_TIME, EXPIRES_TIME)
          VALUES (p_card, cr.GRANT_ID, id, cr.POINTS, cr.POINTS, 0, cr.APPLIED_TIME, cr.EXPIRES_TIME);
        UPDATE S_ACCOUNT a SET LOT_TIME = COALESCE(a.LOT_TIME, t) WHERE a.CARD_ID = p_card;  -- a., not lot_time
        t := t + interval '1 microsecond';
      END IF;
      SELECT a.LOT_TIME, a.HOLD_TIME INTO v_lots, v_holds FROM S_ACCOUNT a WHERE a.CARD_ID = p_card;
      -- Each expiry row moves t on by a microsecond, and the caller decides
      -- at the t handed back: holds and lots due by then are settled too,
      -- pass after pass until t stands (the correctness review's finding:
      -- a hold expiring during the settle kept its reservation, and the
      -- payment that followed took never-expiring points the card did not
      -- have).
      WHILE v_lots IS NOT NULL AND t_pass IS DISTINCT FROM t LOOP
        t_pass := t;
        IF v_holds IS NOT NULL THEN  -- a card that never had a hold reads no P_HOLD
          -- Holds past their expiry, stamped now: they give back what they
          -- reserve (a capture or a void gives it back at once, so these
          -- are the only ended holds that still reserve any).
          WITH e AS (UPDATE P_HOLD x SET STATUS = 'expired', ENDED_TIME = x.EXPIRES_TIME
                       WHERE x.CARD_ID = p_card AND x.STATUS = 'open' AND x.EXPIRES_TIME <= t RETURNING x.HOLD_ID)
          SELECT array_agg(e.HOLD_ID ORDER BY e.HOLD_ID) INTO ended FROM e;
          IF cardinality(ended) > 0 THEN  -- an expiry decided at t: the card's time moves on
            UPDATE S_ACCOUNT SET HOLD_TIME = t WHERE CARD_ID = p_card;
          END IF;
          FOR i IN 1 .. COALESCE(cardinality(ended), 0) LOOP
            SELECT * INTO b, t FROM hotrow_lots_release_v1(p_card, ended[i], 0, NULL, b, t);
          END LOOP;
        END IF;
        FOR r IN SELECT l.LOT_ID, l.REMAINING - l.RESERVED AS free FROM P_LOT l
                   WHERE l.CARD_ID = p_card AND l.EXPIRED_TIME IS NULL AND l.EXPIRES_TIME <= t
                   ORDER BY l.EXPIRES_TIME, l.LOT_ID LOOP
          UPDATE P_LOT SET EXPIRED_TIME = t WHERE LOT_ID = r.LOT_ID AND EXPIRED_TIME IS NULL;
          CONTINUE WHEN NOT FOUND;  -- written out already: never twice
          IF r.free > 0 THEN
            SELECT * INTO b, t FROM hotrow_lot_leave_v1(p_card, r.LOT_ID, r.free, b, t);
          END IF;
        END LOOP;
      END LOOP;
      wrote := t > t0;
      lot_time := v_lots;
      IF wrote THEN
        UPDATE S_ACCOUNT SET BALANCE = b, LAST_UPDATE = t - interval '1 microsecond' WHERE CARD_ID = p_card;
      END IF;
    END $$;

    -- One pass of the sweep (v0.14.0, READ COMMITTED): the cards of the
    -- first p_limit lots due, and of holds past their expiry that still
    -- reserve part of a lot, each settled as its next write would settle
    -- it, at the card's time. A card another transaction holds (its
    -- advisory lock: a write queued or running; or its row: a fold) is
    -- skipped, never waited for: its write settles it, or the next pass
    -- does. Answers the cards settled and whether more may be due (a full
    -- batch was found).
    CREATE OR REPLACE FUNCTION hotrow_lot_sweep_v1(p_limit int)
    RETURNS TABLE (cards bigint, more boolean) LANGUAGE plpgsql SET enable_seqscan = off SET jit = off AS $$
    DECLARE
      now_t timestamp := clock_timestamp() AT TIME ZONE 'UTC';
      lot_cards bigint[];
      hold_cards bigint[];
      picked bigint[];
      a record;
      b bigint;
      t timestamp;
      n bigint := 0;
    BEGIN
      lot_cards := ARRAY(SELECT l.CARD_ID FROM P_LOT l WHERE l.EXPIRED_TIME IS NULL AND l.EXPIRES_TIME <= now_t
                         ORDER BY l.EXPIRES_TIME LIMIT p_limit);
      hold_cards := ARRAY(SELECT h.CARD_ID FROM (SELECT x.HOLD_ID FROM P_LOT_HOLD x WHERE x.EXPIRES_TIME <= now_t
                                                 ORDER BY x.EXPIRES_TIME LIMIT p_limit) y
                          JOIN P_HOLD h ON h.HOLD_ID = y.HOLD_ID);
      picked := ARRAY(SELECT DISTINCT d FROM unnest(lot_cards || hold_cards) d ORDER BY d);
      FOR i IN 1 .. COALESCE(cardinality(picked), 0) LOOP
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(72720004, (picked[i] % 2147483647)::int);
        SELECT x.BALANCE, x.LAST_UPDATE, x.HOLD_TIME INTO a FROM S_ACCOUNT x WHERE x.CARD_ID = picked[i]
          FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        t := GREATEST(clock_timestamp() AT TIME ZONE 'UTC', a.LAST_UPDATE + interval '1 microsecond',
                      a.HOLD_TIME + interval '1 microsecond');
        BEGIN  -- one card's failure is logged and skipped, not the whole pass's
          SELECT x.b, x.t INTO b, t FROM hotrow_card_settle_v1(picked[i], a.BALANCE, t) x;
          n := n + 1;
        EXCEPTION WHEN OTHERS THEN
          RAISE WARNING 'hotrow: the lot sweep could not settle card %: %', picked[i], SQLERRM;
        END;
      END LOOP;
      RETURN QUERY SELECT n, (cardinality(lot_cards) = p_limit OR cardinality(hold_cards) = p_limit) AND n > 0;
    END $$;
  )sql");
}

namespace {

constexpr int kSweepCardsMax = 64;  // lots (and reservations) looked at per transaction
constexpr pg::NamedSql kSweep{"pointcard_lot_sweep", "SELECT cards, more FROM hotrow_lot_sweep_v1($1)"};

// A card's lots with points left, in the order payments take them, with
// what open holds unexpired at the card's time reserve of each, and that
// time (now(): the read transaction's start, as the card's own read;
// never before the card's newest row or hold decision).
constexpr pg::NamedSql kSelectLots{"pointcard_lots", R"(
  SELECT l.LOT_ID, l.GRANT_ID, l.AMOUNT, l.REMAINING,
         (SELECT COALESCE(SUM(r.AMOUNT), 0) FROM P_LOT_HOLD r JOIN P_HOLD h ON h.HOLD_ID = r.HOLD_ID
          WHERE r.LOT_ID = l.LOT_ID AND h.STATUS = 'open' AND h.EXPIRES_TIME > c.T)::bigint,
         hotrow_us(l.CREATED_TIME), hotrow_us(l.EXPIRES_TIME), hotrow_us(c.T)
  FROM (SELECT GREATEST(now() AT TIME ZONE 'UTC', a.LAST_UPDATE + interval '1 microsecond',
                        a.HOLD_TIME + interval '1 microsecond') AS T FROM S_ACCOUNT a WHERE a.CARD_ID = $1) c
  JOIN P_LOT l ON l.CARD_ID = $1 AND l.REMAINING > 0 ORDER BY l.EXPIRES_TIME, l.LOT_ID)"};
// Its applied, unfolded expiring credits unexpired at the card's time:
// lots to be.
constexpr pg::NamedSql kSelectPendingLots{"pointcard_pending_lots", R"(
  SELECT c.GRANT_ID, c.POINTS, hotrow_us(g.APPLIED_TIME), hotrow_us(g.EXPIRES_TIME)
  FROM S_ACCOUNT a JOIN P_GRANT_CREDIT c ON c.CARD_ID = a.CARD_ID JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID
  WHERE a.CARD_ID = $1 AND g.STATE = 'applied' AND g.EXPIRES_TIME > GREATEST(now() AT TIME ZONE 'UTC',
    a.LAST_UPDATE + interval '1 microsecond', a.HOLD_TIME + interval '1 microsecond'))"};
constexpr pg::NamedSql kSelectCursorLot{"pointcard_lot_cursor",
                                        "SELECT hotrow_us(EXPIRES_TIME) FROM P_LOT WHERE LOT_ID = $1 AND CARD_ID = $2"};

// The page of `card`'s lots after `after_id` (its expiry in `after_us`),
// from the rows of kSelectLots, with the never-expiring totals.
void FillPage(const pg::Rows& rows, int64_t card_id, int64_t limit, std::optional<int64_t> after_id, int64_t after_us,
              LotPage& page) {
  for (int i = 0; i < rows.size(); ++i) {
    Lot l{.lot_id = rows.Int(i, 0),
          .card_id = card_id,
          .grant_id = rows.Int(i, 1),
          .amount = rows.Int(i, 2),
          .remaining = rows.Int(i, 3),
          .reserved = rows.Int(i, 4),
          .created_us = rows.Int(i, 5),
          .expires_us = rows.Int(i, 6),
          .expired = false};
    // Past its expiry only what open holds reserve is left, for them.
    l.expired = l.expires_us <= rows.Int(i, 7);
    if (l.expired) l.remaining = l.reserved;
    page.never_expiring -= l.remaining;
    page.never_expiring_reserved -= l.reserved;
    if (l.remaining == 0) continue;
    if (after_id && (l.expires_us < after_us || (l.expires_us == after_us && l.lot_id <= *after_id))) continue;
    if (static_cast<int64_t>(page.lots.size()) == limit) {  // one more: there is a next page
      page.next_after_id = page.lots.back().lot_id;
      continue;  // the totals still count it
    }
    page.lots.push_back(l);
  }
}

Result<LotPage> ReadLots(pg::Connection& c, int64_t card_id, int64_t limit, std::optional<int64_t> after_id) {
  auto card = PostgresCardById(c, card_id);
  if (!card.ok()) return card.status();
  int64_t after_us = 0;
  if (after_id) {  // a cursor is a lot of this card
    auto cursor = c.Query(kSelectCursorLot, {std::to_string(*after_id), std::to_string(card_id)});
    if (!cursor.ok()) return cursor.status();
    if (cursor->empty())
      return Status::InvalidField("after", "after must be a cursor from a previous page of this card");
    after_us = cursor->Int(0, 0);
  }
  LotPage page{.lots = {},
               .pending = {},
               .never_expiring = card->balance,
               .never_expiring_reserved = card->held,
               .next_after_id = {}};
  auto lots = c.Query(kSelectLots, {std::to_string(card_id)});
  if (!lots.ok()) return lots.status();
  FillPage(*lots, card_id, std::clamp<int64_t>(limit, 1, kLotListLimitMax), after_id, after_us, page);
  // Credits to be lots, for the seconds until their fold: apart, every
  // page (they have no id to page by yet).
  auto pending = c.Query(kSelectPendingLots, {std::to_string(card_id)});
  if (!pending.ok()) return pending.status();
  for (int i = 0; i < pending->size(); ++i) {
    page.never_expiring -= pending->Int(i, 1);
    page.pending.push_back({.lot_id = 0,  // numbered when folded
                            .card_id = card_id,
                            .grant_id = pending->Int(i, 0),
                            .amount = pending->Int(i, 1),
                            .remaining = pending->Int(i, 1),
                            .reserved = 0,
                            .created_us = pending->Int(i, 2),
                            .expires_us = pending->Int(i, 3),
                            .expired = false});
  }
  return page;
}

}  // namespace

void PostgresPointCardStore::ListLots(int64_t card_id, int64_t limit, std::optional<int64_t> after_id,
                                      std::function<void(Result<LotPage>)> done) {
  pool_.Submit([card_id, limit, after_id, done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    // One snapshot for the card and its lots.
    if (Status s = (*c)->Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); !s.ok()) return done(s);
    auto page = ReadLots(**c, card_id, limit, after_id);
    log::WarnIfFailed((*c)->Exec("COMMIT"), "lots: ending the read transaction");
    done(std::move(page));
  });
}

void PostgresPointCardStore::SweepLots(const std::function<bool()>& stopping) {
  while (!stopping()) {
    auto swept = grants().Run<pg::Rows>(
        [](pg::Connection& c) { return c.Query(kSweep, {std::to_string(kSweepCardsMax)}); }, /*unbounded=*/true);
    if (!swept.ok()) {
      log::Warn("lot sweep failed (the next pass retries): {}", swept.status().ToString());
      return;
    }
    if (swept->empty() || swept->Text(0, 1) != "t") return;
  }
}

}  // namespace hotrow::pointcard
