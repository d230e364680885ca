#include "pointcard/postgres_store.h"

#include <chrono>
#include <random>
#include <thread>

#include "ops/log.h"

namespace hotrow::pointcard {

namespace pg = db::pg;

namespace {
constexpr int64_t kSchemaLock = 72720003;  // advisory lock key (pg::WithSchemaLock)

// Point-card migration 1 (v0.6.0): stall-free grants (postgres_store.h).
//   - H_TRANSACTION.KIND, backfilled from the sign and the store; a trigger
//     fills it for rows an older instance inserts without one during a
//     rolling upgrade (its WHEN keeps it off this release's inserts).
//   - P_GRANT's state: 'staging' (credits being written, under a lease),
//     'applied' (visible; its fold runs), 'folded'. Earlier grants wrote
//     their rows in their own transaction: folded at their GRANT_TIME.
//   - P_GRANT_CREDIT: the staged credits, one row per card and grant.
constexpr std::string_view kStagedGrants = R"sql(
  ALTER TABLE H_TRANSACTION ADD COLUMN KIND text;
  UPDATE H_TRANSACTION SET KIND = CASE WHEN STORE_ID = 0 THEN 'grant' WHEN AMOUNT > 0 THEN 'charge' ELSE 'payment' END;
  ALTER TABLE H_TRANSACTION ALTER COLUMN KIND SET NOT NULL;
  CREATE FUNCTION hotrow_history_kind() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    NEW.KIND := CASE WHEN NEW.STORE_ID = 0 THEN 'grant' WHEN NEW.AMOUNT > 0 THEN 'charge' ELSE 'payment' END;
    RETURN NEW;
  END $$;
  CREATE TRIGGER H_TRANSACTION_KIND BEFORE INSERT ON H_TRANSACTION FOR EACH ROW WHEN (NEW.KIND IS NULL)
    EXECUTE FUNCTION hotrow_history_kind();
  ALTER TABLE P_GRANT ADD COLUMN STATE text NOT NULL DEFAULT 'folded', ADD COLUMN APPLIED_TIME timestamp,
    ADD COLUMN FOLDED_TIME timestamp, ADD COLUMN FOLD_MS double precision, ADD COLUMN LEASE_UNTIL timestamp;
  UPDATE P_GRANT SET APPLIED_TIME = GRANT_TIME, FOLDED_TIME = GRANT_TIME, FOLD_MS = 0;
  CREATE INDEX P_GRANT_UNFOLDED ON P_GRANT (GRANT_ID) WHERE STATE <> 'folded';
  CREATE TABLE P_GRANT_CREDIT (
    CARD_ID  bigint NOT NULL,
    GRANT_ID bigint NOT NULL,
    POINTS   bigint NOT NULL,
    PRIMARY KEY (CARD_ID, GRANT_ID)
  );
)sql";

Status CreateFunctions(pg::Connection& conn);

// Created as v0.1.0 made them, then migrated (pg::Migrate); the functions
// are (re)created after the steps, which add the columns they use.
Status CreateSchema(pg::Connection& conn) {
  if (Status s = conn.Exec(R"sql(
    CREATE TABLE IF NOT EXISTS M_REGION (
      REGION_ID   int PRIMARY KEY,
      REGION_NAME varchar(256) NOT NULL
    );
    CREATE TABLE IF NOT EXISTS M_STORE (
      STORE_ID      int PRIMARY KEY,
      STORE_ZIPCODE varchar(7),
      STORE_ADDRESS varchar(256),
      STORE_NAME    varchar(256),
      REGION_ID     int NOT NULL,
      S_LATITUDE    double precision,
      S_LONGITUDE   double precision
    );
    -- The stores of one region.
    CREATE INDEX IF NOT EXISTS M_STORE_REGION ON M_STORE (REGION_ID);
    -- Times are UTC (timestamp without time zone), microseconds.
    -- fillfactor 50 leaves room on each page, so a point use's UPDATE is HOT
    -- (no new index entry). That matters under SERIALIZABLE: an index entry
    -- written into a B-tree page that another transaction has read (SSI
    -- locks B-tree pages, not keys) is a read/write conflict, and with many
    -- cards per page most of those are false ones that abort point uses on
    -- other cards.
    CREATE TABLE IF NOT EXISTS S_ACCOUNT (
      CARD_ID     bigint PRIMARY KEY,
      BALANCE     bigint NOT NULL,
      REGION_ID   int    NOT NULL,
      LAST_UPDATE timestamp NOT NULL
    ) WITH (fillfactor = 50);
    -- Append-only; the primary key orders by time for the grant's period scan.
    CREATE TABLE IF NOT EXISTS H_TRANSACTION (
      PAYMENT_TIME timestamp NOT NULL,
      CARD_ID      bigint NOT NULL,
      STORE_ID     int    NOT NULL,
      AMOUNT       bigint NOT NULL,
      BALANCE      bigint NOT NULL,
      PRIMARY KEY (PAYMENT_TIME, CARD_ID, STORE_ID)
    );
    -- A card's history newest first, and the checker's per-card scan.
    CREATE INDEX IF NOT EXISTS H_TRANSACTION_CARD_TIME ON H_TRANSACTION (CARD_ID, PAYMENT_TIME);
    CREATE TABLE IF NOT EXISTS P_IDEMPOTENCY (
      CARD_ID      bigint  NOT NULL,
      KEY          text    NOT NULL,
      FINGERPRINT  text    NOT NULL,
      CREATED      timestamp NOT NULL,
      REFUSED      boolean NOT NULL,
      PAYMENT_TIME timestamp,
      STORE_ID     int     NOT NULL,
      AMOUNT       bigint  NOT NULL,
      BALANCE      bigint  NOT NULL,
      PRIMARY KEY (CARD_ID, KEY)
    );
    -- The purge of keys older than the retention.
    CREATE INDEX IF NOT EXISTS P_IDEMPOTENCY_CREATED ON P_IDEMPOTENCY (CREATED);
    CREATE TABLE IF NOT EXISTS P_GRANT (
      GRANT_ID        bigserial PRIMARY KEY,
      GRANT_TIME      timestamp NOT NULL,
      FROM_TIME       timestamp NOT NULL,
      TO_TIME         timestamp NOT NULL,
      RATE_PERCENT    int    NOT NULL,
      CARDS           bigint NOT NULL,
      POINTS          bigint NOT NULL,
      QUERY_MS        double precision NOT NULL,
      UPDATE_MS       double precision NOT NULL,
      COMMIT_MS       double precision NOT NULL DEFAULT 0,
      IDEMPOTENCY_KEY text UNIQUE,
      FINGERPRINT     text
    );

  )sql");
      !s.ok())
    return s;
  if (Status s = pg::Migrate(conn, "pointcard", {{.sql = kStagedGrants}}); !s.ok()) return s;
  return CreateFunctions(conn);
}

Status CreateFunctions(pg::Connection& conn) {
  if (Status s = conn.Exec(R"sql(
    CREATE OR REPLACE FUNCTION hotrow_us(t timestamp) RETURNS bigint
      LANGUAGE sql IMMUTABLE AS $$ SELECT (EXTRACT(EPOCH FROM t) * 1000000)::bigint $$;
    CREATE OR REPLACE FUNCTION hotrow_ts(us bigint) RETURNS timestamp
      LANGUAGE sql IMMUTABLE AS $$ SELECT 'epoch'::timestamp + us * interval '1 microsecond' $$;

    -- The online point use of v0.2.0-v0.5.0, kept for instances of those
    -- releases still running beside this one during an upgrade (they never
    -- fold staged credit, which leaves it to the fold: still exact). With
    -- the row's time and balance. outcome is a small integer, the contract
    -- with PayResult in postgres_store.cc:
    -- 0 ok, 1 refused, 2 no card, 3 key mismatch, 4 replayed, 5 replayed
    -- refusal.
    -- enable_seqscan = off: SSI locks what a scan reads at the scan's
    -- granularity, and a sequential scan (the planner's choice on a small
    -- table) locks the whole relation, so every other point use's write
    -- becomes a read/write conflict. Index lookups lock the tuple and its
    -- B-tree page. Measured with pgbench, 4 clients on 200 cards: 72% of
    -- point uses failed with 40001 before, 1% after.
    CREATE OR REPLACE FUNCTION hotrow_pay_v2(p_card bigint, p_store int, p_amount bigint, p_key text, p_fp text)
    RETURNS TABLE (outcome smallint, time_us bigint, new_balance bigint) LANGUAGE plpgsql
    SET enable_seqscan = off AS $$
    DECLARE
      k P_IDEMPOTENCY%ROWTYPE;
      b bigint;
      v_last timestamp;
      t timestamp;
    BEGIN
      IF p_key IS NOT NULL THEN
        SELECT * INTO k FROM P_IDEMPOTENCY WHERE CARD_ID = p_card AND KEY = p_key;
        IF FOUND THEN
          IF k.FINGERPRINT <> p_fp THEN
            RETURN QUERY SELECT 3::smallint, NULL::bigint, NULL::bigint;
          ELSE
            RETURN QUERY SELECT CASE WHEN k.REFUSED THEN 5::smallint ELSE 4::smallint END,
                                hotrow_us(k.PAYMENT_TIME), k.BALANCE;
          END IF;
          RETURN;
        END IF;
      END IF;
      SELECT a.BALANCE, a.LAST_UPDATE INTO b, v_last FROM S_ACCOUNT a WHERE a.CARD_ID = p_card;
      IF NOT FOUND THEN
        RETURN QUERY SELECT 2::smallint, NULL::bigint, NULL::bigint;
        RETURN;
      END IF;
      IF b + p_amount < 0 THEN
        IF p_key IS NOT NULL THEN
          INSERT INTO P_IDEMPOTENCY VALUES (p_card, p_key, p_fp, clock_timestamp() AT TIME ZONE 'UTC', true, NULL,
                                            p_store, p_amount, b);
        END IF;
        RETURN QUERY SELECT 1::smallint, NULL::bigint, b;
        RETURN;
      END IF;
      -- Strictly increasing per card, whatever the clock does.
      t := GREATEST(clock_timestamp() AT TIME ZONE 'UTC', v_last + interval '1 microsecond');
      UPDATE S_ACCOUNT SET BALANCE = b + p_amount, LAST_UPDATE = t WHERE CARD_ID = p_card;
      INSERT INTO H_TRANSACTION VALUES (t, p_card, p_store, p_amount, b + p_amount);
      IF p_key IS NOT NULL THEN
        INSERT INTO P_IDEMPOTENCY VALUES (p_card, p_key, p_fp, clock_timestamp() AT TIME ZONE 'UTC', false, t,
                                          p_store, p_amount, b + p_amount);
      END IF;
      RETURN QUERY SELECT 0::smallint, hotrow_us(t), b + p_amount;
    END $$;
    -- v0.6.0's point use: the card's row locked first (every writer of a
    -- card does, the fold too), then an applied grant's credit not folded
    -- yet is folded here -- the grant's row, then this one, each at its own
    -- time -- so no balance is ever written with credit still staged.
    -- At most one grant is applied and not folded at a time (the apply
    -- waits for the previous fold). Outcomes as hotrow_pay_v2's.
    CREATE OR REPLACE FUNCTION hotrow_pay_v3(p_card bigint, p_store int, p_amount bigint, p_key text, p_fp text)
    RETURNS TABLE (outcome smallint, time_us bigint, new_balance bigint) LANGUAGE plpgsql
    SET enable_seqscan = off SET jit = off AS $$
    DECLARE
      k P_IDEMPOTENCY%ROWTYPE;
      b bigint;
      v_last timestamp;
      t timestamp;
      credit bigint;
      credit_grant bigint;
    BEGIN
      IF p_key IS NOT NULL THEN
        SELECT * INTO k FROM P_IDEMPOTENCY WHERE CARD_ID = p_card AND KEY = p_key;
        IF FOUND THEN
          IF k.FINGERPRINT <> p_fp THEN
            RETURN QUERY SELECT 3::smallint, NULL::bigint, NULL::bigint;
          ELSE
            RETURN QUERY SELECT CASE WHEN k.REFUSED THEN 5::smallint ELSE 4::smallint END,
                                hotrow_us(k.PAYMENT_TIME), k.BALANCE;
          END IF;
          RETURN;
        END IF;
      END IF;
      SELECT a.BALANCE, a.LAST_UPDATE INTO b, v_last FROM S_ACCOUNT a WHERE a.CARD_ID = p_card FOR UPDATE;
      IF NOT FOUND THEN
        RETURN QUERY SELECT 2::smallint, NULL::bigint, NULL::bigint;
        RETURN;
      END IF;
      SELECT c.GRANT_ID, c.POINTS INTO credit_grant, credit FROM P_GRANT_CREDIT c
        JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID WHERE c.CARD_ID = p_card AND g.STATE = 'applied'
        ORDER BY c.GRANT_ID LIMIT 1;
      credit := COALESCE(credit, 0);
      IF b + credit + p_amount < 0 THEN
        IF p_key IS NOT NULL THEN
          INSERT INTO P_IDEMPOTENCY VALUES (p_card, p_key, p_fp, clock_timestamp() AT TIME ZONE 'UTC', true, NULL,
                                            p_store, p_amount, b + credit);
        END IF;
        RETURN QUERY SELECT 1::smallint, NULL::bigint, b + credit;
        RETURN;
      END IF;
      -- Strictly increasing per card, whatever the clock does.
      t := GREATEST(clock_timestamp() AT TIME ZONE 'UTC', v_last + interval '1 microsecond');
      IF credit > 0 THEN
        DELETE FROM P_GRANT_CREDIT WHERE CARD_ID = p_card AND GRANT_ID = credit_grant;
        b := b + credit;
        INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND)
          VALUES (t, p_card, 0, credit, b, 'grant');
        t := GREATEST(clock_timestamp() AT TIME ZONE 'UTC', t + interval '1 microsecond');
      END IF;
      UPDATE S_ACCOUNT SET BALANCE = b + p_amount, LAST_UPDATE = t WHERE CARD_ID = p_card;
      INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND)
        VALUES (t, p_card, p_store, p_amount, b + p_amount, CASE WHEN p_amount > 0 THEN 'charge' ELSE 'payment' END);
      IF p_key IS NOT NULL THEN
        INSERT INTO P_IDEMPOTENCY VALUES (p_card, p_key, p_fp, clock_timestamp() AT TIME ZONE 'UTC', false, t,
                                          p_store, p_amount, b + p_amount);
      END IF;
      RETURN QUERY SELECT 0::smallint, hotrow_us(t), b + p_amount;
    END $$;
    -- v0.1.0's function, its outcome as text, kept for instances of that
    -- release still running beside this one during an upgrade.
    CREATE OR REPLACE FUNCTION hotrow_pay(p_card bigint, p_store int, p_amount bigint, p_key text, p_fp text)
    RETURNS TABLE (outcome text, time_us bigint, new_balance bigint) LANGUAGE sql AS $$
      SELECT (ARRAY['ok', 'refused', 'no-card', 'mismatch', 'replayed', 'replayed-refused'])[v.outcome + 1],
             v.time_us, v.new_balance
      FROM hotrow_pay_v2(p_card, p_store, p_amount, p_key, p_fp) v $$;

    -- The grant of v0.2.0-v0.5.0 under LOCK TABLE (this release grants in
    -- steps: postgres_grant_sql.cc), kept for instances of those releases
    -- during an upgrade. Set-based: sum the period's charges per card, then
    -- one UPDATE ... FROM and one INSERT ... SELECT. outcome is a small integer,
    -- the contract with GrantResult in postgres_store.cc: 0 ok, 1 replayed,
    -- 2 key mismatch, 3 the period has not ended by the database's clock,
    -- 4 overlap (grant_id names the earlier grant, cards and points carry
    -- its period's bounds in microseconds).
    CREATE OR REPLACE FUNCTION hotrow_grant_v2(p_from bigint, p_to bigint, p_rate int, p_key text, p_fp text,
                                               p_allow_overlap boolean)
    RETURNS TABLE (outcome smallint, grant_id bigint, cards bigint, points bigint, query_ms double precision,
                   update_ms double precision, commit_ms double precision) LANGUAGE plpgsql AS $$
    DECLARE
      g P_GRANT%ROWTYPE;
      t0 timestamptz;
      t1 timestamptz;
      t2 timestamptz;
      now_t timestamp;
      n_cards bigint;
      n_points bigint;
      new_id bigint;
    BEGIN
      IF p_key IS NOT NULL THEN
        SELECT * INTO g FROM P_GRANT WHERE IDEMPOTENCY_KEY = p_key;
        IF FOUND THEN
          IF g.FINGERPRINT <> p_fp THEN
            RETURN QUERY SELECT 2::smallint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::double precision,
                                NULL::double precision, NULL::double precision;
          ELSE
            RETURN QUERY SELECT 1::smallint, g.GRANT_ID, g.CARDS, g.POINTS, g.QUERY_MS, g.UPDATE_MS, g.COMMIT_MS;
          END IF;
          RETURN;
        END IF;
      END IF;
      -- After LOCK TABLE S_ACCOUNT (the caller's): no other grant runs now.
      IF hotrow_ts(p_to) > clock_timestamp() AT TIME ZONE 'UTC' THEN
        RETURN QUERY SELECT 3::smallint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::double precision,
                            NULL::double precision, NULL::double precision;
        RETURN;
      END IF;
      IF NOT p_allow_overlap THEN
        SELECT * INTO g FROM P_GRANT WHERE FROM_TIME < hotrow_ts(p_to) AND TO_TIME > hotrow_ts(p_from)
          ORDER BY GRANT_ID LIMIT 1;
        IF FOUND THEN
          RETURN QUERY SELECT 4::smallint, g.GRANT_ID, hotrow_us(g.FROM_TIME), hotrow_us(g.TO_TIME),
                              NULL::double precision, NULL::double precision, NULL::double precision;
          RETURN;
        END IF;
      END IF;
      t0 := clock_timestamp();
      CREATE TEMP TABLE IF NOT EXISTS hotrow_bonus (CARD_ID bigint PRIMARY KEY, BONUS bigint NOT NULL)
        ON COMMIT DELETE ROWS;
      INSERT INTO hotrow_bonus
        SELECT CARD_ID, SUM(AMOUNT) * p_rate / 100 FROM H_TRANSACTION
        WHERE PAYMENT_TIME >= hotrow_ts(p_from) AND PAYMENT_TIME < hotrow_ts(p_to) AND AMOUNT > 0 AND STORE_ID > 0
        GROUP BY CARD_ID HAVING SUM(AMOUNT) * p_rate / 100 > 0;
      t1 := clock_timestamp();
      now_t := clock_timestamp() AT TIME ZONE 'UTC';
      WITH upd AS (
        UPDATE S_ACCOUNT a SET BALANCE = a.BALANCE + b.BONUS,
                               LAST_UPDATE = GREATEST(now_t, a.LAST_UPDATE + interval '1 microsecond')
        FROM hotrow_bonus b WHERE a.CARD_ID = b.CARD_ID
        RETURNING a.CARD_ID, b.BONUS, a.BALANCE, a.LAST_UPDATE)
      INSERT INTO H_TRANSACTION SELECT LAST_UPDATE, CARD_ID, 0, BONUS, BALANCE FROM upd;
      GET DIAGNOSTICS n_cards = ROW_COUNT;
      SELECT COALESCE(SUM(b.BONUS), 0) INTO n_points FROM hotrow_bonus b
        WHERE EXISTS (SELECT 1 FROM S_ACCOUNT a WHERE a.CARD_ID = b.CARD_ID);
      t2 := clock_timestamp();
      INSERT INTO P_GRANT (GRANT_TIME, FROM_TIME, TO_TIME, RATE_PERCENT, CARDS, POINTS, QUERY_MS, UPDATE_MS,
                           IDEMPOTENCY_KEY, FINGERPRINT)
        VALUES (now_t, hotrow_ts(p_from), hotrow_ts(p_to), p_rate, n_cards, n_points,
                EXTRACT(EPOCH FROM t1 - t0) * 1000, EXTRACT(EPOCH FROM t2 - t1) * 1000, p_key,
                CASE WHEN p_key IS NULL THEN NULL ELSE p_fp END)
        RETURNING P_GRANT.GRANT_ID INTO new_id;
      RETURN QUERY SELECT 0::smallint, new_id, n_cards, n_points, EXTRACT(EPOCH FROM t1 - t0)::double precision * 1000,
                          EXTRACT(EPOCH FROM t2 - t1)::double precision * 1000, 0::double precision;
    END $$;
    -- The text outcomes of earlier builds, kept for instances still running
    -- beside this one during an upgrade: v0.1.0's signature (it granted
    -- overlapping periods) and the one with p_allow_overlap.
    CREATE OR REPLACE FUNCTION hotrow_grant(p_from bigint, p_to bigint, p_rate int, p_key text, p_fp text,
                                            p_allow_overlap boolean)
    RETURNS TABLE (outcome text, grant_id bigint, cards bigint, points bigint, query_ms double precision,
                   update_ms double precision, commit_ms double precision) LANGUAGE sql AS $$
      SELECT (ARRAY['ok', 'replayed', 'mismatch', 'future', 'overlap'])[v.outcome + 1], v.grant_id, v.cards, v.points,
             v.query_ms, v.update_ms, v.commit_ms
      FROM hotrow_grant_v2(p_from, p_to, p_rate, p_key, p_fp, p_allow_overlap) v $$;
    CREATE OR REPLACE FUNCTION hotrow_grant(p_from bigint, p_to bigint, p_rate int, p_key text, p_fp text)
    RETURNS TABLE (outcome text, grant_id bigint, cards bigint, points bigint, query_ms double precision,
                   update_ms double precision, commit_ms double precision) LANGUAGE sql AS $$
      SELECT * FROM hotrow_grant(p_from, p_to, p_rate, p_key, p_fp, true) $$;
  )sql");
      !s.ok())
    return s;
  return CreatePostgresGrantFunctions(conn);
}
}  // namespace

Status CreatePostgresPointCardSchema(pg::Connection& conn) {
  return pg::WithSchemaLock(conn, kSchemaLock, CreateSchema);
}

Result<std::unique_ptr<PostgresPointCardStore>> PostgresPointCardStore::Open(pg::Pool& pool,
                                                                             PostgresPointCardOptions options) {
  if (Status s = pg::CreateSchemaLocked(pool, kSchemaLock, CreateSchema); !s.ok()) return s;
  std::unique_ptr<PostgresPointCardStore> store(new PostgresPointCardStore(pool, options));
  // First: a fold an instance left unfinished resumes now.
  store->folder_ = std::thread([p = store.get()] { p->FoldLoop(); });
  store->KickFolder();
  store->purger_ = std::make_unique<PeriodicTask>(std::chrono::seconds(10), std::chrono::hours(1),
                                                  [p = store.get()] { p->Purge(); });
  return store;
}

PostgresPointCardStore::~PostgresPointCardStore() { Stop(); }

void PostgresPointCardStore::Stop() {
  {
    std::lock_guard lock(grant_mutex_);
    grants_stopped_ = true;
  }
  if (purger_) purger_->Stop();
  // A running grant answers first (it calls back into this store), then
  // the folder stops between two chunks; a fold left unfinished resumes at
  // the next start of any instance.
  std::thread grant;
  {
    std::unique_lock lock(grant_mutex_);
    grant_finished_.wait(lock, [this] { return !grant_running_; });
    grant = std::move(grant_thread_);
  }
  if (grant.joinable()) grant.join();
  {
    std::lock_guard lock(fold_mutex_);
    folder_stopped_ = true;
  }
  fold_wake_.notify_all();
  if (folder_.joinable()) folder_.join();
}

namespace {

// The statements of the request path, prepared once per connection.
constexpr pg::NamedSql kLockCard{"pointcard_lock_card", "SELECT pg_advisory_lock($1::int, $2::int)"};
constexpr pg::NamedSql kUnlockCard{"pointcard_unlock_card", "SELECT pg_advisory_unlock($1::int, $2::int)"};
constexpr pg::NamedSql kPay{"pointcard_pay",
                            "SELECT outcome, time_us, new_balance FROM hotrow_pay_v3($1, $2, $3, $4, $5)"};
// One statement, one snapshot: the balance and an applied grant's credit
// not folded yet (the fold moves one into the other in one transaction).
constexpr pg::NamedSql kSelectCard{"pointcard_card", R"(
  SELECT a.BALANCE, a.REGION_ID, hotrow_us(a.LAST_UPDATE),
         COALESCE((SELECT SUM(c.POINTS) FROM P_GRANT_CREDIT c JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID
                   WHERE c.CARD_ID = a.CARD_ID AND g.STATE = 'applied'), 0)
  FROM S_ACCOUNT a WHERE a.CARD_ID = $1)"};
// One statement, one snapshot: the card's existence and its page.
constexpr pg::NamedSql kSelectHistory{"pointcard_history", R"(
  SELECT hotrow_us(h.PAYMENT_TIME), h.STORE_ID, h.AMOUNT, h.BALANCE
  FROM S_ACCOUNT a LEFT JOIN LATERAL (
    SELECT * FROM H_TRANSACTION t WHERE t.CARD_ID = a.CARD_ID AND t.PAYMENT_TIME < hotrow_ts($2)
    ORDER BY t.PAYMENT_TIME DESC LIMIT $3) h ON true
  WHERE a.CARD_ID = $1 ORDER BY h.PAYMENT_TIME DESC)"};
// A staging grant has not answered yet: unknown. Grants of v0.5.0 and
// earlier (and of such instances during an upgrade) folded at GRANT_TIME.
constexpr pg::NamedSql kSelectGrant{"pointcard_grant_info", R"(
  SELECT CARDS, POINTS, QUERY_MS, UPDATE_MS, COMMIT_MS, hotrow_us(FROM_TIME), hotrow_us(TO_TIME), RATE_PERCENT,
         hotrow_us(COALESCE(APPLIED_TIME, GRANT_TIME)), STATE,
         hotrow_us(COALESCE(FOLDED_TIME, APPLIED_TIME, GRANT_TIME)), COALESCE(FOLD_MS, 0)
  FROM P_GRANT WHERE GRANT_ID = $1 AND STATE <> 'staging')"};
// Maintenance, not a request: without the request statement_timeout.
constexpr pg::NamedSql kPurgeKeys{"pointcard_purge_keys", "DELETE FROM P_IDEMPOTENCY WHERE CREATED < hotrow_ts($1)"};

}  // namespace

// Idempotency keys are kept at least 24 h: every hour, those older than the
// retention go.
void PostgresPointCardStore::Purge() {
  pool_.Submit([](Result<pg::Connection*> c) {
    if (!c.ok()) return log::Warn("idempotency purge skipped (the next pass retries): {}", c.status().ToString());
    auto done = (*c)->Pipeline({{"BEGIN"},
                                {"SET LOCAL statement_timeout = 0"},
                                {kPurgeKeys, {std::to_string(NowUs() - kIdempotencyRetentionUs)}},
                                {"COMMIT"}});
    const Status& s = done.status();
    if (s.ok()) return;
    log::Warn("idempotency purge failed (the next pass retries): {}", s.ToString());
    if (Status rolled = (*c)->Exec("ROLLBACK"); !rolled.ok()) (*c)->MarkBroken();
  });
}

Status PostgresPointCardStore::LoadRegions(std::vector<Region>* out) {
  auto rows = pool_.Run<pg::Rows>(
      [](pg::Connection& c) { return c.Query("SELECT REGION_ID, REGION_NAME FROM M_REGION ORDER BY REGION_ID"); },
      /*unbounded=*/true);
  if (!rows.ok()) return rows.status();
  for (int i = 0; i < rows->size(); ++i)
    out->push_back(Region{.region_id = rows->Int(i, 0), .name = std::string(rows->Text(i, 1))});
  return Status::Ok();
}

Status PostgresPointCardStore::LoadStores(std::vector<StoreInfo>* out) {
  auto rows = pool_.Run<pg::Rows>(
      [](pg::Connection& c) {
        return c.Query(
            "SELECT STORE_ID, STORE_ZIPCODE, STORE_ADDRESS, STORE_NAME, REGION_ID, S_LATITUDE, S_LONGITUDE "
            "FROM M_STORE ORDER BY STORE_ID");
      },
      /*unbounded=*/true);
  if (!rows.ok()) return rows.status();
  for (int i = 0; i < rows->size(); ++i)
    out->push_back(StoreInfo{.store_id = rows->Int(i, 0),
                             .zipcode = std::string(rows->Text(i, 1)),
                             .address = std::string(rows->Text(i, 2)),
                             .name = std::string(rows->Text(i, 3)),
                             .region_id = rows->Int(i, 4),
                             .latitude = rows->Double(i, 5),
                             .longitude = rows->Double(i, 6)});
  return Status::Ok();
}

void PostgresPointCardStore::GetCard(int64_t card_id, StoreCallback<Result<Card>> done) {
  pool_.Submit([card_id, done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = (*c)->Query(kSelectCard, {std::to_string(card_id)});
    if (!rows.ok()) return done(rows.status());
    if (rows->empty()) return done(NoSuchCard(card_id));
    int64_t pending = rows->Int(0, 3);
    done(Card{.card_id = card_id,
              .balance = rows->Int(0, 0) + pending,
              .region_id = rows->Int(0, 1),
              .last_update_us = rows->Int(0, 2),
              .pending_points = pending});
  });
}

void PostgresPointCardStore::GetGrant(int64_t grant_id, std::function<void(Result<GrantInfo>)> done) {
  pool_.Submit([grant_id, done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = (*c)->Query(kSelectGrant, {std::to_string(grant_id)});
    if (!rows.ok()) return done(rows.status());
    if (rows->empty()) return done(NoSuchGrant(grant_id));
    GrantInfo g;
    g.outcome = {grant_id, rows->Int(0, 0), rows->Int(0, 1), rows->Double(0, 2), rows->Double(0, 3), rows->Double(0, 4),
                 false};
    g.from_us = rows->Int(0, 5);
    g.to_us = rows->Int(0, 6);
    g.rate_percent = rows->Int(0, 7);
    g.applied_at_us = rows->Int(0, 8);
    if (rows->Text(0, 9) == "folded") {
      g.folded_at_us = rows->Int(0, 10);
      g.fold_ms = rows->Double(0, 11);
    }
    done(std::move(g));
  });
}

void PostgresPointCardStore::History(int64_t card_id, int64_t limit, std::optional<int64_t> before_us,
                                     std::function<void(Result<HistoryPage>)> done) {
  pool_.Submit([card_id, limit, before_us, done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = (*c)->Query(kSelectHistory, {std::to_string(card_id), std::to_string(before_us.value_or(INT64_MAX / 2)),
                                             std::to_string(limit + 1)});
    if (!rows.ok()) return done(rows.status());
    if (rows->empty()) return done(NoSuchCard(card_id));
    HistoryPage page;
    for (int i = 0; i < rows->size(); ++i) {
      if (rows->IsNull(i, 0)) continue;  // a card without (more) history
      page.rows.push_back(HistoryRow{.payment_time_us = rows->Int(i, 0),
                                     .card_id = card_id,
                                     .store_id = rows->Int(i, 1),
                                     .amount = rows->Int(i, 2),
                                     .balance = rows->Int(i, 3)});
    }
    if (static_cast<int64_t>(page.rows.size()) > limit) {
      page.rows.pop_back();
      page.next_before_us = page.rows.back().payment_time_us;
    }
    done(std::move(page));
  });
}

namespace {

// The outcome column of hotrow_pay_v3 (the numbers are the SQL function's
// contract, written beside it above).
//
// Why the payment rule exists twice, here in PL/pgSQL and in C++ in
// sqlite_store.cc: on PostgreSQL it must run inside the database, in one
// round trip under SERIALIZABLE (a rule in C++ would hold the transaction
// open across three more round trips, widening every conflict window and
// the per-card lock); on SQLite it runs on the writer thread inside the
// batch transaction, where a round trip costs nothing. The contract suite
// (tests/contract/pointcard_contract.cc) runs the same cases against both:
// refusal, replay, mismatch, unknown card, the balance after each.
enum class PayResult : int64_t { kOk = 0, kRefused, kNoCard, kMismatch, kReplayed, kReplayedRefused };

constexpr int kTries = 3;

}  // namespace

// The reference's policy: up to 3 tries; here with 1-10 ms of jittered
// backoff, doubling, between them (capped at 64x for the grant's longer
// retries).
void RetryBackoff(int attempt) {
  thread_local std::mt19937 rng{std::random_device{}()};
  int base_ms = 1 << std::min(attempt, 6);
  std::this_thread::sleep_for(
      std::chrono::microseconds(std::uniform_int_distribution<int>(base_ms * 500, base_ms * 1500)(rng)));
}

namespace {

// One card's payments queue instead of aborting each other: a session
// advisory lock on the card is taken in its own segment, before the
// SERIALIZABLE transaction begins, so that transaction's snapshot is taken
// after the previous payment on the card committed and released it; the two
// cannot conflict, across instances too. (A SELECT ... FOR UPDATE inside
// the transaction would wait the same, then fail with 40001: its snapshot
// predates the other's commit.) The release runs in its own segment, after
// the transaction, whatever became of it; a lost connection releases it
// too. One round trip for the three. Measured (hey -c 24 on one card,
// docs/pointcard.md): 25% of payments answered 503 after three tries
// before, none after.
constexpr int64_t kCardLockSpace = 72720004;  // advisory lock key space: (this, card id)

// `call` in one SERIALIZABLE transaction behind the card's advisory lock,
// with S_ACCOUNT locked ROW EXCLUSIVE (the grant's EXCLUSIVE waits for it).
Result<pg::Rows> RunSerializable(pg::Connection& c, int64_t card_id, const pg::NamedSql& call,
                                 const std::vector<pg::Param>& params) {
  // Card ids past int4 fold onto others: harmless, they only queue together.
  const std::vector<pg::Param> key = {std::to_string(kCardLockSpace), std::to_string(card_id % 2147483647)};
  const pg::Connection::Statement take[] = {{kLockCard, key}};
  const pg::Connection::Statement work[] = {{"BEGIN ISOLATION LEVEL SERIALIZABLE"},
                                            {"LOCK TABLE S_ACCOUNT IN ROW EXCLUSIVE MODE"},
                                            {call, params},
                                            {"COMMIT"}};
  // A failed statement leaves BEGIN's block aborted past its Sync: end it
  // first, or the release would fail inside it and the lock stay taken.
  const pg::Connection::Statement end[] = {{"ROLLBACK"}};
  const pg::Connection::Statement release[] = {{kUnlockCard, key}};
  const std::span<const pg::Connection::Statement> segments[] = {take, work, end, release};
  auto results = c.PipelineSegments(segments);
  if (!results[0].ok()) log::Debug("card lock not taken: {}", results[0].status().ToString());
  if (!results[3].ok()) log::Warn("card lock not released: {}", results[3].status().ToString());
  if (!results[1].ok()) return results[1].status();
  return std::move((*results[1])[2]);
}

}  // namespace

void PostgresPointCardStore::Pay(Payment p, std::string fingerprint, StoreCallback<Result<PaymentOutcome>> done) {
  pool_.Submit([p = std::move(p), fp = std::move(fingerprint), done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    std::vector<pg::Param> params = {std::to_string(p.card_id), std::to_string(p.store_id), std::to_string(p.amount),
                                     p.idempotency_key ? pg::Param(*p.idempotency_key) : pg::Param(), fp};
    Result<pg::Rows> rows = Status::Internal("unset");
    for (int attempt = 0; attempt < kTries; ++attempt) {
      if (attempt > 0) RetryBackoff(attempt);
      rows = RunSerializable(**c, p.card_id, kPay, params);
      // Two first uses of one idempotency key race to insert it: the loser
      // retries and finds the winner's answer.
      bool unique_race = !rows.ok() && rows.status().sqlstate() == "23505";
      if (rows.ok() || !(db::pg::IsRetryable(rows.status()) || unique_race)) break;
      db::pg::CountRetry(rows.status());
    }
    if (!rows.ok()) return done(rows.status());
    auto outcome = static_cast<PayResult>(rows->Int(0, 0));
    if (outcome == PayResult::kNoCard) return done(NoSuchCard(p.card_id));
    if (outcome == PayResult::kMismatch)
      return done(Status(ErrorCode::kIdempotencyMismatch,
                         "Idempotency-Key '" + *p.idempotency_key + "' was used for a different request on this card",
                         "Idempotency-Key"));
    if (outcome < PayResult::kOk || outcome > PayResult::kReplayedRefused)
      return done(Status::Internal("hotrow_pay_v3 answered outcome " + std::to_string(rows->Int(0, 0))));
    PaymentOutcome out;
    out.replayed = outcome == PayResult::kReplayed || outcome == PayResult::kReplayedRefused;
    out.refused = outcome == PayResult::kRefused || outcome == PayResult::kReplayedRefused;
    int64_t balance = rows->Int(0, 2);
    if (out.refused) {
      out.row = {
          .payment_time_us = 0, .card_id = p.card_id, .store_id = p.store_id, .amount = p.amount, .balance = balance};
    } else {
      out.row = {.payment_time_us = rows->Int(0, 1),
                 .card_id = p.card_id,
                 .store_id = p.store_id,
                 .amount = p.amount,
                 .balance = balance};
    }
    done(out);
  });
}

void PostgresPointCardStore::Grant(GrantRequest r, std::string fingerprint,
                                   std::function<void(Result<GrantOutcome>)> done) {
  // One at a time: the service's gate (service.h) admits a grant only when
  // the previous one has answered; across instances, the begin step refuses
  // one while another stages. Its own thread: the staging statement holds
  // a pool connection for seconds, and the lease's heartbeat and the apply
  // take others.
  std::unique_lock lock(grant_mutex_);
  if (grants_stopped_) {
    lock.unlock();
    return done(Status::Unavailable("the server is shutting down"));
  }
  grant_running_ = true;
  std::thread previous = std::move(grant_thread_);
  grant_thread_ = std::thread([this, r = std::move(r), fp = std::move(fingerprint), done = std::move(done),
                               previous = std::move(previous)]() mutable {
    if (previous.joinable()) previous.join();  // it has answered: only its return is left
    Result<GrantOutcome> outcome = RunGrant(r, fp);
    {
      std::lock_guard l(grant_mutex_);
      grant_running_ = false;
      grant_finished_.notify_all();
    }
    done(std::move(outcome));
  });
}

}  // namespace hotrow::pointcard
