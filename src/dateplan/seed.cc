#include "dateplan/seed.h"

#include <array>
#include <string>
#include <string_view>

#include "dateplan/sqlite_store.h"
#include "ops/log.h"

namespace hotrow::dateplan {

namespace {

struct Theme {
  std::string_view category;
  std::array<std::string_view, 4> places;
  std::array<std::string_view, 4> actions;
  std::array<std::string_view, 4> notes;
};

constexpr std::array<Theme, 6> kJapanese = {{
    {"Indoor",
     {"インドカレー屋", "プラネタリウム", "水族館", "ボードゲームカフェ"},
     {"に行く", "でのんびり過ごす", "を二人で巡る", "で一日遊ぶ"},
     {"インドカレーは穏やかな色になるとなぜか辛くなる", "雨の日でも楽しめる定番コース",
      "予約しておくと待ち時間なしで入れる", "帰りに近くの喫茶店で感想を話すのがおすすめ"}},
    {"Outdoor",
     {"海辺の公園", "河川敷", "山の展望台", "動物園"},
     {"でピクニックする", "を散歩する", "まで歩いてみる", "で夕日を見る"},
     {"お弁当を作って持っていくと盛り上がる", "日焼け止めと飲み物を忘れずに", "夕方の景色が特にきれい",
      "レジャーシートがあると便利"}},
    {"Gourmet",
     {"老舗の寿司屋", "屋台街", "ラーメン横丁", "町中華"},
     {"で食べ歩きする", "のカウンターに座る", "を開拓する", "で乾杯する"},
     {"一品ずつ頼んでシェアすると色々楽しめる", "並ぶ価値のある一杯", "店主のおすすめを聞いてみよう",
      "少し早めの時間に行くと空いている"}},
    {"Cafe",
     {"古民家カフェ", "猫カフェ", "喫茶店", "ブックカフェ"},
     {"でひと休みする", "で本を交換する", "の限定メニューを頼む", "で次の旅行を計画する"},
     {"窓際の席が落ち着く", "季節のケーキが人気", "静かに話せるのでゆっくりできる", "コーヒーの香りで癒される"}},
    {"Art",
     {"美術館", "写真展", "陶芸教室", "ギャラリー"},
     {"を見て回る", "に参加する", "で作品を作る", "の企画展に行く"},
     {"好きな作品を一つずつ選んで見せ合う", "作ったお皿は後日届く", "音声ガイドを借りると理解が深まる",
      "ミュージアムショップも見逃せない"}},
    {"Night",
     {"夜景スポット", "ルーフトップバー", "夜の遊園地", "星空観察会"},
     {"に行く", "でゆっくり話す", "を楽しむ", "に参加する"},
     {"帰りの終電の時間を確認しておこう", "少し寒いので上着を一枚", "写真は三脚があるときれいに撮れる",
      "特別な日にぴったり"}},
}};

constexpr std::array<Theme, 4> kEnglish = {{
    {"Indoor",
     {"a cooking class", "an escape room", "a pottery studio", "a jazz bar"},
     {"Try", "Spend an evening at", "Book", "Sneak away to"},
     {"Pick a night mid-week when it is quiet.", "Great on a rainy day; book a week ahead.",
      "Take photos of what you make together.", "Order the house special and share it."}},
    {"Outdoor",
     {"the riverside trail", "a botanical garden", "the night market", "a hilltop lookout"},
     {"Walk", "Picnic at", "Explore", "Catch the sunset from"},
     {"Bring a blanket and something warm to drink.", "Go early to beat the crowds.",
      "The view at golden hour is unbeatable.", "Comfortable shoes recommended."}},
    {"Gourmet",
     {"a tapas place", "a tiny ramen shop", "a farmers market", "a dessert bar"},
     {"Share small plates at", "Queue together for", "Cook with finds from", "End the night at"},
     {"Order one thing each and swap halfway.", "Cash only, so come prepared.", "Ask what is in season this week.",
      "Save room for the second dessert."}},
    {"Sports",
     {"the bowling alley", "a climbing gym", "the batting cages", "a table-tennis bar"},
     {"Challenge each other at", "Try a beginner session at", "Go wild at", "Have a rematch at"},
     {"Loser buys dinner.", "Rental gear is included.", "Surprisingly fun even if you are bad at it.",
      "Best on a weekday evening."}},
}};

}  // namespace

PlanFields GeneratePlan(std::mt19937_64& rng) {
  auto pick = [&rng](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  PlanFields f;
  if (pick(10) < 7) {
    const Theme& t = kJapanese[pick(kJapanese.size())];
    f.title = std::string(t.places[pick(4)]) + std::string(t.actions[pick(4)]);
    f.content = std::string(t.notes[pick(4)]);
    f.category = std::string(t.category);
  } else {
    const Theme& t = kEnglish[pick(kEnglish.size())];
    f.title = std::string(t.actions[pick(4)]) + " " + std::string(t.places[pick(4)]);
    f.content = std::string(t.notes[pick(4)]) + " " + std::string(t.notes[pick(4)]);
    f.category = std::string(t.category);
  }
  return f;
}

Status SeedPlans(db::sqlite::Connection& conn, int64_t count, uint64_t seed,
                 const std::function<void(int64_t)>& progress) {
  if (Status s = CreateDatePlanSchema(conn); !s.ok()) return s;
  auto existing = db::sqlite::QueryInt(conn, "SELECT COUNT(*) FROM datePlans");
  if (!existing.ok()) return existing.status();
  if (*existing > 0)
    return Status::Conflict("the database already holds " + std::to_string(*existing) +
                            " date plan(s); seed a fresh database or pass --replace");
  std::mt19937_64 rng(seed);
  if (Status s = conn.Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  // Ids 1..count exactly, whatever AUTOINCREMENT remembers from before.
  log::WarnIfFailed(conn.Exec("DELETE FROM sqlite_sequence WHERE name = 'datePlans'"),
                    "seed: resetting the id sequence");
  for (int64_t id = 1; id <= count; ++id) {
    PlanFields f = GeneratePlan(rng);
    auto q = conn.Prepare(R"(INSERT INTO datePlans (id, title, content, category, "like") VALUES (?1, ?2, ?3, ?4, 0))");
    if (!q.ok()) return q.status();
    if (Status s = q->Bind(1, id).Bind(2, f.title).Bind(3, f.content).Bind(4, f.category).Run(); !s.ok()) {
      log::WarnIfFailed(conn.Exec("ROLLBACK"), "seed: ROLLBACK");
      return s;
    }
    if (progress && (id % 5000 == 0 || id == count)) progress(id);
  }
  return conn.Exec("COMMIT");
}

}  // namespace hotrow::dateplan
