// The leaderboard on the embedded SQLite database (the main file): the
// tables lb_board (a row per board: its settings) and lb_score (a row per
// player of a board's season: score, seq, display name, metadata) are the
// truth, written through the group-commit writer (a 200 is durable). seq
// comes from the one-row counter table leaderboard_seq, bumped in the same
// transaction whenever a stored score changes. The service's Boards answer
// every read and change right after each commit.
//
// Schema (sqlite_schema.cc): the component "leaderboard" of the main file
// (sqlite::MigrateComponent). Step 1 creates the board tables with the board
// `default` and moves v0.1.0's table leaderboard(client_id, score, seq) into
// it, as season 1 of `default`; step 2 adds lb_idempotency (score posts'
// Idempotency-Keys, purged hourly after kIdempotencyKeptUs).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "base/periodic_task.h"
#include "db/sqlite_database.h"
#include "leaderboard/store.h"

namespace hotrow::leaderboard {

class SqliteLeaderboardStore final : public LeaderboardStore {
 public:
  // Creates and migrates the schema if needed (before db.writer().Start()).
  static Result<std::unique_ptr<SqliteLeaderboardStore>> Open(db::sqlite::Database& db);
  ~SqliteLeaderboardStore() override;
  void Stop() override;

  Status Load(const std::function<int64_t(BoardInfo)>& board_sink,
              const std::function<void(const std::string&, int64_t, std::string, Stored)>& sink) override;
  Status LoadSeason(const std::string& board_id, int64_t season,
                    const std::function<void(std::string, Stored)>& sink) override;
  Result<std::vector<RecordedSeason>> SeasonHistory(const std::string& board_id) override;
  Result<BoardInfo> LoadBoard(const std::string& board_id) override;
  void ReadProfiles(const std::string& board_id, int64_t season, std::vector<std::string> client_ids,
                    std::function<void(Result<ProfileMap>)> done) override;
  void CreateBoard(BoardInfo board, std::function<void(Status)> done) override;
  void UpdateBoard(BoardInfo board, BoardInfo expected, std::vector<RecordedSeason> history,
                   std::function<void(Status)> done) override;
  void DeleteBoard(BoardInfo board, std::function<void(Status)> done) override;
  void PostScore(ScorePost post, std::function<void(Result<StoredScore>)> done) override;
  void Purge(std::string board_id, int64_t created_us, int64_t through_season,
             std::function<void(Status)> done) override;
  void Remove(std::string board_id, int64_t season, std::string client_id,
              std::function<void(Result<int64_t>)> done) override;

 private:
  explicit SqliteLeaderboardStore(db::sqlite::Database& db) : db_(db) {}
  // Deletes the Idempotency-Keys past kIdempotencyKeptUs (purger_'s thread).
  void PurgeKeys();
  db::sqlite::Database& db_;
  std::atomic<bool> stopping_{false};
  std::unique_ptr<PeriodicTask> purger_;
};

Status CreateLeaderboardSchema(db::sqlite::Connection& conn);

// Inserts `clients` players "player-1".."player-N" with random scores into
// the board `default` when it has none (seeding). progress(done) is called
// now and then.
Status SeedLeaderboard(db::sqlite::Connection& conn, int64_t clients, uint64_t seed,
                       const std::function<void(int64_t)>& progress);

}  // namespace hotrow::leaderboard
