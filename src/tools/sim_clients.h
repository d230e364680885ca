// The simulator's clients (simulator.cc): what a worker does, in-process
// on the service, in-process with the reference's own grant on PostgreSQL,
// or over HTTP against a running server. Included by simulator.cc only.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/await.h"
#include "db/postgres.h"
#include "http/client.h"
#include "http/json.h"
#include "ops/log.h"
#include "pointcard/service.h"

namespace hotrow::tools::sim {

using namespace hotrow::pointcard;
using Clock = std::chrono::steady_clock;

// What a worker does, in-process or over HTTP.
class SimClient {
 public:
  virtual ~SimClient() = default;
  virtual Result<Card> GetCard(int64_t id) = 0;
  virtual Result<std::vector<int64_t>> Stores(int64_t region) = 0;
  // `key` is the payment's Idempotency-Key: one per logical payment, the
  // same on every retry, so a retry after an indeterminate failure (a
  // timeout, a lost connection) cannot pay twice.
  virtual Result<PaymentOutcome> Pay(int64_t card, int64_t store, int64_t amount, const std::string& key) = 0;
  virtual Result<GrantOutcome> Grant(int64_t from, int64_t to, int64_t rate) = 0;
  virtual Result<GrantInfo> GetGrant(int64_t id) = 0;

  // Polls until the grant's history rows are written (its window ends
  // then); its fold time, or the error that stopped the wait.
  Result<double> WaitFolded(int64_t id, const std::atomic<bool>& stop) {
    while (!stop) {
      auto g = GetGrant(id);
      if (!g.ok()) return g.status();
      if (g->folded()) return g->fold_ms;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return Status::Unavailable("the run ended before the grant folded");
  }
};

template <typename T, typename Call>
Result<T> Wait(Call call) {
  return Await<Result<T>>(std::move(call));
}

class InProcessClient : public SimClient {
 public:
  explicit InProcessClient(PointCardService& s) : s_(s) {}
  Result<Card> GetCard(int64_t id) override {
    return Wait<Card>([&](auto done) { s_.GetCard(id, done); });
  }
  Result<std::vector<int64_t>> Stores(int64_t region) override {
    auto stores = s_.StoresOf(region);
    if (!stores.ok()) return stores.status();
    std::vector<int64_t> ids;
    for (const auto& st : **stores) ids.push_back(st.store_id);
    return ids;
  }
  Result<PaymentOutcome> Pay(int64_t card, int64_t store, int64_t amount, const std::string& key) override {
    return Wait<PaymentOutcome>([&](auto done) { s_.Pay(Payment{card, store, amount, key}, done); });
  }
  Result<GrantOutcome> Grant(int64_t from, int64_t to, int64_t rate) override {
    return Wait<GrantOutcome>([&](auto done) { s_.Grant(GrantRequest{from, to, rate, std::nullopt, true}, done); });
  }
  Result<GrantInfo> GetGrant(int64_t id) override {
    return Wait<GrantInfo>([&](auto done) { s_.GetGrant(id, done); });
  }

 private:
  PointCardService& s_;
};

// The reference's grant on PostgreSQL (its section 5.4), for the modes that
// reproduce its runs: one transaction at `isolation`, no lock, no retry.
// The query joins S_ACCOUNT for each card's balance; then, per 1,000 cards
// (its executeBatch), one statement sets BALANCE to the balance the query
// read plus the bonus and writes the history rows. It writes no P_GRANT row,
// so it answers folded at once. Payments stay the store's (hotrow_pay_v7).
class ReferenceGrantClient final : public InProcessClient {
 public:
  ReferenceGrantClient(PointCardService& s, std::unique_ptr<db::pg::Connection> conn, std::string isolation)
      : InProcessClient(s), conn_(std::move(conn)), isolation_(std::move(isolation)) {}
  Result<GrantOutcome> Grant(int64_t from, int64_t to, int64_t rate) override {
    auto t0 = Clock::now();
    Result<GrantOutcome> g = Run(from, to, rate, t0);
    if (!g.ok()) log::WarnIfFailed(conn_->Exec("ROLLBACK"), "ROLLBACK of the reference's grant");
    return g;
  }
  Result<GrantInfo> GetGrant(int64_t id) override {
    GrantInfo g;
    g.outcome.grant_id = id;
    g.folded_at_us = NowUs();
    return g;
  }

 private:
  static constexpr size_t kBatch = 1000;
  static double Ms(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  }
  Result<GrantOutcome> Run(int64_t from, int64_t to, int64_t rate, Clock::time_point t0) {
    if (Status s = conn_->Exec("BEGIN ISOLATION LEVEL " + isolation_ + "; SET LOCAL statement_timeout = 0"); !s.ok())
      return s;
    auto rows = conn_->Query(
        "SELECT T.CARD_ID, A.BALANCE, SUM(T.AMOUNT) FROM H_TRANSACTION T JOIN S_ACCOUNT A ON T.CARD_ID = A.CARD_ID "
        "WHERE T.PAYMENT_TIME >= hotrow_ts($1) AND T.PAYMENT_TIME < hotrow_ts($2) AND T.AMOUNT > 0 AND T.STORE_ID > 0 "
        "GROUP BY T.CARD_ID, A.BALANCE",
        {std::to_string(from), std::to_string(to)});
    if (!rows.ok()) return rows.status();
    auto t1 = Clock::now();
    GrantOutcome g;
    std::string ids, balances, bonuses;
    size_t in_batch = 0;
    auto flush = [&]() -> Status {
      if (in_batch == 0) return Status::Ok();
      auto done = conn_->Query(
          "WITH v AS (SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) v(id, balance, bonus)), "
          "u AS (UPDATE S_ACCOUNT a SET BALANCE = v.balance + v.bonus, "
          "LAST_UPDATE = GREATEST(clock_timestamp() AT TIME ZONE 'UTC', a.LAST_UPDATE + interval '1 microsecond') "
          "FROM v WHERE a.CARD_ID = v.id RETURNING a.CARD_ID, v.bonus, a.BALANCE, a.LAST_UPDATE) "
          "INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND) "
          "SELECT LAST_UPDATE, CARD_ID, 0, bonus, BALANCE, 'grant' FROM u "
          "ON CONFLICT (PAYMENT_TIME, CARD_ID, STORE_ID) DO UPDATE SET AMOUNT = excluded.AMOUNT, "
          "BALANCE = excluded.BALANCE",
          {"{" + ids + "}", "{" + balances + "}", "{" + bonuses + "}"});
      ids.clear(), balances.clear(), bonuses.clear();
      in_batch = 0;
      return done.status();
    };
    for (int i = 0; i < rows->size(); ++i) {
      int64_t bonus = rows->Int(i, 2) * rate / 100;
      if (bonus <= 0) continue;
      const char* sep = in_batch ? "," : "";
      ids.append(sep).append(rows->Text(i, 0));
      balances.append(sep).append(rows->Text(i, 1));
      bonuses.append(sep).append(std::to_string(bonus));
      ++g.cards;
      g.points += bonus;
      if (++in_batch == kBatch) {
        if (Status s = flush(); !s.ok()) return s;
      }
    }
    if (Status s = flush(); !s.ok()) return s;
    auto t2 = Clock::now();
    if (Status s = conn_->Exec("COMMIT"); !s.ok()) return s;
    auto t3 = Clock::now();
    g.grant_id = ++grants_;
    g.query_ms = Ms(t0, t1);
    g.update_ms = Ms(t1, t2);
    g.commit_ms = Ms(t2, t3);
    return g;
  }
  std::unique_ptr<db::pg::Connection> conn_;
  const std::string isolation_;
  int64_t grants_ = 0;
};

// An HTTP exchange; a transport failure as unavailable.
inline Result<http::ClientResponse> CallHttp(http::HttpClient& client, const char* method, const std::string& target,
                                             const std::string& body, const http::Headers& headers) {
  try {
    return client.Request(method, target, body, headers);
  } catch (const std::exception& e) {
    return Status::Unavailable(e.what());
  }
}

// One store key per store (--store-keys): the tills of a server run with
// --require-store-keys. Made before the runs (a key made inside a timed
// payment would be measured as the payment), read-only while they run, and
// revoked after them, so repeated simulations do not pile up keys (a store
// has at most 100).
class StoreKeyRing {
 public:
  explicit StoreKeyRing(std::string admin_token) : admin_token_(std::move(admin_token)) {}

  // A key for every store of every region (47), through `client`; the
  // first refusal ends it (a wrong admin token, a store with 100 keys).
  Status MakeAll(http::HttpClient& client, const std::function<void(const std::string&)>& progress) {
    std::vector<int64_t> stores;
    for (int region = 1; region <= 47; ++region) {
      auto r = Call(client, "GET", "/api/v1/regions/" + std::to_string(region) + "/stores", "");
      if (!r.ok()) return r.status();
      if (r->status != 200) return Status::Unavailable("GET stores answered " + std::to_string(r->status));
      auto ids = http::ExtractIntegers(r->body, "stores", "storeId");
      if (!ids.ok()) return ids.status();
      stores.insert(stores.end(), ids->begin(), ids->end());
    }
    for (size_t i = 0; i < stores.size(); ++i) {
      auto r = Call(client, "POST", "/api/v1/stores/" + std::to_string(stores[i]) + "/keys", "{}");
      if (!r.ok()) return r.status();
      if (r->status != 201)
        return Status::Unavailable("making a key of store " + std::to_string(stores[i]) + " answered " +
                                   std::to_string(r->status) + ": " + r->body);
      auto obj = http::JsonObject::Parse(r->body);
      if (!obj.ok()) return obj.status();
      auto key = obj->String("key");
      auto key_id = obj->String("keyId");
      if (!key.ok() || !key_id.ok()) return Status::Internal("a made key without key or keyId: " + r->body);
      bearers_[stores[i]] = "Bearer " + *key;
      key_ids_.emplace_back(stores[i], *key_id);
      if (i % 500 == 499) progress("store keys: " + std::to_string(i + 1) + "/" + std::to_string(stores.size()));
    }
    return Status::Ok();
  }
  // Revokes the keys MakeAll made; a failure is logged (the keys stay).
  void RevokeAll(http::HttpClient& client) {
    for (const auto& [store, key_id] : key_ids_) {
      auto r = Call(client, "DELETE", "/api/v1/stores/" + std::to_string(store) + "/keys/" + key_id, "");
      if (!r.ok() || r->status != 204) {
        log::Warn("store keys: revoking the simulator's key {} of store {} failed; revoke it by hand", key_id, store);
        return;
      }
    }
  }
  // "Bearer <key>" of the store, or nullptr for a store MakeAll did not see.
  const std::string* Bearer(int64_t store) const {
    auto it = bearers_.find(store);
    return it == bearers_.end() ? nullptr : &it->second;
  }

 private:
  Result<http::ClientResponse> Call(http::HttpClient& client, const char* method, const std::string& target,
                                    const std::string& body) {
    return CallHttp(client, method, target, body, {{"Authorization", "Bearer " + admin_token_}});
  }
  const std::string admin_token_;
  std::map<int64_t, std::string> bearers_;
  std::vector<std::pair<int64_t, std::string>> key_ids_;
};

class HttpSimClient final : public SimClient {
 public:
  // `keys`: pay with the store's key (nullptr: anonymously).
  HttpSimClient(const std::string& host, uint16_t port, std::string admin_token, const StoreKeyRing* keys = nullptr)
      : client_(host, port, std::chrono::seconds(60)), admin_token_(std::move(admin_token)), keys_(keys) {}

  Result<Card> GetCard(int64_t id) override {
    auto r = Call("GET", "/api/v1/cards/" + std::to_string(id), {});
    if (!r.ok()) return r.status();
    if (r->status != 200) return Status::Unavailable("GET card answered " + std::to_string(r->status));
    auto obj = http::JsonObject::Parse(r->body);
    if (!obj.ok()) return obj.status();
    auto balance = obj->Integer("balance", INT64_MIN, INT64_MAX);
    if (!balance.ok()) return balance.status();
    return Card{id, *balance, 0, 0};
  }
  Result<std::vector<int64_t>> Stores(int64_t region) override {
    auto r = Call("GET", "/api/v1/regions/" + std::to_string(region) + "/stores", {});
    if (!r.ok()) return r.status();
    if (r->status != 200) return Status::Unavailable("GET stores answered " + std::to_string(r->status));
    return http::ExtractIntegers(r->body, "stores", "storeId");
  }
  Result<PaymentOutcome> Pay(int64_t card, int64_t store, int64_t amount, const std::string& key) override {
    std::string body = "{\"storeId\":" + std::to_string(store) + ",\"amount\":" + std::to_string(amount) + "}";
    http::Headers headers = {{"Idempotency-Key", key}};
    if (keys_) {
      const std::string* bearer = keys_->Bearer(store);
      if (!bearer) return Status::NotFound("no store key of store " + std::to_string(store));
      headers.emplace_back("Authorization", *bearer);
    }
    auto r = Call("POST", "/api/v1/cards/" + std::to_string(card) + "/transactions", body, headers);
    if (!r.ok()) return r.status();
    PaymentOutcome out;
    if (r->status == 409 && r->body.find("insufficient_balance") != std::string::npos) {
      out.refused = true;
      return out;
    }
    if (r->status != 201) return Status::Unavailable("point use answered " + std::to_string(r->status));
    return out;
  }
  Result<GrantOutcome> Grant(int64_t from, int64_t to, int64_t rate) override {
    std::string body = "{\"from\":\"" + FormatTime(from) + "\",\"to\":\"" + FormatTime(to) +
                       "\",\"ratePercent\":" + std::to_string(rate) + ",\"allowOverlap\":true}";
    auto r = Call("POST", "/api/v1/grants", body, {{"Authorization", "Bearer " + admin_token_}});
    if (!r.ok()) return r.status();
    if (r->status != 201) return Status::Unavailable("grant answered " + std::to_string(r->status) + ": " + r->body);
    auto obj = http::JsonObject::Parse(r->body);
    if (!obj.ok()) return obj.status();
    GrantOutcome g;
    g.grant_id = obj->Integer("grantId", 0, INT64_MAX).value();
    g.cards = obj->Integer("cards", 0, INT64_MAX).value();
    g.points = obj->Integer("points", 0, INT64_MAX).value();
    g.query_ms = obj->Number("queryMs").ok() ? *obj->Number("queryMs") : 0;
    g.update_ms = obj->Number("updateMs").ok() ? *obj->Number("updateMs") : 0;
    g.commit_ms = obj->Number("commitMs").ok() ? *obj->Number("commitMs") : 0;
    return g;
  }
  Result<GrantInfo> GetGrant(int64_t id) override {
    auto r = Call("GET", "/api/v1/grants/" + std::to_string(id), {}, {{"Authorization", "Bearer " + admin_token_}});
    if (!r.ok()) return r.status();
    if (r->status != 200) return Status::Unavailable("GET grant answered " + std::to_string(r->status));
    auto obj = http::JsonObject::Parse(r->body);
    if (!obj.ok()) return obj.status();
    GrantInfo g;
    g.outcome.grant_id = id;
    if (auto state = obj->String("state"); state.ok() && *state == "folded") {
      g.folded_at_us = 0;
      g.fold_ms = obj->Number("foldMs").ok() ? *obj->Number("foldMs") : 0;
    }
    return g;
  }

 private:
  Result<http::ClientResponse> Call(const char* method, const std::string& target, const std::string& body,
                                    const http::Headers& headers = {}) {
    return CallHttp(client_, method, target, body, headers);
  }
  http::HttpClient client_;
  std::string admin_token_;
  const StoreKeyRing* keys_ = nullptr;
};

}  // namespace hotrow::tools::sim
