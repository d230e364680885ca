// The grant's SQL on PostgreSQL: the functions of steps 1-5 and the
// abandon/expire of a grant that never applied. postgres_grant.cc drives
// them; the protocol and why it is serializable are at the top of
// postgres_store.h. Advisory keys used here: 72720005 (kGrantLock, begin
// and apply) and (72720006, grant id), taken shared by every fold chunk.
#include "pointcard/postgres_store.h"

namespace hotrow::pointcard {

namespace pg = db::pg;

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

    -- v0.14.0: begin_v1 and the expiry of the grant's lots
    -- (P_GRANT.EXPIRES_TIME): p_days x 86,400 s after the grant's time, or
    -- at p_at (microseconds), which must be after the grant's time and
    -- within 3,650 days of it. outcome 6: it is not (nothing is written;
    -- cards carries the grant's time in microseconds).
    CREATE OR REPLACE FUNCTION hotrow_grant_begin_v2(p_from bigint, p_to bigint, p_rate int, p_key text, p_fp text,
                                                     p_allow_overlap boolean, p_lease_ms int, p_days int,
                                                     p_at bigint)
    RETURNS TABLE (outcome smallint, grant_id bigint, cards bigint, points bigint, query_ms double precision,
                   update_ms double precision, commit_ms double precision) LANGUAGE plpgsql AS $$
    DECLARE
      r record;
      gt timestamp;
      e timestamp;
    BEGIN
      SELECT * INTO r FROM hotrow_grant_begin_v1(p_from, p_to, p_rate, p_key, p_fp, p_allow_overlap, p_lease_ms) v;
      IF r.outcome = 0 AND (p_days IS NOT NULL OR p_at IS NOT NULL) THEN
        SELECT x.GRANT_TIME INTO gt FROM P_GRANT x WHERE x.GRANT_ID = r.grant_id;
        e := COALESCE(gt + p_days * interval '1 day', hotrow_ts(p_at));
        IF e <= gt OR e > gt + 3650 * interval '1 day' THEN
          DELETE FROM P_GRANT x WHERE x.GRANT_ID = r.grant_id;
          RETURN QUERY SELECT 6::smallint, NULL::bigint, hotrow_us(gt), NULL::bigint, NULL::double precision,
                              NULL::double precision, NULL::double precision;
          RETURN;
        END IF;
        UPDATE P_GRANT x SET EXPIRES_TIME = e WHERE x.GRANT_ID = r.grant_id;
      END IF;
      RETURN QUERY SELECT r.outcome, r.grant_id, r.cards, r.points, r.query_ms, r.update_ms, r.commit_ms;
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

    -- The same barrier in slices, so that the caller can stop between
    -- them: p_inflight NULL takes the set in flight now; each call waits up
    -- to p_max_ms for the set it was given and returns what of it is still
    -- running (empty: the barrier is passed). The set is taken once, so a
    -- stream of new transactions cannot hold the barrier off.
    CREATE OR REPLACE FUNCTION hotrow_grant_barrier_v2(p_inflight text[], p_max_ms int) RETURNS text[]
    LANGUAGE plpgsql AS $$
    DECLARE
      inflight text[] := p_inflight;
      t0 timestamptz := clock_timestamp();
      pause double precision := 0.001;
    BEGIN
      IF inflight IS NULL THEN
        inflight := ARRAY(SELECT l.virtualtransaction FROM pg_locks l
                          WHERE l.locktype = 'relation' AND l.relation = 's_account'::regclass
                            AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                            AND l.mode = 'RowExclusiveLock' AND l.granted AND l.pid <> pg_backend_pid());
      END IF;
      LOOP
        inflight := ARRAY(SELECT DISTINCT l.virtualxid FROM pg_locks l
                          WHERE l.locktype = 'virtualxid' AND l.virtualxid = ANY (inflight));
        EXIT WHEN cardinality(inflight) = 0 OR clock_timestamp() - t0 > p_max_ms * interval '1 millisecond';
        PERFORM pg_sleep(pause);
        pause := LEAST(pause * 2, 0.05);
      END LOOP;
      RETURN inflight;
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
    -- The period's rows are read through an index (the primary key's time
    -- range, or the card index when the period is most of the table) into
    -- a bitmap, so in the heap's order, and summed in one in-memory hash,
    -- whatever the statistics or the caller's settings say: never an index
    -- scan by card, which visited a heap page per row (1M buffer reads: 1.3-
    -- 1.5 s idle on 1M cards against 0.9 s), nor a sequential scan, which
    -- reads every grant row since (the table grows by one per granted card).
    -- The hash of 632k cards takes ~130 MB (work_mem x hash_mem_multiplier);
    -- each of --grant-workers stage ranges hashes its own cards, but reads
    -- the whole period's heap.
    LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan SET enable_seqscan = off
    SET enable_indexscan = off SET enable_bitmapscan = on SET enable_hashagg = on SET enable_hashjoin = on
    SET enable_nestloop = on SET work_mem = '128MB' SET hash_mem_multiplier = 2 SET jit = off AS $$
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
        WHERE h.CARD_ID >= p_lo AND h.CARD_ID <= COALESCE(p_hi - 1, 9223372036854775807)
          AND h.PAYMENT_TIME >= hotrow_ts(p_from) AND h.PAYMENT_TIME < hotrow_ts(p_to) AND h.KIND = 'charge'
        GROUP BY h.CARD_ID HAVING SUM(h.AMOUNT)::bigint * p_rate / 100 > 0;
      t1 := clock_timestamp();
      -- The staging joins the cards to S_ACCOUNT's index in order (a merge
      -- join): with index scans off it probed the table once per card (5 s),
      -- and at this work_mem a hash join read all of S_ACCOUNT (1.3 s
      -- against 0.75 s). Local to this call: the function's SET clauses
      -- restore all four at its exit.
      SET LOCAL enable_seqscan = on;
      SET LOCAL enable_indexscan = on;
      SET LOCAL enable_hashjoin = off;
      SET LOCAL enable_nestloop = off;
      WITH ins AS (
        INSERT INTO P_GRANT_CREDIT (CARD_ID, GRANT_ID, POINTS)
          SELECT s.CARD_ID, p_id, s.POINTS FROM hotrow_stage s
          -- The range's bounds let the merge join start at p_lo.
          WHERE EXISTS (SELECT 1 FROM S_ACCOUNT a WHERE a.CARD_ID = s.CARD_ID AND a.CARD_ID >= p_lo
                          AND a.CARD_ID <= COALESCE(p_hi - 1, 9223372036854775807))
            -- A closed card gets nothing (the closed cards' index; those
            -- closed after this snapshot are dropped at the apply).
            AND NOT EXISTS (SELECT 1 FROM S_ACCOUNT x WHERE x.CARD_ID = s.CARD_ID AND x.STATUS = 'closed')
          ORDER BY s.CARD_ID
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
    -- v2 (v0.9.0): the credits of cards closed by now are dropped in the
    -- apply's transaction and taken off the grant's totals (CARDS, POINTS);
    -- dropped_cards and dropped_points say how much (0 but for outcome 0).
    -- Under the caller's S_ACCOUNT SHARE no close runs meanwhile: a card
    -- closed before the apply gets nothing, one closed after keeps it all.
    CREATE OR REPLACE FUNCTION hotrow_grant_apply_v2(p_id bigint, p_allow_overlap boolean)
    RETURNS TABLE (outcome smallint, other_id bigint, from_us bigint, to_us bigint, dropped_cards bigint,
                   dropped_points bigint) LANGUAGE plpgsql SET enable_seqscan = off AS $$
    DECLARE
      g P_GRANT%ROWTYPE;
      o P_GRANT%ROWTYPE;
      n bigint;
      pts bigint;
    BEGIN
      IF NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid()
                       AND l.classid = 0 AND l.objid = 72720005 AND l.objsubid = 1 AND l.granted) THEN
        RETURN QUERY SELECT 9::smallint, NULL::bigint, NULL::bigint, NULL::bigint, 0::bigint, 0::bigint;
        RETURN;
      END IF;
      SELECT * INTO g FROM P_GRANT WHERE GRANT_ID = p_id;
      IF FOUND AND g.STATE <> 'staging' THEN
        RETURN QUERY SELECT 8::smallint, NULL::bigint, NULL::bigint, NULL::bigint, 0::bigint, 0::bigint;
        RETURN;
      END IF;
      IF NOT FOUND THEN
        RETURN QUERY SELECT 6::smallint, NULL::bigint, NULL::bigint, NULL::bigint, 0::bigint, 0::bigint;
        RETURN;
      END IF;
      SELECT * INTO o FROM P_GRANT WHERE STATE = 'applied' ORDER BY GRANT_ID LIMIT 1;
      IF FOUND THEN
        RETURN QUERY SELECT 7::smallint, o.GRANT_ID, NULL::bigint, NULL::bigint, 0::bigint, 0::bigint;
        RETURN;
      END IF;
      IF NOT p_allow_overlap THEN
        SELECT * INTO o FROM P_GRANT WHERE GRANT_ID <> p_id AND STATE <> 'staging'
          AND FROM_TIME < g.TO_TIME AND TO_TIME > g.FROM_TIME ORDER BY GRANT_ID LIMIT 1;
        IF FOUND THEN
          RETURN QUERY SELECT 4::smallint, o.GRANT_ID, hotrow_us(o.FROM_TIME), hotrow_us(o.TO_TIME), 0::bigint, 0::bigint;
          RETURN;
        END IF;
      END IF;
      -- The staging left out the cards closed by its snapshot, which the
      -- barrier put after every close stamped before the begin: only those
      -- closed since GRANT_TIME are looked at (their index by CLOSED_TIME).
      WITH gone AS (
        DELETE FROM P_GRANT_CREDIT c USING S_ACCOUNT a
          WHERE a.STATUS = 'closed' AND a.CLOSED_TIME >= g.GRANT_TIME AND c.CARD_ID = a.CARD_ID
            AND c.GRANT_ID = p_id RETURNING c.POINTS)
      SELECT COUNT(*), COALESCE(SUM(gone.POINTS), 0) INTO n, pts FROM gone;
      UPDATE P_GRANT SET STATE = 'applied', APPLIED_TIME = clock_timestamp() AT TIME ZONE 'UTC',
                         LEASE_UNTIL = NULL, CARDS = CARDS - n, POINTS = POINTS - pts
        WHERE GRANT_ID = p_id;
      RETURN QUERY SELECT 0::smallint, NULL::bigint, NULL::bigint, NULL::bigint, n, pts;
    END $$;
    -- v0.6.0-v0.8.x's apply, kept for their instances: v2's answer without
    -- the drop's counts (it still drops the closed cards' credit).
    CREATE OR REPLACE FUNCTION hotrow_grant_apply_v1(p_id bigint, p_allow_overlap boolean)
    RETURNS TABLE (outcome smallint, other_id bigint, from_us bigint, to_us bigint) LANGUAGE sql AS $$
      SELECT v.outcome, v.other_id, v.from_us, v.to_us FROM hotrow_grant_apply_v2(p_id, p_allow_overlap) v $$;

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
    SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off
    SET jit = off AS $$
    DECLARE
      st text;
      picked bigint[];
      locked bigint[];
      n bigint;
      ms double precision;
      now_t timestamp := clock_timestamp() AT TIME ZONE 'UTC';
      v_expires timestamp;
      v_applied timestamp;
    BEGIN
      IF NOT pg_try_advisory_xact_lock_shared(72720006, p_id::int) THEN
        RETURN QUERY SELECT 2::smallint, 0::bigint, NULL::bigint, NULL::double precision;
        RETURN;
      END IF;
      SELECT STATE, EXPIRES_TIME, APPLIED_TIME INTO st, v_expires, v_applied FROM P_GRANT WHERE GRANT_ID = p_id;
      IF NOT FOUND OR st <> 'applied' THEN
        RETURN QUERY SELECT 3::smallint, 0::bigint, NULL::bigint, NULL::double precision;
        RETURN;
      END IF;
      picked := ARRAY(SELECT c.CARD_ID FROM P_GRANT_CREDIT c
                      -- Both bounds index conditions, in a generic plan too
                      -- (tests/pg: AFoldChunkReadsOnlyItsCardRange).
                      WHERE c.GRANT_ID = p_id AND c.CARD_ID > p_after
                        AND c.CARD_ID <= COALESCE(p_before - 1, 9223372036854775807)
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
                               LAST_UPDATE = GREATEST(now_t, a.LAST_UPDATE + interval '1 microsecond'),
                               LOT_TIME = CASE WHEN v_expires IS NULL THEN a.LOT_TIME
                                               ELSE COALESCE(a.LOT_TIME, now_t) END
        -- A nested loop, one index probe per credit (the only join left
        -- enabled): a merge join read all of S_ACCOUNT's index, and an
        -- inner `CARD_ID = ANY (locked)` read every locked card once per
        -- credit when P_GRANT_CREDIT's statistics said it was empty.
        FROM d WHERE a.CARD_ID = d.CARD_ID
        RETURNING a.CARD_ID, d.POINTS, a.BALANCE, a.LAST_UPDATE),
      x AS (
        INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND, ACTOR)
          SELECT u.LAST_UPDATE, u.CARD_ID, 0, u.POINTS, u.BALANCE, 'grant', 'system' FROM u
          RETURNING H_TRANSACTION.TRANSACTION_ID, H_TRANSACTION.CARD_ID, H_TRANSACTION.AMOUNT),
      -- v0.14.0: an expiring grant's credit becomes the card's lot, made
      -- at its apply (a lot due already is written out by the card's next
      -- write or the sweep).
      l AS (
        INSERT INTO P_LOT (CARD_ID, GRANT_ID, SOURCE_ID, AMOUNT, REMAINING, RESERVED, CREATED_TIME, EXPIRES_TIME)
          SELECT x.CARD_ID, p_id, x.TRANSACTION_ID, x.AMOUNT, x.AMOUNT, 0, v_applied, v_expires FROM x
          WHERE v_expires IS NOT NULL)
      SELECT COUNT(*) INTO n FROM x;
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

}  // namespace hotrow::pointcard
