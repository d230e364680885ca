// The leaderboard's tables in the embedded store's main file: its
// migration steps (the component "leaderboard", sqlite::MigrateComponent)
// and the demo seed. The store that reads and writes them is sqlite_store.cc.
#include <random>

#include "leaderboard/sqlite_store.h"
#include "ops/log.h"

namespace hotrow::leaderboard {

namespace sqlite = db::sqlite;

namespace {

// Step 1 (v0.7.0), contract: many boards. v0.1.0's table is created first
// (as v0.1.0 made it), so a new file and an old one take the same step; its
// rows become season 1 of `default`, and it is dropped: a release before
// would serve it empty, so it is refused (sqlite::MigrateComponent).
constexpr std::string_view kBoards = R"sql(
  CREATE TABLE IF NOT EXISTS leaderboard (
    client_id TEXT    PRIMARY KEY,
    score     INTEGER NOT NULL,
    seq       INTEGER NOT NULL UNIQUE
  ) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS leaderboard_seq (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    last INTEGER NOT NULL
  );
  INSERT OR IGNORE INTO leaderboard_seq (id, last) VALUES (1, 0);
  CREATE TABLE lb_board (
    board_id       TEXT    PRIMARY KEY,
    sort_order     TEXT    NOT NULL,
    operator       TEXT    NOT NULL,
    reset          TEXT    NOT NULL,
    reset_timezone TEXT    NOT NULL,
    ranking        TEXT    NOT NULL,
    auth           TEXT    NOT NULL,
    keep_seasons   INTEGER NOT NULL,
    created_us     INTEGER NOT NULL,
    reset_every_s  INTEGER NOT NULL DEFAULT 0,   -- --test-hooks seasons
    epoch_season   INTEGER NOT NULL DEFAULT 1,   -- the schedule's epoch (season.h)
    epoch_us       INTEGER NOT NULL DEFAULT 0,
    pre_epoch_started_us INTEGER NOT NULL DEFAULT 0,
    purged_season  INTEGER NOT NULL DEFAULT 0    -- seasons up to it deleted (keepSeasons)
  ) WITHOUT ROWID;
  INSERT INTO lb_board (board_id, sort_order, operator, reset, reset_timezone, ranking, auth, keep_seasons,
                        created_us, epoch_us)
    SELECT 'default', 'desc', 'replace', 'none', 'UTC', 'unique', 'none', 12, t, t
    FROM (SELECT CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER) AS t);
  -- The starts of a board's seasons before its schedule's epoch, recorded
  -- when the schedule changes (later ones are computed).
  CREATE TABLE lb_season (
    board_id   TEXT    NOT NULL,
    season     INTEGER NOT NULL,
    started_us INTEGER NOT NULL,
    PRIMARY KEY (board_id, season)
  ) WITHOUT ROWID;
  -- seq orders equal scores: taken from leaderboard_seq whenever a stored
  -- score changes, so a lower seq means "reached this score earlier".
  CREATE TABLE lb_score (
    board_id     TEXT    NOT NULL,
    season       INTEGER NOT NULL,
    client_id    TEXT    NOT NULL,
    score        INTEGER NOT NULL,
    seq          INTEGER NOT NULL,
    display_name TEXT,
    metadata     TEXT,
    PRIMARY KEY (board_id, season, client_id)
  ) WITHOUT ROWID;
  INSERT INTO lb_score (board_id, season, client_id, score, seq)
    SELECT 'default', 1, client_id, score, seq FROM leaderboard;
  DROP TABLE leaderboard;
)sql";

// Step 2 (v0.7.0): score posts' Idempotency-Keys, with the answer each got
// (ScorePost), kept kIdempotencyKeptUs.
constexpr std::string_view kIdempotency = R"sql(
  CREATE TABLE lb_idempotency (
    board_id         TEXT    NOT NULL,
    client_id        TEXT    NOT NULL,
    key              TEXT    NOT NULL,
    board_created_us INTEGER NOT NULL,  -- the board's incarnation
    fingerprint      TEXT    NOT NULL,
    score            INTEGER NOT NULL,
    seq              INTEGER NOT NULL,
    season           INTEGER NOT NULL,
    created_us       INTEGER NOT NULL,
    PRIMARY KEY (board_id, client_id, key)
  ) WITHOUT ROWID;
  CREATE INDEX lb_idempotency_created ON lb_idempotency (created_us);
)sql";

// Step 3 (v0.7.0): the order of display name and metadata changes (a
// profile may change while the score, and its seq, stays).
constexpr std::string_view kProfiles = R"sql(
  ALTER TABLE lb_score ADD COLUMN profile_seq INTEGER NOT NULL DEFAULT 0;
)sql";

// Step 4 (v0.7.0): boards' HMAC secrets, sealed (model.h, BoardInfo).
constexpr std::string_view kSecrets = R"sql(
  ALTER TABLE lb_board ADD COLUMN secret TEXT NOT NULL DEFAULT '';
  ALTER TABLE lb_board ADD COLUMN previous_secret TEXT NOT NULL DEFAULT '';
  ALTER TABLE lb_board ADD COLUMN previous_until_us INTEGER NOT NULL DEFAULT 0;
)sql";

}  // namespace

Status CreateLeaderboardSchema(sqlite::Connection& conn) {
  return sqlite::MigrateComponent(
      conn, "leaderboard",
      {{.sql = kBoards, .contract = true}, {.sql = kIdempotency}, {.sql = kProfiles}, {.sql = kSecrets}},
      "leaderboard");
}

Status SeedLeaderboard(sqlite::Connection& conn, int64_t clients, uint64_t seed,
                       const std::function<void(int64_t)>& progress) {
  if (Status s = CreateLeaderboardSchema(conn); !s.ok()) return s;
  auto existing = sqlite::QueryInt(conn, "SELECT COUNT(*) FROM lb_score WHERE board_id = 'default'");
  if (!existing.ok()) return existing.status();
  if (*existing > 0)
    return Status::Conflict("the database already holds " + std::to_string(*existing) +
                            " player(s); seed a fresh database or pass --replace");
  std::mt19937_64 rng(seed);
  if (Status s = conn.Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  auto last = sqlite::QueryInt(conn, "SELECT last FROM leaderboard_seq WHERE id = 1");
  if (!last.ok()) return last.status();
  for (int64_t i = 1; i <= clients; ++i) {
    auto q = conn.Prepare(
        "INSERT INTO lb_score (board_id, season, client_id, score, seq) VALUES ('default', 1, ?1, ?2, ?3)");
    if (!q.ok()) return q.status();
    int64_t score = DemoScore(rng);
    if (Status s = q->Bind(1, "player-" + std::to_string(i)).Bind(2, score).Bind(3, *last + i).Run(); !s.ok()) {
      log::WarnIfFailed(conn.Exec("ROLLBACK"), "seed: ROLLBACK");
      return s;
    }
    if (progress && (i % 5000 == 0 || i == clients)) progress(i);
  }
  auto bump = conn.Prepare("UPDATE leaderboard_seq SET last = ?1 WHERE id = 1");
  if (!bump.ok()) return bump.status();
  if (Status s = bump->Bind(1, *last + clients).Run(); !s.ok()) return s;
  return conn.Exec("COMMIT");
}

}  // namespace hotrow::leaderboard
