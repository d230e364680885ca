#include "pointcard/seed.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ops/log.h"
#include "pointcard/model.h"
#include "pointcard/sqlite_store.h"

namespace hotrow::pointcard {

namespace sqlite = db::sqlite;

namespace {

struct Place {
  const char* city;
  double latitude;
  double longitude;
};

// The prefectural capitals, in REGION_ID order, for plausible addresses and
// coordinates.
constexpr std::array<Place, 47> kCapitals = {{
    {"札幌市", 43.06, 141.35},   {"青森市", 40.82, 140.74},   {"盛岡市", 39.70, 141.15},     {"仙台市", 38.27, 140.87},
    {"秋田市", 39.72, 140.10},   {"山形市", 38.24, 140.36},   {"福島市", 37.75, 140.47},     {"水戸市", 36.34, 140.45},
    {"宇都宮市", 36.57, 139.88}, {"前橋市", 36.39, 139.06},   {"さいたま市", 35.86, 139.65}, {"千葉市", 35.61, 140.12},
    {"新宿区", 35.69, 139.69},   {"横浜市", 35.45, 139.64},   {"新潟市", 37.90, 139.02},     {"富山市", 36.70, 137.21},
    {"金沢市", 36.59, 136.63},   {"福井市", 36.07, 136.22},   {"甲府市", 35.66, 138.57},     {"長野市", 36.65, 138.18},
    {"岐阜市", 35.39, 136.72},   {"静岡市", 34.98, 138.38},   {"名古屋市", 35.18, 136.91},   {"津市", 34.73, 136.51},
    {"大津市", 35.00, 135.87},   {"京都市", 35.02, 135.76},   {"大阪市", 34.69, 135.52},     {"神戸市", 34.69, 135.18},
    {"奈良市", 34.69, 135.83},   {"和歌山市", 34.23, 135.17}, {"鳥取市", 35.50, 134.24},     {"松江市", 35.47, 133.05},
    {"岡山市", 34.66, 133.93},   {"広島市", 34.40, 132.46},   {"山口市", 34.19, 131.47},     {"徳島市", 34.07, 134.56},
    {"高松市", 34.34, 134.04},   {"松山市", 33.84, 132.77},   {"高知市", 33.56, 133.53},     {"福岡市", 33.61, 130.42},
    {"佐賀市", 33.25, 130.30},   {"長崎市", 32.74, 129.87},   {"熊本市", 32.79, 130.74},     {"大分市", 33.24, 131.61},
    {"宮崎市", 31.91, 131.42},   {"鹿児島市", 31.56, 130.56}, {"那覇市", 26.21, 127.68},
}};

void GenerateMasters(const SeedOptions& o, std::mt19937_64& rng, std::vector<StoreInfo>* stores) {
  std::uniform_int_distribution<int> region(1, 47), block(1, 9), lot(1, 30), zip(0, 9999999);
  std::uniform_real_distribution<double> jitter(-0.15, 0.15);
  auto micro_degrees = [](double d) { return std::round(d * 1e6) / 1e6; };
  const char* kinds[] = {"駅前店", "中央店", "本店", "北口店", "南口店", "モール店", "東店", "西店"};
  for (int64_t id = 1; id <= o.stores; ++id) {
    int r = region(rng);
    const Place& p = kCapitals[static_cast<size_t>(r - 1)];
    char zipcode[16];
    std::snprintf(zipcode, sizeof zipcode, "%07d", zip(rng));
    std::string address = Prefectures()[static_cast<size_t>(r - 1)].name + p.city + std::to_string(block(rng)) + "-" +
                          std::to_string(lot(rng)) + "-" + std::to_string(lot(rng));
    std::string name = std::string("ホットロウ") + p.city + kinds[id % 8] + " #" + std::to_string(id);
    double lat = micro_degrees(p.latitude + jitter(rng)), lon = micro_degrees(p.longitude + jitter(rng));
    stores->push_back({id, zipcode, address, name, r, lat, lon});
  }
}

// Inserts into SQLite, in one transaction; builds the card index at the end
// from sorted data rather than row by row.
class SqliteSink final : public PointCardSink {
 public:
  explicit SqliteSink(sqlite::Connection& conn) : conn_(conn) {}
  Status Begin() { return conn_.Exec("BEGIN IMMEDIATE; DROP INDEX IF EXISTS H_TRANSACTION_CARD_TIME;"); }
  Status AddRegion(const Region& r) override {
    auto q = conn_.Prepare("INSERT OR REPLACE INTO M_REGION (REGION_ID, REGION_NAME) VALUES (?1, ?2)");
    if (!q.ok()) return q.status();
    return q->Bind(1, r.region_id).Bind(2, r.name).Run();
  }
  Status AddStore(const StoreInfo& s) override {
    auto q = conn_.Prepare(
        "INSERT INTO M_STORE (STORE_ID, STORE_ZIPCODE, STORE_ADDRESS, STORE_NAME, REGION_ID, S_LATITUDE, "
        "S_LONGITUDE) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    if (!q.ok()) return q.status();
    q->Bind(1, s.store_id).Bind(2, s.zipcode).Bind(3, s.address).Bind(4, s.name).Bind(5, s.region_id);
    return q->BindDouble(6, s.latitude).BindDouble(7, s.longitude).Run();
  }
  Status AddCard(const Card& c) override {
    auto q = conn_.Prepare("INSERT INTO S_ACCOUNT (CARD_ID, BALANCE, REGION_ID, LAST_UPDATE) VALUES (?1, ?2, ?3, ?4)");
    if (!q.ok()) return q.status();
    return q->Bind(1, c.card_id).Bind(2, c.balance).Bind(3, c.region_id).Bind(4, c.last_update_us).Run();
  }
  Status AddHistory(const HistoryRow& r) override {
    if (last_transaction_id_ == 0) {
      auto last = LastTransactionId(conn_);
      if (!last.ok()) return last.status();
      last_transaction_id_ = *last;
    }
    auto q = conn_.Prepare(
        "INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND, TRANSACTION_ID, ACTOR) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'anonymous')");
    if (!q.ok()) return q.status();
    return q->Bind(1, r.payment_time_us)
        .Bind(2, r.card_id)
        .Bind(3, r.store_id)
        .Bind(4, r.amount)
        .Bind(5, r.balance)
        .Bind(6, KindOfAmount(r.amount))
        .Bind(7, ++last_transaction_id_)
        .Run();
  }
  Status Finish() override {
    if (Status s = CreatePointCardSchema(conn_); !s.ok()) return s;  // the card index
    return conn_.Exec("COMMIT");
  }
  void Abort() { log::WarnIfFailed(conn_.Exec("ROLLBACK"), "seed: ROLLBACK"); }

 private:
  sqlite::Connection& conn_;
  int64_t last_transaction_id_ = 0;  // read at the first row
};

}  // namespace

Status GeneratePointCard(const SeedOptions& o, PointCardSink& sink,
                         const std::function<void(int64_t, int64_t)>& progress) {
  std::mt19937_64 rng(o.seed);
  int64_t end = o.period_end_us ? o.period_end_us : NowUs() - 1000000;
  int64_t start = end - o.period_us;
  int64_t total = o.cards + o.history, done = 0;

  for (const auto& r : Prefectures())
    if (Status s = sink.AddRegion(r); !s.ok()) return s;
  std::vector<StoreInfo> stores;
  GenerateMasters(o, rng, &stores);
  for (const auto& st : stores)
    if (Status s = sink.AddStore(st); !s.ok()) return s;

  // Which card each history row belongs to.
  std::vector<uint32_t> per_card(static_cast<size_t>(o.cards) + 1, 0);
  std::uniform_int_distribution<int64_t> any_card(1, o.cards), any_store(1, o.stores), offset(0, o.period_us - 1);
  for (int64_t i = 0; i < o.history; ++i) ++per_card[static_cast<size_t>(any_card(rng))];

  std::vector<HistoryRow> rows;
  rows.reserve(static_cast<size_t>(o.history));
  std::uniform_int_distribution<int> region(1, 47), coin(0, 1);
  std::uniform_int_distribution<int64_t> charge(10, 100);  // x100 points
  std::vector<int64_t> times;
  for (int64_t card = 1; card <= o.cards; ++card) {
    uint32_t k = per_card[static_cast<size_t>(card)];
    times.clear();
    for (uint32_t i = 0; i < k; ++i) times.push_back(start + offset(rng));
    std::sort(times.begin(), times.end());
    for (size_t i = 1; i < times.size(); ++i) times[i] = std::max(times[i], times[i - 1] + 1);  // distinct
    int64_t balance = 0, last = start;
    for (size_t i = 0; i < times.size(); ++i) {
      int64_t amount;
      if (i == 0 || balance < 100 || coin(rng) == 0) {
        amount = charge(rng) * 100;  // the opening row is always a charge
      } else {
        amount = -std::uniform_int_distribution<int64_t>(1, balance / 100)(rng) * 100;
      }
      balance += amount;
      rows.push_back({times[i], card, any_store(rng), amount, balance});
      last = times[i];
    }
    if (Status s = sink.AddCard({card, balance, region(rng), last}); !s.ok()) return s;
    if (progress && (++done % 20000 == 0)) progress(done, total);
  }
  // In primary-key order: appends instead of random B-tree inserts.
  std::sort(rows.begin(), rows.end(), [](const HistoryRow& a, const HistoryRow& b) {
    return std::tie(a.payment_time_us, a.card_id, a.store_id) < std::tie(b.payment_time_us, b.card_id, b.store_id);
  });
  for (const HistoryRow& r : rows) {
    if (Status s = sink.AddHistory(r); !s.ok()) return s;
    if (progress && (++done % 20000 == 0)) progress(done, total);
  }
  if (Status s = sink.Finish(); !s.ok()) return s;
  if (progress) progress(total, total);
  return Status::Ok();
}

Status SeedPointCard(sqlite::Connection& conn, const SeedOptions& o,
                     const std::function<void(int64_t, int64_t)>& progress) {
  if (Status s = CreatePointCardSchema(conn); !s.ok()) return s;
  auto existing = sqlite::QueryInt(conn, "SELECT COUNT(*) FROM S_ACCOUNT");
  if (!existing.ok()) return existing.status();
  if (*existing > 0)
    return Status::Conflict("the database already holds " + std::to_string(*existing) +
                            " card(s); seed a fresh database or pass --replace");
  SqliteSink sink(conn);
  if (Status s = sink.Begin(); !s.ok()) return s;
  Status s = GeneratePointCard(o, sink, progress);
  if (!s.ok()) sink.Abort();
  return s;
}

}  // namespace hotrow::pointcard
