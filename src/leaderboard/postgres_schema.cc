// The leaderboard's PostgreSQL schema: its migration steps and the post
// function (hotrow_lb_post_v2), which postgres_store.cc calls. Split from
// the store so that the SQL of the schema reads in one place.
#include "leaderboard/postgres_store.h"

namespace hotrow::leaderboard {

namespace pg = db::pg;

namespace {
constexpr int64_t kSchemaLock = 72720002;  // advisory lock key (pg::WithSchemaLock)

Status CreateSchema(pg::Connection& conn) {
  // leaderboard_clock is the one serialisation point of score writes: a
  // post takes its row lock (UPDATE ... n = n + 1) and holds it until its
  // commit, so seq order is commit order. A sequence (nextval) hands out
  // numbers without that order: two posts for one player could commit with
  // seqs going backwards (the later write then lost on the other instances,
  // whose boards keep the higher seq), and equal scores of different players
  // were not ranked first-to-reach. The cost, measured in docs/design.md:
  // score writes queue on one row through their commit.
  return conn.Exec(R"sql(
    CREATE SEQUENCE IF NOT EXISTS leaderboard_seq;
    CREATE TABLE IF NOT EXISTS leaderboard (
      client_id TEXT   PRIMARY KEY,
      score     BIGINT NOT NULL,
      seq       BIGINT NOT NULL UNIQUE
    );
    CREATE TABLE IF NOT EXISTS leaderboard_clock (
      id int    PRIMARY KEY CHECK (id = 1),
      n  bigint NOT NULL
    );
    INSERT INTO leaderboard_clock
      SELECT 1, GREATEST(COALESCE((SELECT MAX(seq) FROM leaderboard), 0),
                         (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM leaderboard_seq))
      ON CONFLICT (id) DO NOTHING;
  )sql");
}

// Step 1 (v0.7.0), contract: many boards (the tables as on SQLite). v0.1.0's
// table's rows become season 1 of `default`; the table gives way to a view
// of them, so that an instance of a release before, during an upgrade, still
// reads `default` but fails every write it tries (a score row needs its
// board) rather than writing where nobody reads. The functions that post
// and the notifications are this release's; those of before ignore them.
constexpr std::string_view kBoards = R"sql(
  CREATE TABLE lb_board (
    board_id       text   PRIMARY KEY,
    sort_order     text   NOT NULL,
    operator       text   NOT NULL,
    reset          text   NOT NULL,
    reset_timezone text   NOT NULL,
    ranking        text   NOT NULL,
    auth           text   NOT NULL,
    keep_seasons   int    NOT NULL,
    created_us     bigint NOT NULL,
    reset_every_s  int    NOT NULL DEFAULT 0,
    epoch_season   int    NOT NULL DEFAULT 1,
    epoch_us       bigint NOT NULL DEFAULT 0,
    pre_epoch_started_us bigint NOT NULL DEFAULT 0,
    purged_season  int    NOT NULL DEFAULT 0,
    deleting       bool   NOT NULL DEFAULT false
  );
  INSERT INTO lb_board (board_id, sort_order, operator, reset, reset_timezone, ranking, auth, keep_seasons,
                        created_us, epoch_us)
    SELECT 'default', 'desc', 'replace', 'none', 'UTC', 'unique', 'none', 12, t, t
    FROM (SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint AS t) n;
  CREATE TABLE lb_season (
    board_id   text   NOT NULL REFERENCES lb_board ON DELETE CASCADE,
    season     int    NOT NULL,
    started_us bigint NOT NULL,
    PRIMARY KEY (board_id, season)
  );
  CREATE TABLE lb_score (
    board_id     text   NOT NULL REFERENCES lb_board ON DELETE CASCADE,
    season       int    NOT NULL,
    client_id    text   NOT NULL,
    score        bigint NOT NULL,
    seq          bigint NOT NULL,
    display_name text,
    metadata     text,
    PRIMARY KEY (board_id, season, client_id)
  );
  INSERT INTO lb_score (board_id, season, client_id, score, seq)
    SELECT 'default', 1, client_id, score, seq FROM leaderboard;
  DROP TABLE leaderboard;
  -- OFFSET 0: not automatically updatable, so an old instance's DELETE fails
  -- as its INSERT does (it would remove a player nobody is told about).
  CREATE VIEW leaderboard AS
    SELECT client_id, score, seq FROM lb_score WHERE board_id = 'default' AND season = 1 OFFSET 0;
)sql";

// Step 2 (v0.7.0): score posts' Idempotency-Keys, with the answer each got
// (store.h, ScorePost), kept kIdempotencyKeptUs; every keyed post deletes
// a few expired ones, so the table holds about a day of keys.
constexpr std::string_view kIdempotency = R"sql(
  CREATE TABLE lb_idempotency (
    board_id         text   NOT NULL REFERENCES lb_board ON DELETE CASCADE,
    client_id        text   NOT NULL,
    key              text   NOT NULL,
    board_created_us bigint NOT NULL,
    fingerprint      text   NOT NULL,
    score            bigint NOT NULL,
    seq              bigint NOT NULL,
    season           int    NOT NULL,
    created_us       bigint NOT NULL,
    PRIMARY KEY (board_id, client_id, key)
  );
  CREATE INDEX lb_idempotency_created ON lb_idempotency (created_us);
)sql";

// Step 3 (v0.7.0): the order of display name and metadata changes (a
// profile may change while the score, and its seq, stays).
constexpr std::string_view kProfiles = R"sql(
  ALTER TABLE lb_score ADD COLUMN profile_seq bigint NOT NULL DEFAULT 0;
)sql";

// Step 4 (v0.7.0): boards' HMAC secrets, sealed (model.h, BoardInfo).
constexpr std::string_view kSecrets = R"sql(
  ALTER TABLE lb_board ADD COLUMN secret text NOT NULL DEFAULT '',
                       ADD COLUMN previous_secret text NOT NULL DEFAULT '',
                       ADD COLUMN previous_until_us bigint NOT NULL DEFAULT 0;
)sql";

// The post (v2: the keys, display name and metadata; v1, which the build
// before 0.7.0's keys called, is left for it during a rolling restart: a
// function of the same name with other parameter types would be another
// overload, and an untyped call could pick the wrong one): decides the stored score with the board's settings as stored
// (p_op, when not NULL, overrides the operator: the legacy ?mode) and writes
// it in one transaction. A board being deleted is refused before any lock,
// so that a stream of posts cannot starve its DELETE; otherwise the board's
// row is taken FOR KEY SHARE (a delete waits, and a post after it finds no
// board: never an orphan score), then the clock's row lock, held to the
// commit, so seq order is commit order (CreateSchema); then the player's row
// FOR UPDATE, so a remove and a post of one player are ordered too. outcome:
// 0 changed, 1 unchanged (an equal result keeps the player's seq), 2 no
// board, 3 an increment left +-(2^53 - 1) (nothing written), 4 this clock
// is outside [p_start_us, p_next_us) (nothing written; `score` is the
// clock: post again for its season), 5 the instance computed the season
// with another schedule than the board's (p_schedule, ScheduleFingerprint;
// nothing written: read the board again), 6 one of p_keys (StoredKeys) was
// kept with another fingerprint than p_fp, 7 one was kept with p_fp: its answer (score, seq,
// season), nothing written; with the board's creation time, order and
// ranking. The key is looked up under the clock's lock, so two posts with
// one key are one after the other, and before the schedule and the season
// (a retry after a reset still gets its answer). p_name and p_meta, when
// not NULL, replace the player's display name and metadata (even when the
// score stays); when they changed, out_name, out_meta and out_pseq (the
// post's clock value: their order) say how, and a "prof" notification
// follows the "set2" one.
constexpr std::string_view kFunctions = R"sql(
  CREATE OR REPLACE FUNCTION hotrow_lb_post_v2(p_board text, p_client text, p_score bigint, p_op text, p_season int,
                                               p_start_us bigint, p_next_us bigint, p_schedule text, p_keys text[],
                                               p_fp text, p_name text, p_meta text)
  RETURNS TABLE (outcome smallint, score bigint, seq bigint, created_us bigint, sort_order text, ranking text,
                 season int, out_name text, out_meta text, out_pseq bigint)
  LANGUAGE plpgsql AS $$
  DECLARE
    b lb_board%ROWTYPE;
    old_score bigint;
    old_seq bigint;
    old_name text;
    old_meta text;
    new_name text;
    new_meta text;
    profile_changed bool;
    op text;
    v bigint;
    n bigint;
    now_us bigint;
    k lb_idempotency%ROWTYPE;
  BEGIN
    IF NOT EXISTS (SELECT 1 FROM lb_board x WHERE x.board_id = p_board AND NOT x.deleting) THEN
      RETURN QUERY SELECT 2::smallint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::text, NULL::text, NULL::int, NULL::text, NULL::text, NULL::bigint;
      RETURN;
    END IF;
    SELECT * INTO b FROM lb_board x WHERE x.board_id = p_board FOR KEY SHARE;
    IF NOT FOUND OR b.deleting THEN
      RETURN QUERY SELECT 2::smallint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::text, NULL::text, NULL::int, NULL::text, NULL::text, NULL::bigint;
      RETURN;
    END IF;
    op := COALESCE(p_op, b.operator);
    UPDATE leaderboard_clock SET n = GREATEST(leaderboard_clock.n + 1, nextval('leaderboard_seq')) WHERE id = 1
      RETURNING leaderboard_clock.n INTO n;
    -- The season is the one this clock, read after the locks, is in.
    now_us := (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint;
    IF cardinality(p_keys) > 0 THEN
      SELECT * INTO k FROM lb_idempotency x
        WHERE x.board_id = p_board AND x.client_id = p_client AND x.key = ANY (p_keys)
          AND x.board_created_us = b.created_us AND x.created_us > now_us - 86400000000
        LIMIT 1;
      IF FOUND THEN
        IF k.fingerprint <> p_fp THEN
          RETURN QUERY SELECT 6::smallint, NULL::bigint, NULL::bigint, b.created_us, b.sort_order, b.ranking, NULL::int, NULL::text, NULL::text, NULL::bigint;
        ELSE
          RETURN QUERY SELECT 7::smallint, k.score, k.seq, b.created_us, b.sort_order, b.ranking, k.season,
                              NULL::text, NULL::text, NULL::bigint;
        END IF;
        RETURN;
      END IF;
      -- SKIP LOCKED: never wait, holding the clock, for keys a board's
      -- delete (its cascade) holds.
      DELETE FROM lb_idempotency x WHERE (x.board_id, x.client_id, x.key) IN (
        SELECT y.board_id, y.client_id, y.key FROM lb_idempotency y WHERE y.created_us <= now_us - 86400000000
          LIMIT 10 FOR UPDATE SKIP LOCKED);
    END IF;
    -- (Parenthesized: IF reads its condition up to the first THEN outside them.)
    IF p_schedule <> (b.reset || ' ' || b.reset_timezone || ' ' || b.reset_every_s || ' ' || b.epoch_season || ' ' ||
                      (CASE WHEN b.epoch_us <> 0 THEN b.epoch_us ELSE b.created_us END)) THEN
      RETURN QUERY SELECT 5::smallint, NULL::bigint, NULL::bigint, b.created_us, b.sort_order, b.ranking, NULL::int, NULL::text, NULL::text, NULL::bigint;
      RETURN;
    END IF;
    IF now_us < p_start_us OR (p_next_us IS NOT NULL AND now_us >= p_next_us) THEN
      RETURN QUERY SELECT 4::smallint, now_us, NULL::bigint, b.created_us, b.sort_order, b.ranking, NULL::int, NULL::text, NULL::text, NULL::bigint;
      RETURN;
    END IF;
    SELECT s.score, s.seq, s.display_name, s.metadata INTO old_score, old_seq, old_name, old_meta FROM lb_score s
      WHERE s.board_id = p_board AND s.season = p_season AND s.client_id = p_client FOR UPDATE;
    -- Given: replaces the stored one, even when the score stays.
    new_name := COALESCE(p_name, old_name);
    new_meta := COALESCE(p_meta, old_meta);
    profile_changed := new_name IS DISTINCT FROM old_name OR new_meta IS DISTINCT FROM old_meta;
    IF old_score IS NULL OR op = 'replace' THEN
      v := p_score;
    ELSIF op = 'best' THEN
      v := CASE WHEN (b.sort_order = 'desc' AND p_score > old_score) OR (b.sort_order = 'asc' AND p_score < old_score)
                THEN p_score ELSE old_score END;
    ELSE
      v := old_score + p_score;
      IF v < -9007199254740991 OR v > 9007199254740991 THEN
        RETURN QUERY SELECT 3::smallint, v, NULL::bigint, b.created_us, b.sort_order, b.ranking, NULL::int, NULL::text, NULL::text, NULL::bigint;
        RETURN;
      END IF;
    END IF;
    IF profile_changed THEN
      out_name := new_name;
      out_meta := new_meta;
      out_pseq := n;  -- this post's clock: the profile's order
    END IF;
    IF old_score IS NOT NULL AND v = old_score THEN
      IF profile_changed THEN
        UPDATE lb_score s SET display_name = new_name, metadata = new_meta, profile_seq = n
          WHERE s.board_id = p_board AND s.season = p_season AND s.client_id = p_client;
      END IF;
      n := old_seq;
      outcome := 1;
    ELSE
      INSERT INTO lb_score (board_id, season, client_id, score, seq, display_name, metadata, profile_seq)
        VALUES (p_board, p_season, p_client, v, n, new_name, new_meta, CASE WHEN profile_changed THEN n ELSE 0 END)
        ON CONFLICT ON CONSTRAINT lb_score_pkey DO UPDATE SET score = excluded.score, seq = excluded.seq,
          display_name = excluded.display_name, metadata = excluded.metadata,
          profile_seq = CASE WHEN profile_changed THEN excluded.profile_seq ELSE lb_score.profile_seq END;
      PERFORM pg_notify('hotrow_lb', 'set2 ' || p_board || ' ' || b.created_us || ' ' || p_season || ' ' || v || ' ' ||
                                     n || ' ' || p_client);
      outcome := 0;
    END IF;
    IF profile_changed THEN
      -- "prof <board> <created> <season> <seq> <client> <name bytes, -1: none> <name><metadata>"
      PERFORM pg_notify('hotrow_lb', 'prof ' || p_board || ' ' || b.created_us || ' ' || p_season || ' ' || out_pseq ||
                                     ' ' || p_client || ' ' || COALESCE(octet_length(new_name), -1) || ' ' ||
                                     COALESCE(new_name, '') || COALESCE(new_meta, ''));
    END IF;
    IF cardinality(p_keys) > 0 THEN
      INSERT INTO lb_idempotency SELECT p_board, p_client, kk, b.created_us, p_fp, v, n, p_season, now_us
        FROM unnest(p_keys) kk
        ON CONFLICT ON CONSTRAINT lb_idempotency_pkey DO UPDATE SET board_created_us = excluded.board_created_us,
          fingerprint = excluded.fingerprint, score = excluded.score, seq = excluded.seq, season = excluded.season,
          created_us = excluded.created_us;
    END IF;
    RETURN QUERY SELECT outcome, v, n, b.created_us, b.sort_order, b.ranking, p_season, out_name, out_meta, out_pseq;
  END $$;
)sql";

Status MigrateSchema(pg::Connection& conn) {
  if (Status s = CreateSchema(conn); !s.ok()) return s;
  if (Status s = pg::Migrate(
          conn, "leaderboard",
          {{.sql = kBoards, .contract = true}, {.sql = kIdempotency}, {.sql = kProfiles}, {.sql = kSecrets}});
      !s.ok())
    return s;
  return conn.Exec(std::string(kFunctions));
}

}  // namespace

Status CreatePostgresLeaderboardSchema(pg::Connection& conn) {
  return pg::WithSchemaLock(conn, kSchemaLock, MigrateSchema);
}

Status CreatePostgresLeaderboardSchemaOnPool(pg::Pool& pool) {
  return pg::CreateSchemaLocked(pool, kSchemaLock, MigrateSchema);
}

}  // namespace hotrow::leaderboard
