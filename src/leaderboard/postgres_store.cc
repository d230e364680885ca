#include "leaderboard/postgres_store.h"

#include <charconv>

#include "ops/log.h"

namespace hotrow::leaderboard {

namespace pg = db::pg;

Result<std::unique_ptr<PostgresLeaderboardStore>> PostgresLeaderboardStore::Open(pg::Pool& pool) {
  if (Status s = CreatePostgresLeaderboardSchemaOnPool(pool); !s.ok()) return s;
  return std::unique_ptr<PostgresLeaderboardStore>(new PostgresLeaderboardStore(pool));
}

namespace {

constexpr const char* kBoardColumns =
    "board_id, sort_order, operator, reset, reset_timezone, ranking, auth, keep_seasons, created_us, reset_every_s, "
    "epoch_season, epoch_us, pre_epoch_started_us, secret, previous_secret, previous_until_us";

// A profile from a row's (display_name, metadata, profile_seq) at column
// `first`; null when neither is set (or no change was answered).
std::shared_ptr<const Profile> ProfileOf(const pg::Rows& r, int i, int first) {
  if (r.IsNull(i, first) && r.IsNull(i, first + 1)) return nullptr;
  return std::make_shared<const Profile>(Profile{.display_name = std::string(r.Text(i, first)),
                                                 .metadata = std::string(r.Text(i, first + 1)),
                                                 .seq = r.IsNull(i, first + 2) ? 0 : r.Int(i, first + 2)});
}

Result<BoardInfo> BoardFrom(const pg::Rows& r, int i) {
  BoardInfo b{.id = std::string(r.Text(i, 0)),
              .settings = {},
              .created_us = r.Int(i, 8),
              .epoch_season = r.Int(i, 10),
              .epoch_us = r.Int(i, 11),
              .pre_epoch_started_us = r.Int(i, 12),
              .secret_sealed = std::string(r.Text(i, 13)),
              .previous_secret_sealed = std::string(r.Text(i, 14)),
              .previous_until_us = r.Int(i, 15)};
  auto order = ParseOrder(r.Text(i, 1));
  auto op = ParseOperator(r.Text(i, 2));
  auto reset = ParseReset(r.Text(i, 3));
  auto ranking = ParseRanking(r.Text(i, 5));
  auto auth = ParseBoardAuth(r.Text(i, 6));
  if (!order || !op || !reset || !ranking || !auth)
    return Status::Internal("board '" + b.id + "' has a setting this release does not know");
  b.settings = BoardSettings{.order = *order,
                             .op = *op,
                             .reset = *reset,
                             .reset_timezone = std::string(r.Text(i, 4)),
                             .ranking = *ranking,
                             .auth = *auth,
                             .keep_seasons = r.Int(i, 7),
                             .reset_every_s = r.Int(i, 9)};
  return b;
}

}  // namespace

Status PostgresLeaderboardStore::Load(
    const std::function<int64_t(BoardInfo)>& board_sink,
    const std::function<void(const std::string&, int64_t, std::string, Stored)>& sink) {
  // Boards and scores from one snapshot; the scores of the seasons each
  // board's sink wants only (a board may keep 1,000 archived seasons).
  auto rows = pool_.Run<pg::Rows>(
      [&](pg::Connection& c) -> Result<pg::Rows> {
        if (Status s = c.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); !s.ok()) return s;
        auto boards =
            c.Query(std::string("SELECT ") + kBoardColumns + " FROM lb_board WHERE NOT deleting ORDER BY board_id");
        if (!boards.ok()) {
          if (Status rolled = c.Exec("ROLLBACK"); !rolled.ok()) c.MarkBroken();
          return boards.status();
        }
        std::string ids = "{", froms = "{";  // array literals (ids are [A-Za-z0-9_.-])
        for (int i = 0; i < boards->size(); ++i) {
          auto board = BoardFrom(*boards, i);
          if (!board.ok()) {
            log::Warn("leaderboard: {}; it is not served", board.status().message());
            continue;
          }
          std::string id = board->id;
          int64_t from = board_sink(std::move(*board));
          ids += (ids.size() > 1 ? ",\"" : "\"") + id + "\"";
          froms += (froms.size() > 1 ? "," : "") + std::to_string(from);
        }
        auto scores = c.Query(
            "SELECT s.board_id, s.season, s.client_id, s.score, s.seq, "
            "s.display_name IS NOT NULL OR s.metadata IS NOT NULL "
            "FROM lb_score s "
            "JOIN unnest($1::text[], $2::bigint[]) AS w(board_id, from_season) "
            "ON s.board_id = w.board_id AND s.season >= w.from_season",
            {ids + "}", froms + "}"});
        if (Status s = c.Exec(scores.ok() ? "COMMIT" : "ROLLBACK"); !s.ok()) {
          c.MarkBroken();
          if (scores.ok()) return s;
        }
        return scores;
      },
      /*unbounded=*/true);
  if (!rows.ok()) return rows.status();
  const pg::Rows& scores = *rows;
  std::string board;
  for (int i = 0; i < scores.size(); ++i) {
    if (scores.Text(i, 0) != board) board = std::string(scores.Text(i, 0));
    sink(board, scores.Int(i, 1), std::string(scores.Text(i, 2)),
         Stored{.score = scores.Int(i, 3), .seq = scores.Int(i, 4), .has_profile = scores.Text(i, 5) == "t"});
  }
  return Status::Ok();
}

Status PostgresLeaderboardStore::LoadSeason(const std::string& board_id, int64_t season,
                                            const std::function<void(std::string, Stored)>& sink) {
  auto rows = pool_.Run<pg::Rows>(
      [&](pg::Connection& c) {
        return c.Query(
            "SELECT client_id, score, seq, display_name IS NOT NULL OR metadata IS NOT NULL FROM lb_score "
            "WHERE board_id = $1 AND season = $2",
            {board_id, std::to_string(season)});
      },
      /*unbounded=*/true);
  if (!rows.ok()) return rows.status();
  for (int i = 0; i < rows->size(); ++i)
    sink(std::string(rows->Text(i, 0)),
         Stored{.score = rows->Int(i, 1), .seq = rows->Int(i, 2), .has_profile = rows->Text(i, 3) == "t"});
  return Status::Ok();
}

Result<std::vector<RecordedSeason>> PostgresLeaderboardStore::SeasonHistory(const std::string& board_id) {
  auto rows = pool_.Run<pg::Rows>(
      [&](pg::Connection& c) {
        return c.Query("SELECT season, started_us FROM lb_season WHERE board_id = $1 ORDER BY season", {board_id});
      },
      /*unbounded=*/true);
  if (!rows.ok()) return rows.status();
  std::vector<RecordedSeason> out;
  for (int i = 0; i < rows->size(); ++i) out.push_back({rows->Int(i, 0), rows->Int(i, 1)});
  return out;
}

Result<BoardInfo> PostgresLeaderboardStore::LoadBoard(const std::string& board_id) {
  auto rows = pool_.Run<pg::Rows>(
      [&](pg::Connection& c) {
        return c.Query(std::string("SELECT ") + kBoardColumns + " FROM lb_board WHERE board_id = $1 AND NOT deleting",
                       {board_id});
      },
      /*unbounded=*/true);
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return NoSuchBoard(board_id);
  return BoardFrom(*rows, 0);
}

namespace {

// A text[] literal of `items` (each quoted, " and \\ escaped).
std::string TextArray(const std::vector<std::string>& items) {
  std::string out = "{";
  for (const auto& item : items) {
    if (out.size() > 1) out += ',';
    out += '"';
    for (char c : item) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

// Reads "<token> " off the front of `rest`.
std::optional<std::string_view> Token(std::string_view& rest) {
  size_t space = rest.find(' ');
  if (space == std::string_view::npos || space == 0) return std::nullopt;
  std::string_view token = rest.substr(0, space);
  rest.remove_prefix(space + 1);
  return token;
}
std::optional<int64_t> Number(std::string_view text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

// The notifications this release's statements send on kBoardChannel (those
// of v0.1.0-v0.6, "set <score> <seq> <client>" and "del <client>", are
// ignored: no instance of this release sends them):
//   "set2 <board> <created> <season> <score> <seq> <client id>"   a stored score changed
//   "del2 <board> <created> <season> <client id>"                 a player was removed
//   "board <board>"                       a board was created, changed or deleted
// <created> is the board's creation time: a late change of a board deleted
// and made again since is not one of the new board.
Result<std::optional<ScoreChange>> PostgresLeaderboardStore::Follow(std::string_view payload) {
  auto bad = [&]() -> std::optional<ScoreChange> {
    log::Debug("ignoring an unreadable leaderboard notification: {}", payload);
    return std::nullopt;
  };
  std::string_view rest = payload;
  auto kind = Token(rest);
  if (!kind) return bad();
  if (*kind == "board") {
    ScoreChange change;
    change.kind = ScoreChange::Kind::kBoard;
    change.board_id = std::string(rest);
    return std::make_optional(std::move(change));
  }
  auto board = Token(rest);
  auto created = board ? Token(rest) : std::nullopt;
  auto season = created ? Token(rest) : std::nullopt;
  auto created_number = created ? Number(*created) : std::nullopt;
  auto season_number = season ? Number(*season) : std::nullopt;
  if (!created_number || !season_number) return bad();
  ScoreChange change;
  change.board_id = std::string(*board);
  change.season = *season_number;
  change.board_created_us = *created_number;
  if (*kind == "del2") {
    change.kind = ScoreChange::Kind::kErase;
  } else if (*kind == "prof") {
    // "<seq> <client> <name bytes, -1: none> <name><metadata>"
    auto seq = Token(rest);
    auto client = seq ? Token(rest) : std::nullopt;
    auto length = client ? Token(rest) : std::nullopt;
    auto seq_number = seq ? Number(*seq) : std::nullopt;
    auto length_number = length ? Number(*length) : std::nullopt;
    if (!seq_number || !length_number || *length_number < -1 || *length_number > static_cast<int64_t>(rest.size()))
      return bad();
    size_t name_bytes = *length_number < 0 ? 0 : static_cast<size_t>(*length_number);
    change.kind = ScoreChange::Kind::kProfile;
    change.client_id = std::string(*client);
    change.profile = std::make_shared<const Profile>(Profile{.display_name = std::string(rest.substr(0, name_bytes)),
                                                             .metadata = std::string(rest.substr(name_bytes)),
                                                             .seq = *seq_number});
    return std::make_optional(std::move(change));
  } else if (*kind == "set2") {
    auto score = Token(rest);
    auto seq = score ? Token(rest) : std::nullopt;
    auto score_number = score ? Number(*score) : std::nullopt;
    auto seq_number = seq ? Number(*seq) : std::nullopt;
    if (!score_number || !seq_number) return bad();
    change.score = *score_number;
    change.seq = *seq_number;
  } else {
    return bad();
  }
  if (rest.empty()) return bad();
  change.client_id = std::string(rest);
  return std::make_optional(std::move(change));
}

namespace {

// The statements of the request path, prepared once per connection.
constexpr pg::NamedSql kPostScore{
    "lb_post",
    "SELECT outcome, score, seq, created_us, sort_order, ranking, season, out_name, out_meta, "
    "out_pseq FROM hotrow_lb_post_v2($1, $2, $3, $4, $5::int, $6, $7, $8, $9::text[], $10, $11, $12)"};
constexpr pg::NamedSql kRemovePlayer{"lb_remove", R"(
  WITH b AS (SELECT created_us FROM lb_board WHERE board_id = $1 AND NOT deleting),
  d AS (DELETE FROM lb_score WHERE board_id = $1 AND season = $2 AND client_id = $3 AND EXISTS (SELECT 1 FROM b)
        RETURNING client_id)
  SELECT (SELECT created_us FROM b),
         pg_notify('hotrow_lb', 'del2 ' || $1 || ' ' || (SELECT created_us FROM b) || ' ' || $2 || ' ' || client_id)
  FROM d)"};
// A board left half deleted (its DELETE failed after the flag) is finished
// first (kFinishDelete, in the same transaction), then the id is free.
constexpr pg::NamedSql kFinishDelete{"lb_board_finish_delete", "DELETE FROM lb_board WHERE board_id = $1 AND deleting"};
constexpr pg::NamedSql kCreateBoard{"lb_board_create", R"(
  WITH b AS (INSERT INTO lb_board (board_id, sort_order, operator, reset, reset_timezone, ranking, auth, keep_seasons,
                                    created_us, reset_every_s, epoch_season, epoch_us, pre_epoch_started_us, secret,
                                    previous_secret, previous_until_us)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
             ON CONFLICT (board_id) DO NOTHING
             RETURNING board_id)
  SELECT pg_notify('hotrow_lb', 'board ' || board_id) FROM b)"};
constexpr pg::NamedSql kUpdateBoard{"lb_board_update", R"(
  WITH b AS (UPDATE lb_board SET reset = $2, reset_timezone = $3, auth = $4, keep_seasons = $5, reset_every_s = $7,
                                  epoch_season = $8, epoch_us = $9, pre_epoch_started_us = $10, secret = $19,
                                  previous_secret = $20, previous_until_us = $21
             WHERE board_id = $1 AND created_us = $6 AND NOT deleting
               AND reset = $11 AND reset_timezone = $12 AND auth = $13 AND keep_seasons = $14 AND reset_every_s = $15
               AND epoch_season = $16 AND epoch_us = $17 AND pre_epoch_started_us = $18 AND secret = $22
             RETURNING board_id)
  SELECT pg_notify('hotrow_lb', 'board ' || board_id) FROM b)"};
constexpr pg::NamedSql kBoardLive{"lb_board_live",
                                  "SELECT 1 FROM lb_board WHERE board_id = $1 AND created_us = $2 AND NOT deleting"};
// A delete in two commits: first the flag, which posts read before they
// lock the board (an UPDATE of a non-key column, compatible with their FOR
// KEY SHARE), so that no new post holds the row; then the DELETE, which
// waits only for the posts already in, and takes the scores with it (ON
// DELETE CASCADE). Both tell the other instances.
constexpr pg::NamedSql kMarkDeleting{"lb_board_mark_deleting", R"(
  WITH b AS (UPDATE lb_board SET deleting = true WHERE board_id = $1 AND created_us = $2 AND NOT deleting
             RETURNING board_id)
  SELECT pg_notify('hotrow_lb', 'board ' || board_id) FROM b)"};
constexpr pg::NamedSql kDeleteBoard{"lb_board_delete", R"(
  WITH b AS (DELETE FROM lb_board WHERE board_id = $1 AND created_us = $2 AND deleting RETURNING board_id)
  SELECT pg_notify('hotrow_lb', 'board ' || board_id) FROM b)"};

}  // namespace

void PostgresLeaderboardStore::ReadProfiles(const std::string& board_id, int64_t season,
                                            std::vector<std::string> client_ids,
                                            std::function<void(Result<ProfileMap>)> done) {
  static constexpr pg::NamedSql kReadProfiles{"lb_read_profiles", R"(
    SELECT client_id, display_name, metadata, profile_seq FROM lb_score
    WHERE board_id = $1 AND season = $2 AND client_id = ANY($3::text[])
      AND (display_name IS NOT NULL OR metadata IS NOT NULL))"};
  pool_.Submit([board_id, season, ids = TextArray(client_ids), done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = (*c)->Query(kReadProfiles, {board_id, std::to_string(season), ids});
    if (!rows.ok()) return done(rows.status());
    ProfileMap found;
    for (int i = 0; i < rows->size(); ++i) found.emplace(std::string(rows->Text(i, 0)), ProfileOf(*rows, i, 1));
    done(std::move(found));
  });
}

void PostgresLeaderboardStore::CreateBoard(BoardInfo b, std::function<void(Status)> done) {
  pool_.Submit([b = std::move(b), done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    const BoardSettings& s = b.settings;
    auto rows = (*c)->Pipeline(
        {{"BEGIN"},
         {kFinishDelete, {b.id}},
         {kCreateBoard,
          {b.id, Name(s.order), Name(s.op), Name(s.reset), s.reset_timezone, Name(s.ranking), Name(s.auth),
           std::to_string(s.keep_seasons), std::to_string(b.created_us), std::to_string(s.reset_every_s),
           std::to_string(b.epoch_season), std::to_string(b.epoch_us), std::to_string(b.pre_epoch_started_us),
           b.secret_sealed, b.previous_secret_sealed, std::to_string(b.previous_until_us)}},
         {"COMMIT"}});
    if (!rows.ok()) {
      if (Status rolled = (*c)->Exec("ROLLBACK"); !rolled.ok()) (*c)->MarkBroken();
      return done(rows.status());
    }
    done((*rows)[2].empty() ? Status::AlreadyExists("a board '" + b.id + "' exists already") : Status::Ok());
  });
}

constexpr pg::NamedSql kRecordSeason{
    "lb_season_record",
    "INSERT INTO lb_season (board_id, season, started_us) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING"};

void PostgresLeaderboardStore::UpdateBoard(BoardInfo b, BoardInfo expected, std::vector<RecordedSeason> history,
                                           std::function<void(Status)> done) {
  pool_.Submit([b = std::move(b), expected = std::move(expected), history = std::move(history),
                done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    const BoardSettings& s = b.settings;
    const BoardSettings& e = expected.settings;
    std::vector<pg::Connection::Statement> work = {{"BEGIN"},
                                                   {kUpdateBoard,
                                                    {b.id,
                                                     Name(s.reset),
                                                     s.reset_timezone,
                                                     Name(s.auth),
                                                     std::to_string(s.keep_seasons),
                                                     std::to_string(b.created_us),
                                                     std::to_string(s.reset_every_s),
                                                     std::to_string(b.epoch_season),
                                                     std::to_string(b.epoch_us),
                                                     std::to_string(b.pre_epoch_started_us),
                                                     Name(e.reset),
                                                     e.reset_timezone,
                                                     Name(e.auth),
                                                     std::to_string(e.keep_seasons),
                                                     std::to_string(e.reset_every_s),
                                                     std::to_string(expected.epoch_season),
                                                     std::to_string(expected.epoch_us),
                                                     std::to_string(expected.pre_epoch_started_us),
                                                     b.secret_sealed,
                                                     b.previous_secret_sealed,
                                                     std::to_string(b.previous_until_us),
                                                     expected.secret_sealed}}};
    for (const RecordedSeason& h : history)
      work.push_back({kRecordSeason, {b.id, std::to_string(h.season), std::to_string(h.started_us)}});
    work.push_back({"COMMIT"});
    auto rows = (*c)->Pipeline(work);
    if (!rows.ok()) {
      if (Status rolled = (*c)->Exec("ROLLBACK"); !rolled.ok()) (*c)->MarkBroken();
      return done(rows.status());
    }
    if (!(*rows)[1].empty()) return done(Status::Ok());
    // Nothing updated (the history rows, if any, were recorded for nothing:
    // INSERT ... DO NOTHING of starts that hold anyway).
    auto live = (*c)->Query(kBoardLive, {b.id, std::to_string(b.created_us)});
    if (!live.ok()) return done(live.status());
    done(live->empty() ? NoSuchBoard(b.id) : BoardChangedMeanwhile(b.id));
  });
}

void PostgresLeaderboardStore::DeleteBoard(BoardInfo board, std::function<void(Status)> done) {
  pool_.Submit([board = std::move(board), done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    const std::vector<pg::Param> params = {board.id, std::to_string(board.created_us)};
    auto marked = (*c)->Query(kMarkDeleting, params);
    if (!marked.ok()) return done(marked.status());
    if (marked->empty()) return done(NoSuchBoard(board.id));
    auto deleted = (*c)->Query(kDeleteBoard, params);
    // A DELETE that failed (a timeout behind a long post) leaves the board
    // flagged: gone for every reader and post, finished by the next create
    // of its id.
    done(deleted.ok() ? Status::Ok() : deleted.status());
  });
}

void PostgresLeaderboardStore::PostScore(ScorePost p, std::function<void(Result<StoredScore>)> done) {
  pool_.Submit([p = std::move(p), done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = (*c)->Query(
        kPostScore, {p.board_id, p.client_id, std::to_string(p.score), p.op ? pg::Param(Name(*p.op)) : pg::Param(),
                     std::to_string(p.season), std::to_string(p.season_start_us),
                     p.season_next_us ? pg::Param(std::to_string(*p.season_next_us)) : pg::Param(), p.schedule,
                     TextArray(StoredKeys(p)), p.fingerprint, p.display_name ? pg::Param(*p.display_name) : pg::Param(),
                     p.metadata ? pg::Param(*p.metadata) : pg::Param()});
    if (!rows.ok()) return done(rows.status());
    if (rows->empty()) return done(Status::Internal("the post function answered nothing"));
    switch (rows->Int(0, 0)) {
      case 0:
      case 1:
      case 7: {
        auto order = ParseOrder(rows->Text(0, 4));
        auto ranking = ParseRanking(rows->Text(0, 5));
        if (!order || !ranking) return done(Status::Internal("board '" + p.board_id + "' has unknown settings"));
        return done(StoredScore{.score = rows->Int(0, 1),
                                .seq = rows->Int(0, 2),
                                .changed = rows->Int(0, 0) == 0,
                                .board_created_us = rows->Int(0, 3),
                                .board_order = *order,
                                .board_ranking = *ranking,
                                .season = rows->Int(0, 6),
                                .replayed = rows->Int(0, 0) == 7,
                                .profile = rows->IsNull(0, 9) ? nullptr : ProfileOf(*rows, 0, 7)});
      }
      case 6:
        return done(IdempotencyKeyReused(p.idempotency_key.empty() ? "(the signature)" : p.idempotency_key));
      case 4: {
        StoredScore moved;
        moved.moved_at_us = rows->Int(0, 1);
        return done(moved);
      }
      case 5: {
        StoredScore stale;
        stale.stale_schedule = true;
        return done(stale);
      }
      case 2:
        return done(NoSuchBoard(p.board_id));
      case 3:
        return done(IncrementOutOfRange(rows->Int(0, 1)));
      default:
        return done(Status::Internal("the post function answered outcome " + std::string(rows->Text(0, 0))));
    }
  });
}

namespace {
// A purge in batches (each its own transaction, then the connection goes
// back to the pool), of the board of that creation time only, and only
// while it is not purged that far already.
constexpr int64_t kPurgeBatchRows = 5000;
constexpr pg::NamedSql kPurgeBatch{"lb_purge_batch", R"(
  WITH d AS (
    DELETE FROM lb_score WHERE (board_id, season, client_id) IN (
      SELECT s.board_id, s.season, s.client_id FROM lb_score s
      WHERE s.board_id = $1 AND s.season <= $2
        AND EXISTS (SELECT 1 FROM lb_board b WHERE b.board_id = $1 AND b.created_us = $3 AND b.purged_season < $2)
      LIMIT 5000)
    RETURNING 1)
  SELECT count(*) FROM d)"};
constexpr pg::NamedSql kPurgeFinish{"lb_purge_finish", R"(
  WITH b AS (UPDATE lb_board SET purged_season = GREATEST(purged_season, $2)
             WHERE board_id = $1 AND created_us = $3 RETURNING board_id)
  DELETE FROM lb_season WHERE board_id = $1 AND season <= $2 AND EXISTS (SELECT 1 FROM b))"};
}  // namespace

void PostgresLeaderboardStore::Purge(std::string board_id, int64_t created_us, int64_t through_season,
                                     std::function<void(Status)> done) {
  pool_.Submit([this, board_id = std::move(board_id), created_us, through_season,
                done = std::move(done)](Result<pg::Connection*> c) mutable {
    if (!c.ok()) return done(c.status());
    std::vector<pg::Param> params = {board_id, std::to_string(through_season), std::to_string(created_us)};
    auto batch = (*c)->Query(kPurgeBatch, params);
    if (!batch.ok()) return done(batch.status());
    if (batch->Int(0, 0) >= kPurgeBatchRows)  // more: the next batch behind other work
      return Purge(std::move(board_id), created_us, through_season, std::move(done));
    auto finish = (*c)->Query(kPurgeFinish, params);
    done(finish.status());
  });
}

void PostgresLeaderboardStore::Remove(std::string board_id, int64_t season, std::string client_id,
                                      std::function<void(Result<int64_t>)> done) {
  pool_.Submit([board_id = std::move(board_id), season, client_id = std::move(client_id),
                done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = (*c)->Query(kRemovePlayer, {board_id, std::to_string(season), client_id});
    if (!rows.ok()) return done(rows.status());
    if (rows->empty()) return done(NoSuchPlayer(client_id));
    done(rows->Int(0, 0));
  });
}

Status SeedPostgresLeaderboard(pg::Connection& conn, int64_t clients, uint64_t seed) {
  if (Status s = CreatePostgresLeaderboardSchema(conn); !s.ok()) return s;
  auto existing = conn.Query("SELECT COUNT(*) FROM lb_score WHERE board_id = 'default'");
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
    data += "default\t1\tplayer-" + std::to_string(i) + "\t" + std::to_string(DemoScore(rng)) + "\t" +
            std::to_string(base + i) + "\n";
  if (Status s = conn.CopyIn("COPY lb_score (board_id, season, client_id, score, seq) FROM STDIN", data); !s.ok())
    return s;
  auto bumped = conn.Query("UPDATE leaderboard_clock SET n = $1 WHERE id = 1", {std::to_string(base + clients)});
  if (!bumped.ok()) return bumped.status();
  return conn.Query("SELECT setval('leaderboard_seq', $1)", {std::to_string(base + clients)}).status();
}

}  // namespace hotrow::leaderboard
