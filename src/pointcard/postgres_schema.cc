// The point card's schema on PostgreSQL: the tables as v0.1.0 made them,
// their migrations, and the functions every other creates on (the times,
// the refusals of older releases' functions, the legacy grant). Payments'
// functions are in postgres_pay_sql.cc, the grant's in
// postgres_grant_sql.cc.
#include "pointcard/postgres_store.h"

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

// Point-card migration 2 (v0.8.0): what each history row is and who wrote
// it.
//   - TRANSACTION_ID: unique and positive; existing rows numbered in
//     primary-key order, new ones from a sequence (its default, so rows an
//     older instance inserts during a rolling upgrade get one too).
//   - ACTOR: admin, system (a grant's rows) or anonymous; the KIND trigger
//     fills it for an older instance's rows.
//   - REFERENCE, REASON: the client's texts; REFUND_OF: a refunded row's id.
// The backfill rewrites every row once: ALTER TABLE holds H_TRANSACTION
// for its length (docs/operations.md, upgrading to 0.8.0).
constexpr std::string_view kRowFields = R"sql(
  CREATE SEQUENCE H_TRANSACTION_ID_SEQ AS bigint;
  ALTER TABLE H_TRANSACTION ADD COLUMN TRANSACTION_ID bigint, ADD COLUMN ACTOR text, ADD COLUMN REFERENCE text,
    ADD COLUMN REASON text, ADD COLUMN REFUND_OF bigint;
  UPDATE H_TRANSACTION h SET TRANSACTION_ID = n.ID,
    ACTOR = CASE WHEN h.KIND = 'grant' THEN 'system' ELSE 'anonymous' END
  FROM (SELECT PAYMENT_TIME, CARD_ID, STORE_ID,
               row_number() OVER (ORDER BY PAYMENT_TIME, CARD_ID, STORE_ID) AS ID FROM H_TRANSACTION) n
  WHERE h.PAYMENT_TIME = n.PAYMENT_TIME AND h.CARD_ID = n.CARD_ID AND h.STORE_ID = n.STORE_ID;
  SELECT setval('H_TRANSACTION_ID_SEQ', COALESCE((SELECT MAX(TRANSACTION_ID) FROM H_TRANSACTION), 1),
                EXISTS (SELECT 1 FROM H_TRANSACTION));
  ALTER SEQUENCE H_TRANSACTION_ID_SEQ OWNED BY H_TRANSACTION.TRANSACTION_ID;
  ALTER TABLE H_TRANSACTION ALTER COLUMN TRANSACTION_ID SET DEFAULT nextval('H_TRANSACTION_ID_SEQ'),
    ALTER COLUMN TRANSACTION_ID SET NOT NULL, ALTER COLUMN ACTOR SET NOT NULL;
  CREATE UNIQUE INDEX H_TRANSACTION_ID ON H_TRANSACTION (TRANSACTION_ID);
  CREATE OR REPLACE FUNCTION hotrow_history_kind() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    NEW.KIND := COALESCE(NEW.KIND,
                         CASE WHEN NEW.STORE_ID = 0 THEN 'grant' WHEN NEW.AMOUNT > 0 THEN 'charge' ELSE 'payment' END);
    NEW.ACTOR := COALESCE(NEW.ACTOR, CASE WHEN NEW.STORE_ID = 0 THEN 'system' ELSE 'anonymous' END);
    RETURN NEW;
  END $$;
  DROP TRIGGER H_TRANSACTION_KIND ON H_TRANSACTION;
  CREATE TRIGGER H_TRANSACTION_KIND BEFORE INSERT ON H_TRANSACTION FOR EACH ROW
    WHEN (NEW.KIND IS NULL OR NEW.ACTOR IS NULL) EXECUTE FUNCTION hotrow_history_kind();
)sql";

// Point-card migration 3 (v0.9.0): cards a retailer issues and closes.
//   - S_ACCOUNT: EXTERNAL_REF (unique), STATUS (active, closed), CLOSED_TIME;
//     constant defaults, so no rewrite. Two partial indexes of the closed
//     cards: by id (a grant's staging leaves them out) and by CLOSED_TIME
//     (its apply drops the credit of those closed since its begin). No index
//     covers BALANCE or LAST_UPDATE: point uses stay HOT.
//   - S_ACCOUNT_CARD_ID_SEQ: the ids of new cards, past every seeded one
//     (the seed moves it on too).
//   - P_REQUEST_KEY: the idempotency keys of POST /cards, by route.
// ADD COLUMN takes S_ACCOUNT exclusively, for the whole step (the indexes
// too: 0.6 s on 1M cards): every read and write of the table waits. A
// transaction that holds it longer (an older instance's grant staging)
// would make everyone wait behind the step, so the step gives up after
// 10 s (lock_timeout) and the start fails, naming the migration: start
// again when the grant is done.
constexpr std::string_view kCards = R"sql(
  SET LOCAL lock_timeout = '10s';
  ALTER TABLE S_ACCOUNT ADD COLUMN EXTERNAL_REF text, ADD COLUMN STATUS text NOT NULL DEFAULT 'active',
    ADD COLUMN CLOSED_TIME timestamp;
  CREATE UNIQUE INDEX S_ACCOUNT_EXTERNAL_REF ON S_ACCOUNT (EXTERNAL_REF) WHERE EXTERNAL_REF IS NOT NULL;
  CREATE INDEX S_ACCOUNT_CLOSED ON S_ACCOUNT (CARD_ID) WHERE STATUS = 'closed';
  CREATE INDEX S_ACCOUNT_CLOSED_TIME ON S_ACCOUNT (CLOSED_TIME) WHERE STATUS = 'closed';
  CREATE SEQUENCE S_ACCOUNT_CARD_ID_SEQ AS bigint OWNED BY S_ACCOUNT.CARD_ID;
  SELECT setval('S_ACCOUNT_CARD_ID_SEQ', COALESCE((SELECT MAX(CARD_ID) FROM S_ACCOUNT), 1),
                EXISTS (SELECT 1 FROM S_ACCOUNT));
  CREATE TABLE P_REQUEST_KEY (
    ROUTE       text      NOT NULL,
    KEY         text      NOT NULL,
    FINGERPRINT text      NOT NULL,
    CREATED     timestamp NOT NULL,
    RESULT_ID   bigint    NOT NULL,
    PRIMARY KEY (ROUTE, KEY)
  );
  CREATE INDEX P_REQUEST_KEY_CREATED ON P_REQUEST_KEY (CREATED);
)sql";

// 4 (v0.10.0): store keys, a terminal's credential (M_STORE_KEY):
// SHA-256 of the secret in hex, never the secret; a revoked key keeps its
// row, so the rows it wrote (ACTOR key:<KEY_ID>) still name it. A new
// table: no lock on another.
constexpr std::string_view kStoreKeys = R"sql(
  CREATE TABLE M_STORE_KEY (
    KEY_ID         text      PRIMARY KEY,
    STORE_ID       int       NOT NULL,
    SECRET_SHA256  text      NOT NULL,
    CREATED_TIME   timestamp NOT NULL,
    LAST_USED_TIME timestamp,
    REVOKED_TIME   timestamp
  );
  CREATE INDEX M_STORE_KEY_STORE ON M_STORE_KEY (STORE_ID, CREATED_TIME);
)sql";

// 5 (v0.12.0): holds (model.h, Hold).
//   - P_HOLD, its ids from a sequence (bigserial); P_HOLD_CARD lists a
//     card's holds, P_HOLD_OPEN finds what it holds.
//   - S_ACCOUNT.HOLD_TIME: the card's newest hold decision (create,
//     capture, void, an expiry stamped). A card's time is after it and
//     after LAST_UPDATE, so decisions about its holds only move forward;
//     NULL, the card never had a hold, and a payment reads no P_HOLD at all
//     (no SSI read lock on a table other cards' holds write). Nullable, no
//     default: no rewrite, a moment's exclusive lock (lock_timeout as in 3).
//   - P_IDEMPOTENCY.HOLD_ID: the hold a hold, capture or void key answers.
// A contract step: this release makes hotrow_pay_v6 (0.10.0-0.11.x's) a
// wrapper of v7, so that running older instances respect holds; one of
// them starting again would put its own v6 back (every start recreates its
// functions) and spend held points. So older binaries are refused at start
// (running ones keep serving), and a downgrade is a restore.
constexpr std::string_view kHolds = R"sql(
  SET LOCAL lock_timeout = '10s';
  ALTER TABLE S_ACCOUNT ADD COLUMN HOLD_TIME timestamp;
  CREATE TABLE P_HOLD (
    HOLD_ID         bigserial PRIMARY KEY,
    CARD_ID         bigint    NOT NULL,
    STORE_ID        int       NOT NULL,
    AMOUNT          bigint    NOT NULL,
    STATUS          text      NOT NULL,
    CREATED_TIME    timestamp NOT NULL,
    EXPIRES_TIME    timestamp NOT NULL,
    ENDED_TIME      timestamp,
    CAPTURE_ID      bigint,
    CAPTURED_AMOUNT bigint,
    ACTOR           text      NOT NULL
  );
  CREATE INDEX P_HOLD_CARD ON P_HOLD (CARD_ID, HOLD_ID);
  CREATE INDEX P_HOLD_OPEN ON P_HOLD (CARD_ID, EXPIRES_TIME) WHERE STATUS = 'open';
  ALTER TABLE P_IDEMPOTENCY ADD COLUMN HOLD_ID bigint;
)sql";

// 6 (v0.14.0): expiring lots (model.h, Lot; as SQLite's point-card schema
// 6, sqlite_schema.cc): only credit that expires is a lot.
//   - P_LOT: a grant's credit to a card, REMAINING what is left of it,
//     RESERVED what open holds keep; EXPIRED_TIME set once, by the write
//     (or sweep) that writes it out, EXPIRY_ID its expiry row.
//     P_LOT_CARD lists a card's lots in expiry order (reads, the lot
//     list), P_LOT_OPEN those not written out yet (what a write reads:
//     a card's history of spent, written-out lots stays unread, so SSI
//     never promotes a payment's read locks to all of P_LOT), P_LOT_DUE
//     all of those by expiry (the sweep). No index names REMAINING or
//     RESERVED, and pages are half full
//     (fillfactor 50, as S_ACCOUNT): a payment's take is a HOT update that
//     writes no index entry. With SQLite's partial indexes on REMAINING,
//     every take wrote entries into index pages other cards' payments read,
//     and SERIALIZABLE payments on cards with lots failed with 40001: 2.6%
//     of payments and 14.5% of refunds answered 503 after three tries
//     (bench/lots-conflicts.sh).
//   - P_LOT_USE: what each row took from (payment, capture, expiry:
//     negative) or gave back to (refund: positive) each lot.
//   - P_LOT_HOLD: what each open hold reserves of each lot, with the
//     hold's EXPIRES_TIME (P_LOT_HOLD_DUE: the sweep's holds past theirs).
//   - P_GRANT.EXPIRES_TIME: its lots' expiry, NULL for a grant whose points
//     never expire.
//   - S_ACCOUNT.LOT_TIME: when the card got its first lot; NULL, it never
//     had one, and its writes read no P_LOT (no SSI read lock on a table
//     other cards' lots write), as HOLD_TIME is for P_HOLD. Nullable, no
//     default: no rewrite (lock_timeout as in 3).
// A contract step, as 5: 0.12.0 and 0.13.0 instances would spend lot
// points without taking them from their lots, so they are refused at
// start. This release replaces the bodies of the functions they call
// (same signatures), so the ones still running keep lots right.
constexpr std::string_view kLots = R"sql(
  SET LOCAL lock_timeout = '10s';
  ALTER TABLE S_ACCOUNT ADD COLUMN LOT_TIME timestamp;
  ALTER TABLE P_GRANT ADD COLUMN EXPIRES_TIME timestamp;
  CREATE TABLE P_LOT (
    LOT_ID       bigserial PRIMARY KEY,
    CARD_ID      bigint    NOT NULL,
    GRANT_ID     bigint    NOT NULL,
    SOURCE_ID    bigint    NOT NULL,
    AMOUNT       bigint    NOT NULL,
    REMAINING    bigint    NOT NULL,
    RESERVED     bigint    NOT NULL,
    CREATED_TIME timestamp NOT NULL,
    EXPIRES_TIME timestamp NOT NULL,
    EXPIRED_TIME timestamp,
    EXPIRY_ID    bigint
  ) WITH (fillfactor = 50);
  CREATE INDEX P_LOT_CARD ON P_LOT (CARD_ID, EXPIRES_TIME, LOT_ID);
  CREATE INDEX P_LOT_OPEN ON P_LOT (CARD_ID, EXPIRES_TIME, LOT_ID) WHERE EXPIRED_TIME IS NULL;
  CREATE INDEX P_LOT_DUE ON P_LOT (EXPIRES_TIME) WHERE EXPIRED_TIME IS NULL;
  CREATE TABLE P_LOT_USE (
    TRANSACTION_ID bigint NOT NULL,
    LOT_ID         bigint NOT NULL,
    AMOUNT         bigint NOT NULL,
    PRIMARY KEY (TRANSACTION_ID, LOT_ID)
  );
  CREATE INDEX P_LOT_USE_LOT ON P_LOT_USE (LOT_ID);
  CREATE TABLE P_LOT_HOLD (
    HOLD_ID      bigint    NOT NULL,
    LOT_ID       bigint    NOT NULL,
    AMOUNT       bigint    NOT NULL,
    EXPIRES_TIME timestamp NOT NULL,
    PRIMARY KEY (HOLD_ID, LOT_ID)
  );
  CREATE INDEX P_LOT_HOLD_LOT ON P_LOT_HOLD (LOT_ID);
  CREATE INDEX P_LOT_HOLD_DUE ON P_LOT_HOLD (EXPIRES_TIME);
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
  if (Status s = pg::Migrate(conn, "pointcard",
                             {{.sql = kStagedGrants},
                              {.sql = kRowFields},
                              {.sql = kCards},
                              {.sql = kStoreKeys},
                              {.sql = kHolds, .contract = true},
                              {.sql = kLots, .contract = true}});
      !s.ok())
    return s;
  return CreateFunctions(conn);
}

Status CreateFunctions(pg::Connection& conn) {
  if (Status s = conn.Exec(R"sql(
    CREATE OR REPLACE FUNCTION hotrow_us(t timestamp) RETURNS bigint
      LANGUAGE sql IMMUTABLE AS $$ SELECT (EXTRACT(EPOCH FROM t) * 1000000)::bigint $$;
    CREATE OR REPLACE FUNCTION hotrow_ts(us bigint) RETURNS timestamp
      LANGUAGE sql IMMUTABLE AS $$ SELECT 'epoch'::timestamp + us * interval '1 microsecond' $$;

    -- Refuses a payment on a closed card for a release's function that
    -- has no outcome for it (SQLSTATE HR002: an error, nothing written).
    CREATE OR REPLACE FUNCTION hotrow_card_closed(p_card bigint) RETURNS smallint LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'card % is closed', p_card USING ERRCODE = 'HR002';
    END $$;
    -- Likewise for a store that does not exist (SQLSTATE HR003).
    CREATE OR REPLACE FUNCTION hotrow_no_store(p_store int) RETURNS smallint LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'no store with id %', p_store USING ERRCODE = 'HR003';
    END $$;

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
        WHERE PAYMENT_TIME >= hotrow_ts(p_from) AND PAYMENT_TIME < hotrow_ts(p_to) AND KIND = 'charge'
        GROUP BY CARD_ID HAVING SUM(AMOUNT) * p_rate / 100 > 0;
      t1 := clock_timestamp();
      now_t := clock_timestamp() AT TIME ZONE 'UTC';
      WITH upd AS (
        UPDATE S_ACCOUNT a SET BALANCE = a.BALANCE + b.BONUS,
                               LAST_UPDATE = GREATEST(now_t, a.LAST_UPDATE + interval '1 microsecond')
        FROM hotrow_bonus b WHERE a.CARD_ID = b.CARD_ID AND a.STATUS = 'active'
        RETURNING a.CARD_ID, b.BONUS, a.BALANCE, a.LAST_UPDATE)
      INSERT INTO H_TRANSACTION SELECT LAST_UPDATE, CARD_ID, 0, BONUS, BALANCE FROM upd;
      GET DIAGNOSTICS n_cards = ROW_COUNT;
      SELECT COALESCE(SUM(b.BONUS), 0) INTO n_points FROM hotrow_bonus b
        WHERE EXISTS (SELECT 1 FROM S_ACCOUNT a WHERE a.CARD_ID = b.CARD_ID AND a.STATUS = 'active');
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
  if (Status s = CreatePostgresLotFunctions(conn); !s.ok()) return s;
  if (Status s = CreatePostgresPaymentFunctions(conn); !s.ok()) return s;
  if (Status s = CreatePostgresCardFunctions(conn); !s.ok()) return s;
  if (Status s = CreatePostgresStoreFunctions(conn); !s.ok()) return s;
  if (Status s = CreatePostgresKeyFunctions(conn); !s.ok()) return s;
  if (Status s = CreatePostgresRefundFunctions(conn); !s.ok()) return s;
  if (Status s = CreatePostgresHoldFunctions(conn); !s.ok()) return s;
  return CreatePostgresGrantFunctions(conn);
}
}  // namespace

Status CreatePostgresPointCardSchema(pg::Connection& conn) {
  return pg::WithSchemaLock(conn, kSchemaLock, CreateSchema);
}

Status CreatePostgresPointCardSchema(pg::Pool& pool) { return pg::CreateSchemaLocked(pool, kSchemaLock, CreateSchema); }

}  // namespace hotrow::pointcard
