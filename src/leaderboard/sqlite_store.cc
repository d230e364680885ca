#include "leaderboard/sqlite_store.h"

#include <chrono>
#include <future>
#include <random>

#include "base/time.h"
#include "leaderboard/season.h"
#include "ops/log.h"

namespace hotrow::leaderboard {

namespace sqlite = db::sqlite;

namespace {

constexpr const char* kBoardColumns =
    "board_id, sort_order, operator, reset, reset_timezone, ranking, auth, keep_seasons, created_us, reset_every_s, "
    "epoch_season, epoch_us, pre_epoch_started_us, secret, previous_secret, previous_until_us";
constexpr int kBoardColumnCount = 16;

// A board from a row of kBoardColumns; internal for a setting this release
// does not know (a newer release wrote it).
Result<BoardInfo> BoardFrom(const sqlite::Query& q) {
  BoardInfo b{.id = std::string(q.Text(0)),
              .settings = {},
              .created_us = q.Int(8),
              .epoch_season = q.Int(10),
              .epoch_us = q.Int(11),
              .pre_epoch_started_us = q.Int(12),
              .secret_sealed = std::string(q.Text(13)),
              .previous_secret_sealed = std::string(q.Text(14)),
              .previous_until_us = q.Int(15)};
  auto order = ParseOrder(q.Text(1));
  auto op = ParseOperator(q.Text(2));
  auto reset = ParseReset(q.Text(3));
  auto ranking = ParseRanking(q.Text(5));
  auto auth = ParseBoardAuth(q.Text(6));
  if (!order || !op || !reset || !ranking || !auth)
    return Status::Internal("board '" + b.id + "' has a setting this release does not know");
  b.settings = BoardSettings{.order = *order,
                             .op = *op,
                             .reset = *reset,
                             .reset_timezone = std::string(q.Text(4)),
                             .ranking = *ranking,
                             .auth = *auth,
                             .keep_seasons = q.Int(7),
                             .reset_every_s = q.Int(9)};
  return b;
}

Status BindSettings(sqlite::Query& q, const BoardInfo& b) {
  q.Bind(1, b.id).Bind(2, Name(b.settings.order)).Bind(3, Name(b.settings.op)).Bind(4, Name(b.settings.reset));
  q.Bind(5, b.settings.reset_timezone).Bind(6, Name(b.settings.ranking)).Bind(7, Name(b.settings.auth));
  q.Bind(8, b.settings.keep_seasons).Bind(9, b.created_us).Bind(10, b.settings.reset_every_s);
  q.Bind(11, b.epoch_season).Bind(12, b.epoch_us).Bind(13, b.pre_epoch_started_us);
  q.Bind(14, b.secret_sealed).Bind(15, b.previous_secret_sealed).Bind(16, b.previous_until_us);
  return q.Run();
}

Result<bool> BoardExists(sqlite::Connection& c, const std::string& board_id) {
  auto q = c.Prepare("SELECT 1 FROM lb_board WHERE board_id = ?1");
  if (!q.ok()) return q.status();
  return q->Bind(1, board_id).Step();
}

// A board as stored now, and the season up to which its scores were
// deleted (keepSeasons).
struct PostBoard {
  BoardInfo info;
  int64_t purged_season = 0;
};
Result<PostBoard> BoardForPost(sqlite::Connection& c, const std::string& board_id) {
  auto q = c.Prepare(std::string("SELECT ") + kBoardColumns + ", purged_season FROM lb_board WHERE board_id = ?1");
  if (!q.ok()) return q.status();
  auto row = q->Bind(1, board_id).Step();
  if (!row.ok()) return row.status();
  if (!*row) return NoSuchBoard(board_id);
  auto info = BoardFrom(*q);
  if (!info.ok()) return info.status();
  return PostBoard{std::move(*info), q->Int(kBoardColumnCount)};
}

StoredScore Answer(const PostBoard& b, int64_t season, int64_t score, int64_t seq, bool changed) {
  return StoredScore{.score = score,
                     .seq = seq,
                     .changed = changed,
                     .board_created_us = b.info.created_us,
                     .board_order = b.info.settings.order,
                     .board_ranking = b.info.settings.ranking,
                     .season = season};
}

// Rows a purge deletes per writer op, so the writer's other work (posts,
// likes) waits for one batch at most, never a whole season.
constexpr int64_t kPurgeBatchRows = 2000;

// One batch of a purge of the board's seasons through `through`: true when
// rows are left. Nothing when the board is gone, made again, or purged
// that far already.
Result<bool> PurgeBatch(sqlite::Connection& c, const std::string& board_id, int64_t created_us, int64_t through) {
  auto board = c.Prepare("SELECT purged_season FROM lb_board WHERE board_id = ?1 AND created_us = ?2");
  if (!board.ok()) return board.status();
  auto row = board->Bind(1, board_id).Bind(2, created_us).Step();
  if (!row.ok()) return row.status();
  if (!*row || board->Int(0) >= through) return false;
  auto scores = c.Prepare(
      "DELETE FROM lb_score WHERE (board_id, season, client_id) IN (SELECT board_id, season, client_id FROM lb_score "
      "WHERE board_id = ?1 AND season <= ?2 LIMIT ?3)");
  if (!scores.ok()) return scores.status();
  if (Status s = scores->Bind(1, board_id).Bind(2, through).Bind(3, kPurgeBatchRows).Run(); !s.ok()) return s;
  if (c.Changes() >= kPurgeBatchRows) return true;
  for (const char* sql : {"DELETE FROM lb_season WHERE board_id = ?1 AND season <= ?2",
                          "UPDATE lb_board SET purged_season = ?2 WHERE board_id = ?1"}) {
    auto q = c.Prepare(sql);
    if (!q.ok()) return q.status();
    if (Status s = q->Bind(1, board_id).Bind(2, through).Run(); !s.ok()) return s;
  }
  return false;
}

// Decides and writes one score inside the batch transaction, in the season
// the writer's clock is in now.
// The answer kept for one of the post's keys (replayed), if any.
Result<std::optional<StoredScore>> Replay(sqlite::Connection& c, const ScorePost& p, const PostBoard& b, int64_t now) {
  auto q = c.Prepare(
      "SELECT fingerprint, score, seq, season FROM lb_idempotency WHERE board_id = ?1 AND client_id = ?2 AND "
      "key = ?3 AND board_created_us = ?4 AND created_us > ?5");
  if (!q.ok()) return q.status();
  for (const auto& key : StoredKeys(p)) {
    q->Reset();
    q->Bind(1, p.board_id).Bind(2, p.client_id).Bind(3, key).Bind(4, b.info.created_us);
    auto row = q->Bind(5, now - kIdempotencyKeptUs).Step();
    if (!row.ok()) return row.status();
    if (!*row) continue;
    if (q->Text(0) != p.fingerprint) return IdempotencyKeyReused(p.idempotency_key.empty() ? key : p.idempotency_key);
    StoredScore kept = Answer(b, q->Int(3), q->Int(1), q->Int(2), false);
    kept.replayed = true;
    return std::optional(kept);
  }
  return std::optional<StoredScore>();
}

// Keeps the post's keys with its answer (over expired ones).
Status KeepKey(sqlite::Connection& c, const ScorePost& p, const StoredScore& answer, int64_t now) {
  auto q = c.Prepare(
      "INSERT OR REPLACE INTO lb_idempotency (board_id, client_id, key, board_created_us, fingerprint, score, seq, "
      "season, created_us) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  if (!q.ok()) return q.status();
  for (const auto& key : StoredKeys(p)) {
    q->Reset();
    q->Bind(1, p.board_id).Bind(2, p.client_id).Bind(3, key).Bind(4, answer.board_created_us);
    q->Bind(5, p.fingerprint).Bind(6, answer.score).Bind(7, answer.seq).Bind(8, answer.season).Bind(9, now);
    if (Status s = q->Run(); !s.ok()) return s;
  }
  return Status::Ok();
}

Result<StoredScore> ApplyScoreUnkept(sqlite::Connection& c, const ScorePost& p, const PostBoard& b, int64_t now);

Result<StoredScore> ApplyScore(sqlite::Connection& c, const ScorePost& p) {
  auto board = BoardForPost(c, p.board_id);
  if (!board.ok()) return board.status();
  const int64_t now = NowMicros();
  if (!p.idempotency_key.empty() || !p.signature.empty()) {
    auto kept = Replay(c, p, *board, now);
    if (!kept.ok()) return kept.status();
    if (*kept) return **kept;
  }
  auto answer = ApplyScoreUnkept(c, p, *board, now);
  if (!answer.ok()) return answer;
  if (Status s = KeepKey(c, p, *answer, now); !s.ok()) return s;
  return answer;
}

// The next sequence number (score changes and profile changes share it).
Result<int64_t> NextSeq(sqlite::Connection& c) {
  auto bump = c.Prepare("UPDATE leaderboard_seq SET last = last + 1 WHERE id = 1 RETURNING last");
  if (!bump.ok()) return bump.status();
  auto row = bump->Step();
  if (!row.ok()) return row.status();
  int64_t seq = bump->Int(0);
  if (Status s = bump->Run(); !s.ok()) return s;
  return seq;
}

// A profile from a row's (display_name, metadata, profile_seq) at `first`;
// null when neither is set.
std::shared_ptr<const Profile> ProfileFrom(const sqlite::Query& q, int first) {
  if (q.IsNull(first) && q.IsNull(first + 1)) return nullptr;
  return std::make_shared<const Profile>(Profile{
      .display_name = std::string(q.Text(first)), .metadata = std::string(q.Text(first + 1)), .seq = q.Int(first + 2)});
}

Result<StoredScore> ApplyScoreUnkept(sqlite::Connection& c, const ScorePost& p, const PostBoard& b, int64_t now) {
  const PostBoard* board = &b;
  auto at = SeasonOf(ScheduleOf(board->info), now);
  if (!at.ok()) return at.status();
  const int64_t season = at->season;
  auto find = c.Prepare(
      "SELECT score, seq, display_name, metadata, profile_seq FROM lb_score WHERE board_id = ?1 AND season = ?2 AND "
      "client_id = ?3");
  if (!find.ok()) return find.status();
  auto row = find->Bind(1, p.board_id).Bind(2, season).Bind(3, p.client_id).Step();
  if (!row.ok()) return row.status();
  std::optional<Stored> stored;
  std::string name, metadata;  // as stored ("" unset)
  if (*row) {
    stored = Stored{.score = find->Int(0), .seq = find->Int(1)};
    name = find->Text(2), metadata = find->Text(3);
  }
  const BoardSettings& settings = board->info.settings;
  auto next = ApplyOperator(p.op.value_or(settings.op), settings.order,
                            stored ? std::optional(stored->score) : std::nullopt, p.score);
  if (!next.ok()) return next.status();
  // Given: replaces the stored one, even when the score stays.
  const bool profile_changed = (p.display_name && *p.display_name != name) || (p.metadata && *p.metadata != metadata);
  if (p.display_name) name = *p.display_name;
  if (p.metadata) metadata = *p.metadata;
  const bool score_changed = !stored || stored->score != *next;
  if (!score_changed && !profile_changed) return Answer(*board, season, stored->score, stored->seq, false);
  auto seq = NextSeq(c);
  if (!seq.ok()) return seq.status();
  auto bind_text = [](sqlite::Query& q, int i, const std::string& v) -> sqlite::Query& {
    return v.empty() ? q.BindNull(i) : q.Bind(i, v);
  };
  StoredScore answer = score_changed ? Answer(*board, season, *next, *seq, true)
                                     : Answer(*board, season, stored->score, stored->seq, false);
  if (score_changed) {
    auto upsert = c.Prepare(
        "INSERT INTO lb_score (board_id, season, client_id, score, seq, display_name, metadata, profile_seq) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (board_id, season, client_id) DO UPDATE SET "
        "score = excluded.score, seq = excluded.seq, display_name = excluded.display_name, "
        "metadata = excluded.metadata, profile_seq = excluded.profile_seq");
    if (!upsert.ok()) return upsert.status();
    upsert->Bind(1, p.board_id).Bind(2, season).Bind(3, p.client_id).Bind(4, *next).Bind(5, *seq);
    bind_text(*upsert, 6, name);
    bind_text(*upsert, 7, metadata);
    upsert->Bind(8, profile_changed ? *seq : (*row ? find->Int(4) : 0));
    if (Status s = upsert->Run(); !s.ok()) return s;
  } else {
    auto update = c.Prepare(
        "UPDATE lb_score SET display_name = ?4, metadata = ?5, profile_seq = ?6 WHERE board_id = ?1 AND season = ?2 "
        "AND client_id = ?3");
    if (!update.ok()) return update.status();
    update->Bind(1, p.board_id).Bind(2, season).Bind(3, p.client_id);
    bind_text(*update, 4, name);
    bind_text(*update, 5, metadata);
    if (Status s = update->Bind(6, *seq).Run(); !s.ok()) return s;
  }
  if (profile_changed)
    answer.profile = std::make_shared<const Profile>(Profile{.display_name = name, .metadata = metadata, .seq = *seq});
  return answer;
}

// Runs `apply` (a status-only change) on the writer.
void SubmitStatus(sqlite::Database& db, std::function<Status(sqlite::Connection&)> apply,
                  std::function<void(Status)> done) {
  auto run = [apply = std::move(apply)](sqlite::Connection& c) -> Result<sqlite::Unit> {
    if (Status s = apply(c); !s.ok()) return s;
    return sqlite::Unit{};
  };
  auto finish = [done = std::move(done)](const Result<sqlite::Unit>& r) { done(r.status()); };
  sqlite::SubmitCall<sqlite::Unit>(db.writer(), std::move(run), std::move(finish));
}

}  // namespace

Result<std::unique_ptr<SqliteLeaderboardStore>> SqliteLeaderboardStore::Open(db::sqlite::Database& db) {
  if (Status s = CreateLeaderboardSchema(db.writer().connection()); !s.ok()) return s;
  std::unique_ptr<SqliteLeaderboardStore> store(new SqliteLeaderboardStore(db));
  // Idempotency-Keys older than kIdempotencyKeptUs go every hour (a replay
  // ignores them already); the first pass shortly after start-up (the
  // writer starts after Open).
  store->purger_ = std::make_unique<PeriodicTask>(std::chrono::seconds(10), std::chrono::hours(1),
                                                  [p = store.get()] { p->PurgeKeys(); });
  return store;
}

SqliteLeaderboardStore::~SqliteLeaderboardStore() { Stop(); }

void SqliteLeaderboardStore::Stop() {
  stopping_.store(true);  // a purge under way ends after its batch
  if (purger_) purger_->Stop();
}

void SqliteLeaderboardStore::PurgeKeys() {
  const int64_t cutoff = NowMicros() - kIdempotencyKeptUs;
  // In batches, so that posts never wait behind a day's keys at once.
  auto batch = [cutoff](sqlite::Connection& c) -> Result<bool> {
    auto q = c.Prepare(
        "DELETE FROM lb_idempotency WHERE (board_id, client_id, key) IN (SELECT board_id, client_id, key FROM "
        "lb_idempotency WHERE created_us <= ?1 LIMIT ?2)");
    if (!q.ok()) return q.status();
    if (Status s = q->Bind(1, cutoff).Bind(2, kPurgeBatchRows).Run(); !s.ok()) return s;
    return c.Changes() >= kPurgeBatchRows;
  };
  for (bool more = true; more && !stopping_.load();) {
    std::promise<Result<bool>> answer;
    auto future = answer.get_future();
    sqlite::SubmitCall<bool>(db_.writer(), batch, [&answer](const Result<bool>& r) { answer.set_value(r); });
    Result<bool> r = future.get();
    if (!r.ok()) {
      log::Warn("leaderboard: the purge of old Idempotency-Keys failed (the next pass retries): {}",
                r.status().ToString());
      return;
    }
    more = *r;
  }
}

Status SqliteLeaderboardStore::Load(const std::function<int64_t(BoardInfo)>& board_sink,
                                    const std::function<void(const std::string&, int64_t, std::string, Stored)>& sink) {
  auto conn = db_.OpenReader();
  if (!conn.ok()) return conn.status();
  sqlite::ReadSnapshot snapshot(**conn);  // boards and scores from one snapshot
  if (!snapshot.status().ok()) return snapshot.status();
  auto boards = (*conn)->Prepare(std::string("SELECT ") + kBoardColumns + " FROM lb_board ORDER BY board_id");
  if (!boards.ok()) return boards.status();
  std::vector<std::pair<std::string, int64_t>> wanted;  // board, its lowest season wanted
  while (true) {
    auto row = boards->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    auto board = BoardFrom(*boards);
    if (!board.ok()) {
      log::Warn("leaderboard: {}; it is not served", board.status().message());
      continue;
    }
    std::string id = board->id;
    wanted.emplace_back(std::move(id), board_sink(std::move(*board)));
  }
  auto q = (*conn)->Prepare(
      "SELECT season, client_id, score, seq, display_name IS NOT NULL OR metadata IS NOT NULL FROM lb_score "
      "WHERE board_id = ?1 AND season >= ?2");
  if (!q.ok()) return q.status();
  for (const auto& [board, from] : wanted) {
    q->Reset();
    q->Bind(1, board).Bind(2, from);
    while (true) {
      auto row = q->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      sink(board, q->Int(0), std::string(q->Text(1)),
           Stored{.score = q->Int(2), .seq = q->Int(3), .has_profile = q->Int(4) != 0});
    }
  }
  return Status::Ok();
}

Status SqliteLeaderboardStore::LoadSeason(const std::string& board_id, int64_t season,
                                          const std::function<void(std::string, Stored)>& sink) {
  auto conn = db_.OpenReader();
  if (!conn.ok()) return conn.status();
  auto q = (*conn)->Prepare(
      "SELECT client_id, score, seq, display_name IS NOT NULL OR metadata IS NOT NULL FROM lb_score WHERE "
      "board_id = ?1 AND season = ?2");
  if (!q.ok()) return q.status();
  q->Bind(1, board_id).Bind(2, season);
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
    sink(std::string(q->Text(0)), Stored{.score = q->Int(1), .seq = q->Int(2), .has_profile = q->Int(3) != 0});
  }
}

Result<std::vector<RecordedSeason>> SqliteLeaderboardStore::SeasonHistory(const std::string& board_id) {
  auto conn = db_.OpenReader();
  if (!conn.ok()) return conn.status();
  auto q = (*conn)->Prepare("SELECT season, started_us FROM lb_season WHERE board_id = ?1 ORDER BY season");
  if (!q.ok()) return q.status();
  q->Bind(1, board_id);
  std::vector<RecordedSeason> out;
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) return out;
    out.push_back({q->Int(0), q->Int(1)});
  }
}

// On the caller's thread (an event loop): at most kPageLimitMax + 1 or
// kRanksIdsMax lookups by primary key, from one read transaction.
void SqliteLeaderboardStore::ReadProfiles(const std::string& board_id, int64_t season,
                                          std::vector<std::string> client_ids,
                                          std::function<void(Result<ProfileMap>)> done) {
  auto read = [&]() -> Result<ProfileMap> {
    auto conn = db_.Reader();
    if (!conn.ok()) return conn.status();
    sqlite::ReadSnapshot snapshot(**conn);
    if (!snapshot.status().ok()) return snapshot.status();
    auto q = (*conn)->Prepare(
        "SELECT display_name, metadata, profile_seq FROM lb_score WHERE board_id = ?1 AND season = ?2 AND "
        "client_id = ?3");
    if (!q.ok()) return q.status();
    ProfileMap found;
    for (auto& id : client_ids) {
      q->Reset();
      auto row = q->Bind(1, board_id).Bind(2, season).Bind(3, id).Step();
      if (!row.ok()) return row.status();
      if (!*row) continue;
      if (auto profile = ProfileFrom(*q, 0)) found.emplace(std::move(id), std::move(profile));
    }
    return found;
  };
  done(read());
}

Result<BoardInfo> SqliteLeaderboardStore::LoadBoard(const std::string& board_id) {
  auto conn = db_.OpenReader();
  if (!conn.ok()) return conn.status();
  auto q = (*conn)->Prepare(std::string("SELECT ") + kBoardColumns + " FROM lb_board WHERE board_id = ?1");
  if (!q.ok()) return q.status();
  auto row = q->Bind(1, board_id).Step();
  if (!row.ok()) return row.status();
  if (!*row) return NoSuchBoard(board_id);
  return BoardFrom(*q);
}

void SqliteLeaderboardStore::CreateBoard(BoardInfo board, std::function<void(Status)> done) {
  auto apply = [board = std::move(board)](sqlite::Connection& c) -> Status {
    auto exists = BoardExists(c, board.id);
    if (!exists.ok()) return exists.status();
    if (*exists) return Status::AlreadyExists("a board '" + board.id + "' exists already");
    auto q = c.Prepare(std::string("INSERT INTO lb_board (") + kBoardColumns +
                       ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)");
    if (!q.ok()) return q.status();
    return BindSettings(*q, board);
  };
  SubmitStatus(db_, std::move(apply), std::move(done));
}

void SqliteLeaderboardStore::Purge(std::string board_id, int64_t created_us, int64_t through_season,
                                   std::function<void(Status)> done) {
  auto batch = [board_id, created_us, through_season](sqlite::Connection& c) {
    return PurgeBatch(c, board_id, created_us, through_season);
  };
  sqlite::SubmitCall<bool>(
      db_.writer(), std::move(batch),
      [this, board_id, created_us, through_season, done = std::move(done)](const Result<bool>& more) mutable {
        if (!more.ok()) return done(more.status());
        if (!*more) return done(Status::Ok());
        Purge(std::move(board_id), created_us, through_season, std::move(done));  // the next batch, behind other work
      });
}

void SqliteLeaderboardStore::UpdateBoard(BoardInfo board, BoardInfo expected, std::vector<RecordedSeason> history,
                                         std::function<void(Status)> done) {
  auto apply = [board = std::move(board), expected = std::move(expected),
                history = std::move(history)](sqlite::Connection& c) -> Status {
    // Only what PATCH may change (and the schedule's epoch); order, operator
    // and ranking stay. Not a board of the same id made again since.
    auto q = c.Prepare(
        "UPDATE lb_board SET reset = ?2, reset_timezone = ?3, auth = ?4, keep_seasons = ?5, reset_every_s = ?7, "
        "epoch_season = ?8, epoch_us = ?9, pre_epoch_started_us = ?10, secret = ?19, previous_secret = ?20, "
        "previous_until_us = ?21 WHERE board_id = ?1 AND created_us = ?6 "
        "AND reset = ?11 AND reset_timezone = ?12 AND auth = ?13 AND keep_seasons = ?14 AND reset_every_s = ?15 "
        "AND epoch_season = ?16 AND epoch_us = ?17 AND pre_epoch_started_us = ?18 AND secret = ?22");
    if (!q.ok()) return q.status();
    const BoardSettings& s = board.settings;
    q->Bind(1, board.id).Bind(2, Name(s.reset)).Bind(3, s.reset_timezone).Bind(4, Name(s.auth));
    q->Bind(5, s.keep_seasons).Bind(6, board.created_us).Bind(7, s.reset_every_s).Bind(8, board.epoch_season);
    q->Bind(9, board.epoch_us).Bind(10, board.pre_epoch_started_us);
    const BoardSettings& e = expected.settings;
    q->Bind(11, Name(e.reset)).Bind(12, e.reset_timezone).Bind(13, Name(e.auth)).Bind(14, e.keep_seasons);
    q->Bind(15, e.reset_every_s).Bind(16, expected.epoch_season).Bind(17, expected.epoch_us);
    q->Bind(18, expected.pre_epoch_started_us);
    q->Bind(19, board.secret_sealed).Bind(20, board.previous_secret_sealed).Bind(21, board.previous_until_us);
    q->Bind(22, expected.secret_sealed);
    if (Status st = q->Run(); !st.ok()) return st;
    if (c.Changes() == 0) {
      auto live = c.Prepare("SELECT 1 FROM lb_board WHERE board_id = ?1 AND created_us = ?2");
      if (!live.ok()) return live.status();
      auto row = live->Bind(1, board.id).Bind(2, board.created_us).Step();
      if (!row.ok()) return row.status();
      return *row ? BoardChangedMeanwhile(board.id) : NoSuchBoard(board.id);
    }
    for (const RecordedSeason& h : history) {
      auto r = c.Prepare("INSERT OR IGNORE INTO lb_season (board_id, season, started_us) VALUES (?1, ?2, ?3)");
      if (!r.ok()) return r.status();
      if (Status st = r->Bind(1, board.id).Bind(2, h.season).Bind(3, h.started_us).Run(); !st.ok()) return st;
    }
    return Status::Ok();
  };
  SubmitStatus(db_, std::move(apply), std::move(done));
}

void SqliteLeaderboardStore::DeleteBoard(BoardInfo info, std::function<void(Status)> done) {
  auto apply = [board_id = std::move(info.id), created = info.created_us](sqlite::Connection& c) -> Status {
    auto board = c.Prepare("DELETE FROM lb_board WHERE board_id = ?1 AND created_us = ?2");
    if (!board.ok()) return board.status();
    if (Status s = board->Bind(1, board_id).Bind(2, created).Run(); !s.ok()) return s;
    if (c.Changes() == 0) return NoSuchBoard(board_id);
    for (const char* sql : {"DELETE FROM lb_score WHERE board_id = ?1", "DELETE FROM lb_season WHERE board_id = ?1",
                            "DELETE FROM lb_idempotency WHERE board_id = ?1"}) {
      auto q = c.Prepare(sql);
      if (!q.ok()) return q.status();
      if (Status s = q->Bind(1, board_id).Run(); !s.ok()) return s;
    }
    return Status::Ok();
  };
  SubmitStatus(db_, std::move(apply), std::move(done));
}

void SqliteLeaderboardStore::PostScore(ScorePost post, std::function<void(Result<StoredScore>)> done) {
  auto apply = [post = std::move(post)](sqlite::Connection& c) { return ApplyScore(c, post); };
  sqlite::SubmitCall<StoredScore>(db_.writer(), std::move(apply), std::move(done));
}

void SqliteLeaderboardStore::Remove(std::string board_id, int64_t season, std::string client_id,
                                    std::function<void(Result<int64_t>)> done) {
  auto apply = [board_id = std::move(board_id), season,
                client_id = std::move(client_id)](sqlite::Connection& c) -> Result<int64_t> {
    auto board = BoardForPost(c, board_id);
    if (!board.ok()) return board.status();
    auto q = c.Prepare("DELETE FROM lb_score WHERE board_id = ?1 AND season = ?2 AND client_id = ?3");
    if (!q.ok()) return q.status();
    if (Status s = q->Bind(1, board_id).Bind(2, season).Bind(3, client_id).Run(); !s.ok()) return s;
    if (c.Changes() == 0) return NoSuchPlayer(client_id);
    return board->info.created_us;
  };
  sqlite::SubmitCall<int64_t>(db_.writer(), std::move(apply), std::move(done));
}

}  // namespace hotrow::leaderboard
