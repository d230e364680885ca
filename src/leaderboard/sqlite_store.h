// The leaderboard on the embedded SQLite database: the table
// leaderboard(client_id, score, seq) is the truth, written through the
// group-commit writer (a 200 is durable). seq comes from the one-row counter
// table leaderboard_seq, bumped in the same transaction whenever a stored
// score changes. The service's Board answers every read and changes right
// after each commit.
#pragma once

#include "db/sqlite_database.h"
#include "leaderboard/store.h"

namespace hotrow::leaderboard {

class SqliteLeaderboardStore final : public LeaderboardStore {
 public:
  // Creates the schema if needed (before db.writer().Start()).
  static Result<std::unique_ptr<SqliteLeaderboardStore>> Open(db::sqlite::Database& db);

  Status Load(const std::function<void(std::string, Stored)>& sink) override;
  void PostScore(std::string client_id, int64_t score, ScoreMode mode,
                 std::function<void(Result<StoredScore>)> done) override;
  void Remove(std::string client_id, std::function<void(Status)> done) override;

 private:
  explicit SqliteLeaderboardStore(db::sqlite::Database& db) : db_(db) {}
  db::sqlite::Database& db_;
};

Status CreateLeaderboardSchema(db::sqlite::Connection& conn);

// Inserts `clients` players "player-1".."player-N" with random scores into an
// empty table (seeding). progress(done) is called now and then.
Status SeedLeaderboard(db::sqlite::Connection& conn, int64_t clients, uint64_t seed,
                       const std::function<void(int64_t)>& progress);

}  // namespace hotrow::leaderboard
