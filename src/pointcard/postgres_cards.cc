// Cards on PostgreSQL: reading one, issuing one, closing one
// (postgres_store.h). Both writes run behind an advisory lock in one
// SERIALIZABLE transaction (RunSerializable): a close behind its card's, as
// every payment; an issue behind card 0's, so two issues never race for an
// external reference or a key.
#include "ops/log.h"
#include "pointcard/postgres_store.h"

namespace hotrow::pointcard {

namespace pg = db::pg;

Status CreatePostgresCardFunctions(pg::Connection& conn) {
  return conn.Exec(R"sql(
    -- A card as reads show it (its balance with an applied grant's credit
    -- not folded yet); no row for an unknown card. The writes below answer
    -- with it, read inside their own transaction: a write that committed
    -- always comes with its card.
    -- v0.14.0: less what its lots due at the card's time have lost (what
    -- open holds do not keep), and without expiring credit due by then.
    CREATE OR REPLACE FUNCTION hotrow_card_v1(p_card bigint)
    RETURNS TABLE (c_card bigint, c_balance bigint, c_region int, c_last_us bigint, c_pending bigint, c_ref text,
                   c_status text, c_closed_us bigint) LANGUAGE sql STABLE AS $$
      SELECT a.CARD_ID, a.BALANCE - hotrow_lots_due_v1(a.CARD_ID, a.LOT_TIME, x.T), a.REGION_ID,
             hotrow_us(a.LAST_UPDATE),
             COALESCE((SELECT SUM(c.POINTS) FROM P_GRANT_CREDIT c JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID
                       WHERE c.CARD_ID = a.CARD_ID AND g.STATE = 'applied'
                         AND (g.EXPIRES_TIME IS NULL OR g.EXPIRES_TIME > x.T)), 0)::bigint,
             a.EXTERNAL_REF, a.STATUS, hotrow_us(a.CLOSED_TIME)
      FROM S_ACCOUNT a CROSS JOIN LATERAL (SELECT GREATEST(clock_timestamp() AT TIME ZONE 'UTC',
                                                           a.LAST_UPDATE + interval '1 microsecond',
                                                           a.HOLD_TIME + interval '1 microsecond') AS T) x
      WHERE a.CARD_ID = p_card $$;

    -- Issues a card (v0.9.0). outcome: 0 made, 1 replayed (an earlier
    -- request with this key made the card), 2 key mismatch, 3 the external
    -- reference is taken (now, or when this key was first used); then the
    -- card (hotrow_card_v1's columns; NULL for 2 and 3). The id comes from
    -- S_ACCOUNT_CARD_ID_SEQ; one a seed of an older release took moves the
    -- sequence past every card.
    -- v0.10.0 (v2): with a store key (p_key_id, p_key_sha: hex of SHA-256
    -- of its secret), checked first in this transaction (outcome 4: unknown,
    -- revoked or not this secret; nothing written), and the idempotency key
    -- scoped to the store key (route 'cards:key:<keyId>'; the admin's are
    -- route 'cards'), so two stores' tills that number their requests alike
    -- never get each other's cards.
    CREATE OR REPLACE FUNCTION hotrow_card_create_v2(p_region int, p_ref text, p_key text, p_fp text, p_key_id text,
                                                     p_key_sha text)
    RETURNS TABLE (o_outcome smallint, c_card bigint, c_balance bigint, c_region int, c_last_us bigint,
                   c_pending bigint, c_ref text, c_status text, c_closed_us bigint)
    LANGUAGE plpgsql SET enable_seqscan = off AS $$
    DECLARE
      k P_REQUEST_KEY%ROWTYPE;
      id bigint;
      res smallint;
      now_t timestamp := clock_timestamp() AT TIME ZONE 'UTC';
      v_route text := CASE WHEN p_key_id IS NULL THEN 'cards' ELSE 'cards:key:' || p_key_id END;
    BEGIN
      IF p_key_id IS NOT NULL AND hotrow_store_key_check_v1(p_key_id, p_key_sha) = 0 THEN
        RETURN QUERY SELECT 4::smallint, NULL::bigint, NULL::bigint, NULL::int, NULL::bigint, NULL::bigint,
                            NULL::text, NULL::text, NULL::bigint;
        RETURN;
      END IF;
      IF p_key IS NOT NULL THEN
        SELECT * INTO k FROM P_REQUEST_KEY r WHERE r.ROUTE = v_route AND r.KEY = p_key;
      END IF;
      IF p_key IS NOT NULL AND FOUND THEN
        res := CASE WHEN k.FINGERPRINT <> p_fp THEN 2 WHEN k.RESULT_ID = 0 THEN 3 ELSE 1 END;
        id := CASE WHEN res = 1 THEN k.RESULT_ID END;
      ELSIF p_ref IS NOT NULL AND EXISTS (SELECT 1 FROM S_ACCOUNT a WHERE a.EXTERNAL_REF = p_ref) THEN
        -- Kept with its key (RESULT_ID 0), as a refused payment is: a retry
        -- is refused again, another body with the key is a mismatch.
        IF p_key IS NOT NULL THEN
          INSERT INTO P_REQUEST_KEY (ROUTE, KEY, FINGERPRINT, CREATED, RESULT_ID) VALUES (v_route, p_key, p_fp, now_t, 0);
        END IF;
        res := 3;
      ELSE
        id := nextval('S_ACCOUNT_CARD_ID_SEQ');
        IF EXISTS (SELECT 1 FROM S_ACCOUNT a WHERE a.CARD_ID = id) THEN
          PERFORM setval('S_ACCOUNT_CARD_ID_SEQ', (SELECT MAX(a.CARD_ID) FROM S_ACCOUNT a));
          id := nextval('S_ACCOUNT_CARD_ID_SEQ');
        END IF;
        INSERT INTO S_ACCOUNT (CARD_ID, BALANCE, REGION_ID, LAST_UPDATE, EXTERNAL_REF, STATUS)
          VALUES (id, 0, p_region, now_t, p_ref, 'active');
        IF p_key IS NOT NULL THEN
          INSERT INTO P_REQUEST_KEY (ROUTE, KEY, FINGERPRINT, CREATED, RESULT_ID)
            VALUES (v_route, p_key, p_fp, now_t, id);
        END IF;
        res := 0;
      END IF;
      IF p_key_id IS NOT NULL AND res <> 2 THEN
        PERFORM hotrow_store_key_touch_v1(p_key_id);  -- what commits counts as the key's use
      END IF;
      RETURN QUERY SELECT res, c.* FROM (SELECT 1) one LEFT JOIN LATERAL hotrow_card_v1(id) c ON true;
    END $$;
    -- v0.9.0's, kept for its instances: the admin's, no store key.
    CREATE OR REPLACE FUNCTION hotrow_card_create_v1(p_region int, p_ref text, p_key text, p_fp text)
    RETURNS TABLE (o_outcome smallint, c_card bigint, c_balance bigint, c_region int, c_last_us bigint,
                   c_pending bigint, c_ref text, c_status text, c_closed_us bigint)
    LANGUAGE sql AS $$ SELECT * FROM hotrow_card_create_v2(p_region, p_ref, p_key, p_fp, NULL, NULL) $$;

    -- Closes a card (v0.9.0), under its row lock, at a time after its
    -- newest row. outcome: 0 closed now, 1 closed already, 2 key mismatch
    -- (the key is a payment's on this card), 3 no card, 4 a replay of this
    -- key; then the card (NULL for 2 and 3). A key is kept with the
    -- payments' (P_IDEMPOTENCY, no store, no amount), whether this request
    -- closed the card or found it closed, so the same key is one request
    -- per card whatever it did.
    CREATE OR REPLACE FUNCTION hotrow_card_close_v1(p_card bigint, p_key text, p_fp text)
    RETURNS TABLE (o_outcome smallint, c_card bigint, c_balance bigint, c_region int, c_last_us bigint,
                   c_pending bigint, c_ref text, c_status text, c_closed_us bigint)
    LANGUAGE plpgsql SET enable_seqscan = off AS $$
    DECLARE
      k P_IDEMPOTENCY%ROWTYPE;
      st text;
      b bigint;
      v_last timestamp;
      t timestamp;
      res smallint;
    BEGIN
      IF p_key IS NOT NULL THEN
        SELECT * INTO k FROM P_IDEMPOTENCY x WHERE x.CARD_ID = p_card AND x.KEY = p_key;
      END IF;
      IF p_key IS NOT NULL AND FOUND THEN
        res := CASE WHEN k.FINGERPRINT <> p_fp THEN 2 ELSE 4 END;
      ELSE
        SELECT a.STATUS, a.BALANCE, a.LAST_UPDATE INTO st, b, v_last FROM S_ACCOUNT a WHERE a.CARD_ID = p_card
          FOR UPDATE;
        IF NOT FOUND THEN
          res := 3;
        ELSE
          t := GREATEST(clock_timestamp() AT TIME ZONE 'UTC', v_last + interval '1 microsecond');
          IF st <> 'closed' THEN
            UPDATE S_ACCOUNT SET STATUS = 'closed', CLOSED_TIME = t WHERE CARD_ID = p_card;
          END IF;
          IF p_key IS NOT NULL THEN
            INSERT INTO P_IDEMPOTENCY VALUES (p_card, p_key, p_fp, clock_timestamp() AT TIME ZONE 'UTC', false, t, 0, 0,
                                              b);
          END IF;
          res := CASE WHEN st = 'closed' THEN 1 ELSE 0 END;
        END IF;
      END IF;
      RETURN QUERY SELECT res, c.* FROM (SELECT 1) one
        LEFT JOIN LATERAL hotrow_card_v1(CASE WHEN res IN (0, 1, 4) THEN p_card END) c ON true;
    END $$;
  )sql");
}

namespace {

// One statement, one snapshot: the balance and an applied grant's credit
// not folded yet (the fold moves one into the other in one transaction),
// and what the card's open holds keep at the card's time (now, but never
// before its newest row or hold decision: a clock stepped back does not
// reopen a hold a payment found expired), less what its lots due then have
// lost (0.14.0). "Now" is the transaction's start (now()), so the lots'
// reads (postgres_lots.cc), in one transaction, count at one time.
#define HOTROW_SELECT_CARD                                                                                          \
  "SELECT a.CARD_ID, a.BALANCE, a.REGION_ID, hotrow_us(a.LAST_UPDATE), "                                            \
  "COALESCE((SELECT SUM(c.POINTS) FROM P_GRANT_CREDIT c JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID "                 \
  "WHERE c.CARD_ID = a.CARD_ID AND g.STATE = 'applied' AND (g.EXPIRES_TIME IS NULL OR g.EXPIRES_TIME > x.T)), 0), " \
  "a.EXTERNAL_REF, a.STATUS, hotrow_us(a.CLOSED_TIME), "                                                            \
  "COALESCE((SELECT SUM(-h.AMOUNT) FROM P_HOLD h WHERE h.CARD_ID = a.CARD_ID AND h.STATUS = 'open' "                \
  "AND h.EXPIRES_TIME > x.T), 0), hotrow_lots_due_v1(a.CARD_ID, a.LOT_TIME, x.T) FROM S_ACCOUNT a "                 \
  "CROSS JOIN LATERAL (SELECT GREATEST(now() AT TIME ZONE 'UTC', a.LAST_UPDATE + interval "                         \
  "'1 microsecond', a.HOLD_TIME + interval '1 microsecond') AS T) x "
constexpr pg::NamedSql kSelectCard{"pointcard_card", HOTROW_SELECT_CARD "WHERE a.CARD_ID = $1"};
constexpr pg::NamedSql kSelectCardByRef{"pointcard_card_by_ref", HOTROW_SELECT_CARD "WHERE a.EXTERNAL_REF = $1"};
#undef HOTROW_SELECT_CARD
constexpr pg::NamedSql kCreateCard{"pointcard_card_create",
                                   "SELECT * FROM hotrow_card_create_v2($1, $2, $3, $4, $5, $6)"};
constexpr pg::NamedSql kSelectHeld{
    "pointcard_card_held",
    "SELECT COALESCE(SUM(-h.AMOUNT), 0) FROM S_ACCOUNT a JOIN P_HOLD h ON h.CARD_ID = a.CARD_ID AND h.STATUS = "
    "'open' AND h.EXPIRES_TIME > GREATEST(clock_timestamp() AT TIME ZONE 'UTC', a.LAST_UPDATE + interval "
    "'1 microsecond', a.HOLD_TIME + interval '1 microsecond') WHERE a.CARD_ID = $1"};
constexpr pg::NamedSql kCloseCard{"pointcard_card_close", "SELECT * FROM hotrow_card_close_v1($1, $2, $3)"};

// The card in the first row's columns from `at` on (kSelectCard's, and
// hotrow_card_v1's after a write's outcome, without `held`); nullopt for
// none.
std::optional<Card> ReadCard(const pg::Rows& rows, int at = 0) {
  if (rows.empty() || rows.IsNull(0, at)) return std::nullopt;
  int64_t pending = rows.Int(0, at + 4);
  // kSelectCard's balance is as written, its lots' loss apart (column 9);
  // hotrow_card_v1's has it taken off already.
  Card card{.card_id = rows.Int(0, at),
            .balance = rows.Int(0, at + 1) + pending - (at == 0 ? rows.Int(0, 9) : 0),
            .region_id = rows.Int(0, at + 2),
            .last_update_us = rows.Int(0, at + 3),
            .pending_points = pending};
  if (!rows.IsNull(0, at + 5)) card.external_ref = std::string(rows.Text(0, at + 5));
  card.status = std::string(rows.Text(0, at + 6));
  if (!rows.IsNull(0, at + 7)) card.closed_at_us = rows.Int(0, at + 7);
  if (at == 0) card.held = rows.Int(0, 8);  // kSelectCard's; hotrow_card_v1 has no column for it
  return card;
}

// The card a write answered with, in its own transaction.
Result<Card> WrittenCard(const pg::Rows& rows, bool replayed, const char* function) {
  auto card = ReadCard(rows, 1);
  if (!card) return Status::Internal(std::string(function) + " answered no card");
  card->replayed = replayed;
  return std::move(*card);
}

Result<Card> CardById(pg::Connection& c, int64_t card_id) {
  auto rows = c.Query(kSelectCard, {std::to_string(card_id)});
  if (!rows.ok()) return rows.status();
  auto card = ReadCard(*rows);
  if (!card) return NoSuchCard(card_id);
  return std::move(*card);
}

}  // namespace

Result<Card> PostgresCardById(pg::Connection& c, int64_t card_id) { return CardById(c, card_id); }

namespace {

Status KeyMismatch(const std::string& key) {
  return Status(ErrorCode::kIdempotencyMismatch, "Idempotency-Key '" + key + "' was used for a different request",
                "Idempotency-Key");
}

}  // namespace

constexpr int kWriteTries = 3;  // the reference's policy, as payments

Result<pg::Rows> RunSerializableRetried(pg::Connection& c, int64_t lock_card, const pg::NamedSql& call,
                                        const std::vector<pg::Param>& params, bool retry_unique_race,
                                        Isolation isolation) {
  Result<pg::Rows> rows = Status::Internal("unset");
  for (int attempt = 0; attempt < kWriteTries; ++attempt) {
    if (attempt > 0) RetryBackoff(attempt);
    rows = RunSerializable(c, lock_card, call, params, isolation);
    const bool unique_race = retry_unique_race && !rows.ok() && rows.status().sqlstate() == "23505";
    if (rows.ok() || !(pg::IsRetryable(rows.status()) || unique_race)) break;
    pg::CountRetry(rows.status());
  }
  return rows;
}

void PostgresPointCardStore::GetCard(int64_t card_id, StoreCallback<Result<Card>> done) {
  pool_.Submit([card_id, done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    done(CardById(**c, card_id));
  });
}

void PostgresPointCardStore::FindCard(std::string external_ref, std::function<void(Result<std::optional<Card>>)> done) {
  pool_.Submit([ref = std::move(external_ref), done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = (*c)->Query(kSelectCardByRef, {ref});
    if (!rows.ok()) return done(rows.status());
    done(ReadCard(*rows));
  });
}

void PostgresPointCardStore::CreateCard(NewCard card, std::string fingerprint, std::function<void(Result<Card>)> done) {
  pool_.Submit(
      [card = std::move(card), fp = std::move(fingerprint), done = std::move(done)](Result<pg::Connection*> c) {
        if (!c.ok()) return done(c.status());
        auto rows = RunSerializableRetried(
            **c, 0, kCreateCard,
            {std::to_string(card.region_id), OptionalParam(card.external_ref), OptionalParam(card.idempotency_key), fp,
             card.key ? pg::Param(card.key->key_id) : pg::Param(),
             card.key ? pg::Param(card.key->secret_sha256) : pg::Param()});
        if (!rows.ok()) return done(rows.status());
        switch (rows->Int(0, 0)) {
          case 0:
            return done(WrittenCard(*rows, false, "hotrow_card_create_v2"));  // a new card holds nothing
          case 1: {  // a replay answers the card as it is now, with what its holds keep
            auto card = WrittenCard(*rows, true, "hotrow_card_create_v2");
            if (card.ok()) {
              auto held = (*c)->Query(kSelectHeld, {std::to_string(card->card_id)});
              if (!held.ok()) return done(held.status());
              card->held = held->Int(0, 0);
            }
            return done(std::move(card));
          }
          case 2:
            return done(KeyMismatch(*card.idempotency_key));
          case 3:
            return done(ExternalRefTaken(*card.external_ref));
          case 4:
            return done(BadStoreKey());
          default:
            return done(Status::Internal("hotrow_card_create_v2 answered outcome " + std::to_string(rows->Int(0, 0))));
        }
      });
}

void PostgresPointCardStore::CloseCard(CardClose close, std::string fingerprint,
                                       std::function<void(Result<Card>)> done) {
  pool_.Submit(
      [close = std::move(close), fp = std::move(fingerprint), done = std::move(done)](Result<pg::Connection*> c) {
        if (!c.ok()) return done(c.status());
        auto rows = RunSerializableRetried(**c, close.card_id, kCloseCard,
                                           {std::to_string(close.card_id), OptionalParam(close.idempotency_key), fp});
        if (!rows.ok()) return done(rows.status());
        const int64_t outcome = rows->Int(0, 0);
        if (outcome == 2) return done(CardKeyMismatch(*close.idempotency_key));
        if (outcome == 3) return done(NoSuchCard(close.card_id));
        if (outcome != 0 && outcome != 1 && outcome != 4)
          return done(Status::Internal("hotrow_card_close_v1 answered outcome " + std::to_string(outcome)));
        auto card = WrittenCard(*rows, outcome == 4, "hotrow_card_close_v1");
        if (card.ok()) {  // what its holds hold, read after the close (which changes none)
          auto held = (*c)->Query(kSelectHeld, {std::to_string(close.card_id)});
          if (!held.ok()) return done(held.status());
          card->held = held->Int(0, 0);
        }
        done(std::move(card));
      });
}

}  // namespace hotrow::pointcard
