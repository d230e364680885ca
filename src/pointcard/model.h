// The prepaid point card: cards, their append-only history, stores and
// regions, and the bounds on every input. Names follow the reference's
// tables (S_ACCOUNT, H_TRANSACTION, M_STORE, M_REGION) so its SQL reads the
// same here.
//
// Times are UTC microseconds since the Unix epoch (INTEGER in SQLite, shown
// as "2026-11-30T06:00:00.123456Z"). They are taken from one clock by
// whoever serialises the writes -- the writer thread here -- and strictly
// increase, so a card's history has one order and (PAYMENT_TIME, CARD_ID,
// STORE_ID) never collides.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/auth.h"
#include "base/status.h"
#include "base/text.h"
#include "base/time.h"

namespace hotrow::metrics {
class Histogram;
}  // namespace hotrow::metrics

namespace hotrow::pointcard {

inline constexpr int64_t kAmountAbsMax = 1000000;
inline constexpr int64_t kHistoryLimitMax = 100;
// A history cursor past 9999-12-31T23:59:59.999999Z is that instant: every
// backend can hold it (PostgreSQL's timestamps end in 294276, int64
// microseconds in 294247), so a huge cursor is the first page, not an error.
inline constexpr int64_t kHistoryCursorMaxUs = 253402300799999999;
inline constexpr int64_t kHistoryLimitDefault = 20;
// Idempotency keys are kept at least 24 h; they are purged after this.
inline constexpr int64_t kIdempotencyRetentionUs = 48ll * 3600 * 1000000;
inline constexpr int64_t kRatePercentMin = 1;
inline constexpr int64_t kRatePercentMax = 100;

// S_ACCOUNT.STATUS. A closed card refuses payments and charges
// (card_closed); it keeps its balance, its history and the credit of grants
// applied before the close.
inline constexpr std::string_view kCardActive = "active";
inline constexpr std::string_view kCardClosed = "closed";

// The credential a write came with, checked inside its transaction: a
// revocation holds on every instance at once.
struct KeyUse {
  std::string key_id;
  std::string secret_sha256;  // hex of SHA-256 of the secret sent
};

struct Card {
  int64_t card_id = 0;
  int64_t balance = 0;  // what the card holds, pending_points included
  int64_t region_id = 0;
  int64_t last_update_us = 0;  // the newest history row's time (or the issue time)
  // Credit of an applied grant not yet written into the card's history (the
  // fold writes it within seconds: docs/pointcard.md#the-grant-protocol).
  int64_t pending_points = 0;
  // |amount| of the card's open holds that have not expired (available is
  // balance - held).
  int64_t held = 0;
  std::optional<std::string> external_ref{};  // the retailer's own id, unique
  std::string status{kCardActive};
  std::optional<int64_t> closed_at_us{};
  bool replayed = false;  // POST /cards, /close: answered from an earlier request with the same key
};

// POST /api/v1/cards: a new card, balance 0. The idempotency key is scoped
// to the route (P_REQUEST_KEY), its fingerprint covers the body.
struct NewCard {
  int64_t region_id = 0;
  std::optional<std::string> external_ref{};  // 1-64 visible code points, no space
  std::optional<std::string> idempotency_key{};
  std::optional<KeyUse> key{};  // a store key's (any store's): checked in the transaction
};

// Closing a card; the key is scoped to the card, as a payment's.
struct CardClose {
  int64_t card_id = 0;
  std::optional<std::string> idempotency_key{};
};

inline constexpr size_t kExternalRefLengthMax = 64;

// The bounds of a history row's optional texts (docs/api.md).
inline constexpr size_t kReferenceLengthMax = 64;  // visible code points, no space
inline constexpr size_t kReasonLengthMax = 200;

// Who wrote a history row (H_TRANSACTION.ACTOR): the admin token, hotrow
// itself (a grant's rows), or a client that gave no credential.
// "key:<keyId>" for a store key comes with the store keys.
inline constexpr std::string_view kActorAdmin = "admin";
inline constexpr std::string_view kActorSystem = "system";
inline constexpr std::string_view kActorAnonymous = "anonymous";

// One H_TRANSACTION row. KIND says what it is: a charge (AMOUNT > 0) or a
// payment (< 0) at a store, or a grant's credit (STORE_ID 0); BALANCE is the
// card's balance after the row. TRANSACTION_ID is unique per database and
// positive (not in time order on PostgreSQL, where a sequence gives it).
struct HistoryRow {
  int64_t payment_time_us = 0;
  int64_t card_id = 0;
  int64_t store_id = 0;
  int64_t amount = 0;
  int64_t balance = 0;
  int64_t transaction_id = 0;
  std::string kind{};                      // "payment", "charge", "grant", "refund", "capture"
  std::string actor{};                     // kActorAdmin, kActorSystem, kActorAnonymous
  std::optional<std::string> reference{};  // the client's, such as an order id
  std::optional<std::string> reason{};
  std::optional<int64_t> refund_of{};  // the transactionId a refund returns (none yet)
};

// "charge" or "payment", by the amount's sign.
inline std::string_view KindOfAmount(int64_t amount) { return amount > 0 ? "charge" : "payment"; }

// GET /api/v1/cards/{id}?asOf=: the card's balance at a time, from its
// history as written (the BALANCE of its newest row at or before it; 0
// before its first).
struct BalanceAsOf {
  int64_t card_id = 0;
  int64_t as_of_us = 0;
  int64_t balance = 0;
};

struct HistoryPage {
  std::vector<HistoryRow> rows;           // newest first
  std::optional<int64_t> next_before_us;  // pass as before= for the next page
};

struct Region {
  int64_t region_id = 0;
  std::string name;
};

struct StoreInfo {
  int64_t store_id = 0;
  std::string zipcode;
  std::string address;
  std::string name;
  int64_t region_id = 0;
  double latitude = 0;
  double longitude = 0;
};

// POST /api/v1/stores: a new store (M_STORE), the next id. The key is
// scoped to the route (P_REQUEST_KEY "stores").
struct NewStore {
  int64_t region_id = 0;
  std::string name{};
  std::string zipcode{};  // 7 digits (M_STORE.STORE_ZIPCODE is varchar(7))
  std::string address{};
  double latitude = 0;   // -90..90
  double longitude = 0;  // -180..180
  std::optional<std::string> idempotency_key{};
};

// Store ids are PostgreSQL ints (M_STORE.STORE_ID int): a larger id names
// no store on any backend.
inline constexpr int64_t kStoreIdMax = 2147483647;
inline constexpr size_t kStoreNameLengthMax = 100;
inline constexpr size_t kStoreAddressLengthMax = 200;

// A store key (M_STORE_KEY): a terminal's credential, "<keyId>.<secret>".
// The server keeps SHA-256 of the secret only (hex), so the key is shown
// once, when it is made. LAST_USED_TIME moves at most once a minute
// (kKeyUseResolutionUs): a terminal's payments do not all write its key's
// row.
struct StoreKey {
  std::string key_id;  // kKeyIdLength lowercase hex digits
  int64_t store_id = 0;
  int64_t created_us = 0;
  std::optional<int64_t> last_used_us{};
  std::optional<int64_t> revoked_us{};
};
inline constexpr size_t kKeyIdLength = kCredentialIdLength;  // base/auth.h: the throttle knows the shape
inline constexpr size_t kKeySecretLength = kCredentialSecretLength;
inline constexpr int64_t kKeyUseResolutionUs = 60'000'000;
// A store has at most this many keys that are not revoked.
inline constexpr int64_t kStoreKeysMax = 100;

// "key:<keyId>", the ACTOR of a row a store key wrote.
inline std::string KeyActor(std::string_view key_id) { return "key:" + std::string(key_id); }

// A point use: a charge (amount > 0) or a payment (amount < 0).
struct Payment {
  int64_t card_id = 0;
  int64_t store_id = 0;
  int64_t amount = 0;
  std::optional<std::string> idempotency_key{};
  std::optional<std::string> reference{};  // 1-64 visible code points
  std::optional<std::string> reason{};     // 1-200 code points, one line
  std::string actor{kActorAnonymous};      // who asked: kept in the row
  std::optional<KeyUse> key{};             // a store key's: checked in the transaction
};

// A refund (POST /api/v1/cards/{id}/transactions/{transactionId}/refund):
// +amount on the card, in a row of kind "refund" that names the refunded
// row (refundOf) and carries its store. Only payment rows are refundable
// (captures too, once holds exist), and their refunds together return at
// most what the payment took. Decided under the card's lock; always keyed.
struct RefundRequest {
  int64_t card_id = 0;
  int64_t transaction_id = 0;       // the refunded row's
  std::optional<int64_t> amount{};  // 1 to what remains refundable; nullopt: all of it
  std::string idempotency_key{};
  std::optional<std::string> reference{};
  std::optional<std::string> reason{};
  std::string actor{kActorAnonymous};
  std::optional<KeyUse> key{};  // must be the refunded row's store's
};

// A hold (P_HOLD): points a store reserves on a card now and captures or
// voids later (POST /api/v1/cards/{id}/holds). While open and unexpired it
// counts in the card's `held`; nothing is in the history until a capture,
// which writes one "capture" row (refundable as a payment is). Status runs
// open -> captured | voided | expired; "expired" is read lazily from
// EXPIRES_TIME (an open hold past it is shown expired, and the card's next
// hold action stamps it).
inline constexpr std::string_view kHoldOpen = "open";
inline constexpr std::string_view kHoldCaptured = "captured";
inline constexpr std::string_view kHoldVoided = "voided";
inline constexpr std::string_view kHoldExpiredStatus = "expired";
inline constexpr int64_t kHoldSecondsMax = 604800;  // 7 days
inline constexpr int64_t kHoldListLimitMax = 100;
// GET /api/v1/cards/{id}/lots: lots per page, at most and by default.
inline constexpr int64_t kLotListLimitMax = 100;

struct Hold {
  int64_t hold_id = 0;
  int64_t card_id = 0;
  int64_t store_id = 0;
  int64_t amount = 0;  // -1,000,000 .. -1
  std::string status{kHoldOpen};
  int64_t created_us = 0;
  int64_t expires_us = 0;
  std::optional<int64_t> ended_us{};         // captured, voided: its time; expired: EXPIRES_TIME
  std::optional<int64_t> capture_id{};       // the capture row's TRANSACTION_ID
  std::optional<int64_t> captured_amount{};  // hold.amount <= it <= -1
  std::string actor{kActorAnonymous};
};
// An open hold past its expiry, as reads show it: expired at EXPIRES_TIME.
inline void ShowExpiry(Hold& h, int64_t now_us) {
  if (h.status == kHoldOpen && h.expires_us <= now_us) {
    h.status = std::string(kHoldExpiredStatus);
    h.ended_us = h.expires_us;
  }
}

// POST /api/v1/cards/{id}/holds.
struct NewHold {
  int64_t card_id = 0;
  int64_t store_id = 0;
  int64_t amount = 0;              // -1,000,000 .. -1
  int64_t expires_in_seconds = 0;  // 1 .. 604,800
  std::optional<std::string> idempotency_key{};
  std::string actor{kActorAnonymous};
  std::optional<KeyUse> key{};  // must be the body's store's
};

// POST /api/v1/cards/{id}/holds/{holdId}/capture or .../void.
struct HoldAction {
  int64_t card_id = 0;
  int64_t hold_id = 0;
  bool capture = false;             // false: void
  std::optional<int64_t> amount{};  // a capture's: hold.amount .. -1; nullopt: the whole hold
  std::optional<std::string> idempotency_key{};
  std::string actor{kActorAnonymous};
  std::optional<KeyUse> key{};  // must be the hold's store's
};

// What a hold write came to: the hold as it is after it, and a capture's
// row. `refusal` (hold_expired) is an answer whose write commits: the hold
// is stamped expired at the card's time, so no later action sees it open.
struct HoldOutcome {
  Hold hold;
  std::optional<HistoryRow> row{};
  bool replayed = false;
  Status refusal{};
};

// A lot (0.13.0): credit that expires, a grant's given with an expiry
// (P_LOT). Payments and holds take from lots in EXPIRES_TIME order, then
// from the card's never-expiring points, which are the rest of its balance
// (charges, refunds, grants without an expiry). From its expiry on, what
// no open hold reserves leaves the card: reads leave it out at once; an
// "expiry" row writes it out at the card's next write or the sweep.
struct Lot {
  int64_t lot_id = 0;
  int64_t card_id = 0;
  int64_t grant_id = 0;
  int64_t amount = 0;     // what the grant gave
  int64_t remaining = 0;  // what is left of it, as a read at its time counts
  int64_t reserved = 0;   // of which open, unexpired holds keep
  int64_t created_us = 0;
  int64_t expires_us = 0;
  bool expired = false;  // its expiry has come at the read's time
};

// GET /api/v1/cards/{id}/lots: the lots with points left, in the order
// payments take them, a page of them, and the never-expiring rest.
struct LotPage {
  std::vector<Lot> lots;
  // Applied expiring credit not folded yet (lot_id 0): lots within seconds.
  std::vector<Lot> pending;
  int64_t never_expiring = 0;            // balance - what all the card's lots have left
  int64_t never_expiring_reserved = 0;   // held - what all its lots reserve
  std::optional<int64_t> next_after_id;  // pass as after= for the next page
};

struct HoldPage {
  std::vector<Hold> holds;                // newest first
  std::optional<int64_t> next_before_id;  // pass as before= for the next page
};

inline Status NoSuchHold(int64_t card_id, int64_t hold_id) {
  return Status::NotFound("card " + std::to_string(card_id) + " has no hold with id " + std::to_string(hold_id));
}
// insufficient_balance for a hold or capture that does not fit what the
// card has available (balance - held).
inline Status NotAvailable(int64_t card_id, int64_t available, int64_t amount, std::string_view what) {
  return {ErrorCode::kInsufficientBalance, "card " + std::to_string(card_id) + " has " + std::to_string(available) +
                                               " point(s) available; " + std::string(what) + " of " +
                                               std::to_string(-amount) + " does not fit"};
}
inline Status HoldExpired(int64_t hold_id, int64_t expires_us) {
  return {ErrorCode::kHoldExpired, "hold " + std::to_string(hold_id) + " expired at " + FormatTime(expires_us)};
}
inline Status HoldNotOpen(int64_t hold_id, std::string_view status) {
  return {ErrorCode::kHoldNotOpen, "hold " + std::to_string(hold_id) + " is " + std::string(status) + " already"};
}
// A capture past what its hold reserves, or more than the card holds.
inline Status CaptureTooLarge(int64_t hold_id, int64_t hold_amount) {
  return Status::InvalidField("amount", "a capture of hold " + std::to_string(hold_id) + " must be from " +
                                            std::to_string(hold_amount) + " to -1");
}

// What a point use came to. Both outcomes are answers (201 or 409), and
// both are kept with an idempotency key so a retry gets the same answer.
struct PaymentOutcome {
  bool refused = false;   // insufficient balance: nothing was written
  HistoryRow row;         // the new row (refused: the card, store and amount asked,
                          // and the balance that did not suffice; no time)
  bool replayed = false;  // answered from an earlier request with the same key
};

struct GrantRequest {
  int64_t from_us = 0;
  int64_t to_us = 0;
  int64_t rate_percent = 0;
  std::optional<std::string> idempotency_key;
  // Grant a period that overlaps an earlier successful grant's. Without it
  // such a grant is refused with period_already_granted (a second grant of
  // a period without a key would double the bonus); the reference's
  // experiment grants one period every 10 s and sets it.
  bool allow_overlap = false;
  // The lots it makes expire (0.13.0, SQLite): at the grant's time plus
  // expires_in_days x 86,400 s (1..kLotDaysMax), or at expires_at_us (a
  // time after the grant's, within kLotDaysMax days). Neither: its credit
  // never expires. The route lets one through at most.
  std::optional<int64_t> expires_in_days{};
  std::optional<int64_t> expires_at_us{};
};

inline constexpr int64_t kLotDaysMax = 3650;
// When a grant made at grant_us makes its lots expire: nullopt, never;
// invalid_field expiresAt for a time not after grant_us or more than
// kLotDaysMax days after it.
Result<std::optional<int64_t>> LotExpiry(const GrantRequest& r, int64_t grant_us);

// period_already_granted, naming the earlier grant.
Status PeriodAlreadyGranted(int64_t grant_id, int64_t from_us, int64_t to_us);
// invalid_field "to" for a period that has not ended by the store's clock.
Status PeriodNotEnded();

struct GrantOutcome {
  int64_t grant_id = 0;
  int64_t cards = 0;
  int64_t points = 0;
  double query_ms = 0;
  double update_ms = 0;  // writing the credits (staging them, on SQLite)
  double commit_ms = 0;  // the commit that made the grant visible
  bool replayed = false;
};

// A grant as GET /api/v1/grants/{id} shows it. Applied: visible in every
// balance, its history rows still being written (folded); folded: done.
struct GrantInfo {
  GrantOutcome outcome;
  int64_t from_us = 0;
  int64_t to_us = 0;
  int64_t rate_percent = 0;
  int64_t applied_at_us = 0;
  std::optional<int64_t> folded_at_us;  // nullopt while applied
  double fold_ms = 0;                   // writing its history rows, after the answer
  std::optional<int64_t> expires_us;    // when its lots expire; nullopt: never
  bool folded() const { return folded_at_us.has_value(); }
};

// hotrow_pointcard_grant_phase_seconds{phase}: query, update, commit
// (routes.cc, when a grant answers) and fold (the store, when it ends).
inline constexpr const char* kGrantPhaseHelp =
    "Time of each phase of a point grant (query, update: writing its credits, commit: making it visible, fold: "
    "writing its history rows after the answer).";
// Its phase="fold" series, observed in nanoseconds by the stores.
metrics::Histogram& GrantFoldSeconds();

// "2026-11-30T06:00:00.123456Z" (base/time.h).
using ::hotrow::FormatTime;
using ::hotrow::FormatTimeTo;
using ::hotrow::kTimeTextMax;
// RFC 3339: "2026-01-01T00:00:00Z", with optional fraction (up to 6 digits)
// and "Z" or a "+09:00"-style offset. nullopt when malformed.
std::optional<int64_t> ParseTime(std::string_view text);
// Microseconds since the epoch, now.
int64_t NowUs();

// The 47 prefectures of Japan, M_REGION's rows.
const std::vector<Region>& Prefectures();

// The error every backend answers for an unknown card.
inline Status NoSuchCard(int64_t card_id) { return Status::NotFound("no card with id " + std::to_string(card_id)); }
inline Status CardIsClosed(int64_t card_id) {
  return {ErrorCode::kCardClosed, "card " + std::to_string(card_id) + " is closed"};
}
inline Status CardKeyMismatch(std::string_view key) {
  return Status(ErrorCode::kIdempotencyMismatch,
                "Idempotency-Key '" + std::string(key) + "' was used for a different request on this card",
                "Idempotency-Key");
}
inline Status NoSuchTransaction(int64_t card_id, int64_t transaction_id) {
  return Status::NotFound("card " + std::to_string(card_id) + " has no transaction with id " +
                          std::to_string(transaction_id));
}
inline Status NotRefundable(int64_t transaction_id, std::string_view kind) {
  const bool vowel = !kind.empty() && std::string_view("aeiou").find(kind[0]) != std::string_view::npos;
  return {ErrorCode::kNotRefundable, "transaction " + std::to_string(transaction_id) + (vowel ? " is an " : " is a ") +
                                         std::string(kind) + "; only payments and captures are refundable"};
}
inline Status RefundExceedsOriginal(int64_t transaction_id, int64_t remaining, int64_t asked) {
  return {ErrorCode::kRefundExceedsOriginal,
          remaining == 0 ? "transaction " + std::to_string(transaction_id) + " is refunded in full already"
                         : "transaction " + std::to_string(transaction_id) + " has " + std::to_string(remaining) +
                               " point(s) left to refund; a refund of " + std::to_string(asked) + " does not fit",
          remaining == 0 ? "" : "amount"};
}
inline Status ExternalRefTaken(std::string_view ref) {
  return {ErrorCode::kAlreadyExists, "a card with externalRef '" + std::string(ref) + "' exists already",
          "externalRef"};
}
inline Status NoSuchStore(int64_t store_id) { return Status::NotFound("no store with id " + std::to_string(store_id)); }
// Store ids run up to kStoreIdMax, one past the largest: a store with the
// last id leaves none (409, nothing written).
inline Status NoStoreIdLeft() {
  return Status::Conflict("no store id is left: a store has id 2147483647, the largest a store id can be");
}
// A store key that is unknown, revoked or not the secret sent: one answer
// for the three, so a guess learns nothing.
inline Status BadStoreKey() {
  return Status(ErrorCode::kUnauthorized, "the store key is unknown, revoked or wrong", "Authorization");
}
inline Status KeyOfAnotherStore(int64_t key_store, int64_t store_id) {
  return Status(
      ErrorCode::kForbidden,
      "this store key belongs to store " + std::to_string(key_store) + ", not store " + std::to_string(store_id),
      "Authorization");
}
inline Status NoSuchKey(std::string_view key_id, int64_t store_id) {
  return Status::NotFound("store " + std::to_string(store_id) + " has no key '" + std::string(key_id) + "'");
}
inline Status TooManyKeys(int64_t store_id) {
  return Status::Conflict("store " + std::to_string(store_id) + " has " + std::to_string(kStoreKeysMax) +
                          " keys that are not revoked, the most it may have: revoke one first");
}
inline Status NoSuchGrant(int64_t grant_id) { return Status::NotFound("no grant with id " + std::to_string(grant_id)); }

}  // namespace hotrow::pointcard
