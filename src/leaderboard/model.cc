#include "leaderboard/model.h"

#include <algorithm>

#include "base/text.h"

namespace hotrow::leaderboard {

int64_t DemoScore(std::mt19937_64& rng) {
  std::normal_distribution<double> dist(5000, 1500);
  return static_cast<int64_t>(std::max(0.0, dist(rng)));
}

Status ValidateDisplayName(std::string_view name) {
  // Not text.h's `trimmed`: a name may end in a combining mark or a
  // variation selector ("José" decomposed, Hindi, "❤️"); only a space or a
  // format character at either end is refused.
  if (Status s = CheckUserText(name, TextRule{.field = "displayName",
                                              .code_points_min = 1,
                                              .code_points_max = kDisplayNameMax,
                                              .multiline = false,
                                              .trimmed = false});
      !s.ok())
    return s;
  auto blank = [](uint32_t cp) {
    return cp == 0x20 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) ||
           (cp >= 0x2028 && cp <= 0x202F) || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
  };
  size_t i = 0;
  auto first = NextCodePoint(name, &i);
  uint32_t last = first.value_or(0);
  while (i < name.size())
    if (auto cp = NextCodePoint(name, &i))
      last = *cp;
    else
      break;
  if (blank(first.value_or(0)) || blank(last))
    return Status::InvalidField("displayName", "displayName must not begin or end with a space");
  return Status::Ok();
}

Status ValidateClientId(std::string_view id, const char* field) {
  auto bad = [field] {
    return Status::InvalidField(field, std::string(field) + " must be 1-" + std::to_string(kClientIdLengthMax) +
                                           " characters of A-Z a-z 0-9 _ . : -");
  };
  if (id.empty() || id.size() > kClientIdLengthMax) return bad();
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == ':' || c == '-';
    if (!ok) return bad();
  }
  return Status::Ok();
}

namespace {
template <typename E, size_t N>
std::optional<E> Find(const std::pair<E, const char*> (&names)[N], std::string_view name) {
  for (const auto& [v, n] : names)
    if (name == n) return v;
  return std::nullopt;
}
template <typename E, size_t N>
const char* NameIn(const std::pair<E, const char*> (&names)[N], E v) {
  for (const auto& [value, n] : names)
    if (value == v) return n;
  return "?";
}
constexpr std::pair<Order, const char*> kOrders[] = {{Order::kDesc, "desc"}, {Order::kAsc, "asc"}};
constexpr std::pair<Operator, const char*> kOperators[] = {
    {Operator::kReplace, "replace"}, {Operator::kBest, "best"}, {Operator::kIncrement, "increment"}};
constexpr std::pair<Reset, const char*> kResets[] = {
    {Reset::kNone, "none"}, {Reset::kDaily, "daily"}, {Reset::kWeekly, "weekly"}, {Reset::kMonthly, "monthly"}};
constexpr std::pair<Ranking, const char*> kRankings[] = {{Ranking::kUnique, "unique"}, {Ranking::kShared, "shared"}};
constexpr std::pair<BoardAuth, const char*> kAuths[] = {{BoardAuth::kNone, "none"}, {BoardAuth::kHmac, "hmac"}};
}  // namespace

const char* Name(Order v) { return NameIn(kOrders, v); }
const char* Name(Operator v) { return NameIn(kOperators, v); }
const char* Name(Reset v) { return NameIn(kResets, v); }
const char* Name(Ranking v) { return NameIn(kRankings, v); }
const char* Name(BoardAuth v) { return NameIn(kAuths, v); }
std::optional<Order> ParseOrder(std::string_view n) { return Find(kOrders, n); }
std::optional<Operator> ParseOperator(std::string_view n) { return Find(kOperators, n); }
std::optional<Reset> ParseReset(std::string_view n) { return Find(kResets, n); }
std::optional<Ranking> ParseRanking(std::string_view n) { return Find(kRankings, n); }
std::optional<BoardAuth> ParseBoardAuth(std::string_view n) { return Find(kAuths, n); }

Status ValidateBoardId(std::string_view id, const char* field) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  bool ok = !id.empty() && id.size() <= kBoardIdLengthMax && alnum(id.front());
  for (char c : id) ok = ok && (alnum(c) || c == '_' || c == '.' || c == '-');
  if (ok) return Status::Ok();
  return Status::InvalidField(field, std::string(field) + " must be 1-" + std::to_string(kBoardIdLengthMax) +
                                         " characters of A-Z a-z 0-9 _ . -, the first a letter or digit");
}

Status IncrementOutOfRange(int64_t sum) {
  return Status::InvalidField("score", "the incremented score " + std::to_string(sum) + " is outside +-" +
                                           std::to_string(kScoreAbsMax) + "; nothing was written");
}

Result<int64_t> ApplyOperator(Operator op, Order order, std::optional<int64_t> stored, int64_t posted) {
  if (!stored) return posted;
  switch (op) {
    case Operator::kReplace:
      return posted;
    case Operator::kBest:
      return Better(order, posted, *stored) ? posted : *stored;
    case Operator::kIncrement: {
      int64_t sum = *stored + posted;  // both within +-(2^53-1): no overflow
      if (sum < -kScoreAbsMax || sum > kScoreAbsMax) return IncrementOutOfRange(sum);
      return sum;
    }
  }
  return posted;
}

}  // namespace hotrow::leaderboard
