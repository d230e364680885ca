#include "leaderboard/sqlite_store.h"

#include <random>

#include "ops/log.h"

namespace hotrow::leaderboard {

namespace sqlite = db::sqlite;

Status CreateLeaderboardSchema(sqlite::Connection& conn) {
  // seq orders equal scores: it is taken from leaderboard_seq whenever a
  // stored score changes, so a lower seq means "reached this score earlier".
  return conn.Exec(R"sql(
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
  )sql");
}

Result<std::unique_ptr<SqliteLeaderboardStore>> SqliteLeaderboardStore::Open(db::sqlite::Database& db) {
  if (Status s = CreateLeaderboardSchema(db.writer().connection()); !s.ok()) return s;
  return std::unique_ptr<SqliteLeaderboardStore>(new SqliteLeaderboardStore(db));
}

Status SqliteLeaderboardStore::Load(const std::function<void(std::string, Stored)>& sink) {
  auto conn = db_.OpenReader();
  if (!conn.ok()) return conn.status();
  auto q = (*conn)->Prepare("SELECT client_id, score, seq FROM leaderboard");
  if (!q.ok()) return q.status();
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
    sink(std::string(q->Text(0)), Stored{.score = q->Int(1), .seq = q->Int(2)});
  }
}

namespace {

// Decides and writes one score inside the batch transaction.
Result<StoredScore> ApplyScore(sqlite::Connection& c, const std::string& client_id, int64_t score, ScoreMode mode) {
  auto find = c.Prepare("SELECT score, seq FROM leaderboard WHERE client_id = ?1");
  if (!find.ok()) return find.status();
  find->Bind(1, client_id);
  auto row = find->Step();
  if (!row.ok()) return row.status();
  if (*row) {
    int64_t old_score = find->Int(0), old_seq = find->Int(1);
    if (old_score == score || (mode == ScoreMode::kBest && old_score > score))
      return StoredScore{.score = old_score, .seq = old_seq, .changed = false};
  }
  auto next = c.Prepare("UPDATE leaderboard_seq SET last = last + 1 WHERE id = 1 RETURNING last");
  if (!next.ok()) return next.status();
  auto seq_row = next->Step();
  if (!seq_row.ok()) return seq_row.status();
  int64_t seq = next->Int(0);
  if (Status s = next->Run(); !s.ok()) return s;
  auto upsert = c.Prepare(
      "INSERT INTO leaderboard (client_id, score, seq) VALUES (?1, ?2, ?3) "
      "ON CONFLICT (client_id) DO UPDATE SET score = excluded.score, seq = excluded.seq");
  if (!upsert.ok()) return upsert.status();
  if (Status s = upsert->Bind(1, client_id).Bind(2, score).Bind(3, seq).Run(); !s.ok()) return s;
  return StoredScore{.score = score, .seq = seq, .changed = true};
}

}  // namespace

void SqliteLeaderboardStore::PostScore(std::string client_id, int64_t score, ScoreMode mode,
                                       std::function<void(Result<StoredScore>)> done) {
  auto apply = [client_id = std::move(client_id), score, mode](sqlite::Connection& c) {
    return ApplyScore(c, client_id, score, mode);
  };
  db::sqlite::SubmitCall<StoredScore>(db_.writer(), std::move(apply), std::move(done));
}

void SqliteLeaderboardStore::Remove(std::string client_id, std::function<void(Status)> done) {
  auto apply = [client_id](sqlite::Connection& c) -> Result<db::sqlite::Unit> {
    auto q = c.Prepare("DELETE FROM leaderboard WHERE client_id = ?1");
    if (!q.ok()) return q.status();
    if (Status s = q->Bind(1, client_id).Run(); !s.ok()) return s;
    if (c.Changes() == 0) return NoSuchPlayer(client_id);
    return db::sqlite::Unit{};
  };
  auto finish = [done = std::move(done)](const Result<db::sqlite::Unit>& r) { done(r.status()); };
  db::sqlite::SubmitCall<db::sqlite::Unit>(db_.writer(), std::move(apply), std::move(finish));
}

Status SeedLeaderboard(sqlite::Connection& conn, int64_t clients, uint64_t seed,
                       const std::function<void(int64_t)>& progress) {
  if (Status s = CreateLeaderboardSchema(conn); !s.ok()) return s;
  auto existing = sqlite::QueryInt(conn, "SELECT COUNT(*) FROM leaderboard");
  if (!existing.ok()) return existing.status();
  if (*existing > 0)
    return Status::Conflict("the database already holds " + std::to_string(*existing) +
                            " player(s); seed a fresh database or pass --replace");
  std::mt19937_64 rng(seed);
  if (Status s = conn.Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  auto last = sqlite::QueryInt(conn, "SELECT last FROM leaderboard_seq WHERE id = 1");
  if (!last.ok()) return last.status();
  for (int64_t i = 1; i <= clients; ++i) {
    auto q = conn.Prepare("INSERT INTO leaderboard (client_id, score, seq) VALUES (?1, ?2, ?3)");
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
