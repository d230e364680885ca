// The leaderboard on PostgreSQL (when --redis is not given): the tables
// lb_board and lb_score (as on SQLite, sqlite_store.h) are the truth for
// every instance; each instance answers reads from its service's in-memory
// Boards, which follow the tables:
//   - its own writes update it after they commit, before answering;
//   - other instances' writes arrive by NOTIFY on kBoardChannel, sent in
//     the writing transaction, so at its commit, and parsed by Follow
//     (below the statements that send them, in postgres_store.cc); a
//     board's creation, change or deletion is a "board" notification, on
//     which the service reads that board again;
//   - a listener reconnect reloads the whole board.
// The sequence number that orders equal scores comes from one clock row,
// locked until the commit, so it is one order for all instances, and it is
// commit order. The cost: score writes queue on that row through their
// commit (measured in docs/design.md). Changes carry their sequence number,
// and the Board ignores older ones (SetIfNewer). One narrow race remains: a
// local write's own update of the Board can land after another instance's
// later delete of the same player was applied; the next reload or change of
// that player corrects it.
#pragma once

#include "db/postgres.h"
#include "leaderboard/store.h"

namespace hotrow::leaderboard {

inline constexpr const char* kBoardChannel = "hotrow_lb";

class PostgresLeaderboardStore final : public LeaderboardStore {
 public:
  static Result<std::unique_ptr<PostgresLeaderboardStore>> Open(db::pg::Pool& pool);

  Status Load(const std::function<int64_t(BoardInfo)>& board_sink,
              const std::function<void(const std::string&, int64_t, std::string, Stored)>& sink) override;
  Status LoadSeason(const std::string& board_id, int64_t season,
                    const std::function<void(std::string, Stored)>& sink) override;
  Result<std::vector<RecordedSeason>> SeasonHistory(const std::string& board_id) override;
  Result<BoardInfo> LoadBoard(const std::string& board_id) override;
  void ReadProfiles(const std::string& board_id, int64_t season, std::vector<std::string> client_ids,
                    std::function<void(Result<ProfileMap>)> done) override;
  const char* channel() const override { return kBoardChannel; }
  Result<std::optional<ScoreChange>> Follow(std::string_view notification) override;
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
  explicit PostgresLeaderboardStore(db::pg::Pool& pool) : pool_(pool) {}
  db::pg::Pool& pool_;
};

// Creates and migrates the schema (postgres_schema.cc), under its advisory
// lock, on one connection or on one of the pool's (pg::CreateSchemaLocked).
Status CreatePostgresLeaderboardSchema(db::pg::Connection& conn);
Status CreatePostgresLeaderboardSchemaOnPool(db::pg::Pool& pool);

// Players player-1..player-N with demo scores, into an empty table (COPY).
Status SeedPostgresLeaderboard(db::pg::Connection& conn, int64_t clients, uint64_t seed);

}  // namespace hotrow::leaderboard
