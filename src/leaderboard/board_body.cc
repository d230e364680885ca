#include "leaderboard/board_body.h"

#include "base/time.h"
#include "http/json.h"

namespace hotrow::leaderboard {

namespace {

// One of a setting's names, when the body has it; invalid_field naming it
// and its choices otherwise.
template <typename E>
Status ReadChoice(const http::JsonObject& body, std::string_view field, std::optional<E> (*parse)(std::string_view),
                  const char* choices, E* out) {
  if (!body.Has(field)) return Status::Ok();
  auto text = body.String(field);
  if (!text.ok()) return text.status();
  auto v = parse(*text);
  if (!v) return Status::InvalidField(std::string(field), std::string(field) + " must be one of " + choices);
  *out = *v;
  return Status::Ok();
}

constexpr const char* kOrders = "desc, asc";
constexpr const char* kOperators = "replace, best, increment";
constexpr const char* kResets = "none, daily, weekly, monthly";
constexpr const char* kRankings = "unique, shared";
constexpr const char* kAuths = "none, hmac";

Status ReadTimezone(const http::JsonObject& body, std::string* out) {
  if (!body.Has("resetTimezone")) return Status::Ok();
  auto tz = body.String("resetTimezone");
  if (!tz.ok()) return tz.status();
  *out = *tz;
  return Status::Ok();
}

// "reset": one of kResets, or (a --test-hooks server) {"everySeconds": N}.
Status ReadReset(const http::JsonObject& body, Reset* reset, int64_t* every_s) {
  if (!body.Has("reset")) return Status::Ok();
  if (body.KindOf("reset") != http::JsonObject::Kind::kObject) {
    *every_s = 0;
    return ReadChoice(body, "reset", ParseReset, kResets, reset);
  }
  // Errors name the member as reset.<name>.
  auto in_reset = [](const Status& s) {
    return Status(s.code(), s.message(), s.field().empty() ? "reset" : "reset." + s.field());
  };
  auto object = body.Object("reset");
  if (!object.ok()) return object.status();
  if (Status s = object->OnlyFields({"everySeconds"}); !s.ok()) return in_reset(s);
  auto every = object->Integer("everySeconds", 1, kResetEverySecondsMax);
  if (!every.ok()) return in_reset(every.status());
  *reset = Reset::kNone;
  *every_s = *every;
  return Status::Ok();
}

Status ReadKeepSeasons(const http::JsonObject& body, int64_t* out) {
  if (!body.Has("keepSeasons")) return Status::Ok();
  auto keep = body.Integer("keepSeasons", 1, kKeepSeasonsMax);
  if (!keep.ok()) return keep.status();
  *out = *keep;
  return Status::Ok();
}

}  // namespace

Result<BoardInfo> ParseNewBoard(std::string_view text) {
  auto body = http::JsonObject::Parse(text);
  if (!body.ok()) return body.status();
  if (Status s =
          body->OnlyFields({"id", "order", "operator", "reset", "resetTimezone", "ranking", "auth", "keepSeasons"});
      !s.ok())
    return s;
  auto id = body->String("id");
  if (!id.ok()) return id.status();
  if (Status s = ValidateBoardId(*id); !s.ok()) return s;
  BoardInfo b{.id = *id, .settings = {}, .created_us = 0};
  BoardSettings& s = b.settings;
  for (Status st :
       {ReadChoice(*body, "order", ParseOrder, kOrders, &s.order),
        ReadChoice(*body, "operator", ParseOperator, kOperators, &s.op), ReadReset(*body, &s.reset, &s.reset_every_s),
        ReadTimezone(*body, &s.reset_timezone), ReadChoice(*body, "ranking", ParseRanking, kRankings, &s.ranking),
        ReadChoice(*body, "auth", ParseBoardAuth, kAuths, &s.auth), ReadKeepSeasons(*body, &s.keep_seasons)})
    if (!st.ok()) return st;
  return b;
}

Result<BoardPatch> ParsePatch(std::string_view text) {
  auto body = http::JsonObject::Parse(text);
  if (!body.ok()) return body.status();
  if (Status s = body->OnlyFields({"reset", "resetTimezone", "keepSeasons", "auth"}); !s.ok()) return s;
  BoardPatch patch;
  Reset reset{};
  int64_t every_s = 0;
  BoardAuth auth{};
  std::string tz;
  int64_t keep = 0;
  for (Status st : {ReadReset(*body, &reset, &every_s), ReadTimezone(*body, &tz),
                    ReadChoice(*body, "auth", ParseBoardAuth, kAuths, &auth), ReadKeepSeasons(*body, &keep)})
    if (!st.ok()) return st;
  if (body->Has("reset") && every_s > 0) patch.reset_every_s = every_s;
  if (body->Has("reset") && every_s == 0) patch.reset = reset;
  if (body->Has("resetTimezone")) patch.reset_timezone = tz;
  if (body->Has("auth")) patch.auth = auth;
  if (body->Has("keepSeasons")) patch.keep_seasons = keep;
  return patch;
}

}  // namespace hotrow::leaderboard
