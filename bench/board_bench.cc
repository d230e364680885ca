// The embedded leaderboard's rank structure in-process (leaderboard::Board):
// a player's rank, the top 10 and the friends view of 20 ids on one board
// of N players (Arg; issue 14 asks for the rank lookup's p99 <= 1 ms at
// 10,000,000), each call timed on its own so that the report has
// percentiles, not only a mean: counters p50_us, p99_us, max_us. Also the
// heap the board grew by, per player (bytes_per_player: mallinfo2 before
// and after the fill, so the same structure that serve loads), and
// (NamedBytes) the same with a display name and metadata for every player.
//
//   build/bench/board_bench --benchmark_filter='/10000000'
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "leaderboard/board.h"

namespace {

using hotrow::leaderboard::Board;

struct Filled {
  std::unique_ptr<Board> board;
  double bytes_per_player = 0;
};

// Bytes in use on the heap, mmapped blocks (the index's slot array) included.
size_t Heap() {
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

// One board per size, kept for every benchmark of that size.
Filled& BoardOf(int64_t players) {
  static std::map<int64_t, Filled> boards;
  auto it = boards.find(players);
  if (it != boards.end()) return it->second;
  boards.clear();  // one at a time: 10M players take about a gigabyte
  size_t before = Heap();
  auto board = std::make_unique<Board>();
  std::mt19937_64 rng(1);
  std::normal_distribution<double> score(5000, 1500);
  for (int64_t i = 0; i < players; ++i)
    board->Set("player-" + std::to_string(i), std::max<int64_t>(0, static_cast<int64_t>(score(rng))), i + 1);
  double grown = static_cast<double>(Heap() - before);
  return boards[players] = Filled{std::move(board), grown / static_cast<double>(players)};
}

// Times `call` once per iteration; reports percentiles of those times.
template <typename Call>
void Timed(benchmark::State& state, Call call) {
  Filled& f = BoardOf(state.range(0));
  std::vector<double> us;
  std::mt19937_64 rng(2);
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    call(*f.board, rng);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(us.begin(), us.end());
  auto at = [&](double q) {
    return us[std::min(us.size() - 1, static_cast<size_t>(q * static_cast<double>(us.size())))];
  };
  state.counters["p50_us"] = at(0.5);
  state.counters["p99_us"] = at(0.99);
  state.counters["max_us"] = us.back();
  state.counters["bytes_per_player"] = f.bytes_per_player;
}

void BM_Rank(benchmark::State& state) {
  const int64_t n = state.range(0);
  Timed(state, [n](Board& b, std::mt19937_64& rng) {
    auto view =
        b.Player("player-" + std::to_string(static_cast<int64_t>(rng() % static_cast<uint64_t>(n))), std::nullopt);
    benchmark::DoNotOptimize(view);
  });
}

void BM_Top10(benchmark::State& state) {
  Timed(state, [](Board& b, std::mt19937_64&) {
    auto page = b.Top(0, 10);
    benchmark::DoNotOptimize(page);
  });
}

void BM_Friends20(benchmark::State& state) {
  const int64_t n = state.range(0);
  Timed(state, [n](Board& b, std::mt19937_64& rng) {
    std::vector<std::string> ids;
    for (int i = 0; i < 20; ++i)
      ids.push_back("player-" + std::to_string(static_cast<int64_t>(rng() % static_cast<uint64_t>(n))));
    auto entries = b.Locate(ids);
    benchmark::DoNotOptimize(entries);
  });
}

void BM_Post(benchmark::State& state) {
  const int64_t n = state.range(0);
  int64_t seq = n + 1;
  Timed(state, [n, &seq](Board& b, std::mt19937_64& rng) {
    b.Set("player-" + std::to_string(static_cast<int64_t>(rng() % static_cast<uint64_t>(n))),
          static_cast<int64_t>(rng() % 10000), seq++);
  });
}

// A board whose every player has a display name and metadata: the heap it
// grew by, per player. The Board holds the profiles of its top 100 only
// (the store keeps the rest), so this stays the unnamed board's figure.
void BM_NamedBytes(benchmark::State& state) {
  const int64_t n = state.range(0);
  for (auto _ : state) {
    size_t before = Heap();
    auto board = std::make_unique<Board>();
    std::mt19937_64 rng(1);
    std::normal_distribution<double> score(5000, 1500);
    for (int64_t i = 0; i < n; ++i) {
      std::string id = "player-" + std::to_string(i);
      board->Set(id, std::max<int64_t>(0, static_cast<int64_t>(score(rng))), i + 1);
      board->SetProfile(id, std::make_shared<const hotrow::leaderboard::Profile>(hotrow::leaderboard::Profile{
                                .display_name = "Player " + std::to_string(i),
                                .metadata = R"({"level":)" + std::to_string(i % 100) + R"(,"clan":"north"})",
                                .seq = i + 1}));
    }
    state.counters["bytes_per_player"] = static_cast<double>(Heap() - before) / static_cast<double>(n);
    state.counters["profiles_held"] = static_cast<double>(board->profiles_held());
  }
}

}  // namespace

// By size, so that each board is filled once.
int main(int argc, char** argv) {
  for (int64_t n : {10000, 1000000, 10000000}) {
    using Fn = void (*)(benchmark::State&);
    const std::pair<const char*, Fn> all[] = {
        {"Rank", BM_Rank}, {"Top10", BM_Top10}, {"Friends20", BM_Friends20}, {"Post", BM_Post}};
    for (const auto& [name, fn] : all)
      benchmark::RegisterBenchmark(name, fn)->Arg(n)->Iterations(200000)->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("NamedBytes", BM_NamedBytes)->Arg(1000000)->Iterations(1)->Unit(benchmark::kSecond);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
