// Leaderboard entries and the rules for their fields.
//
// Ranking rule: higher score first; among equal scores, the player whose
// stored score changed to that value earlier ranks higher. "Earlier" is a
// sequence number the store of record assigns whenever a stored score
// changes (re-posting an equal score changes nothing and keeps the number),
// so the order is the same on every instance. Ranks are positions 1, 2, 3...
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace hotrow::leaderboard {

inline constexpr size_t kClientIdLengthMax = 64;
inline constexpr int64_t kScoreAbsMax = (int64_t{1} << 53) - 1;  // exact in a double (Redis scores)
inline constexpr int64_t kPageLimitMax = 100;
inline constexpr int64_t kPageLimitDefault = 10;
inline constexpr int64_t kAroundMax = 50;
// A score post's Idempotency-Key is kept for 24 h (then purged).
inline constexpr int64_t kIdempotencyKeptUs = 24ll * 3600 * 1000000;
inline constexpr int64_t kOffsetMax = INT64_MAX - kPageLimitMax;  // offset + limit never overflows

enum class ScoreMode {
  kReplace,  // the new score replaces the stored one (the reference's behaviour)
  kBest,     // the stored score becomes the higher of the two
};

// Which end of the board is first: the highest score (desc, a points board)
// or the lowest (asc, a board of times).
enum class Order { kDesc, kAsc };
// How ranks are numbered: positions 1, 2, 3, 4 (unique; ties to whoever
// reached the score first), or 1 + the number of players with a strictly
// better score, 1, 2, 2, 4 (shared; equal scores still listed in sequence
// order).
enum class Ranking { kUnique, kShared };
// What a post does with the stored score: replace it, keep the better of the
// two (higher on a desc board, lower on an asc one), or add to it.
enum class Operator { kReplace, kBest, kIncrement };
// When a board starts a new season (at 00:00 in its time zone): never, every
// day, every Monday, on the first of every month.
enum class Reset { kNone, kDaily, kWeekly, kMonthly };
// Who may post: anyone with a ClientId (none), or a signed request (hmac).
enum class BoardAuth { kNone, kHmac };

inline constexpr size_t kBoardIdLengthMax = 64;
inline constexpr int64_t kKeepSeasonsMax = 1000;
inline constexpr int64_t kKeepSeasonsDefault = 12;
inline constexpr int64_t kBoardsPageLimitMax = 100;
inline constexpr int64_t kRanksIdsMax = 100;  // the friends view
// The board the legacy routes (/api/v1/score, /api/v1/leaderboard) use. It
// exists from the start and cannot be deleted.
inline constexpr std::string_view kDefaultBoard = "default";

// A board's settings, as created (every field but the id has a default).
struct BoardSettings {
  Order order = Order::kDesc;
  Operator op = Operator::kReplace;
  Reset reset = Reset::kNone;
  std::string reset_timezone = "UTC";
  Ranking ranking = Ranking::kUnique;
  BoardAuth auth = BoardAuth::kNone;
  int64_t keep_seasons = kKeepSeasonsDefault;
  // > 0 (only with --test-hooks: "reset":{"everySeconds":N}): a season every
  // so many seconds instead of `reset`.
  int64_t reset_every_s = 0;
  bool operator==(const BoardSettings&) const = default;
};

struct BoardInfo {
  std::string id;
  BoardSettings settings;
  int64_t created_us = 0;  // UTC microseconds
  // Where its season schedule counts from (season.h): season epoch_season
  // begins at epoch_us; before it the board is in season epoch_season - 1,
  // begun at pre_epoch_started_us. A new board: (1, created_us).
  int64_t epoch_season = 1;
  int64_t epoch_us = 0;
  int64_t pre_epoch_started_us = 0;
  // auth hmac: the board's secret, sealed (base/crypto.h Seal, under the
  // --secrets-key-file key); "" when it has none. The secret before a
  // rotation stays accepted until previous_until_us.
  std::string secret_sealed = {};
  std::string previous_secret_sealed = {};
  int64_t previous_until_us = 0;
};

// A signed post's headers (auth hmac): X-Timestamp is decimal Unix seconds
// within kSignatureSkewS of the instance's clock; X-Signature 64 hex digits,
// HMAC-SHA256 under the secret's ASCII bytes of
// "POST\n<path as received, no query>\n<ClientId>\n<X-Timestamp as sent>\n<body>".
inline constexpr int64_t kSignatureSkewS = 300;
// A signature is kept by the store of record (as an Idempotency-Key is) so
// that a repeated one replays its answer; it is refused after the skew.
inline constexpr int64_t kSecretGraceSecondsMax = 7 * 86400;
struct SignedRequest {
  std::string_view path;
  std::string_view client_id;
  std::string_view timestamp;  // as sent; empty: missing
  std::string_view signature;  // as sent; empty: missing
  std::string_view body;
};

inline constexpr int64_t kResetEverySecondsMax = 86400;

// The names the API and the stores use for each setting, both ways.
const char* Name(Order v);
const char* Name(Operator v);
const char* Name(Reset v);
const char* Name(Ranking v);
const char* Name(BoardAuth v);
std::optional<Order> ParseOrder(std::string_view name);
std::optional<Operator> ParseOperator(std::string_view name);
std::optional<Reset> ParseReset(std::string_view name);
std::optional<Ranking> ParseRanking(std::string_view name);
std::optional<BoardAuth> ParseBoardAuth(std::string_view name);

// invalid_field (naming `field`) unless 1-64 characters of [A-Za-z0-9_.-]
// whose first is [A-Za-z0-9]. Case-sensitive.
Status ValidateBoardId(std::string_view id, const char* field = "id");

// Whether `candidate` is better than `stored` on a board of `order`.
inline bool Better(Order order, int64_t candidate, int64_t stored) {
  return order == Order::kDesc ? candidate > stored : candidate < stored;
}

// The score a post leaves stored: what `op` makes of the stored score (none
// for a new player) and the posted one. invalid_field `score` when an
// increment leaves +-kScoreAbsMax.
Result<int64_t> ApplyOperator(Operator op, Order order, std::optional<int64_t> stored, int64_t posted);
// The error of an increment whose result `sum` leaves +-kScoreAbsMax.
Status IncrementOutOfRange(int64_t sum);

// What a player shows beside the score, when set: a display name (1-64
// visible characters) and metadata (a JSON object of at most 1,024 bytes as
// sent, nested at most 8 deep, no key twice; kept byte for byte). `seq`
// orders changes of it as a score's seq orders scores (a profile can change
// while the score, and so its seq, stays). Immutable, shared.
struct Profile {
  std::string display_name;  // empty: unset
  std::string metadata;      // empty: unset
  int64_t seq = 0;
};
inline constexpr size_t kDisplayNameMax = 64;  // code points
inline constexpr size_t kMetadataBytesMax = 1024;
inline constexpr int kMetadataDepthMax = 8;
// invalid_field `displayName` unless 1-kDisplayNameMax visible characters
// (text.h's rule, trimmed).
Status ValidateDisplayName(std::string_view name);

// A hash that finds std::string keys by std::string_view (no copy).
struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};
// Profiles by client id, as a store read them (a player without one absent).
using ProfileMap = std::unordered_map<std::string, std::shared_ptr<const Profile>, StringViewHash, std::equal_to<>>;

// A player's stored score and the sequence number of the change that set it.
struct Stored {
  int64_t score;
  int64_t seq;
  // Whether the player has a display name or metadata (loads: the Board
  // reads the top's from the store when it shows them).
  bool has_profile = false;
};

struct Entry {
  int64_t rank = 0;  // 1-based
  std::string client_id;
  int64_t score = 0;
  std::shared_ptr<const Profile> profile = nullptr;  // none set
  // The player may have a profile that the Board does not hold (outside its
  // top): read it from the store (Board::SetProfile).
  bool profile_unread = false;
};

// A page of the board. Its entries are a view into an immutable list that
// the page shares ownership of -- the board's top-100 snapshot, the Redis
// cache, or a list made for this page -- so serving the hot top 10 copies
// and allocates nothing.
struct Page {
  std::shared_ptr<const std::vector<Entry>> source;
  std::span<const Entry> entries;
  int64_t total = 0;

  // A page that owns a list made for it.
  static Page Own(std::vector<Entry> entries, int64_t total) {
    auto list = std::make_shared<const std::vector<Entry>>(std::move(entries));
    return Page{list, std::span<const Entry>(*list), total};
  }
  // The entries [offset, offset + limit) of a shared list (clipped).
  static Page Slice(std::shared_ptr<const std::vector<Entry>> list, int64_t offset, int64_t limit, int64_t total) {
    auto size = static_cast<int64_t>(list->size());
    int64_t begin = std::min(offset, size), end = std::min(offset + limit, size);
    std::span<const Entry> view(list->data() + begin, static_cast<size_t>(end - begin));
    return Page{std::move(list), view, total};
  }
};

struct PlayerView {
  Entry entry;
  std::optional<std::vector<Entry>> around;  // present when asked for
};

// The outcome of posting a score.
struct Posted {
  Entry entry;  // the stored score and the rank after the request
  bool changed = false;
  int64_t season = 1;     // the season it went to
  bool replayed = false;  // an Idempotency-Key retry: the kept answer, nothing written
};

// A demo player's score: around 5,000 with a long tail, so there are many
// ties. Deterministic for a given generator state.
int64_t DemoScore(std::mt19937_64& rng);

// invalid_field (naming `field`: the ClientId header, or the {clientId} of a
// path) unless 1-kClientIdLengthMax characters of [A-Za-z0-9_.:-].
Status ValidateClientId(std::string_view client_id, const char* field = "ClientId");

// The error every backend answers for an unknown player.
inline Status NoSuchPlayer(const std::string& client_id) {
  return Status::NotFound("no player '" + client_id + "' on the leaderboard");
}

}  // namespace hotrow::leaderboard
