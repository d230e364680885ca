#include "leaderboard/postgres_store.h"

#include <charconv>

#include "ops/log.h"

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
}  // namespace

Status CreatePostgresLeaderboardSchema(pg::Connection& conn) {
  return pg::WithSchemaLock(conn, kSchemaLock, CreateSchema);
}

Result<std::unique_ptr<PostgresLeaderboardStore>> PostgresLeaderboardStore::Open(pg::Pool& pool) {
  if (Status s = pg::CreateSchemaLocked(pool, kSchemaLock, CreateSchema); !s.ok()) return s;
  return std::unique_ptr<PostgresLeaderboardStore>(new PostgresLeaderboardStore(pool));
}

Status PostgresLeaderboardStore::Load(const std::function<void(std::string, Stored)>& sink) {
  auto rows =
      pool_.Run<pg::Rows>([](pg::Connection& c) { return c.Query("SELECT client_id, score, seq FROM leaderboard"); },
                          /*unbounded=*/true);
  if (!rows.ok()) return rows.status();
  for (int i = 0; i < rows->size(); ++i)
    sink(std::string(rows->Text(i, 0)), Stored{.score = rows->Int(i, 1), .seq = rows->Int(i, 2)});
  return Status::Ok();
}

// The notifications the two statements below send on kBoardChannel:
//   "set <score> <seq> <client id>"   a stored score changed
//   "del <client id>"                 a player was removed
Result<std::optional<ScoreChange>> PostgresLeaderboardStore::Follow(std::string_view payload) {
  auto bad = [&]() -> std::optional<ScoreChange> {
    log::Debug("ignoring an unreadable leaderboard notification: {}", payload);
    return std::nullopt;
  };
  if (payload.starts_with("del "))
    return std::make_optional(
        ScoreChange{.kind = ScoreChange::Kind::kErase, .client_id = std::string(payload.substr(4))});
  if (!payload.starts_with("set ")) return bad();
  std::string_view rest = payload.substr(4);
  int64_t score = 0, seq = 0;
  auto [p1, e1] = std::from_chars(rest.data(), rest.data() + rest.size(), score);
  if (e1 != std::errc() || p1 == rest.data() + rest.size()) return bad();
  rest.remove_prefix(static_cast<size_t>(p1 - rest.data()) + 1);
  auto [p2, e2] = std::from_chars(rest.data(), rest.data() + rest.size(), seq);
  if (e2 != std::errc() || p2 == rest.data() + rest.size()) return bad();
  rest.remove_prefix(static_cast<size_t>(p2 - rest.data()) + 1);
  return std::make_optional(
      ScoreChange{.kind = ScoreChange::Kind::kSet, .client_id = std::string(rest), .score = score, .seq = seq});
}

namespace {

// The statements of the request path, prepared once per connection.
//
// A post decides and writes in one statement: the new score replaces the
// stored one (or, in best mode, only a higher one does); an equal score
// changes nothing, so the player keeps its sequence number. The clock's row
// lock is taken first and held to the commit (one statement, its own
// transaction): seq order is commit order. GREATEST(n + 1, nextval): the
// clock stays on the sequence, so an instance of v0.1.0 (which still takes
// nextval alone) running beside this one during an upgrade never gets a
// seq the clock gave.
constexpr pg::NamedSql kPostScore{"leaderboard_post", R"(
  WITH clock AS (UPDATE leaderboard_clock SET n = GREATEST(n + 1, nextval('leaderboard_seq')) WHERE id = 1
                 RETURNING n),
  up AS (
    INSERT INTO leaderboard AS l (client_id, score, seq) SELECT $1, $2, n FROM clock
    ON CONFLICT (client_id) DO UPDATE SET score = excluded.score, seq = excluded.seq
    WHERE l.score <> excluded.score AND ($3 = 'replace' OR excluded.score > l.score)
    RETURNING score, seq, client_id)
  SELECT score, seq, pg_notify('hotrow_lb', 'set ' || score || ' ' || seq || ' ' || client_id) FROM up)"};
constexpr pg::NamedSql kSelectScore{"leaderboard_select", "SELECT score, seq FROM leaderboard WHERE client_id = $1"};
constexpr pg::NamedSql kRemovePlayer{"leaderboard_remove", R"(
  WITH d AS (DELETE FROM leaderboard WHERE client_id = $1 RETURNING client_id)
  SELECT pg_notify('hotrow_lb', 'del ' || client_id) FROM d)"};

}  // namespace

void PostgresLeaderboardStore::PostScore(std::string client_id, int64_t score, ScoreMode mode,
                                         std::function<void(Result<StoredScore>)> done) {
  pool_.Submit([client_id = std::move(client_id), score, mode, done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto changed =
        (*c)->Query(kPostScore, {client_id, std::to_string(score), mode == ScoreMode::kBest ? "best" : "replace"});
    if (!changed.ok()) return done(changed.status());
    bool was_changed = !changed->empty();
    int64_t stored = 0, seq = 0;
    if (was_changed) {
      stored = changed->Int(0, 0);
      seq = changed->Int(0, 1);
    } else {
      auto current = (*c)->Query(kSelectScore, {client_id});
      if (!current.ok()) return done(current.status());
      if (current->empty()) return done(Status::Internal("the player vanished while posting"));
      stored = current->Int(0, 0);
      seq = current->Int(0, 1);
    }
    done(StoredScore{.score = stored, .seq = seq, .changed = was_changed});
  });
}

void PostgresLeaderboardStore::Remove(std::string client_id, std::function<void(Status)> done) {
  pool_.Submit([client_id = std::move(client_id), done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = (*c)->Query(kRemovePlayer, {client_id});
    if (!rows.ok()) return done(rows.status());
    if (rows->empty()) return done(NoSuchPlayer(client_id));
    done(Status::Ok());
  });
}

Status SeedPostgresLeaderboard(pg::Connection& conn, int64_t clients, uint64_t seed) {
  if (Status s = CreatePostgresLeaderboardSchema(conn); !s.ok()) return s;
  auto existing = conn.Query("SELECT COUNT(*) FROM leaderboard");
  if (!existing.ok()) return existing.status();
  if (existing->Int(0, 0) > 0)
    return Status::Conflict("the database already holds " + std::to_string(existing->Int(0, 0)) +
                            " player(s); seed a fresh database or pass --replace");
  std::mt19937_64 rng(seed);
  auto next = conn.Query("SELECT n FROM leaderboard_clock WHERE id = 1");
  if (!next.ok()) return next.status();
  int64_t base = next->Int(0, 0);
  std::string data;
  for (int64_t i = 1; i <= clients; ++i)
    data +=
        "player-" + std::to_string(i) + "\t" + std::to_string(DemoScore(rng)) + "\t" + std::to_string(base + i) + "\n";
  if (Status s = conn.CopyIn("COPY leaderboard (client_id, score, seq) FROM STDIN", data); !s.ok()) return s;
  auto bumped = conn.Query("UPDATE leaderboard_clock SET n = $1 WHERE id = 1", {std::to_string(base + clients)});
  if (!bumped.ok()) return bumped.status();
  return conn.Query("SELECT setval('leaderboard_seq', $1)", {std::to_string(base + clients)}).status();
}

}  // namespace hotrow::leaderboard
