// The grant on PostgreSQL: staged credits, one small atomic apply, a fold
// after the answer. The protocol and why it is serializable are at the top
// of postgres_store.h; this file holds its SQL and its driver.
#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>

#include "ops/failpoint.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "pointcard/postgres_store.h"

namespace hotrow::pointcard {

namespace pg = db::pg;

// Advisory lock keys (another store's are 72720001-72720004).
constexpr int64_t kGrantLock = 72720005;  // begin and apply, cluster-wide
// (72720006, grant id) is taken shared by every fold chunk (in the SQL):
// held exclusive, it pauses the grant's fold (the tests hold one off so).

Status CreatePostgresGrantFunctions(pg::Connection& conn) {
  return conn.Exec(R"sql(
    -- Staging grants whose lease ran out: their instance died or lost
    -- PostgreSQL before the apply, so they never applied. The P_GRANT row
    -- goes first and its credits with it, in one statement: a heartbeat that
    -- renews the lease meanwhile keeps both (the DELETE re-checks the lease
    -- on the row's newest version). A row that is locked belongs to a
    -- staging transaction still running, alive by definition: skipped, never
    -- waited for.
    CREATE OR REPLACE FUNCTION hotrow_grant_expire_v1() RETURNS bigint LANGUAGE plpgsql AS $$
    DECLARE
      now_t timestamp := clock_timestamp() AT TIME ZONE 'UTC';
      n bigint;
    BEGIN
      WITH gone AS (
        DELETE FROM P_GRANT WHERE GRANT_ID IN (
          SELECT g.GRANT_ID FROM P_GRANT g WHERE g.STATE = 'staging' AND g.LEASE_UNTIL < now_t
          FOR UPDATE SKIP LOCKED)
        RETURNING GRANT_ID)
      DELETE FROM P_GRANT_CREDIT c USING gone WHERE c.GRANT_ID = gone.GRANT_ID;
      GET DIAGNOSTICS n = ROW_COUNT;
      RETURN n;
    END $$;

    -- Step 1, begin, under the caller's pg_advisory_xact_lock(kGrantLock).
    -- outcome: 0 begun (grant_id), 1 replayed, 2 key mismatch, 3 the period
    -- has not ended by the database's clock, 4 overlap (grant_id names the
    -- earlier grant, cards and points carry its bounds in microseconds),
    -- 5 another grant is staging.
    CREATE OR REPLACE FUNCTION hotrow_grant_begin_v1(p_from bigint, p_to bigint, p_rate int, p_key text, p_fp text,
                                                     p_allow_overlap boolean, p_lease_ms int)
    RETURNS TABLE (outcome smallint, grant_id bigint, cards bigint, points bigint, query_ms double precision,
                   update_ms double precision, commit_ms double precision) LANGUAGE plpgsql AS $$
    DECLARE
      g P_GRANT%ROWTYPE;
      now_t timestamp := clock_timestamp() AT TIME ZONE 'UTC';
      new_id bigint;
    BEGIN
      PERFORM hotrow_grant_expire_v1();
      IF p_key IS NOT NULL THEN
        SELECT * INTO g FROM P_GRANT WHERE IDEMPOTENCY_KEY = p_key;
        IF FOUND THEN
          IF g.FINGERPRINT <> p_fp THEN
            RETURN QUERY SELECT 2::smallint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::double precision,
                                NULL::double precision, NULL::double precision;
          ELSIF g.STATE = 'staging' THEN
            RETURN QUERY SELECT 5::smallint, g.GRANT_ID, NULL::bigint, NULL::bigint, NULL::double precision,
                                NULL::double precision, NULL::double precision;
          ELSE
            RETURN QUERY SELECT 1::smallint, g.GRANT_ID, g.CARDS, g.POINTS, g.QUERY_MS, g.UPDATE_MS, g.COMMIT_MS;
          END IF;
          RETURN;
        END IF;
      END IF;
      IF hotrow_ts(p_to) > now_t THEN
        RETURN QUERY SELECT 3::smallint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::double precision,
                            NULL::double precision, NULL::double precision;
        RETURN;
      END IF;
      SELECT * INTO g FROM P_GRANT WHERE STATE = 'staging' ORDER BY GRANT_ID LIMIT 1;
      IF FOUND THEN
        RETURN QUERY SELECT 5::smallint, g.GRANT_ID, NULL::bigint, NULL::bigint, NULL::double precision,
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
      INSERT INTO P_GRANT (GRANT_TIME, FROM_TIME, TO_TIME, RATE_PERCENT, CARDS, POINTS, QUERY_MS, UPDATE_MS,
                           IDEMPOTENCY_KEY, FINGERPRINT, STATE, LEASE_UNTIL)
        VALUES (now_t, hotrow_ts(p_from), hotrow_ts(p_to), p_rate, 0, 0, 0, 0, p_key,
                CASE WHEN p_key IS NULL THEN NULL ELSE p_fp END, 'staging',
                now_t + p_lease_ms * interval '1 millisecond')
        RETURNING P_GRANT.GRANT_ID INTO new_id;
      RETURN QUERY SELECT 0::smallint, new_id, NULL::bigint, NULL::bigint, NULL::double precision,
                          NULL::double precision, NULL::double precision;
    END $$;

    -- Step 2, the barrier: waits for every transaction that held S_ACCOUNT
    -- ROW EXCLUSIVE when it was called (every point use takes it before it
    -- reads the clock), as CREATE INDEX CONCURRENTLY waits for older
    -- transactions. Called once the database's clock is past the period's
    -- end, it returns when every row stamped before that end has committed
    -- or rolled back; rows stamped later are outside the period. It blocks
    -- nobody. Returns the milliseconds it waited.
    -- Gives up after p_max_ms (a session left idle in a transaction that
    -- touched S_ACCOUNT would hold it for ever) and returns -1; the poll
    -- backs off from 1 to 50 ms, since each read of pg_locks takes every
    -- lock-manager partition.
    CREATE OR REPLACE FUNCTION hotrow_grant_barrier_v1(p_max_ms int) RETURNS double precision LANGUAGE plpgsql AS $$
    DECLARE
      inflight text[];
      t0 timestamptz := clock_timestamp();
      pause double precision := 0.001;
    BEGIN
      inflight := ARRAY(SELECT l.virtualtransaction FROM pg_locks l
                        WHERE l.locktype = 'relation' AND l.relation = 's_account'::regclass
                          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                          AND l.mode = 'RowExclusiveLock' AND l.granted AND l.pid <> pg_backend_pid());
      WHILE EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'virtualxid' AND l.virtualxid = ANY (inflight)) LOOP
        IF clock_timestamp() - t0 > p_max_ms * interval '1 millisecond' THEN
          RETURN -1;
        END IF;
        PERFORM pg_sleep(pause);
        pause := LEAST(pause * 2, 0.05);
      END LOOP;
      RETURN EXTRACT(EPOCH FROM clock_timestamp() - t0) * 1000;
    END $$;

    -- Step 3, query and stage, one card range [p_lo, p_hi) of it, in the
    -- caller's REPEATABLE READ transaction on the snapshot the grant's
    -- leader exported (one snapshot for all ranges, taken after the
    -- barrier; not SERIALIZABLE, so SSI does not track it, and it locks
    -- nothing a point use takes): the period's charges per card into
    -- P_GRANT_CREDIT, committed by each range on its own. Nobody reads the
    -- credits of a staging grant, and a grant that fails is dropped with all
    -- of them. Integer points, truncated, as on SQLite. The leader holds its
    -- P_GRANT row FOR NO KEY UPDATE, and each range takes it FOR KEY SHARE:
    -- no expiry can take the grant while a range stages (its DELETE waits,
    -- then sees the lease the leader renews), so no credit outlives its
    -- grant. SQLSTATE HR001: the lease was lost before (expired and deleted).
    CREATE OR REPLACE FUNCTION hotrow_grant_stage_range_v1(p_id bigint, p_from bigint, p_to bigint, p_rate int,
                                                           p_lo bigint, p_hi bigint)
    RETURNS TABLE (cards bigint, points bigint, query_ms double precision, update_ms double precision)
    -- Planned for each grant's own period and range: a connection's sixth
    -- call must not get a generic plan that guesses their share of the rows.
    LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $$
    DECLARE
      t0 timestamptz := clock_timestamp();
      t1 timestamptz;
      n bigint;
      pts bigint;
    BEGIN
      PERFORM 1 FROM P_GRANT WHERE GRANT_ID = p_id AND STATE = 'staging' FOR KEY SHARE;
      IF NOT FOUND THEN
        RAISE EXCEPTION 'grant % lost its staging lease', p_id USING ERRCODE = 'HR001';
      END IF;
      CREATE TEMP TABLE IF NOT EXISTS hotrow_stage (CARD_ID bigint NOT NULL, POINTS bigint NOT NULL)
        ON COMMIT DELETE ROWS;
      INSERT INTO hotrow_stage
        SELECT h.CARD_ID, SUM(h.AMOUNT)::bigint * p_rate / 100 FROM H_TRANSACTION h
        WHERE h.CARD_ID >= p_lo AND h.CARD_ID < COALESCE(p_hi, 9223372036854775807)
          AND h.PAYMENT_TIME >= hotrow_ts(p_from) AND h.PAYMENT_TIME < hotrow_ts(p_to) AND h.KIND = 'charge'
        GROUP BY h.CARD_ID HAVING SUM(h.AMOUNT)::bigint * p_rate / 100 > 0;
      t1 := clock_timestamp();
      WITH ins AS (
        INSERT INTO P_GRANT_CREDIT (CARD_ID, GRANT_ID, POINTS)
          SELECT s.CARD_ID, p_id, s.POINTS FROM hotrow_stage s
          WHERE EXISTS (SELECT 1 FROM S_ACCOUNT a WHERE a.CARD_ID = s.CARD_ID) ORDER BY s.CARD_ID
          RETURNING P_GRANT_CREDIT.POINTS)
      SELECT COUNT(*), COALESCE(SUM(ins.POINTS), 0) INTO n, pts FROM ins;
      RETURN QUERY SELECT n, pts, EXTRACT(EPOCH FROM t1 - t0)::double precision * 1000,
                          EXTRACT(EPOCH FROM clock_timestamp() - t1)::double precision * 1000;
    END $$;

    -- Step 4, apply, SERIALIZABLE, behind the caller's session lock on
    -- kGrantLock: one small commit makes the whole grant visible.
    -- outcome: 0 applied, 4 overlap (other_id, its bounds), 6 the grant is
    -- gone (its lease was lost), 7 the previous grant has not folded yet
    -- (nothing was written: fold, then call again), 8 applied already (an
    -- earlier call committed and its answer was lost), 9 the caller does not
    -- hold the session lock (its pipelined take failed; nothing written).
    CREATE OR REPLACE FUNCTION hotrow_grant_apply_v1(p_id bigint, p_allow_overlap boolean)
    RETURNS TABLE (outcome smallint, other_id bigint, from_us bigint, to_us bigint) LANGUAGE plpgsql AS $$
    DECLARE
      g P_GRANT%ROWTYPE;
      o P_GRANT%ROWTYPE;
    BEGIN
      IF NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid()
                       AND l.classid = 0 AND l.objid = 72720005 AND l.objsubid = 1 AND l.granted) THEN
        RETURN QUERY SELECT 9::smallint, NULL::bigint, NULL::bigint, NULL::bigint;
        RETURN;
      END IF;
      SELECT * INTO g FROM P_GRANT WHERE GRANT_ID = p_id;
      IF FOUND AND g.STATE <> 'staging' THEN
        RETURN QUERY SELECT 8::smallint, NULL::bigint, NULL::bigint, NULL::bigint;
        RETURN;
      END IF;
      IF NOT FOUND THEN
        RETURN QUERY SELECT 6::smallint, NULL::bigint, NULL::bigint, NULL::bigint;
        RETURN;
      END IF;
      SELECT * INTO o FROM P_GRANT WHERE STATE = 'applied' ORDER BY GRANT_ID LIMIT 1;
      IF FOUND THEN
        RETURN QUERY SELECT 7::smallint, o.GRANT_ID, NULL::bigint, NULL::bigint;
        RETURN;
      END IF;
      IF NOT p_allow_overlap THEN
        SELECT * INTO o FROM P_GRANT WHERE GRANT_ID <> p_id AND STATE <> 'staging'
          AND FROM_TIME < g.TO_TIME AND TO_TIME > g.FROM_TIME ORDER BY GRANT_ID LIMIT 1;
        IF FOUND THEN
          RETURN QUERY SELECT 4::smallint, o.GRANT_ID, hotrow_us(o.FROM_TIME), hotrow_us(o.TO_TIME);
          RETURN;
        END IF;
      END IF;
      UPDATE P_GRANT SET STATE = 'applied', APPLIED_TIME = clock_timestamp() AT TIME ZONE 'UTC',
                         LEASE_UNTIL = NULL
        WHERE GRANT_ID = p_id;
      RETURN QUERY SELECT 0::smallint, NULL::bigint, NULL::bigint, NULL::bigint;
    END $$;

    -- Step 5, one chunk of the fold (READ COMMITTED). Any number of
    -- workers, on any instance, fold one grant at once: each chunk reads
    -- the next p_chunk credits after p_after (and before p_before, when
    -- set), unlocked, then takes their cards' rows FOR UPDATE SKIP LOCKED
    -- (a card a point use holds is skipped: that use folds it, or a later
    -- pass does), deletes the credits of the cards it holds and writes them
    -- as the grant's rows, each card's row at its own time after its
    -- newest. A credit is deleted only by whoever holds its card's row, so
    -- it is consumed once, and the DELETE (a statement after the card
    -- locks) finds only the credits no point use consumed first. The chunk
    -- never waits for a row lock, and holds nothing while it reads the
    -- credits: a read that is slow (dead rows a long snapshot keeps, on a
    -- saturated server) delays no point use. It used to take the credits
    -- FOR UPDATE SKIP LOCKED as it read them; beside 192 payment workers a
    -- final pass's read took 30 s, and the point uses whose credits it held
    -- waited that long. The range's upper bound must stay an index
    -- condition in a generic plan: written as `p_before IS NULL OR ...` it
    -- was a filter, and a range's last chunks read every credit after the
    -- range. outcome: 0 folded `cards` up to
    -- last_card, 4 nothing left in the range, 1 done (a full pass, p_after
    -- < 0 and no p_before, found no credit left: the grant is folded now,
    -- fold_ms), 2 busy (folds are paused: an exclusive hold on the
    -- advisory lock (72720006, grant) pauses them), 3 not applied (folded already, or unknown).
    -- Index scans only, and no JIT: with sequential scans disabled the
    -- plans' costs pass jit_above_cost, and compiling them took 135-240 ms
    -- per statement (a fold of 632k cards ran at 1,500 cards/s).
    CREATE OR REPLACE FUNCTION hotrow_grant_fold_v1(p_id bigint, p_after bigint, p_before bigint, p_chunk int)
    RETURNS TABLE (outcome smallint, cards bigint, last_card bigint, fold_ms double precision) LANGUAGE plpgsql
    SET enable_seqscan = off SET enable_bitmapscan = off SET jit = off AS $$
    DECLARE
      st text;
      picked bigint[];
      locked bigint[];
      n bigint;
      ms double precision;
      now_t timestamp := clock_timestamp() AT TIME ZONE 'UTC';
    BEGIN
      IF NOT pg_try_advisory_xact_lock_shared(72720006, p_id::int) THEN
        RETURN QUERY SELECT 2::smallint, 0::bigint, NULL::bigint, NULL::double precision;
        RETURN;
      END IF;
      SELECT STATE INTO st FROM P_GRANT WHERE GRANT_ID = p_id;
      IF NOT FOUND OR st <> 'applied' THEN
        RETURN QUERY SELECT 3::smallint, 0::bigint, NULL::bigint, NULL::double precision;
        RETURN;
      END IF;
      picked := ARRAY(SELECT c.CARD_ID FROM P_GRANT_CREDIT c
                      -- Both bounds index conditions, in a generic plan too
                      -- (tests/pg: AFoldChunkReadsOnlyItsCardRange).
                      WHERE c.GRANT_ID = p_id AND c.CARD_ID > p_after
                        AND c.CARD_ID < COALESCE(p_before, 9223372036854775807)
                      ORDER BY c.CARD_ID LIMIT p_chunk);
      IF cardinality(picked) = 0 THEN
        IF p_after >= 0 OR p_before IS NOT NULL THEN
          RETURN QUERY SELECT 4::smallint, 0::bigint, NULL::bigint, NULL::double precision;
          RETURN;
        END IF;
        UPDATE P_GRANT SET STATE = 'folded', FOLDED_TIME = now_t,
                           FOLD_MS = EXTRACT(EPOCH FROM now_t - APPLIED_TIME) * 1000
          WHERE GRANT_ID = p_id AND STATE = 'applied' RETURNING P_GRANT.FOLD_MS INTO ms;
        IF NOT FOUND THEN  -- another worker finished it first
          RETURN QUERY SELECT 3::smallint, 0::bigint, NULL::bigint, NULL::double precision;
          RETURN;
        END IF;
        RETURN QUERY SELECT 1::smallint, 0::bigint, NULL::bigint, ms;
        RETURN;
      END IF;
      locked := ARRAY(SELECT a.CARD_ID FROM S_ACCOUNT a WHERE a.CARD_ID = ANY (picked) ORDER BY a.CARD_ID
                      FOR UPDATE SKIP LOCKED);
      WITH d AS (
        DELETE FROM P_GRANT_CREDIT c WHERE c.GRANT_ID = p_id AND c.CARD_ID = ANY (locked)
        RETURNING c.CARD_ID, c.POINTS),
      u AS (
        UPDATE S_ACCOUNT a SET BALANCE = a.BALANCE + d.POINTS,
                               LAST_UPDATE = GREATEST(now_t, a.LAST_UPDATE + interval '1 microsecond')
        FROM d WHERE a.CARD_ID = d.CARD_ID AND a.CARD_ID = ANY (locked)  -- an index condition, not a join plan
        RETURNING a.CARD_ID, d.POINTS, a.BALANCE, a.LAST_UPDATE)
      INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND)
        SELECT u.LAST_UPDATE, u.CARD_ID, 0, u.POINTS, u.BALANCE, 'grant' FROM u;
      GET DIAGNOSTICS n = ROW_COUNT;
      RETURN QUERY SELECT 0::smallint, n, picked[cardinality(picked)], NULL::double precision;
    END $$;

    -- A grant that failed before its apply: gone with its credits (also when
    -- an expiry took its row first: credits it committed after that go here).
    -- -1: it had applied (the apply's answer was lost), so it is kept.
    CREATE OR REPLACE FUNCTION hotrow_grant_abandon_v1(p_id bigint) RETURNS bigint LANGUAGE plpgsql AS $$
    DECLARE
      st text;
      n bigint;
    BEGIN
      SELECT STATE INTO st FROM P_GRANT WHERE GRANT_ID = p_id FOR UPDATE;
      IF FOUND AND st <> 'staging' THEN
        RETURN -1;  -- it applied after all (an apply whose answer was lost): kept
      END IF;
      DELETE FROM P_GRANT WHERE GRANT_ID = p_id;
      DELETE FROM P_GRANT_CREDIT WHERE GRANT_ID = p_id;
      GET DIAGNOSTICS n = ROW_COUNT;
      RETURN n;
    END $$;
  )sql");
}

namespace {

constexpr pg::NamedSql kGrantLockXact{"pointcard_grant_lock_xact", "SELECT pg_advisory_xact_lock($1::bigint)"};
constexpr pg::NamedSql kGrantLockSession{"pointcard_grant_lock", "SELECT pg_advisory_lock($1::bigint)"};
constexpr pg::NamedSql kGrantUnlockSession{"pointcard_grant_unlock", "SELECT pg_advisory_unlock($1::bigint)"};
constexpr pg::NamedSql kBegin{"pointcard_grant_begin",
                              "SELECT outcome, grant_id, cards, points, query_ms, update_ms, commit_ms "
                              "FROM hotrow_grant_begin_v1($1, $2, $3, $4, $5, $6, $7)"};
constexpr pg::NamedSql kBarrier{"pointcard_grant_barrier", "SELECT hotrow_grant_barrier_v1($1)"};
constexpr pg::NamedSql kGrantRow{"pointcard_grant_row",
                                 "SELECT CARDS, POINTS, QUERY_MS, UPDATE_MS FROM P_GRANT WHERE GRANT_ID = $1"};
constexpr pg::NamedSql kStageRange{
    "pointcard_grant_stage_range",
    "SELECT cards, points, query_ms, update_ms FROM hotrow_grant_stage_range_v1($1, $2, $3, $4, $5, $6)"};
constexpr pg::NamedSql kStageHold{"pointcard_grant_stage_hold",
                                  "SELECT pg_export_snapshot() FROM P_GRANT WHERE GRANT_ID = $1 AND STATE = 'staging' "
                                  "FOR NO KEY UPDATE"};
constexpr pg::NamedSql kStageTotals{
    "pointcard_grant_stage_totals",
    "UPDATE P_GRANT SET CARDS = $2, POINTS = $3, QUERY_MS = $4, UPDATE_MS = $5, "
    "LEASE_UNTIL = clock_timestamp() AT TIME ZONE 'UTC' + $6 * interval '1 millisecond' "
    "WHERE GRANT_ID = $1"};
constexpr pg::NamedSql kStageClear{"pointcard_grant_stage_clear", "DELETE FROM P_GRANT_CREDIT WHERE GRANT_ID = $1"};
constexpr pg::NamedSql kApply{"pointcard_grant_apply",
                              "SELECT outcome, other_id, from_us, to_us FROM hotrow_grant_apply_v1($1, $2)"};
constexpr pg::NamedSql kFold{"pointcard_grant_fold",
                             "SELECT outcome, cards, last_card, fold_ms FROM hotrow_grant_fold_v1($1, $2, $3, $4)"};
constexpr pg::NamedSql kTopCard{"pointcard_top_card", "SELECT COALESCE(MAX(CARD_ID), 0) FROM S_ACCOUNT"};
constexpr pg::NamedSql kAbandon{"pointcard_grant_abandon", "SELECT hotrow_grant_abandon_v1($1)"};
constexpr pg::NamedSql kExpire{"pointcard_grant_expire", "SELECT hotrow_grant_expire_v1()"};
constexpr pg::NamedSql kHeartbeat{"pointcard_grant_heartbeat",
                                  "UPDATE P_GRANT SET LEASE_UNTIL = clock_timestamp() AT TIME ZONE 'UTC' + "
                                  "$2 * interval '1 millisecond' WHERE GRANT_ID = $1 AND STATE = 'staging'"};
constexpr pg::NamedSql kRecordCommitTime{"pointcard_grant_commit_ms",
                                         "UPDATE P_GRANT SET COMMIT_MS = $1 WHERE GRANT_ID = $2"};
// A (auto)vacuum or analyze of S_ACCOUNT: the apply's SHARE request would
// queue behind it, and every payment behind that request.
constexpr pg::NamedSql kAccountsVacuuming{
    "pointcard_accounts_vacuuming",
    "SELECT COUNT(*) FROM pg_locks l WHERE l.locktype = 'relation' AND l.relation = 's_account'::regclass "
    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND l.mode = 'ShareUpdateExclusiveLock' AND l.granted"};
constexpr pg::NamedSql kOldestApplied{"pointcard_grant_oldest_applied",
                                      "SELECT GRANT_ID FROM P_GRANT WHERE STATE = 'applied' ORDER BY GRANT_ID LIMIT 1"};

enum class BeginResult : int64_t { kBegun = 0, kReplayed, kMismatch, kFuture, kOverlap, kStaging };
enum class ApplyResult : int64_t {
  kApplied = 0,
  kOverlap = 4,
  kLeaseLost = 6,
  kPreviousFolding = 7,
  kAppliedBefore = 8,
  kNotLocked = 9
};

// `work` between BEGIN `begin` and COMMIT in one round trip; a failure rolls
// back (a broken connection is replaced by the pool). Returns the rows of
// work's last statement.
Result<pg::Rows> InTransaction(pg::Connection& c, const std::string& begin,
                               std::vector<pg::Connection::Statement> work) {
  std::vector<pg::Connection::Statement> all;
  all.emplace_back(begin);
  all.emplace_back("SET LOCAL statement_timeout = 0");  // admin batch work, not a request
  size_t last = all.size() + work.size() - 1;
  for (auto& w : work) all.push_back(std::move(w));
  all.emplace_back("COMMIT");
  auto rows = c.Pipeline(all);
  if (!rows.ok()) {
    if (Status rolled = c.Exec("ROLLBACK"); !rolled.ok()) c.MarkBroken();
    return rows.status();
  }
  return std::move((*rows)[last]);
}

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// How long a grant waits for the barrier and for the previous fold, as on
// SQLite (then 503, nothing granted).
constexpr int64_t kWaitMaxMs = 60000;

Status LeaseLost(int64_t grant_id) {
  return Status::Unavailable("grant " + std::to_string(grant_id) +
                             " lost its staging lease (its heartbeat could not renew it in time); nothing was "
                             "granted, retry");
}

}  // namespace

PostgresPointCardStore::FoldStep PostgresPointCardStore::FoldChunk(int64_t grant_id, int64_t* after,
                                                                   std::optional<int64_t> before) {
  auto rows = pool_.Run<pg::Rows>(
      [&](pg::Connection& c) {
        return InTransaction(
            c, "BEGIN",
            {{kFold,
              {std::to_string(grant_id), std::to_string(*after),
               before ? pg::Param(std::to_string(*before)) : pg::Param(), std::to_string(options_.fold_chunk)}}});
      },
      /*unbounded=*/true);
  if (!rows.ok()) {
    log::Warn("grant {}: a fold chunk failed (it is retried): {}", grant_id, rows.status().ToString());
    return FoldStep::kFailed;
  }
  switch (rows->Int(0, 0)) {
    case 0:
      *after = rows->Int(0, 2);
      failpoint::MaybeCrash("grant.fold", fold_chunks_.fetch_add(1) + 1);
      return FoldStep::kMore;
    case 1:
      GrantFoldSeconds().Observe(static_cast<uint64_t>(rows->Double(0, 3) * 1e6));
      log::Info("grant {}: folded in {:.0f} ms", grant_id, rows->Double(0, 3));
      return FoldStep::kDone;
    case 2:
      return FoldStep::kBusy;
    case 4:
      return FoldStep::kRangeDone;
    default:
      return FoldStep::kDone;  // not applied: folded already, here or by another instance
  }
}

PostgresPointCardStore::FoldStep PostgresPointCardStore::FoldRange(int64_t grant_id, int64_t after,
                                                                   std::optional<int64_t> before,
                                                                   const std::function<bool()>& stopping) {
  int failures = 0;
  while (!stopping()) {
    FoldStep step = FoldChunk(grant_id, &after, before);
    switch (step) {
      case FoldStep::kMore:
        failures = 0;
        break;
      case FoldStep::kBusy:
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        break;
      case FoldStep::kFailed:
        if (++failures > 8) return step;  // the folder's next pass (1 s) tries again
        RetryBackoff(failures);
        break;
      default:
        return step;
    }
  }
  return FoldStep::kFailed;
}

// The card ids split into fold_workers ranges, one worker each: on a busy
// server each backend gets its share of the CPU, so one worker alone folds
// at a fraction of the speed it has on an idle one. Then passes from the
// start take what the workers skipped, until one finds nothing left.
bool PostgresPointCardStore::FoldToEnd(int64_t grant_id, const std::function<bool()>& stopping) {
  auto top = pool_.Run<pg::Rows>([](pg::Connection& c) { return c.Query(kTopCard); }, /*unbounded=*/true);
  // At most half the pool: requests keep the rest.
  const int64_t workers = std::clamp<int64_t>(pool_.size() / 2, 1, std::max<int64_t>(1, options_.fold_workers));
  if (top.ok() && workers > 1) {
    const int64_t span = top->Int(0, 0) / workers + 1;
    std::vector<std::thread> threads;
    for (int64_t w = 0; w < workers; ++w) {
      std::optional<int64_t> before;
      if (w + 1 < workers) before = (w + 1) * span;
      threads.emplace_back(
          [this, grant_id, w, span, before, &stopping] { FoldRange(grant_id, w * span - 1, before, stopping); });
    }
    for (auto& t : threads) t.join();
  }
  for (int pass = 0; !stopping(); ++pass) {
    // What the passes after the first find is what point uses held: a
    // pause for them to end, not a loop over the credits' index.
    if (pass > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    FoldStep step = FoldRange(grant_id, -1, std::nullopt, stopping);
    if (step == FoldStep::kDone) return true;
    if (step == FoldStep::kFailed) return false;
  }
  return false;
}

// The folder: woken by an apply on this instance, and every second, it
// drops expired staging grants and folds an applied grant to its end (any
// instance's, so a fold resumes after its instance died).
void PostgresPointCardStore::FoldLoop() {
  std::unique_lock lock(fold_mutex_);
  while (!folder_stopped_) {
    fold_wake_.wait_for(lock, std::chrono::seconds(1), [this] { return folder_stopped_ || fold_kicked_; });
    if (folder_stopped_) break;
    fold_kicked_ = false;
    lock.unlock();
    auto expired = pool_.Run<pg::Rows>([](pg::Connection& c) { return c.Query(kExpire); }, /*unbounded=*/true);
    if (expired.ok() && expired->Int(0, 0) > 0)
      log::Warn("dropped {} staged credit(s) of grants whose lease ran out (never applied)", expired->Int(0, 0));
    auto applied = pool_.Run<pg::Rows>([](pg::Connection& c) { return c.Query(kOldestApplied); }, /*unbounded=*/true);
    if (applied.ok() && !applied->empty()) {
      FoldToEnd(applied->Int(0, 0), [this] {
        std::lock_guard l(fold_mutex_);
        return folder_stopped_;
      });
    }
    lock.lock();
  }
}

void PostgresPointCardStore::KickFolder() {
  {
    std::lock_guard lock(fold_mutex_);
    fold_kicked_ = true;
  }
  fold_wake_.notify_all();
}

// Step 3: a leader transaction holds the grant's row and exports its
// REPEATABLE READ snapshot; stage workers, one per card range, import it
// and each commit their range's credits; the leader then records the
// totals (and the lease) and commits. Several backends, because on a
// saturated server each one gets its share of the cores: one statement
// staged 632k cards in 20 s and more beside 192 payment workers.
Result<PostgresPointCardStore::StageTotals> PostgresPointCardStore::Stage(int64_t id, const GrantRequest& r,
                                                                          const std::string& lease_ms,
                                                                          bool clear_first) {
  const std::string id_text = std::to_string(id);
  if (clear_first) {  // ranges an earlier attempt committed
    auto cleared = pool_.Run<pg::Rows>([&](pg::Connection& c) { return c.Query(kStageClear, {id_text}); },
                                       /*unbounded=*/true);
    if (!cleared.ok()) return cleared.status();
  }
  auto top = pool_.Run<pg::Rows>([](pg::Connection& c) { return c.Query(kTopCard); }, /*unbounded=*/true);
  if (!top.ok()) return top.status();
  const int64_t workers = StageWorkers();
  const int64_t span = top->Int(0, 0) / workers + 1;
  return pool_.Run<StageTotals>(
      [&](pg::Connection& leader) -> Result<StageTotals> {
        // A bound on idling here: a leader left open would hold the
        // grant's row and its snapshot.
        auto held = leader.Pipeline({{"BEGIN ISOLATION LEVEL REPEATABLE READ"},
                                     {"SET LOCAL statement_timeout = 0"},
                                     {"SET LOCAL idle_in_transaction_session_timeout = '120s'"},
                                     {kStageHold, {id_text}}});
        auto rollback = [&](Status why) -> Result<StageTotals> {
          if (Status rolled = leader.Exec("ROLLBACK"); !rolled.ok()) leader.MarkBroken();
          return why;
        };
        if (!held.ok()) return rollback(held.status());
        if ((*held)[3].empty()) return rollback(LeaseLost(id));
        const std::string snapshot((*held)[3].Text(0, 0));
        auto range = [&](int64_t w) {
          return std::vector<pg::Param>{id_text,
                                        std::to_string(r.from_us),
                                        std::to_string(r.to_us),
                                        std::to_string(r.rate_percent),
                                        std::to_string(w == 0 ? std::numeric_limits<int64_t>::min() : w * span),
                                        w + 1 < workers ? pg::Param(std::to_string((w + 1) * span)) : pg::Param()};
        };
        // Range 0 in the leader's own transaction, the others each on a
        // connection of its own (so one worker needs no second connection).
        std::vector<Result<pg::Rows>> ranges;
        for (int64_t w = 0; w < workers; ++w) ranges.emplace_back(Status::Internal("unset"));
        {
          std::vector<std::thread> threads;
          for (int64_t w = 1; w < workers; ++w) {
            threads.emplace_back([&, w] {
              ranges[w] = pool_.Run<pg::Rows>(
                  [&](pg::Connection& c) {
                    return InTransaction(c, "BEGIN ISOLATION LEVEL REPEATABLE READ",
                                         {{"SET TRANSACTION SNAPSHOT '" + snapshot + "'"}, {kStageRange, range(w)}});
                  },
                  /*unbounded=*/true);
            });
          }
          ranges[0] = leader.Query(kStageRange, range(0));
          for (auto& t : threads) t.join();
        }
        StageTotals totals;
        for (auto& range : ranges) {
          if (!range.ok()) return rollback(range.status());
          totals.cards += range->Int(0, 0);
          totals.points += range->Int(0, 1);
          totals.query_ms = std::max(totals.query_ms, range->Double(0, 2));
          totals.update_ms = std::max(totals.update_ms, range->Double(0, 3));
        }
        auto recorded =
            leader.Pipeline({{kStageTotals,
                              {id_text, std::to_string(totals.cards), std::to_string(totals.points),
                               std::to_string(totals.query_ms), std::to_string(totals.update_ms), lease_ms}},
                             {"COMMIT"}});
        if (!recorded.ok()) return rollback(recorded.status());
        return totals;
      },
      /*unbounded=*/true);
}

int64_t PostgresPointCardStore::StageWorkers() const {
  if (options_.stage_workers > 0) return options_.stage_workers;
  // The leader stages one range itself; with the fold workers (up to half
  // the pool, while the previous grant folds) at most three quarters of
  // the pool is taken, so requests keep the rest.
  return std::clamp<int64_t>(pool_.size() / 4, 1, 4);
}

Result<GrantOutcome> PostgresPointCardStore::RunGrant(const GrantRequest& r, const std::string& fp) {
  const std::string lease_ms = std::to_string(options_.lease.count());
  // 1. begin
  std::vector<pg::Param> params = {std::to_string(r.from_us),
                                   std::to_string(r.to_us),
                                   std::to_string(r.rate_percent),
                                   r.idempotency_key ? pg::Param(*r.idempotency_key) : pg::Param(),
                                   fp,
                                   r.allow_overlap ? "true" : "false",
                                   lease_ms};
  auto begun = pool_.Run<pg::Rows>(
      [&](pg::Connection& c) {
        return InTransaction(c, "BEGIN", {{kGrantLockXact, {std::to_string(kGrantLock)}}, {kBegin, params}});
      },
      /*unbounded=*/true);
  if (!begun.ok()) return begun.status();
  switch (static_cast<BeginResult>(begun->Int(0, 0))) {
    case BeginResult::kBegun:
      break;
    case BeginResult::kReplayed:
      return GrantOutcome{.grant_id = begun->Int(0, 1),
                          .cards = begun->Int(0, 2),
                          .points = begun->Int(0, 3),
                          .query_ms = begun->Double(0, 4),
                          .update_ms = begun->Double(0, 5),
                          .commit_ms = begun->Double(0, 6),
                          .replayed = true};
    case BeginResult::kMismatch:
      return Status(ErrorCode::kIdempotencyMismatch, "Idempotency-Key was used for a different grant",
                    "Idempotency-Key");
    case BeginResult::kFuture:
      return PeriodNotEnded();
    case BeginResult::kOverlap:
      return PeriodAlreadyGranted(begun->Int(0, 1), begun->Int(0, 2), begun->Int(0, 3));
    case BeginResult::kStaging:
      return Status(ErrorCode::kGrantInProgress, "grant " + std::to_string(begun->Int(0, 1)) +
                                                     " is being prepared (on this or another instance); retry when it "
                                                     "has answered");
    default:
      return Status::Internal("hotrow_grant_begin_v1 answered outcome " + std::to_string(begun->Int(0, 0)));
  }
  const int64_t id = begun->Int(0, 1);
  const std::string id_text = std::to_string(id);
  // Drops the grant unless it applied after all (an apply whose answer was
  // lost): then it answers that grant, applied, as if the answer had come.
  // `maybe_applied`: an apply was sent whose outcome is unknown; if the
  // drop fails too, the answer must not say that nothing was granted.
  auto abandon = [&](Status why, bool maybe_applied = false) -> Result<GrantOutcome> {
    Result<pg::Rows> gone = Status::Internal("unset");
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (attempt > 0) RetryBackoff(attempt);
      gone = pool_.Run<pg::Rows>([&](pg::Connection& c) { return c.Query(kAbandon, {id_text}); },
                                 /*unbounded=*/true);
      if (gone.ok()) break;
    }
    if (!gone.ok()) {
      log::Warn("grant {}: cannot drop its staged credits now (its lease expiry will, unless it applied): {}", id,
                gone.status().ToString());
      if (maybe_applied)
        return Status::Unavailable("grant " + id_text + ": the database was lost while it applied (" + why.message() +
                                   "), so whether it applied is unknown; retry with the same Idempotency-Key, "
                                   "which answers it if it did");
      return why;
    }
    if (gone->Int(0, 0) >= 0) return why;
    auto row = pool_.Run<pg::Rows>([&](pg::Connection& c) { return c.Query(kGrantRow, {id_text}); },
                                   /*unbounded=*/true);
    if (!row.ok() || row->empty()) return why;
    log::Warn("grant {}: its apply committed though its answer was lost ({})", id, why.ToString());
    KickFolder();
    return GrantOutcome{.grant_id = id,
                        .cards = row->Int(0, 0),
                        .points = row->Int(0, 1),
                        .query_ms = row->Double(0, 2),
                        .update_ms = row->Double(0, 3),
                        .commit_ms = 0,
                        .replayed = false};
  };
  auto stopping = [this] {
    std::lock_guard lock(grant_mutex_);
    return grants_stopped_;
  };
  // The lease, renewed while this grant waits to stage and to apply (while
  // it stages, its transaction holds the row).
  auto paused = std::make_shared<std::atomic<bool>>(false);
  auto heartbeat =
      std::make_unique<PeriodicTask>(options_.lease / 5, options_.lease / 5, [this, id_text, lease_ms, paused] {
        if (paused->load()) return;
        auto beat = pool_.Run<pg::Rows>(
            [&](pg::Connection& c) {
              return c.Query(kHeartbeat, {id_text, lease_ms});
            },
            /*unbounded=*/true);
        if (!beat.ok()) log::Warn("grant {}: lease not renewed: {}", id_text, beat.status().ToString());
      });
  // 2. barrier
  auto barrier = pool_.Run<pg::Rows>([&](pg::Connection& c) { return c.Query(kBarrier, {std::to_string(kWaitMaxMs)}); },
                                     /*unbounded=*/true);
  if (!barrier.ok()) return abandon(barrier.status());
  if (barrier->Double(0, 0) < 0)
    return abandon(Status::Unavailable("the grant waited " + std::to_string(kWaitMaxMs / 1000) +
                                       " s for a transaction on S_ACCOUNT to end (a session idle in a transaction?); "
                                       "nothing was granted, retry"));
  failpoint::MaybeDelay("grant.slow");
  // 3. query and stage (again if a heartbeat in flight made it fail)
  paused->store(true);
  Result<StageTotals> staged = Status::Internal("unset");
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (attempt > 0) RetryBackoff(attempt);
    staged = Stage(id, r, lease_ms, /*clear_first=*/attempt > 0);
    if (!staged.ok() && staged.status().sqlstate() == "HR001") staged = LeaseLost(id);
    if (staged.ok() || !pg::IsRetryable(staged.status())) break;
    pg::CountRetry(staged.status());
  }
  paused->store(false);
  if (!staged.ok()) return abandon(staged.status());
  failpoint::MaybeCrash("grant.stage");
  GrantOutcome outcome{.grant_id = id,
                       .cards = staged->cards,
                       .points = staged->points,
                       .query_ms = staged->query_ms,
                       .update_ms = staged->update_ms,
                       .commit_ms = 0,
                       .replayed = false};
  // 4. apply, once the previous grant has folded (the folders fold it).
  const std::string lock_key = std::to_string(kGrantLock);
  const auto wait_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMaxMs);
  std::chrono::steady_clock::time_point vacuum_wait_until{};  // set once the previous fold has ended
  for (int attempt = 0;; ++attempt) {
    if (stopping()) return abandon(Status::Unavailable("the server is shutting down; nothing was granted, retry"));
    // The previous fold first, without the lock: a SHARE request that
    // waited for fold chunks would hold every payment queued behind it.
    auto folding = pool_.Run<pg::Rows>([](pg::Connection& c) { return c.Query(kOldestApplied); }, /*unbounded=*/true);
    if (folding.ok() && !folding->empty()) {
      if (stopping() || std::chrono::steady_clock::now() > wait_until)
        return abandon(Status::Unavailable("grant " + std::string(folding->Text(0, 0)) +
                                           " is still folding (or the server is shutting down); nothing was "
                                           "granted, retry"));
      KickFolder();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (vacuum_wait_until == std::chrono::steady_clock::time_point{})
      vacuum_wait_until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    // Then a vacuum of S_ACCOUNT (a fold updates most of it, so autovacuum
    // often starts right then): waited out without queueing, up to 10 s,
    // since PostgreSQL cancels it only after deadlock_timeout (1 s), longer
    // than the lock_timeout below.
    if (std::chrono::steady_clock::now() < vacuum_wait_until) {
      auto vacuuming =
          pool_.Run<pg::Rows>([](pg::Connection& c) { return c.Query(kAccountsVacuuming); }, /*unbounded=*/true);
      if (vacuuming.ok() && vacuuming->Int(0, 0) > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
    }
    auto start = std::chrono::steady_clock::now();
    auto applied = pool_.Run<pg::Rows>(
        [&](pg::Connection& c) -> Result<pg::Rows> {
          const pg::Connection::Statement take[] = {{kGrantLockSession, {lock_key}}};
          // SHARE waits for the point uses in flight (milliseconds) and
          // holds new ones for this one small commit: none straddles the
          // apply, so commit order is the serial order a READ COMMITTED
          // reader sees. It also waits for autovacuum: lock_timeout, retry.
          const pg::Connection::Statement work[] = {{"BEGIN ISOLATION LEVEL SERIALIZABLE"},
                                                    {"SET LOCAL lock_timeout = '500ms'"},
                                                    {"LOCK TABLE S_ACCOUNT IN SHARE MODE"},
                                                    {kApply, {id_text, r.allow_overlap ? "true" : "false"}},
                                                    {"COMMIT"}};
          const pg::Connection::Statement end[] = {{"ROLLBACK"}};
          const pg::Connection::Statement release[] = {{kGrantUnlockSession, {lock_key}}};
          const std::span<const pg::Connection::Statement> segments[] = {take, work, end, release};
          auto results = c.PipelineSegments(segments);
          if (!results[0].ok()) return results[0].status();
          if (!results[3].ok()) c.MarkBroken();  // never hand out a connection that holds the lock
          if (!results[1].ok()) return results[1].status();
          return std::move((*results[1])[3]);
        },
        /*unbounded=*/true);
    outcome.commit_ms = MsSince(start);
    if (!applied.ok()) {
      bool lock_timeout = applied.status().sqlstate() == "55P03";
      if ((pg::IsRetryable(applied.status()) || lock_timeout) && attempt < 20 && !stopping()) {
        pg::CountRetry(applied.status());
        RetryBackoff(attempt);
        continue;
      }
      // Unknown outcome on a lost connection: the grant is applied or
      // still staging; abandon deletes it only in the second case.
      return abandon(applied.status(), /*maybe_applied=*/true);
    }
    auto what = static_cast<ApplyResult>(applied->Int(0, 0));
    if (what == ApplyResult::kApplied || what == ApplyResult::kAppliedBefore) break;
    if (what == ApplyResult::kNotLocked && attempt < 20) {
      RetryBackoff(attempt);
      continue;
    }
    if (what == ApplyResult::kLeaseLost) return LeaseLost(id);
    if (what == ApplyResult::kOverlap)
      return abandon(PeriodAlreadyGranted(applied->Int(0, 1), applied->Int(0, 2), applied->Int(0, 3)));
    if (what != ApplyResult::kPreviousFolding)
      return abandon(Status::Internal("hotrow_grant_apply_v1 answered outcome " + std::to_string(applied->Int(0, 0))));
    if (stopping() || std::chrono::steady_clock::now() > wait_until)
      return abandon(Status::Unavailable("grant " + std::to_string(applied->Int(0, 1)) +
                                         " is still folding (or the server is shutting down); nothing was granted, "
                                         "retry"));
    KickFolder();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    attempt = 0;
  }
  heartbeat.reset();
  failpoint::MaybeCrash("grant.commit");
  KickFolder();
  auto timed = pool_.Run<pg::Rows>([&](pg::Connection& c) {
    return c.Query(kRecordCommitTime, {std::to_string(outcome.commit_ms), id_text});
  });
  if (!timed.ok()) log::Warn("grant {}: cannot record its commit time: {}", id, timed.status().ToString());
  return outcome;
}

}  // namespace hotrow::pointcard
