// The leaderboard service, its boards: settings, their changes and secrets
// (auth hmac), the signature check, and the list of a board's seasons. The
// registry, the read model and the scores are in service.cc (service.h
// says how they fit together).
#include <algorithm>
#include <mutex>
#include <shared_mutex>

#include "base/crypto.h"
#include "base/text.h"
#include "base/time.h"
#include "leaderboard/service.h"
#include "ops/log.h"

namespace hotrow::leaderboard {

namespace {

bool SameSchedule(const BoardSettings& a, const BoardSettings& b) {
  return a.reset == b.reset && a.reset_timezone == b.reset_timezone && a.reset_every_s == b.reset_every_s;
}

}  // namespace

Status LeaderboardService::ValidateSettings(const BoardSettings& s) const {
  if (s.keep_seasons < 1 || s.keep_seasons > kKeepSeasonsMax)
    return Status::OutOfRange("keepSeasons", 1, kKeepSeasonsMax);
  if (s.reset_every_s != 0) {
    if (!options_.test_hooks)
      return Status::InvalidField("reset", "\"everySeconds\" needs a server started with --test-hooks");
    if (s.reset_every_s < 1 || s.reset_every_s > kResetEverySecondsMax)
      return Status::OutOfRange("reset.everySeconds", 1, kResetEverySecondsMax);
  }
  if (Status st = ValidateTimezone(s.reset_timezone); !st.ok()) return st;
  if (s.auth == BoardAuth::kHmac && options_.secrets_key.empty())
    return Status(ErrorCode::kConflict,
                  "auth \"hmac\" needs a server started with --secrets-key-file (board secrets are kept encrypted "
                  "under that key)",
                  "auth");
  return Status::Ok();
}

Result<std::string> LeaderboardService::NewSecret(BoardInfo& info) const {
  if (options_.secrets_key.empty())
    return Status(ErrorCode::kConflict, "board secrets need a server started with --secrets-key-file", "auth");
  std::string secret = RandomToken(32);  // 64 hex digits; the key is their ASCII bytes
  info.secret_sealed = Seal(options_.secrets_key, secret);
  return secret;
}

Result<std::string> LeaderboardService::CheckSignature(const std::string& board_id, const SignedRequest& r) {
  auto state = Find(board_id);
  if (!state || state->info.settings.auth != BoardAuth::kHmac) return std::string();
  auto refuse = [this](std::string why) -> Status {
    bad_signatures_->Add();
    return Status(ErrorCode::kBadSignature, std::move(why));
  };
  if (r.timestamp.empty() || r.signature.empty())
    return refuse("board '" + board_id + "' takes signed posts only: send X-Timestamp and X-Signature");
  auto ts = r.timestamp.size() <= 12 ? ParseInt(r.timestamp, 0, INT64_MAX / 1000000) : std::nullopt;
  if (!ts) return refuse("X-Timestamp must be decimal Unix seconds");
  const int64_t now_s = NowMicros() / 1000000;
  if (*ts < now_s - kSignatureSkewS || *ts > now_s + kSignatureSkewS)
    return refuse("X-Timestamp is " + std::to_string(*ts - now_s) + " s from the server's clock; at most " +
                  std::to_string(kSignatureSkewS) + " s either way");
  auto sent = r.signature.size() == 64 ? HexDecode(r.signature) : std::nullopt;
  if (!sent) return refuse("X-Signature must be 64 hex digits (HMAC-SHA256)");
  std::string message;
  message.reserve(r.path.size() + r.client_id.size() + r.timestamp.size() + r.body.size() + 8);
  message.append("POST\n").append(r.path).append("\n").append(r.client_id).append("\n");
  message.append(r.timestamp).append("\n").append(r.body);
  const BoardInfo& info = state->info;
  bool good = false;
  for (const std::string* sealed : {&info.secret_sealed, &info.previous_secret_sealed}) {
    if (sealed->empty()) continue;
    if (sealed == &info.previous_secret_sealed && NowMicros() >= info.previous_until_us) continue;
    auto secret = Unseal(options_.secrets_key, *sealed);
    if (!secret && sealed == &info.previous_secret_sealed) {
      log::Warn(
          "leaderboard: the previous secret of board '{}' cannot be opened with --secrets-key-file; only the "
          "current one is accepted",
          board_id);
      continue;
    }
    if (!secret) {
      log::Error("leaderboard: the secret of board '{}' cannot be opened with --secrets-key-file (another key?)",
                 board_id);
      return Status::Internal("board '" + board_id + "' has a secret this server cannot read");
    }
    good = good || ConstantTimeEquals(HmacSha256(*secret, message), *sent);
  }
  if (!good) return refuse("X-Signature does not match the request under board '" + board_id + "''s secret");
  return HexEncode(*sent);
}

Result<BoardView> LeaderboardService::ViewOf(const BoardInfo& info) const {
  auto at = SeasonOf(ScheduleOf(info), NowMicros());
  if (!at.ok()) return at.status();
  return BoardView{
      .info = info, .season = at->season, .season_started_us = at->started_us, .next_reset_us = at->next_us};
}

void LeaderboardService::CreateBoard(BoardInfo board, std::function<void(Result<BoardView>)> done) {
  if (Status s = ValidateBoardId(board.id); !s.ok()) return done(s);
  if (Status s = ValidateSettings(board.settings); !s.ok()) return done(s);
  board.created_us = NowMicros();
  board.epoch_season = kFirstSeason;
  board.epoch_us = board.created_us;
  board.pre_epoch_started_us = 0;
  board.secret_sealed.clear(), board.previous_secret_sealed.clear(), board.previous_until_us = 0;
  std::optional<std::string> secret;
  if (board.settings.auth == BoardAuth::kHmac) {
    auto made = NewSecret(board);
    if (!made.ok()) return done(made.status());
    secret = std::move(*made);
  }
  auto created = board;
  store_.CreateBoard(std::move(board), [this, created, secret, done = std::move(done)](const Status& s) {
    if (!s.ok()) return done(s);
    auto at = SeasonOf(ScheduleOf(created), NowMicros());
    auto state = at.ok() ? MakeState(created, at->season) : at.status();
    if (state.ok()) {
      std::unique_lock lock(mutex_);
      auto it = boards_.find(created.id);
      // Unless its own notification (and a score after it) got here first.
      if (it == boards_.end() || it->second->info.created_us != created.created_us) Place(std::move(*state));
    } else {
      log::Error("leaderboard: board '{}' was created but cannot be held: {}", created.id, state.status().ToString());
    }
    auto view = ViewOf(created);
    if (view.ok()) view->secret = secret;
    done(std::move(view));
  });
}

void LeaderboardService::UpdateBoard(const std::string& board_id, BoardPatch patch,
                                     std::function<void(Result<BoardView>)> done) {
  auto found = FindOrNotFound(board_id);
  if (!found.ok()) return done(found.status());
  auto state = Current(std::move(*found));
  if (!state.ok()) return done(state.status());
  const BoardInfo& old = (*state)->info;
  BoardInfo info = old;
  if (patch.reset_every_s) {
    info.settings.reset = Reset::kNone;
    info.settings.reset_every_s = *patch.reset_every_s;
  } else if (patch.reset) {
    info.settings.reset = *patch.reset;
    info.settings.reset_every_s = 0;
  }
  if (patch.reset_timezone) info.settings.reset_timezone = *patch.reset_timezone;
  if (patch.keep_seasons) info.settings.keep_seasons = *patch.keep_seasons;
  if (patch.auth) info.settings.auth = *patch.auth;
  if (Status s = ValidateSettings(info.settings); !s.ok()) return done(s);
  // Switched to hmac: a fresh secret is made now (and shown once, here);
  // switched off: the secrets go (a secret that leaked never comes back).
  std::optional<std::string> secret;
  if (info.settings.auth != old.settings.auth) {
    info.secret_sealed.clear(), info.previous_secret_sealed.clear(), info.previous_until_us = 0;
    if (info.settings.auth == BoardAuth::kHmac) {
      auto made = NewSecret(info);
      if (!made.ok()) return done(made.status());
      secret = std::move(*made);
    }
  }
  std::vector<RecordedSeason> history;
  if (!SameSchedule(old.settings, info.settings)) {
    // The new schedule counts from the current one's next boundary; the
    // starts of the kept seasons before that it cannot compute are
    // recorded (SeasonHistory).
    const SeasonSchedule before = ScheduleOf(old);
    auto next =
        Reschedule(before, info.settings.reset, info.settings.reset_timezone, info.settings.reset_every_s, NowMicros());
    if (!next.ok()) return done(next.status());
    info.epoch_season = next->epoch_season;
    info.epoch_us = next->epoch_us;
    info.pre_epoch_started_us = next->pre_epoch_started_us;
    int64_t keep = std::max(old.settings.keep_seasons, info.settings.keep_seasons);
    for (int64_t s = std::max(kFirstSeason, (*state)->season - keep); s < info.epoch_season - 1; ++s) {
      if (s < before.epoch_season - 1) continue;  // recorded by an earlier change
      auto start = s == before.epoch_season - 1 ? Result<int64_t>(before.pre_epoch_started_us) : SeasonStart(before, s);
      if (!start.ok()) return done(start.status());
      history.push_back({s, *start});
    }
  }
  store_.UpdateBoard(info, old, std::move(history), [this, info, secret, done = std::move(done)](const Status& s) {
    if (!s.ok()) return done(s);
    {
      std::unique_lock lock(mutex_);
      auto it = boards_.find(info.id);
      // Unless it was deleted meanwhile, or deleted and made again.
      if (it != boards_.end() && it->second->info.created_us == info.created_us) {
        auto state = Rebase(*it->second, info, it->second->season);
        if (state.ok()) {
          Place(*state);
          PurgeOld(**state);  // keepSeasons may be lower now
        } else
          log::Error("leaderboard: board '{}' was changed but cannot be held: {}", info.id, state.status().ToString());
      }
    }
    auto view = ViewOf(info);
    if (view.ok()) view->secret = secret;
    done(std::move(view));
  });
}

void LeaderboardService::RotateSecret(const std::string& board_id, int64_t grace_s,
                                      std::function<void(Result<BoardView>)> done) {
  if (grace_s < 0 || grace_s > kSecretGraceSecondsMax)
    return done(Status::OutOfRange("graceSeconds", 0, kSecretGraceSecondsMax));
  auto found = FindOrNotFound(board_id);
  if (!found.ok()) return done(found.status());
  const BoardInfo& old = (*found)->info;
  if (old.settings.auth != BoardAuth::kHmac)
    return done(Status::Conflict("board '" + board_id + "' takes unsigned posts (auth none): it has no secret"));
  BoardInfo info = old;
  // The one before stays for the grace, if this server can read it (after a
  // change of --secrets-key-file it cannot: the rotation is the way out).
  const bool keep = grace_s > 0 && Unseal(options_.secrets_key, old.secret_sealed).has_value();
  info.previous_secret_sealed = keep ? old.secret_sealed : std::string();
  info.previous_until_us = keep ? NowMicros() + grace_s * 1000000 : 0;
  auto secret = NewSecret(info);
  if (!secret.ok()) return done(secret.status());
  store_.UpdateBoard(info, old, {}, [this, info, secret = *secret, done = std::move(done)](const Status& s) {
    if (!s.ok()) return done(s);
    {
      std::unique_lock lock(mutex_);
      auto it = boards_.find(info.id);
      if (it != boards_.end() && it->second->info.created_us == info.created_us) {
        auto state = Rebase(*it->second, info, it->second->season);
        if (state.ok()) Place(*state);
      }
    }
    auto view = ViewOf(info);
    if (view.ok()) view->secret = secret;
    done(std::move(view));
  });
}

void LeaderboardService::DeleteBoard(const std::string& board_id, std::function<void(Status)> done) {
  auto state = FindOrNotFound(board_id);
  if (!state.ok()) return done(state.status());
  if (board_id == kDefaultBoard) return done(Status::Conflict("the board 'default' cannot be deleted"));
  int64_t created = (*state)->info.created_us;
  store_.DeleteBoard((*state)->info, [this, board_id, created, done = std::move(done)](const Status& s) {
    if (s.ok()) {
      std::unique_lock lock(mutex_);
      auto it = boards_.find(board_id);
      if (it != boards_.end() && it->second->info.created_us == created) boards_.erase(it);
      deleted_[board_id] = std::max(deleted_[board_id], created);
      changes_.fetch_add(1, std::memory_order_acq_rel);
    }
    done(s);
  });
}

Result<BoardView> LeaderboardService::GetBoard(const std::string& board_id) const {
  auto state = FindOrNotFound(board_id);
  if (!state.ok()) return state.status();
  return ViewOf((*state)->info);
}

Result<BoardList> LeaderboardService::ListBoards(int64_t offset, int64_t limit) const {
  if (limit < 1 || limit > kBoardsPageLimitMax) return Status::OutOfRange("limit", 1, kBoardsPageLimitMax);
  if (offset < 0 || offset > kOffsetMax) return Status::OutOfRange("offset", 0, kOffsetMax);
  std::vector<BoardInfo> infos;
  BoardList list;
  {
    std::shared_lock lock(mutex_);
    list.total = static_cast<int64_t>(boards_.size());
    auto it = boards_.begin();
    std::advance(it, std::min(offset, list.total));
    for (; it != boards_.end() && static_cast<int64_t>(infos.size()) < limit; ++it) infos.push_back(it->second->info);
  }
  for (const auto& info : infos) {
    auto view = ViewOf(info);
    if (!view.ok()) return view.status();
    list.boards.push_back(std::move(*view));
  }
  return list;
}

Result<std::vector<SeasonInfo>> LeaderboardService::Seasons(const std::string& board_id) const {
  auto state = FindOrNotFound(board_id);
  if (!state.ok()) return state.status();
  const BoardInfo& info = (*state)->info;
  const SeasonSchedule schedule = ScheduleOf(info);
  auto at = SeasonOf(schedule, NowMicros());
  if (!at.ok()) return at.status();
  const int64_t oldest = OldestKept(info, at->season);
  // Seasons before the one before the epoch began under an earlier
  // schedule: their starts were recorded when it changed.
  std::map<int64_t, int64_t> recorded;
  if (oldest < schedule.epoch_season - 1) {
    auto history = store_.SeasonHistory(board_id);
    if (!history.ok()) return history.status();
    for (const auto& h : *history) recorded[h.season] = h.started_us;
  }
  auto start_of = [&](int64_t season) -> std::optional<int64_t> {
    if (season == at->season) return at->started_us;
    if (season == schedule.epoch_season - 1) return schedule.pre_epoch_started_us;
    if (season >= schedule.epoch_season) {
      auto start = SeasonStart(schedule, season);
      return start.ok() ? std::optional(*start) : std::nullopt;
    }
    auto it = recorded.find(season);
    return it == recorded.end() ? std::nullopt : std::optional(it->second);
  };
  std::vector<SeasonInfo> seasons;
  for (int64_t season = oldest; season <= at->season; ++season) {
    auto started = start_of(season);
    if (!started) continue;  // not recorded: deleted with the seasons past keepSeasons
    std::optional<int64_t> ended;
    if (season < at->season) ended = start_of(season + 1);
    seasons.push_back(SeasonInfo{season, *started, ended});
  }
  return seasons;
}

}  // namespace hotrow::leaderboard
