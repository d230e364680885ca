#include "leaderboard/routes.h"

#include "base/time.h"
#include "http/errors.h"
#include "http/json.h"
#include "http/query.h"
#include "leaderboard/board_body.h"

namespace hotrow::leaderboard {

using http::JsonWriter;
using http::Request;
using http::Responder;
using http::Response;

namespace {

// "displayName" and "metadata", when set.
void WriteProfile(JsonWriter& w, const Profile* p) {
  if (!p) return;
  if (!p->display_name.empty()) w.Field("displayName", p->display_name);
  if (!p->metadata.empty()) {
    w.Key("metadata");
    w.RawObject(p->metadata);
  }
}

void WriteEntry(JsonWriter& w, const Entry& e) {
  w.StartObject();
  w.Field("rank", e.rank);
  w.Field("clientId", e.client_id);
  w.Field("score", e.score);
  WriteProfile(w, e.profile.get());
  w.EndObject();
}

void WriteEntries(JsonWriter& w, std::span<const Entry> entries) {
  w.StartArray();
  for (const auto& e : entries) WriteEntry(w, e);
  w.EndArray();
}

// "next": the offset of the page after this one, or null on the last.
void WriteNext(JsonWriter& w, int64_t offset, size_t count, int64_t total) {
  w.Key("next");
  int64_t next = offset + static_cast<int64_t>(count);
  if (count > 0 && next < total)
    w.Int(next);
  else
    w.Null();
}

void WriteTime(JsonWriter& w, std::string_view key, std::optional<int64_t> us) {
  w.Key(key);
  if (us)
    w.String(FormatTime(*us));
  else
    w.Null();
}

void WriteBoard(JsonWriter& w, const BoardView& b) {
  const BoardSettings& s = b.info.settings;
  w.StartObject();
  w.Field("id", b.info.id);
  w.Field("order", Name(s.order));
  w.Field("operator", Name(s.op));
  if (s.reset_every_s > 0) {
    w.Key("reset");
    w.StartObject();
    w.Field("everySeconds", s.reset_every_s);
    w.EndObject();
  } else {
    w.Field("reset", Name(s.reset));
  }
  w.Field("resetTimezone", s.reset_timezone);
  w.Field("ranking", Name(s.ranking));
  w.Field("auth", Name(s.auth));
  w.Field("keepSeasons", s.keep_seasons);
  WriteTime(w, "createdAt", b.info.created_us);
  w.Field("season", b.season);
  WriteTime(w, "seasonStartedAt", b.season_started_us);
  WriteTime(w, "nextResetAt", b.next_reset_us);
  if (b.secret) w.Field("secret", *b.secret);
  w.EndObject();
}

Response BoardResponse(const BoardView& b, int status = 200) {
  Response res;
  res.status = status;
  JsonWriter w(res.body);
  WriteBoard(w, b);
  return res;
}

Response Error(const Status& s) { return http::ErrorResponse(s); }

// 429 past --score-rate, with Retry-After in whole seconds.
Response RateLimited(int64_t wait_s) {
  Response res = Error(Status(ErrorCode::kRateLimited, "more score posts for this player on this board than " +
                                                           std::string("--score-rate allows; retry after ") +
                                                           std::to_string(wait_s) + " s"));
  res.AddHeader("Retry-After", std::to_string(wait_s));
  return res;
}

Result<ScoreMode> ParseMode(const http::Query& q) {
  auto mode = q.Get("mode");
  if (!mode || *mode == "replace") return ScoreMode::kReplace;
  if (*mode == "best") return ScoreMode::kBest;
  return Status::InvalidField("mode", "mode must be 'replace' or 'best'");
}

// ?season=N on a read, checked after the request's other parameters: the
// season read (the current one without it); 404 for an unknown board or a
// season it does not keep.
Result<int64_t> ReadSeason(LeaderboardService& service, const http::Query& q, const std::string& board_id) {
  std::optional<int64_t> asked;
  if (q.Get("season")) {
    auto season = q.Int("season", kFirstSeason);
    if (!season.ok()) return season.status();
    if (*season < kFirstSeason) return Status::InvalidField("season", "season must be 1 or more");
    asked = *season;
  }
  return service.ReadSeason(board_id, asked);
}

// A post's ClientId and score, from the header and a {"score": N} body.
struct ParsedPost {
  std::string client_id;
  int64_t score = 0;
  PostExtras extras;
};

// The ClientId, the body {"score", "displayName"?, "metadata"?} and the
// Idempotency-Key header.
Result<ParsedPost> ParsePost(const Request& req) {
  if (!req.HasHeader("ClientId")) return Status::InvalidField("ClientId", "the ClientId header is required");
  auto body = http::JsonObject::Parse(req.body);
  if (!body.ok()) return body.status();
  if (Status s = body->OnlyFields({"score", "displayName", "metadata"}); !s.ok()) return s;
  auto score = body->SaturatedInteger("score");
  if (!score.ok()) return score.status();
  ParsedPost post{std::string(req.Header("ClientId")), *score, {}};
  if (req.HasHeader("Idempotency-Key")) {
    post.extras.idempotency_key = std::string(req.Header("Idempotency-Key"));
    // An empty header is a key that fails the check, not no key.
    if (post.extras.idempotency_key.empty()) post.extras.idempotency_key = " ";
  }
  if (body->Has("displayName")) {
    auto name = body->String("displayName");
    if (!name.ok()) return name.status();
    post.extras.display_name = std::move(*name);
  }
  if (body->Has("metadata")) {
    auto metadata = body->RawObject("metadata", kMetadataBytesMax, kMetadataDepthMax);
    if (!metadata.ok()) return metadata.status();
    post.extras.metadata = std::move(*metadata);
  }
  return post;
}

// An auth hmac board's check, before anything else of the post is read:
// the signature (or "" for a board that takes unsigned posts), or the 401
// (with WWW-Authenticate: HMAC-SHA256, http/errors.cc).
Result<std::string> Signature(LeaderboardService& service, const std::string& board_id, const Request& req) {
  return service.CheckSignature(board_id, SignedRequest{.path = req.path,
                                                        .client_id = req.Header("ClientId"),
                                                        .timestamp = req.Header("X-Timestamp"),
                                                        .signature = req.Header("X-Signature"),
                                                        .body = req.body});
}

Response PostedResponse(const Posted& p, bool with_season) {
  Response res;
  if (p.replayed) res.AddHeader("Idempotent-Replayed", "true");
  JsonWriter w(res.body);
  w.StartObject();
  w.Field("clientId", p.entry.client_id);
  w.Field("score", p.entry.score);
  w.Field("rank", p.entry.rank);
  if (with_season) w.Field("season", p.season);
  w.EndObject();
  return res;
}

// ?offset= (default 0) and ?limit= (default kPageLimitDefault); the
// service checks their ranges.
Result<std::pair<int64_t, int64_t>> PageRange(const http::Query& q) {
  auto limit = q.Int("limit", kPageLimitDefault);
  if (!limit.ok()) return limit.status();
  auto offset = q.Int("offset", 0);
  if (!offset.ok()) return offset.status();
  return std::pair{*offset, *limit};
}

Response NoContent() {
  Response res;
  res.status = 204;
  return res;
}

// --- The legacy routes, on `default` ---------------------------------------

void PostScore(LeaderboardService& service, const Request& req, Responder responder) {
  auto query = http::Query::Parse(req.query);
  if (!query.ok()) return responder.Send(Error(query.status()));
  auto mode = ParseMode(*query);
  if (!mode.ok()) return responder.Send(Error(mode.status()));
  auto signature = Signature(service, std::string(kDefaultBoard), req);
  if (!signature.ok()) return responder.Send(Error(signature.status()));
  // The query is not signed: on a signed board it must not change the post.
  if (!signature->empty() && query->Get("mode"))
    return responder.Send(Error(Status::InvalidField(
        "mode", "?mode is not part of the signature: on a board with auth hmac its operator decides")));
  auto post = ParsePost(req);
  if (!post.ok()) return responder.Send(Error(post.status()));
  post->extras.signature = std::move(*signature);
  if (auto wait = service.RateLimit(kDefaultBoard, post->client_id)) return responder.Send(RateLimited(*wait));
  service.PostScore(
      post->client_id, post->score, *mode,
      [responder](Result<Posted> r) mutable {
        if (!r.ok()) return responder.Send(Error(r.status()));
        responder.Send(PostedResponse(*r, false));
      },
      std::move(post->extras));
}

// A page: {"entries", "total", "next"} and, for a board route, "board" and
// "season" first.
void SendPage(Responder& responder, std::string body, const Page& page, int64_t offset, const std::string* board_id,
              int64_t season = kFirstSeason) {
  Response res = http::ResponseWithBody(std::move(body));
  res.body.reserve(96 + page.entries.size() * 56);
  JsonWriter w(res.body);
  w.StartObject();
  if (board_id) {
    w.Field("board", *board_id);
    w.Field("season", season);
  }
  w.Key("entries");
  WriteEntries(w, page.entries);
  w.Field("total", page.total);
  WriteNext(w, offset, page.entries.size(), page.total);
  w.EndObject();
  responder.Send(std::move(res));
}

void Top(LeaderboardService& service, Request& req, Responder responder) {
  auto query = http::Query::Parse(req.query);
  if (!query.ok()) return responder.Send(Error(query.status()));
  auto range = PageRange(*query);
  if (!range.ok()) return responder.Send(Error(range.status()));
  auto [offset, limit] = *range;
  service.Top(offset, limit, [responder, offset = offset, body = http::TakeSpareBody(req)](Result<Page> r) mutable {
    if (!r.ok()) return responder.Send(Error(r.status()));
    SendPage(responder, std::move(body), *r, offset, nullptr);
  });
}

void SendPlayer(Responder& responder, const PlayerView& v, std::optional<int64_t> season) {
  Response res;
  JsonWriter w(res.body);
  w.StartObject();
  w.Field("rank", v.entry.rank);
  w.Field("clientId", v.entry.client_id);
  w.Field("score", v.entry.score);
  WriteProfile(w, v.entry.profile.get());
  if (season) w.Field("season", *season);
  if (v.around) {
    w.Key("around");
    WriteEntries(w, *v.around);
  }
  w.EndObject();
  responder.Send(std::move(res));
}

Result<std::optional<int64_t>> ParseAround(const http::Query& q) {
  if (!q.Get("around")) return std::optional<int64_t>();
  auto k = q.Int("around", 0);
  if (!k.ok()) return k.status();
  return std::optional<int64_t>(*k);
}

void Player(LeaderboardService& service, const Request& req, Responder responder) {
  const std::string& client_id = req.params.at(0);
  auto query = http::Query::Parse(req.query);
  if (!query.ok()) return responder.Send(Error(query.status()));
  auto around = ParseAround(*query);
  if (!around.ok()) return responder.Send(Error(around.status()));
  service.Player(client_id, *around, [responder](Result<PlayerView> r) mutable {
    if (!r.ok()) return responder.Send(Error(r.status()));
    SendPlayer(responder, *r, std::nullopt);
  });
}

void Remove(LeaderboardService& service, const AdminAuth& admin, const Request& req, Responder responder) {
  if (Status s = admin.Check(http::BearerToken(req)); !s.ok()) return responder.Send(Error(s));
  service.Remove(req.params.at(0),
                 [responder](const Status& s) mutable { responder.Send(s.ok() ? NoContent() : Error(s)); });
}

// --- Boards ------------------------------------------------------------------

void CreateBoard(LeaderboardService& service, const AdminAuth& admin, const Request& req, Responder responder) {
  if (Status s = admin.Check(http::BearerToken(req)); !s.ok()) return responder.Send(Error(s));
  auto board = ParseNewBoard(req.body);
  if (!board.ok()) return responder.Send(Error(board.status()));
  service.CreateBoard(std::move(*board), [responder](Result<BoardView> r) mutable {
    if (!r.ok()) return responder.Send(Error(r.status()));
    Response res = BoardResponse(*r, 201);
    res.AddHeader("Location", "/api/v1/boards/" + r->info.id);
    responder.Send(std::move(res));
  });
}

void ListBoards(LeaderboardService& service, const Request& req, Responder responder) {
  auto query = http::Query::Parse(req.query);
  if (!query.ok()) return responder.Send(Error(query.status()));
  auto range = PageRange(*query);
  if (!range.ok()) return responder.Send(Error(range.status()));
  auto [offset, limit] = *range;
  auto list = service.ListBoards(offset, limit);
  if (!list.ok()) return responder.Send(Error(list.status()));
  Response res;
  JsonWriter w(res.body);
  w.StartObject();
  w.Key("boards");
  w.StartArray();
  for (const auto& b : list->boards) WriteBoard(w, b);
  w.EndArray();
  w.Field("total", list->total);
  WriteNext(w, offset, list->boards.size(), list->total);
  w.EndObject();
  responder.Send(std::move(res));
}

void GetBoard(LeaderboardService& service, const Request& req, Responder responder) {
  auto board = service.GetBoard(req.params.at(0));
  responder.Send(board.ok() ? BoardResponse(*board) : Error(board.status()));
}

void UpdateBoard(LeaderboardService& service, const AdminAuth& admin, const Request& req, Responder responder) {
  if (Status s = admin.Check(http::BearerToken(req)); !s.ok()) return responder.Send(Error(s));
  auto patch = ParsePatch(req.body);
  if (!patch.ok()) return responder.Send(Error(patch.status()));
  service.UpdateBoard(req.params.at(0), std::move(*patch), [responder](Result<BoardView> r) mutable {
    responder.Send(r.ok() ? BoardResponse(*r) : Error(r.status()));
  });
}

void DeleteBoard(LeaderboardService& service, const AdminAuth& admin, const Request& req, Responder responder) {
  if (Status s = admin.Check(http::BearerToken(req)); !s.ok()) return responder.Send(Error(s));
  service.DeleteBoard(req.params.at(0),
                      [responder](const Status& s) mutable { responder.Send(s.ok() ? NoContent() : Error(s)); });
}

void BoardScore(LeaderboardService& service, const Request& req, Responder responder) {
  auto query = http::Query::Parse(req.query);
  if (!query.ok()) return responder.Send(Error(query.status()));
  // Not silently ignored: a board's operator decides (?mode is the legacy
  // route's), and a score goes to the current season.
  if (query->Get("mode"))
    return responder.Send(Error(
        Status::InvalidField("mode", "mode is a parameter of /api/v1/score only; on a board, its operator decides")));
  if (query->Get("season"))
    return responder.Send(Error(Status::InvalidField("season", "a score goes to the board's current season")));
  auto signature = Signature(service, req.params.at(0), req);
  if (!signature.ok()) return responder.Send(Error(signature.status()));
  auto post = ParsePost(req);
  if (!post.ok()) return responder.Send(Error(post.status()));
  post->extras.signature = std::move(*signature);
  if (auto wait = service.RateLimit(req.params.at(0), post->client_id)) return responder.Send(RateLimited(*wait));
  service.PostScore(req.params.at(0), post->client_id, post->score, std::nullopt, std::move(post->extras),
                    [responder](Result<Posted> r) mutable {
                      if (!r.ok()) return responder.Send(Error(r.status()));
                      responder.Send(PostedResponse(*r, true));
                    });
}

// POST /api/v1/boards/{board}/secret, body {"graceSeconds": N} (optional).
void RotateSecret(LeaderboardService& service, const AdminAuth& admin, const Request& req, Responder responder) {
  if (Status s = admin.Check(http::BearerToken(req)); !s.ok()) return responder.Send(Error(s));
  int64_t grace = 0;
  if (!req.body.empty()) {
    auto body = http::JsonObject::Parse(req.body);
    if (!body.ok()) return responder.Send(Error(body.status()));
    if (Status s = body->OnlyFields({"graceSeconds"}); !s.ok()) return responder.Send(Error(s));
    if (body->Has("graceSeconds")) {
      auto g = body->Integer("graceSeconds", 0, kSecretGraceSecondsMax);
      if (!g.ok()) return responder.Send(Error(g.status()));
      grace = *g;
    }
  }
  service.RotateSecret(req.params.at(0), grace, [responder](Result<BoardView> r) mutable {
    responder.Send(r.ok() ? BoardResponse(*r, 201) : Error(r.status()));
  });
}

void BoardRemovePlayer(LeaderboardService& service, const AdminAuth& admin, const Request& req, Responder responder) {
  if (Status s = admin.Check(http::BearerToken(req)); !s.ok()) return responder.Send(Error(s));
  auto query = http::Query::Parse(req.query);
  if (!query.ok()) return responder.Send(Error(query.status()));
  // Not silently the current season when another was meant.
  if (query->Get("season"))
    return responder.Send(Error(Status::InvalidField("season", "a player is removed from the current season only")));
  service.Remove(req.params.at(0), req.params.at(1),
                 [responder](const Status& s) mutable { responder.Send(s.ok() ? NoContent() : Error(s)); });
}

void BoardTop(LeaderboardService& service, Request& req, Responder responder) {
  auto query = http::Query::Parse(req.query);
  if (!query.ok()) return responder.Send(Error(query.status()));
  std::string board_id = req.params.at(0);
  auto range = PageRange(*query);
  if (!range.ok()) return responder.Send(Error(range.status()));
  auto season = ReadSeason(service, *query, board_id);
  if (!season.ok()) return responder.Send(Error(season.status()));
  auto [offset, limit] = *range;
  service.Top(board_id, *season, offset, limit,
              [responder, board_id, offset = offset, season = *season,
               body = http::TakeSpareBody(req)](Result<Page> r) mutable {
                if (!r.ok()) return responder.Send(Error(r.status()));
                SendPage(responder, std::move(body), *r, offset, &board_id, season);
              });
}

void BoardPlayer(LeaderboardService& service, const Request& req, Responder responder) {
  auto query = http::Query::Parse(req.query);
  if (!query.ok()) return responder.Send(Error(query.status()));
  auto around = ParseAround(*query);
  if (!around.ok()) return responder.Send(Error(around.status()));
  auto season = ReadSeason(service, *query, req.params.at(0));
  if (!season.ok()) return responder.Send(Error(season.status()));
  service.Player(req.params.at(0), *season, req.params.at(1), *around,
                 [responder, season = *season](Result<PlayerView> r) mutable {
                   if (!r.ok()) return responder.Send(Error(r.status()));
                   SendPlayer(responder, *r, season);
                 });
}

void BoardRanks(LeaderboardService& service, const Request& req, Responder responder) {
  auto query = http::Query::Parse(req.query);
  if (!query.ok()) return responder.Send(Error(query.status()));
  std::string board_id = req.params.at(0);
  auto body = http::JsonObject::Parse(req.body);
  if (!body.ok()) return responder.Send(Error(body.status()));
  if (Status s = body->OnlyFields({"clientIds"}); !s.ok()) return responder.Send(Error(s));
  auto ids = body->StringArray("clientIds", static_cast<size_t>(kRanksIdsMax));
  if (!ids.ok()) return responder.Send(Error(ids.status()));
  auto season = ReadSeason(service, *query, board_id);
  if (!season.ok()) return responder.Send(Error(season.status()));
  service.Ranks(board_id, *season, std::move(*ids),
                [responder, board_id, season = *season](Result<RanksView> r) mutable {
                  if (!r.ok()) return responder.Send(Error(r.status()));
                  Response res;
                  JsonWriter w(res.body);
                  w.StartObject();
                  w.Field("board", board_id);
                  w.Field("season", season);
                  w.Key("entries");
                  WriteEntries(w, r->entries);
                  w.Key("missing");
                  w.StartArray();
                  for (const auto& id : r->missing) w.String(id);
                  w.EndArray();
                  w.EndObject();
                  responder.Send(std::move(res));
                });
}

void BoardSeasons(LeaderboardService& service, const Request& req, Responder responder) {
  auto seasons = service.Seasons(req.params.at(0));
  if (!seasons.ok()) return responder.Send(Error(seasons.status()));
  Response res;
  JsonWriter w(res.body);
  w.StartObject();
  w.Key("seasons");
  w.StartArray();
  for (const auto& s : *seasons) {
    w.StartObject();
    w.Field("season", s.season);
    WriteTime(w, "startedAt", s.started_us);
    WriteTime(w, "endedAt", s.ended_us);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  responder.Send(std::move(res));
}

}  // namespace

void AddRoutes(http::Router& router, LeaderboardService& service, const AdminAuth& admin) {
  using http::BodyPolicy;
  using http::Method;
  auto add = [&](Method m, const char* path, auto handler, BodyPolicy body = BodyPolicy::kNone) {
    router.Add(m, path, std::move(handler), body);
  };
  auto& s = service;
  auto& a = admin;
  // The reference's routes, on the board `default`.
  add(
      Method::kPost, "/api/v1/score", [&s](Request& r, Responder res) { PostScore(s, r, std::move(res)); },
      BodyPolicy::kJson);
  add(Method::kGet, "/api/v1/leaderboard", [&s](Request& r, Responder res) { Top(s, r, std::move(res)); });
  add(Method::kGet, "/api/v1/leaderboard/{clientId}",
      [&s](Request& r, Responder res) { Player(s, r, std::move(res)); });
  add(Method::kDelete, "/api/v1/leaderboard/{clientId}",
      [&s, &a](Request& r, Responder res) { Remove(s, a, r, std::move(res)); });
  // Boards.
  add(
      Method::kPost, "/api/v1/boards", [&s, &a](Request& r, Responder res) { CreateBoard(s, a, r, std::move(res)); },
      BodyPolicy::kJson);
  add(Method::kGet, "/api/v1/boards", [&s](Request& r, Responder res) { ListBoards(s, r, std::move(res)); });
  add(Method::kGet, "/api/v1/boards/{board}", [&s](Request& r, Responder res) { GetBoard(s, r, std::move(res)); });
  add(
      Method::kPatch, "/api/v1/boards/{board}",
      [&s, &a](Request& r, Responder res) { UpdateBoard(s, a, r, std::move(res)); }, BodyPolicy::kJson);
  add(Method::kDelete, "/api/v1/boards/{board}",
      [&s, &a](Request& r, Responder res) { DeleteBoard(s, a, r, std::move(res)); });
  add(
      Method::kPost, "/api/v1/boards/{board}/scores",
      [&s](Request& r, Responder res) { BoardScore(s, r, std::move(res)); }, BodyPolicy::kJson);
  add(Method::kGet, "/api/v1/boards/{board}/leaderboard",
      [&s](Request& r, Responder res) { BoardTop(s, r, std::move(res)); });
  add(Method::kGet, "/api/v1/boards/{board}/players/{clientId}",
      [&s](Request& r, Responder res) { BoardPlayer(s, r, std::move(res)); });
  add(Method::kDelete, "/api/v1/boards/{board}/players/{clientId}",
      [&s, &a](Request& r, Responder res) { BoardRemovePlayer(s, a, r, std::move(res)); });
  add(
      Method::kPost, "/api/v1/boards/{board}/ranks",
      [&s](Request& r, Responder res) { BoardRanks(s, r, std::move(res)); }, BodyPolicy::kJson);
  add(Method::kGet, "/api/v1/boards/{board}/seasons",
      [&s](Request& r, Responder res) { BoardSeasons(s, r, std::move(res)); });
  add(
      Method::kPost, "/api/v1/boards/{board}/secret",
      [&s, &a](Request& r, Responder res) { RotateSecret(s, a, r, std::move(res)); }, BodyPolicy::kJson);
}

}  // namespace hotrow::leaderboard
