// The point card's SQLite schema: the tables as v0.1.0 made them, the
// migrations that bring them forward, and the numbering of rows an older
// release wrote (sqlite_store.h).
#include "ops/log.h"
#include "pointcard/sqlite_store.h"

namespace hotrow::pointcard {

namespace sqlite = db::sqlite;

Status CreatePointCardTables(sqlite::Connection& conn) {
  return conn.Exec(R"sql(
    CREATE TABLE IF NOT EXISTS M_REGION (
      REGION_ID   INTEGER PRIMARY KEY,
      REGION_NAME TEXT    NOT NULL
    );
    CREATE TABLE IF NOT EXISTS M_STORE (
      STORE_ID      INTEGER PRIMARY KEY,
      STORE_ZIPCODE TEXT,
      STORE_ADDRESS TEXT,
      STORE_NAME    TEXT,
      REGION_ID     INTEGER NOT NULL,
      S_LATITUDE    REAL,
      S_LONGITUDE   REAL
    );
    -- The stores of one region (the reference's "stores by REGION_ID" query).
    CREATE INDEX IF NOT EXISTS M_STORE_REGION ON M_STORE (REGION_ID);
    -- Times are UTC microseconds since the epoch.
    CREATE TABLE IF NOT EXISTS S_ACCOUNT (
      CARD_ID     INTEGER PRIMARY KEY,
      BALANCE     INTEGER NOT NULL,
      REGION_ID   INTEGER NOT NULL,
      LAST_UPDATE INTEGER NOT NULL
    );
    -- Append-only. The primary key (the reference's) orders by time, which is
    -- what the grant's period scan needs.
    CREATE TABLE IF NOT EXISTS H_TRANSACTION (
      PAYMENT_TIME INTEGER NOT NULL,
      CARD_ID      INTEGER NOT NULL,
      STORE_ID     INTEGER NOT NULL,
      AMOUNT       INTEGER NOT NULL,
      BALANCE      INTEGER NOT NULL,
      PRIMARY KEY (PAYMENT_TIME, CARD_ID, STORE_ID)
    ) WITHOUT ROWID;
    -- A card's history newest first (GET .../transactions) and the invariant
    -- checker's per-card scan in time order.
    CREATE INDEX IF NOT EXISTS H_TRANSACTION_CARD_TIME ON H_TRANSACTION (CARD_ID, PAYMENT_TIME);
    -- Idempotency keys of point uses, with the outcome they got. CREATED
    -- (indexed) drives the purge of keys older than the retention.
    CREATE TABLE IF NOT EXISTS P_IDEMPOTENCY (
      CARD_ID      INTEGER NOT NULL,
      KEY          TEXT    NOT NULL,
      FINGERPRINT  TEXT    NOT NULL,
      CREATED      INTEGER NOT NULL,
      REFUSED      INTEGER NOT NULL,
      PAYMENT_TIME INTEGER NOT NULL,
      STORE_ID     INTEGER NOT NULL,
      AMOUNT       INTEGER NOT NULL,
      BALANCE      INTEGER NOT NULL,
      PRIMARY KEY (CARD_ID, KEY)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS P_IDEMPOTENCY_CREATED ON P_IDEMPOTENCY (CREATED);
    -- One row per completed grant; its idempotency key, if any, is unique.
    CREATE TABLE IF NOT EXISTS P_GRANT (
      GRANT_ID        INTEGER PRIMARY KEY,
      GRANT_TIME      INTEGER NOT NULL,
      FROM_TIME       INTEGER NOT NULL,
      TO_TIME         INTEGER NOT NULL,
      RATE_PERCENT    INTEGER NOT NULL,
      CARDS           INTEGER NOT NULL,
      POINTS          INTEGER NOT NULL,
      QUERY_MS        REAL    NOT NULL,
      UPDATE_MS       REAL    NOT NULL,
      COMMIT_MS       REAL    NOT NULL DEFAULT 0,
      IDEMPOTENCY_KEY TEXT UNIQUE,
      FINGERPRINT     TEXT
    );
  )sql");
}

Status CreatePointCardSchema(sqlite::Connection& conn) {
  // As v0.1.0 made them; the steps below bring them forward.
  if (Status s = CreatePointCardTables(conn); !s.ok()) return s;
  // The point-card file's own record (pointcard/sqlite_file.h).
  return sqlite::Migrate(conn,
                         {
                             // 1 (v0.5.0): stall-free grants (the protocol in sqlite_store.h).
                             //  - KIND says what a history row is; a grant counts charges only.
                             //  - P_GRANT's STATE: staging (credits being written, invisible),
                             //    applied (visible, history rows being folded), folded.
                             //  - P_GRANT_CREDIT: a grant's credit per card until it is folded.
                             {.sql = R"sql(
                               ALTER TABLE H_TRANSACTION ADD COLUMN KIND TEXT;
                               UPDATE H_TRANSACTION SET KIND = CASE WHEN STORE_ID = 0 THEN 'grant'
                                 WHEN AMOUNT > 0 THEN 'charge' ELSE 'payment' END;
                               ALTER TABLE P_GRANT ADD COLUMN STATE TEXT NOT NULL DEFAULT 'folded';
                               ALTER TABLE P_GRANT ADD COLUMN APPLIED_TIME INTEGER;
                               ALTER TABLE P_GRANT ADD COLUMN FOLDED_TIME INTEGER;
                               ALTER TABLE P_GRANT ADD COLUMN FOLD_MS REAL NOT NULL DEFAULT 0;
                               UPDATE P_GRANT SET APPLIED_TIME = GRANT_TIME, FOLDED_TIME = GRANT_TIME;
                               CREATE INDEX P_GRANT_UNFOLDED ON P_GRANT (STATE) WHERE STATE <> 'folded';
                               CREATE TABLE P_GRANT_CREDIT (
                                 CARD_ID  INTEGER NOT NULL,
                                 GRANT_ID INTEGER NOT NULL,
                                 POINTS   INTEGER NOT NULL,
                                 PRIMARY KEY (CARD_ID, GRANT_ID)
                               ) WITHOUT ROWID;
                             )sql"},
                             // 2 (v0.8.0): what each history row is and who wrote it.
                             //  - TRANSACTION_ID, unique and positive: existing rows numbered in
                             //    primary-key order, new ones one past the largest.
                             //  - ACTOR: admin, system (a grant's rows) or anonymous.
                             //  - REFERENCE, REASON: the client's texts; REFUND_OF: the refunded
                             //    row's TRANSACTION_ID.
                             // Columns without defaults (an expand step): a release before this
                             // one leaves them NULL in the rows it writes, and the next Open
                             // numbers those (NumberNewRows).
                             {.sql = R"sql(
                               ALTER TABLE H_TRANSACTION ADD COLUMN TRANSACTION_ID INTEGER;
                               ALTER TABLE H_TRANSACTION ADD COLUMN ACTOR TEXT;
                               ALTER TABLE H_TRANSACTION ADD COLUMN REFERENCE TEXT;
                               ALTER TABLE H_TRANSACTION ADD COLUMN REASON TEXT;
                               ALTER TABLE H_TRANSACTION ADD COLUMN REFUND_OF INTEGER;
                               UPDATE H_TRANSACTION SET TRANSACTION_ID = n.ID,
                                 ACTOR = CASE WHEN H_TRANSACTION.KIND = 'grant' THEN 'system' ELSE 'anonymous' END
                               FROM (SELECT PAYMENT_TIME AS T, CARD_ID AS C, STORE_ID AS S,
                                       row_number() OVER (ORDER BY PAYMENT_TIME, CARD_ID, STORE_ID) AS ID
                                     FROM H_TRANSACTION) n
                               WHERE H_TRANSACTION.PAYMENT_TIME = n.T AND H_TRANSACTION.CARD_ID = n.C
                                 AND H_TRANSACTION.STORE_ID = n.S;
                               CREATE UNIQUE INDEX H_TRANSACTION_ID ON H_TRANSACTION (TRANSACTION_ID);
                             )sql"},
                             // 3 (v0.9.0): cards a retailer issues and closes.
                             //  - S_ACCOUNT: EXTERNAL_REF (the retailer's id, unique), STATUS
                             //    (active, closed) and CLOSED_TIME; the closed cards' index (by
                             //    CLOSED_TIME, with their ids) is what a grant reads: its query
                             //    leaves them out, its apply drops those closed since.
                             //  - P_REQUEST_KEY: the idempotency keys of POST /cards, scoped to
                             //    the route, with the id of what they made.
                             {.sql = R"sql(
                               ALTER TABLE S_ACCOUNT ADD COLUMN EXTERNAL_REF TEXT;
                               ALTER TABLE S_ACCOUNT ADD COLUMN STATUS TEXT NOT NULL DEFAULT 'active';
                               ALTER TABLE S_ACCOUNT ADD COLUMN CLOSED_TIME INTEGER;
                               CREATE UNIQUE INDEX S_ACCOUNT_EXTERNAL_REF ON S_ACCOUNT (EXTERNAL_REF)
                                 WHERE EXTERNAL_REF IS NOT NULL;
                               CREATE INDEX S_ACCOUNT_CLOSED ON S_ACCOUNT (CLOSED_TIME) WHERE STATUS = 'closed';
                               CREATE TABLE P_REQUEST_KEY (
                                 ROUTE       TEXT    NOT NULL,
                                 KEY         TEXT    NOT NULL,
                                 FINGERPRINT TEXT    NOT NULL,
                                 CREATED     INTEGER NOT NULL,
                                 RESULT_ID   INTEGER NOT NULL,
                                 PRIMARY KEY (ROUTE, KEY)
                               ) WITHOUT ROWID;
                               CREATE INDEX P_REQUEST_KEY_CREATED ON P_REQUEST_KEY (CREATED);
                             )sql"},
                             // 4 (v0.10.0): store keys, a terminal's credential. SHA-256 of the
                             // secret (hex), never the secret; a revoked key keeps its row, so
                             // the rows it wrote (ACTOR key:<KEY_ID>) still name it.
                             {.sql = R"sql(
                               CREATE TABLE M_STORE_KEY (
                                 KEY_ID         TEXT    PRIMARY KEY,
                                 STORE_ID       INTEGER NOT NULL,
                                 SECRET_SHA256  TEXT    NOT NULL,
                                 CREATED_TIME   INTEGER NOT NULL,
                                 LAST_USED_TIME INTEGER,
                                 REVOKED_TIME   INTEGER
                               ) WITHOUT ROWID;
                               CREATE INDEX M_STORE_KEY_STORE ON M_STORE_KEY (STORE_ID, CREATED_TIME);
                             )sql"},
                             // 5 (v0.12.0): holds (model.h, Hold). A hold is no history row
                             // until its capture; an open one counts in `held` until EXPIRES_TIME.
                             //  - P_HOLD_CARD lists a card's holds; P_HOLD_OPEN finds what it holds.
                             //  - P_IDEMPOTENCY.HOLD_ID: the hold a hold, capture or void key
                             //    answers (NULL for a payment's or a refund's).
                             {.sql = R"sql(
                               CREATE TABLE P_HOLD (
                                 HOLD_ID         INTEGER PRIMARY KEY,
                                 CARD_ID         INTEGER NOT NULL,
                                 STORE_ID        INTEGER NOT NULL,
                                 AMOUNT          INTEGER NOT NULL,
                                 STATUS          TEXT    NOT NULL,
                                 CREATED_TIME    INTEGER NOT NULL,
                                 EXPIRES_TIME    INTEGER NOT NULL,
                                 ENDED_TIME      INTEGER,
                                 CAPTURE_ID      INTEGER,
                                 CAPTURED_AMOUNT INTEGER,
                                 ACTOR           TEXT    NOT NULL
                               );
                               CREATE INDEX P_HOLD_CARD ON P_HOLD (CARD_ID, HOLD_ID);
                               CREATE INDEX P_HOLD_OPEN ON P_HOLD (CARD_ID, EXPIRES_TIME) WHERE STATUS = 'open';
                               ALTER TABLE P_IDEMPOTENCY ADD COLUMN HOLD_ID INTEGER;
                             )sql",
                              // A contract step: 0.11.0 would ignore open holds and spend their
                              // points, so older binaries are refused (a downgrade is a restore).
                              .contract = true},
                             // 6 (v0.13.0): expiring lots (model.h, Lot). Only credit that
                             // expires is a lot; the rest of a balance never expires.
                             //  - P_LOT: a grant's credit to a card, with REMAINING and what
                             //    open holds reserve of it; EXPIRED_TIME and EXPIRY_ID once its
                             //    expiry is written out. P_LOT_LIVE finds a card's lots with
                             //    points left (in the order payments take them), P_LOT_OPEN a
                             //    card's lots not written out (those due, for its next write),
                             //    P_LOT_DUE every lot not written out (the sweep).
                             //  - P_LOT_USE: what each row took from (payment, capture, expiry:
                             //    negative) or gave back to (refund: positive) each lot.
                             //  - P_LOT_HOLD: what each open hold reserves of each lot, with the
                             //    hold's EXPIRES_TIME: P_LOT_HOLD_DUE finds holds past their
                             //    expiry that still reserve (the sweep releases them).
                             //  - P_GRANT.EXPIRES_TIME: when a grant's lots expire (NULL: never).
                             {.sql = R"sql(
                               CREATE TABLE P_LOT (
                                 LOT_ID       INTEGER PRIMARY KEY,
                                 CARD_ID      INTEGER NOT NULL,
                                 GRANT_ID     INTEGER NOT NULL,
                                 SOURCE_ID    INTEGER,
                                 AMOUNT       INTEGER NOT NULL,
                                 REMAINING    INTEGER NOT NULL,
                                 RESERVED     INTEGER NOT NULL DEFAULT 0,
                                 CREATED_TIME INTEGER NOT NULL,
                                 EXPIRES_TIME INTEGER NOT NULL,
                                 EXPIRED_TIME INTEGER,
                                 EXPIRY_ID    INTEGER
                               );
                               CREATE INDEX P_LOT_OPEN ON P_LOT (CARD_ID, EXPIRES_TIME) WHERE EXPIRED_TIME IS NULL;
                               CREATE INDEX P_LOT_LIVE ON P_LOT (CARD_ID, EXPIRES_TIME, LOT_ID) WHERE REMAINING > 0;
                               CREATE INDEX P_LOT_DUE ON P_LOT (EXPIRES_TIME) WHERE EXPIRED_TIME IS NULL;
                               CREATE TABLE P_LOT_USE (
                                 TRANSACTION_ID INTEGER NOT NULL,
                                 LOT_ID         INTEGER NOT NULL,
                                 AMOUNT         INTEGER NOT NULL,
                                 PRIMARY KEY (TRANSACTION_ID, LOT_ID)
                               ) WITHOUT ROWID;
                               CREATE INDEX P_LOT_USE_LOT ON P_LOT_USE (LOT_ID);
                               CREATE TABLE P_LOT_HOLD (
                                 HOLD_ID INTEGER NOT NULL,
                                 LOT_ID  INTEGER NOT NULL,
                                 AMOUNT  INTEGER NOT NULL,
                                 EXPIRES_TIME INTEGER NOT NULL,
                                 PRIMARY KEY (HOLD_ID, LOT_ID)
                               ) WITHOUT ROWID;
                               CREATE INDEX P_LOT_HOLD_LOT ON P_LOT_HOLD (LOT_ID);
                               CREATE INDEX P_LOT_HOLD_DUE ON P_LOT_HOLD (EXPIRES_TIME);
                               ALTER TABLE P_GRANT ADD COLUMN EXPIRES_TIME INTEGER;
                             )sql",
                              // A contract step: 0.12.0 would spend a lot's points without
                              // taking them from the lot, which would then expire them again.
                              .contract = true},
                         },
                         "point card");
}

Result<int64_t> LastTransactionId(sqlite::Connection& conn) {
  auto q = conn.Prepare("SELECT COALESCE(MAX(TRANSACTION_ID), 0) FROM H_TRANSACTION");
  if (!q.ok()) return q.status();
  auto row = q->Step();
  if (!row.ok()) return row.status();
  int64_t last = q->Int(0);
  if (Status s = q->Run(); !s.ok()) return s;
  return last;
}

// Rows a release before 0.8.0 wrote into a file this one had migrated (a
// downgrade, then this release again) have no TRANSACTION_ID or ACTOR: they
// get them now, numbered after every other row.
Status NumberNewRows(sqlite::Connection& conn) {
  auto unnumbered = sqlite::QueryInt(conn, "SELECT COUNT(*) FROM H_TRANSACTION WHERE TRANSACTION_ID IS NULL");
  if (!unnumbered.ok()) return unnumbered.status();
  if (*unnumbered == 0) return Status::Ok();
  if (Status s = conn.Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  auto last = LastTransactionId(conn);
  Status s = last.status();
  if (s.ok()) {
    auto q = conn.Prepare(
        "UPDATE H_TRANSACTION SET TRANSACTION_ID = ?1 + n.RN, "
        "ACTOR = COALESCE(ACTOR, CASE WHEN KIND = 'grant' THEN 'system' ELSE 'anonymous' END) "
        "FROM (SELECT PAYMENT_TIME AS T, CARD_ID AS C, STORE_ID AS S, "
        "row_number() OVER (ORDER BY PAYMENT_TIME, CARD_ID, STORE_ID) AS RN FROM H_TRANSACTION "
        "WHERE TRANSACTION_ID IS NULL) n "
        "WHERE H_TRANSACTION.PAYMENT_TIME = n.T AND H_TRANSACTION.CARD_ID = n.C AND H_TRANSACTION.STORE_ID = n.S");
    s = q.ok() ? q->Bind(1, *last).Run() : q.status();
  }
  if (s.ok()) s = conn.Exec("COMMIT");
  if (!s.ok()) {
    log::WarnIfFailed(conn.Exec("ROLLBACK"), "SQLite: ROLLBACK");
    return s;
  }
  log::Info("point card: numbered {} history row(s) an earlier release wrote", *unnumbered);
  return Status::Ok();
}

}  // namespace hotrow::pointcard
