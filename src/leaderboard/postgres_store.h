// The leaderboard on PostgreSQL (when --redis is not given): the table is
// the truth for every instance; each instance answers reads from its own
// in-memory Board, which follows the table:
//   - its own writes update it after they commit, before answering;
//   - other instances' writes arrive by NOTIFY hotrow_lb ("set <score>
//     <seq> <client id>", "del <client id>"), sent in the writing
//     transaction, so at its commit;
//   - a listener reconnect reloads the whole board.
// The sequence number that orders equal scores comes from a PostgreSQL
// sequence, so it is one order for all instances.
#pragma once

#include "db/postgres.h"
#include "leaderboard/board.h"
#include "leaderboard/store.h"

namespace hotrow::leaderboard {

inline constexpr const char* kBoardChannel = "hotrow_lb";

class PostgresLeaderboardStore final : public LeaderboardStore {
 public:
  static Result<std::unique_ptr<PostgresLeaderboardStore>> Open(db::pg::Pool& pool);
  // (Re)builds the Board from the table.
  Status Load();
  // A notification from hotrow_lb.
  void Follow(const std::string& payload);

  void PostScore(std::string client_id, int64_t score, ScoreMode mode,
                 std::function<void(Result<Posted>)> done) override;
  void Remove(std::string client_id, std::function<void(Status)> done) override;
  void Top(int64_t offset, int64_t limit, Callback<Result<Page>> done) override;
  void Player(std::string client_id, std::optional<int64_t> around,
              std::function<void(Result<PlayerView>)> done) override;

 private:
  explicit PostgresLeaderboardStore(db::pg::Pool& pool) : pool_(pool) {}
  db::pg::Pool& pool_;
  Board board_;
};

Status CreatePostgresLeaderboardSchema(db::pg::Connection& conn);

// Players player-1..player-N with demo scores, into an empty table (COPY).
Status SeedPostgresLeaderboard(db::pg::Connection& conn, int64_t clients, uint64_t seed);

}  // namespace hotrow::leaderboard
