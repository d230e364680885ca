#include "pointcard/seed.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <string>
#include <vector>

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
    {"札幌市", 43.06, 141.35},   {"青森市", 40.82, 140.74},   {"盛岡市", 39.70, 141.15},
    {"仙台市", 38.27, 140.87},   {"秋田市", 39.72, 140.10},   {"山形市", 38.24, 140.36},
    {"福島市", 37.75, 140.47},   {"水戸市", 36.34, 140.45},   {"宇都宮市", 36.57, 139.88},
    {"前橋市", 36.39, 139.06},   {"さいたま市", 35.86, 139.65}, {"千葉市", 35.61, 140.12},
    {"新宿区", 35.69, 139.69},   {"横浜市", 35.45, 139.64},   {"新潟市", 37.90, 139.02},
    {"富山市", 36.70, 137.21},   {"金沢市", 36.59, 136.63},   {"福井市", 36.07, 136.22},
    {"甲府市", 35.66, 138.57},   {"長野市", 36.65, 138.18},   {"岐阜市", 35.39, 136.72},
    {"静岡市", 34.98, 138.38},   {"名古屋市", 35.18, 136.91}, {"津市", 34.73, 136.51},
    {"大津市", 35.00, 135.87},   {"京都市", 35.02, 135.76},   {"大阪市", 34.69, 135.52},
    {"神戸市", 34.69, 135.18},   {"奈良市", 34.69, 135.83},   {"和歌山市", 34.23, 135.17},
    {"鳥取市", 35.50, 134.24},   {"松江市", 35.47, 133.05},   {"岡山市", 34.66, 133.93},
    {"広島市", 34.40, 132.46},   {"山口市", 34.19, 131.47},   {"徳島市", 34.07, 134.56},
    {"高松市", 34.34, 134.04},   {"松山市", 33.84, 132.77},   {"高知市", 33.56, 133.53},
    {"福岡市", 33.61, 130.42},   {"佐賀市", 33.25, 130.30},   {"長崎市", 32.74, 129.87},
    {"熊本市", 32.79, 130.74},   {"大分市", 33.24, 131.61},   {"宮崎市", 31.91, 131.42},
    {"鹿児島市", 31.56, 130.56}, {"那覇市", 26.21, 127.68},
}};

struct Row {
  int64_t time;
  int64_t card;
  int64_t store;
  int64_t amount;
  int64_t balance;
};

Status InsertMasters(sqlite::Connection& conn, const SeedOptions& o, std::mt19937_64& rng) {
  for (const auto& r : Prefectures()) {
    auto q = conn.Prepare("INSERT OR REPLACE INTO M_REGION (REGION_ID, REGION_NAME) VALUES (?1, ?2)");
    if (!q.ok()) return q.status();
    if (Status s = q->Bind(1, r.region_id).Bind(2, r.name).Run(); !s.ok()) return s;
  }
  std::uniform_int_distribution<int> region(1, 47), block(1, 9), lot(1, 30), zip(0, 9999999);
  std::uniform_real_distribution<double> jitter(-0.15, 0.15);
  const char* kinds[] = {"駅前店", "中央店", "本店", "北口店", "南口店", "モール店", "東店", "西店"};
  for (int64_t id = 1; id <= o.stores; ++id) {
    int r = region(rng);
    const Place& p = kCapitals[static_cast<size_t>(r - 1)];
    char zipcode[8];
    std::snprintf(zipcode, sizeof zipcode, "%07d", zip(rng));
    std::string address = Prefectures()[static_cast<size_t>(r - 1)].name + p.city + std::to_string(block(rng)) +
                          "-" + std::to_string(lot(rng)) + "-" + std::to_string(lot(rng));
    std::string name = std::string("ホットロウ") + p.city + kinds[id % 8] + " #" + std::to_string(id);
    auto q = conn.Prepare(
        "INSERT INTO M_STORE (STORE_ID, STORE_ZIPCODE, STORE_ADDRESS, STORE_NAME, REGION_ID, S_LATITUDE, "
        "S_LONGITUDE) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    if (!q.ok()) return q.status();
    q->Bind(1, id).Bind(2, std::string_view(zipcode, 7)).Bind(3, address).Bind(4, name).Bind(5, r);
    auto micro_degrees = [](double d) { return std::round(d * 1e6) / 1e6; };
    q->BindDouble(6, micro_degrees(p.latitude + jitter(rng))).BindDouble(7, micro_degrees(p.longitude + jitter(rng)));
    if (Status s = q->Run(); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace

Status SeedPointCard(sqlite::Connection& conn, const SeedOptions& o,
                     const std::function<void(int64_t, int64_t)>& progress) {
  if (Status s = CreatePointCardSchema(conn); !s.ok()) return s;
  auto existing = sqlite::QueryInt(conn, "SELECT COUNT(*) FROM S_ACCOUNT");
  if (!existing.ok()) return existing.status();
  if (*existing > 0)
    return Status::Conflict("the database already holds " + std::to_string(*existing) +
                            " card(s); seed a fresh database or pass --replace");
  std::mt19937_64 rng(o.seed);
  int64_t end = o.period_end_us ? o.period_end_us : NowUs() - 1000000;
  int64_t start = end - o.period_us;
  int64_t total = o.cards + o.history, done = 0;

  // Which card each history row belongs to.
  std::vector<uint32_t> per_card(static_cast<size_t>(o.cards) + 1, 0);
  std::uniform_int_distribution<int64_t> any_card(1, o.cards), any_store(1, o.stores), offset(0, o.period_us - 1);
  for (int64_t i = 0; i < o.history; ++i) ++per_card[static_cast<size_t>(any_card(rng))];

  if (Status s = conn.Exec("BEGIN IMMEDIATE; DROP INDEX IF EXISTS H_TRANSACTION_CARD_TIME;"); !s.ok()) return s;
  auto fail = [&conn](Status s) {
    (void)conn.Exec("ROLLBACK");
    return s;
  };
  if (Status s = InsertMasters(conn, o, rng); !s.ok()) return fail(s);

  std::vector<Row> rows;
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
    auto q = conn.Prepare("INSERT INTO S_ACCOUNT (CARD_ID, BALANCE, REGION_ID, LAST_UPDATE) VALUES (?1, ?2, ?3, ?4)");
    if (!q.ok()) return fail(q.status());
    if (Status s = q->Bind(1, card).Bind(2, balance).Bind(3, region(rng)).Bind(4, last).Run(); !s.ok())
      return fail(s);
    if (progress && (++done % 20000 == 0)) progress(done, total);
  }
  // Insert in primary-key order: appends instead of random B-tree inserts.
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return std::tie(a.time, a.card, a.store) < std::tie(b.time, b.card, b.store);
  });
  for (const Row& r : rows) {
    auto q = conn.Prepare(
        "INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE) VALUES (?1, ?2, ?3, ?4, ?5)");
    if (!q.ok()) return fail(q.status());
    if (Status s = q->Bind(1, r.time).Bind(2, r.card).Bind(3, r.store).Bind(4, r.amount).Bind(5, r.balance).Run();
        !s.ok())
      return fail(s);
    if (progress && (++done % 20000 == 0)) progress(done, total);
  }
  // The card index, built once from sorted data rather than row by row.
  if (Status s = CreatePointCardSchema(conn); !s.ok()) return fail(s);
  if (progress) progress(total, total);
  return conn.Exec("COMMIT");
}

}  // namespace hotrow::pointcard
