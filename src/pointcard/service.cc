#include "pointcard/service.h"

#include <algorithm>
#include <cassert>
#include <cstdio>

#include <unicode/uchar.h>

#include "base/crypto.h"
#include "ops/log.h"

namespace hotrow::pointcard {

Status PointCardService::Load() {
  regions_.clear();
  stores_by_region_.clear();
  store_region_.clear();
  if (Status s = store_.LoadRegions(&regions_); !s.ok()) return s;
  std::vector<StoreInfo> stores;
  if (Status s = store_.LoadStores(&stores); !s.ok()) return s;
  for (auto& st : stores) {
    store_region_[st.store_id] = st.region_id;
    stores_by_region_[st.region_id].push_back(std::move(st));
  }
  log::Info("point card: {} region(s), {} store(s) in memory", regions_.size(), store_region_.size());
  return Status::Ok();
}

bool PointCardService::IsRegion(int64_t region_id) const {
  for (const auto& r : regions_)
    if (r.region_id == region_id) return true;
  return false;
}

Result<const std::vector<StoreInfo>*> PointCardService::StoresOf(int64_t region_id) const {
  static const std::vector<StoreInfo> kNone;
  if (!IsRegion(region_id)) return Status::NotFound("no region with id " + std::to_string(region_id));
  auto it = stores_by_region_.find(region_id);
  return it == stores_by_region_.end() ? &kNone : &it->second;
}

Result<const StoreInfo*> PointCardService::Store(int64_t store_id) const {
  auto region = store_region_.find(store_id);
  if (region != store_region_.end()) {
    for (const auto& s : stores_by_region_.at(region->second))
      if (s.store_id == store_id) return &s;
  }
  return Status::NotFound("no store with id " + std::to_string(store_id));
}

void PointCardService::GetCard(int64_t card_id, Callback<Result<Card>> done) {
  store_.GetCard(card_id, std::move(done));
}

void PointCardService::BalanceAt(int64_t card_id, int64_t as_of_us, std::function<void(Result<BalanceAsOf>)> done) {
  // The future's balance is not known yet, and the last moments' may still
  // change: a write stamped in them may not have committed.
  if (as_of_us > NowUs() - as_of_settle_us_)
    return done(Status::InvalidField(
        "asOf", "asOf must be at least " + std::to_string(as_of_settle_us_ / 1000) +
                    " ms in the past: writes stamped later may still be committing (the card's balance now is "
                    "GET /api/v1/cards/{cardId})"));
  store_.BalanceAt(card_id, as_of_us, std::move(done));
}

void PointCardService::History(int64_t card_id, int64_t limit, std::optional<int64_t> before_us,
                               std::function<void(Result<HistoryPage>)> done) {
  if (limit < 1 || limit > kHistoryLimitMax) return done(Status::OutOfRange("limit", 1, kHistoryLimitMax));
  if (before_us && *before_us > kHistoryCursorMaxUs) before_us = kHistoryCursorMaxUs;
  store_.History(card_id, limit, before_us, std::move(done));
}

void PointCardService::ListLots(int64_t card_id, int64_t limit, std::optional<int64_t> after_id,
                                std::function<void(Result<LotPage>)> done) {
  if (limit < 1 || limit > kLotListLimitMax) return done(Status::OutOfRange("limit", 1, kLotListLimitMax));
  store_.ListLots(card_id, limit, after_id, std::move(done));
}

namespace {

// A reference is an identifier (an order id, a receipt number): visible
// characters only, no space anywhere, nothing drawn as nothing. After the
// first code point, a mark that draws is part of the character before it
// (Hindi's vowel signs, a decomposed ガ); a variation selector may follow
// an emoji (U+2764 U+FE0F), and a zero-width joiner only an emoji (a ZWJ
// sequence). Every other default-ignorable code point is refused (Hangul
// fillers, zero-width spaces, U+034F, a selector after a letter), so two
// references that look the same are the same bytes.
// An external reference (a card's) follows the same rule.
Status CheckReference(std::string_view v, const char* field = "reference") {
  const TextRule rule{.field = field, .code_points_max = kReferenceLengthMax, .trimmed = true};
  if (Status s = CheckUserText(v, rule); !s.ok()) return s;
  uint32_t previous = 0;
  bool after_emoji = false;  // an emoji, then perhaps its selector or skin tone
  for (size_t i = 0; i < v.size();) {
    const bool first = i == 0;
    auto cp = NextCodePoint(v, &i);
    if (!cp) return Status::InvalidField(field, std::string(field) + " must be valid UTF-8");
    bool ok;
    if (*cp == 0x200D)
      ok = after_emoji;
    else if (!first && IsPartOfPrevious(*cp, previous))
      ok = true;
    else
      ok = IsVisible(*cp) && !IsDefaultIgnorable(*cp);
    if (!ok)
      return Status::InvalidField(field, std::string(field) + " must be 1 to " + std::to_string(kReferenceLengthMax) +
                                             " visible characters, with no space");
    after_emoji = IsPictographic(*cp) ||
                  (after_emoji &&
                   (IsVariationSelector(*cp) || u_hasBinaryProperty(static_cast<UChar32>(*cp), UCHAR_EMOJI_MODIFIER)));
    previous = *cp;
  }
  return Status::Ok();
}

// " name=<bytes>:<text>": length-prefixed, so no text can pass for another
// field (a reason may contain " reference=").
void AppendText(std::string& fingerprint, std::string_view name, const std::optional<std::string>& text) {
  if (!text) return;
  fingerprint.append(" ").append(name).append("=").append(std::to_string(text->size())).append(":").append(*text);
}

// A row's reference and reason, when given.
Status CheckRowTexts(const std::optional<std::string>& reference, const std::optional<std::string>& reason) {
  if (reference) {
    if (Status s = CheckReference(*reference); !s.ok()) return s;
  }
  if (reason) return CheckUserText(*reason, {.field = "reason", .code_points_max = kReasonLengthMax, .trimmed = true});
  return Status::Ok();
}

}  // namespace

void PointCardService::Pay(Payment p, Callback<Result<PaymentOutcome>> done) {
  if (p.amount == 0 || p.amount < -kAmountAbsMax || p.amount > kAmountAbsMax)
    return done(Status::InvalidField("amount", "amount must be a non-zero integer from " +
                                                   std::to_string(-kAmountAbsMax) + " to " +
                                                   std::to_string(kAmountAbsMax)));
  if (Status s = CheckRowTexts(p.reference, p.reason); !s.ok()) return done(s);
  if (p.idempotency_key) {
    if (Status s = ValidateIdempotencyKey(*p.idempotency_key); !s.ok()) return done(s);
  }
  // Existence after every identifier is read (docs/api.md, the error
  // order): the store's in the store's transaction (stores are made while
  // serving, on any instance); ids past a PostgreSQL int name none.
  if (p.store_id > kStoreIdMax) return done(NoSuchStore(p.store_id));
  // The same key with the same fingerprint is the same request (only keyed
  // requests need one).
  std::string fingerprint;
  // Keys that releases before 0.8.0 stored (no reference, no reason) keep
  // their fingerprints.
  if (p.idempotency_key) {
    fingerprint = "pay store=" + std::to_string(p.store_id) + " amount=" + std::to_string(p.amount);
    AppendText(fingerprint, "reference", p.reference);
    AppendText(fingerprint, "reason", p.reason);
  }
  store_.Pay(std::move(p), std::move(fingerprint), std::move(done));
}

void PointCardService::Refund(RefundRequest r, Callback<Result<PaymentOutcome>> done) {
  if (r.amount && (*r.amount < 1 || *r.amount > kAmountAbsMax))
    return done(Status::InvalidField(
        "amount", "amount must be an integer from 1 to " + std::to_string(kAmountAbsMax) + ", or left out for all"));
  if (Status s = CheckRowTexts(r.reference, r.reason); !s.ok()) return done(s);
  if (Status s = ValidateIdempotencyKey(r.idempotency_key); !s.ok()) return done(s);
  // Scoped to the card with the payments' keys: "refund" keeps a payment's
  // fingerprint from ever matching.
  std::string fingerprint = "refund transaction=" + std::to_string(r.transaction_id) +
                            " amount=" + (r.amount ? std::to_string(*r.amount) : std::string("all"));
  AppendText(fingerprint, "reference", r.reference);
  AppendText(fingerprint, "reason", r.reason);
  store_.Refund(std::move(r), std::move(fingerprint), std::move(done));
}

void PointCardService::CreateHold(NewHold h, std::function<void(Result<HoldOutcome>)> done) {
  if (h.amount < -kAmountAbsMax || h.amount > -1)
    return done(Status::InvalidField(
        "amount", "amount must be an integer from -" + std::to_string(kAmountAbsMax) + " to -1: the points to hold"));
  if (h.expires_in_seconds < 1 || h.expires_in_seconds > kHoldSecondsMax)
    return done(Status::InvalidField(
        "expiresInSeconds", "expiresInSeconds must be an integer from 1 to " + std::to_string(kHoldSecondsMax)));
  if (h.store_id > kStoreIdMax) return done(NoSuchStore(h.store_id));
  std::string fingerprint;
  if (h.idempotency_key) {
    if (Status s = ValidateIdempotencyKey(*h.idempotency_key); !s.ok()) return done(s);
    fingerprint = "hold store=" + std::to_string(h.store_id) + " amount=" + std::to_string(h.amount) +
                  " expiresInSeconds=" + std::to_string(h.expires_in_seconds);
  }
  store_.CreateHold(std::move(h), std::move(fingerprint), std::move(done));
}

void PointCardService::EndHold(HoldAction a, std::function<void(Result<HoldOutcome>)> done) {
  if (a.amount && (*a.amount < -kAmountAbsMax || *a.amount > -1))
    return done(Status::InvalidField("amount", "amount must be an integer from -" + std::to_string(kAmountAbsMax) +
                                                   " to -1, or left out for the whole hold"));
  std::string fingerprint;
  if (a.idempotency_key) {
    if (Status s = ValidateIdempotencyKey(*a.idempotency_key); !s.ok()) return done(s);
    fingerprint = std::string(a.capture ? "capture" : "void") + " hold=" + std::to_string(a.hold_id);
    if (a.capture) fingerprint += " amount=" + (a.amount ? std::to_string(*a.amount) : std::string("all"));
  }
  store_.EndHold(std::move(a), std::move(fingerprint), std::move(done));
}

void PointCardService::ListHolds(int64_t card_id, int64_t limit, std::optional<int64_t> before_id,
                                 std::function<void(Result<HoldPage>)> done) {
  if (limit < 1 || limit > kHoldListLimitMax) return done(Status::OutOfRange("limit", 1, kHoldListLimitMax));
  store_.ListHolds(card_id, limit, before_id, std::move(done));
}

namespace {

// An external reference in NFC, then checked: one spelled two ways (a
// precomposed é, or e + U+0301) is one reference, on issue and on lookup.
Status NormalizeExternalRef(std::string& ref) {
  if (IsValidUtf8(ref)) ref = ToNfc(ref);
  return CheckReference(ref, "externalRef");
}

}  // namespace

void PointCardService::CreateStore(NewStore store, std::function<void(Result<std::pair<StoreInfo, bool>>)> done) {
  // -0 is 0: SQLite stores it as 0, and a retry sending 0 is the same request.
  store.latitude += 0.0;
  store.longitude += 0.0;
  if (Status s = CheckUserText(store.name, {.field = "name", .code_points_max = kStoreNameLengthMax, .trimmed = true});
      !s.ok())
    return done(s);
  if (store.zipcode.size() != 7 ||
      !std::all_of(store.zipcode.begin(), store.zipcode.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return done(Status::InvalidField("zipcode", "zipcode must be 7 digits, such as 1000001"));
  if (Status s = CheckUserText(store.address,
                               {.field = "address", .code_points_max = kStoreAddressLengthMax, .trimmed = true});
      !s.ok())
    return done(s);
  if (!(store.latitude >= -90 && store.latitude <= 90))
    return done(Status::InvalidField("latitude", "latitude must be a number from -90 to 90"));
  if (!(store.longitude >= -180 && store.longitude <= 180))
    return done(Status::InvalidField("longitude", "longitude must be a number from -180 to 180"));
  if (store.idempotency_key) {
    if (Status s = ValidateIdempotencyKey(*store.idempotency_key); !s.ok()) return done(s);
  }
  if (!IsRegion(store.region_id))
    return done(Status::InvalidField(
        "regionId", "no region with id " + std::to_string(store.region_id) + " (GET /api/v1/regions lists them)"));
  std::string fingerprint;
  if (store.idempotency_key) {
    char coordinates[96];
    snprintf(coordinates, sizeof coordinates, " latitude=%.17g longitude=%.17g", store.latitude, store.longitude);
    fingerprint = "store region=" + std::to_string(store.region_id) + coordinates;
    AppendText(fingerprint, "name", store.name);
    AppendText(fingerprint, "zipcode", store.zipcode);
    AppendText(fingerprint, "address", store.address);
  }
  store_.CreateStore(std::move(store), std::move(fingerprint), std::move(done));
}

void PointCardService::FindStore(int64_t store_id, std::function<void(Result<StoreInfo>)> done) {
  if (store_id > kStoreIdMax) return done(NoSuchStore(store_id));
  store_.GetStore(store_id, std::move(done));
}

void PointCardService::ListStores(int64_t region_id, std::function<void(Result<std::vector<StoreInfo>>)> done) {
  if (!IsRegion(region_id)) return done(Status::NotFound("no region with id " + std::to_string(region_id)));
  store_.ListStores(region_id, std::move(done));
}

void PointCardService::CreateStoreKey(int64_t store_id,
                                      std::function<void(Result<std::pair<StoreKey, std::string>>)> done) {
  if (store_id > kStoreIdMax) return done(NoSuchStore(store_id));
  StoreKey key{.key_id = RandomToken(kKeyIdLength / 2), .store_id = store_id};
  std::string secret = RandomToken(kKeySecretLength / 2);
  std::string digest = HexEncode(Sha256(secret));
  std::string shown = key.key_id + "." + secret;
  store_.CreateStoreKey(std::move(key), std::move(digest),
                        [shown = std::move(shown), done = std::move(done)](Result<StoreKey> r) mutable {
                          if (!r.ok()) return done(r.status());
                          done(std::make_pair(std::move(r).value(), std::move(shown)));
                        });
}

void PointCardService::ListStoreKeys(int64_t store_id, std::function<void(Result<std::vector<StoreKey>>)> done) {
  if (store_id > kStoreIdMax) return done(NoSuchStore(store_id));
  store_.ListStoreKeys(store_id, std::move(done));
}

void PointCardService::RevokeStoreKey(int64_t store_id, std::string key_id,
                                      std::function<void(Result<StoreKey>)> done) {
  if (store_id > kStoreIdMax) return done(NoSuchStore(store_id));
  store_.RevokeStoreKey(store_id, std::move(key_id), std::move(done));
}

std::optional<KeyUse> PointCardService::ParseStoreKey(std::string_view bearer) {
  auto id = NamedCredentialId(bearer);
  if (!id) return std::nullopt;
  return KeyUse{std::string(*id), HexEncode(Sha256(bearer.substr(kKeyIdLength + 1)))};
}

void PointCardService::CreateCard(NewCard card, std::function<void(Result<Card>)> done) {
  if (card.external_ref) {
    if (Status s = NormalizeExternalRef(*card.external_ref); !s.ok()) return done(s);
  }
  if (card.idempotency_key) {
    if (Status s = ValidateIdempotencyKey(*card.idempotency_key); !s.ok()) return done(s);
  }
  if (!IsRegion(card.region_id))
    return done(Status::InvalidField(
        "regionId", "no region with id " + std::to_string(card.region_id) + " (GET /api/v1/regions lists them)"));
  std::string fingerprint;
  if (card.idempotency_key) {
    fingerprint = "card region=" + std::to_string(card.region_id);
    AppendText(fingerprint, "externalRef", card.external_ref);
  }
  store_.CreateCard(std::move(card), std::move(fingerprint), std::move(done));
}

void PointCardService::FindCard(std::string external_ref, std::function<void(Result<std::optional<Card>>)> done) {
  if (Status s = NormalizeExternalRef(external_ref); !s.ok()) return done(s);
  store_.FindCard(std::move(external_ref), std::move(done));
}

void PointCardService::CloseCard(CardClose close, std::function<void(Result<Card>)> done) {
  if (close.idempotency_key) {
    if (Status s = ValidateIdempotencyKey(*close.idempotency_key); !s.ok()) return done(s);
  }
  // No payment's fingerprint starts so ("pay ...").
  store_.CloseCard(std::move(close), "close", std::move(done));
}

void PointCardService::Grant(GrantRequest r, std::function<void(Result<GrantOutcome>)> done) {
  if (r.rate_percent < kRatePercentMin || r.rate_percent > kRatePercentMax)
    return done(Status::OutOfRange("ratePercent", kRatePercentMin, kRatePercentMax));
  if (r.from_us >= r.to_us) return done(Status::InvalidField("to", "the period must have from < to"));
  // Whether the period has ended is decided by the store, inside the
  // grant's transaction, on the clock that stamps payments (the database's
  // on PostgreSQL): an application host whose clock runs ahead must not
  // grant a period that payments are still entering.
  if (r.idempotency_key) {
    if (Status s = ValidateIdempotencyKey(*r.idempotency_key); !s.ok()) return done(s);
  }
  if (r.expires_in_days && r.expires_at_us)
    return done(Status::InvalidField("expiresAt", "give expiresInDays or expiresAt, not both"));
  if (r.expires_in_days && (*r.expires_in_days < 1 || *r.expires_in_days > kLotDaysMax))
    return done(Status::OutOfRange("expiresInDays", 1, kLotDaysMax));
  // Grants without an expiry keep the fingerprints their keys had before
  // 0.13.0.
  std::string fingerprint = "grant from=" + std::to_string(r.from_us) + " to=" + std::to_string(r.to_us) +
                            " rate=" + std::to_string(r.rate_percent) + (r.allow_overlap ? " overlap=allowed" : "") +
                            (r.expires_in_days ? " expires_in_days=" + std::to_string(*r.expires_in_days) : "") +
                            (r.expires_at_us ? " expires_at=" + std::to_string(*r.expires_at_us) : "");
  {
    std::lock_guard lock(grant_mutex_);
    if (grants_stopped_) return done(Status::Unavailable("the server is shutting down"));
    if (grant_running_)
      return done(Status(ErrorCode::kGrantInProgress, "a point grant is already running; retry when it has finished"));
    grant_running_ = true;
  }
  store_.Grant(std::move(r), std::move(fingerprint), [this, done = std::move(done)](Result<GrantOutcome> outcome) {
    {
      std::lock_guard lock(grant_mutex_);
      assert(grant_running_);
      grant_running_ = false;
      grant_finished_.notify_all();
    }
    done(std::move(outcome));  // touches no member: Stop may have returned
  });
}

void PointCardService::GetGrant(int64_t grant_id, std::function<void(Result<GrantInfo>)> done) {
  store_.GetGrant(grant_id, std::move(done));
}

void PointCardService::Stop() {
  {
    std::lock_guard lock(grant_mutex_);
    if (grants_stopped_) return;
    grants_stopped_ = true;
  }
  // The store waits for a running grant to answer (through the writer or
  // the pool, which still run), and tells one that would wait for a fold to
  // give up, so shutdown never waits out a stuck fold.
  store_.Stop();
  std::unique_lock lock(grant_mutex_);
  grant_finished_.wait(lock, [this] { return !grant_running_; });
}

}  // namespace hotrow::pointcard
