#include "leaderboard/board.h"

#include <algorithm>
#include <cassert>
#include <climits>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>

#include <ext/pb_ds/assoc_container.hpp>
#include <ext/pb_ds/tree_policy.hpp>

#include "ops/log.h"

namespace hotrow::leaderboard {

namespace {
using Key = std::pair<int64_t, int64_t>;  // (±score, seq): ascending = rank order
using Tree = __gnu_pbds::tree<Key, std::string, std::less<Key>, __gnu_pbds::rb_tree_tag,
                              __gnu_pbds::tree_order_statistics_node_update>;
using Node = Tree::value_type;  // (key, client id), in a node that stays put while it lives

// Client id -> its node in the tree. The id is kept once, in the node: a
// slot is a pointer to it, whose low bit (nodes are 8-byte aligned) marks a
// player that may have a display name or metadata. Open addressing with
// linear probing, at most 3/4 full, deletion by backward shift (no
// tombstones): 8 bytes a slot, 11-21 bytes a player, against about 88 for a
// std::unordered_map node holding the id again, (score, seq) and its bucket
// (docs/benchmarks.md, "Leaderboard at scale").
class PlayerIndex {
 public:
  static_assert(alignof(Node) >= 2, "the slot's low bit is the profile mark");
  // The player's node (null when absent), and whether it is marked as
  // maybe having a profile.
  struct Found {
    const Node* node = nullptr;
    bool marked = false;
  };
  Found Lookup(std::string_view id) const {
    const uintptr_t* slot = Slot(id);
    return slot ? Found{NodeOf(*slot), (*slot & 1) != 0} : Found{};
  }
  const Node* Find(std::string_view id) const { return Lookup(id).node; }
  bool Marked(std::string_view id) const { return Lookup(id).marked; }
  // Marks or unmarks a player that is present; false when it already was.
  bool Mark(std::string_view id, bool marked) {
    auto* slot = const_cast<uintptr_t*>(Slot(id));
    if (!slot || (*slot & 1) == (marked ? 1u : 0u)) return false;
    *slot ^= 1;
    if (marked)
      ++marked_;
    else
      --marked_;
    return true;
  }
  // Players marked: none, and no lookup is needed to know a player is not.
  size_t marked() const { return marked_; }
  // Adds a node whose id is absent.
  void Add(const Node* node, bool marked = false) {
    if ((size_ + 1) * 4 > slots_.size() * 3) Grow(slots_.empty() ? 16 : slots_.size() * 2);
    AddSlot(reinterpret_cast<uintptr_t>(node) | (marked ? 1 : 0));
    if (marked) ++marked_;
  }
  // Call while the id's node still lives (its id is compared).
  void Erase(std::string_view id) {
    if (slots_.empty()) return;
    size_t hole = Home(id);
    for (;; hole = (hole + 1) & mask_) {
      if (!slots_[hole]) return;
      if (NodeOf(slots_[hole])->second == id) break;
    }
    marked_ -= slots_[hole] & 1;
    // Moves each later entry of the run back into the hole when the hole
    // lies between its home and its slot, so that no probe stops early.
    for (size_t j = (hole + 1) & mask_; slots_[j]; j = (j + 1) & mask_) {
      size_t home = Home(NodeOf(slots_[j])->second);
      if (((j - home) & mask_) >= ((j - hole) & mask_)) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole] = 0;
    --size_;
  }
  void Clear() {
    slots_ = {};
    mask_ = size_ = marked_ = 0;
  }
  // Room for n players without growing.
  void Reserve(size_t n) {
    size_t cap = 16;
    while (n * 4 > cap * 3) cap *= 2;
    if (cap > slots_.size()) Grow(cap);
  }

 private:
  static const Node* NodeOf(uintptr_t slot) { return reinterpret_cast<const Node*>(slot & ~uintptr_t{1}); }
  size_t Home(std::string_view id) const { return std::hash<std::string_view>()(id) & mask_; }
  const uintptr_t* Slot(std::string_view id) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = Home(id);; i = (i + 1) & mask_) {
      if (!slots_[i]) return nullptr;
      if (NodeOf(slots_[i])->second == id) return &slots_[i];
    }
  }
  void AddSlot(uintptr_t slot) {
    size_t i = Home(NodeOf(slot)->second);
    while (slots_[i]) i = (i + 1) & mask_;
    slots_[i] = slot;
    ++size_;
  }
  void Grow(size_t cap) {
    std::vector<uintptr_t> old = std::move(slots_);
    slots_.assign(cap, 0);
    mask_ = cap - 1;
    size_ = 0;
    for (uintptr_t s : old)
      if (s) AddSlot(s);
  }
  std::vector<uintptr_t> slots_;  // 0: empty; a power of two
  size_t mask_ = 0, size_ = 0, marked_ = 0;
};
}  // namespace

struct Board::Impl {
  explicit Impl(Order order, Ranking ranking) : sign(order == Order::kDesc ? -1 : 1), ranking(ranking) {}
  const int64_t sign;  // the key's first half is sign * score (|score| < 2^53: no overflow)
  const Ranking ranking;
  Tree tree;
  PlayerIndex players;
  // The display names and metadata of the marked players (PlayerIndex) in
  // the top kPageLimitMax, as far as they are known: no other player's
  // costs anything here. Others are read from the store (board.h).
  ProfileMap profiles;
  ProfileToken token;  // erases: Erase and ReplaceAll; sets: SetProfile
  // The players (hashes of their ids: 2 KiB a Board at most) of the latest
  // SetProfile calls, by token.sets after each: a read handed back keeps
  // what no set since touched (CacheProfiles; a hash collision only keeps
  // one player less).
  static constexpr size_t kRecentSetsMax = 128;
  std::deque<std::pair<uint64_t, size_t>> recent_sets;
  static size_t IdHash(std::string_view id) { return std::hash<std::string_view>()(id); }

  // The entry's profile as held, or the mark that it must be read.
  void FillProfile(Entry& e) const {
    if (!profiles.empty())
      if (auto it = profiles.find(e.client_id); it != profiles.end()) {
        e.profile = it->second;
        return;
      }
    e.profile_unread = players.marked() > 0 && players.Marked(e.client_id);
  }
  bool InTop(const Key& key) const { return tree.order_of_key(key) < static_cast<size_t>(kPageLimitMax); }

  Key KeyOf(int64_t score, int64_t seq) const { return {sign * score, seq}; }
  // Adds a player that is on neither structure. Sequence numbers are
  // unique, so two players never share a key; if data restored by hand
  // made them, the second is left out (logged) rather than indexed to the
  // first one's node.
  void Insert(const Key& key, std::string id, bool marked = false) {
    auto [node, inserted] = tree.insert({key, std::move(id)});
    if (inserted) return players.Add(&*node, marked);
    log::Error(
        "leaderboard: two players share score {} and sequence number {} ('{}' and another); the other is "
        "left out of the board",
        sign * key.first, key.second, node->second);
  }
  int64_t ScoreOf(const Key& key) const { return sign * key.first; }
  // The rank of the entry at 0-based position `pos` with key `key`.
  int64_t Rank(int64_t pos, const Key& key) const {
    if (ranking == Ranking::kUnique) return pos + 1;
    return static_cast<int64_t>(tree.order_of_key({key.first, INT64_MIN})) + 1;
  }

  // Entries with 0-based positions [from, to) of the tree.
  std::vector<Entry> Range(int64_t from, int64_t to) const {
    std::vector<Entry> out;
    if (from >= to) return out;
    out.reserve(static_cast<size_t>(to - from));
    auto it = tree.find_by_order(static_cast<size_t>(from));
    for (int64_t pos = from; pos < to && it != tree.end(); ++pos, ++it) {
      // Shared ranks: one search for the first entry, then a rank changes
      // only where the score does.
      int64_t rank = ranking == Ranking::kUnique || out.empty()   ? Rank(pos, it->first)
                     : it->first.first == sign * out.back().score ? out.back().rank
                                                                  : pos + 1;
      out.push_back({rank, it->second, ScoreOf(it->first)});
      FillProfile(out.back());
    }
    return out;
  }
};

Board::Board(Order order, Ranking ranking)
    : order_(order),
      ranking_(ranking),
      impl_(std::make_unique<Impl>(order, ranking)),
      snapshot_(std::make_shared<const Snapshot>()) {}
Board::~Board() = default;

void Board::Set(std::string_view client_id, int64_t score, int64_t seq) {
  std::unique_lock lock(mutex_);
  SetLocked(client_id, score, seq);
}

void Board::SetIfNewer(std::string_view client_id, int64_t score, int64_t seq) {
  {
    std::shared_lock lock(mutex_);  // the common case, a stale change, takes no exclusive lock
    const Node* n = impl_->players.Find(client_id);
    if (n && n->first.second >= seq) return;
  }
  std::unique_lock lock(mutex_);
  // Again under the exclusive lock: a newer change may have landed between
  // the two locks, and it must not be overwritten by this older one.
  const Node* n = impl_->players.Find(client_id);
  if (n && n->first.second >= seq) return;
  SetLocked(client_id, score, seq);
}

void Board::SetLocked(std::string_view client_id, int64_t score, int64_t seq) {
  assert(mutex_.HeldExclusively() && "Board::SetLocked without the exclusive lock");
  auto& tree = impl_->tree;
  bool touches_top = true;  // a new player: the total changes
  auto [n, marked] = impl_->players.Lookup(client_id);
  std::string id(client_id);
  if (n) {
    Key old = n->first;
    touches_top = impl_->InTop(old);
    impl_->players.Erase(client_id);  // first: it compares the node's id
    tree.erase(old);
  }
  Key key = impl_->KeyOf(score, seq);
  impl_->Insert(key, std::move(id), marked);
  if (touches_top || impl_->InTop(key)) Publish();
}

void Board::ReplaceAll(const std::vector<std::pair<std::string, Stored>>& players) {
  // In rank order: each insert then walks the same few nodes of the tree's
  // right edge instead of a random path through all of it (a 10M-player
  // board loads several times faster than in the stores' order).
  std::vector<std::pair<Key, size_t>> order;
  order.reserve(players.size());
  for (size_t i = 0; i < players.size(); ++i)
    order.push_back({impl_->KeyOf(players[i].second.score, players[i].second.seq), i});
  std::sort(order.begin(), order.end());
  std::unique_lock lock(mutex_);
  impl_->tree.clear();
  impl_->players.Clear();
  impl_->profiles.clear();
  ++impl_->token.erases;
  impl_->players.Reserve(players.size());
  for (const auto& [key, i] : order) {
    const auto& [id, st] = players[i];
    if (const Node* n = impl_->players.Find(id)) {  // listed twice: the newer change counts
      if (n->first.second > st.seq) continue;
      Key old = n->first;
      impl_->players.Erase(id);
      impl_->tree.erase(old);
    }
    impl_->Insert(key, id, st.has_profile);
  }
  // No profile is held yet: the first read of the top reads them.
  Publish();
}

void Board::SetProfile(std::string_view client_id, std::shared_ptr<const Profile> profile) {
  if (!profile) return;
  std::unique_lock lock(mutex_);
  const Node* player = impl_->players.Find(client_id);
  if (!player) return;
  ++impl_->token.sets;
  impl_->recent_sets.emplace_back(impl_->token.sets, Impl::IdHash(client_id));
  if (impl_->recent_sets.size() > Impl::kRecentSetsMax) impl_->recent_sets.pop_front();
  const bool newly_marked = impl_->players.Mark(client_id, true);
  if (!impl_->InTop(player->first)) return;  // read from the store when shown
  auto it = impl_->profiles.find(client_id);
  if (it != impl_->profiles.end() && it->second->seq >= profile->seq) return;
  // None held: one older than the player's score may be of an entry
  // removed since (a late answer), or not the newest; the store says (the
  // top's entry now says to read it).
  if (it == impl_->profiles.end() && profile->seq < player->first.second) {
    if (newly_marked) Publish();
    return;
  }
  if (it == impl_->profiles.end())
    impl_->profiles.emplace(std::string(client_id), std::move(profile));
  else
    it->second = std::move(profile);
  Publish();
}

Board::ProfileToken Board::profile_token() const {
  std::shared_lock lock(mutex_);
  return impl_->token;
}

void Board::CacheProfiles(ProfileToken token, const std::vector<std::string_view>& asked, const ProfileMap& found) {
  std::unique_lock lock(mutex_);
  if (impl_->token.erases != token.erases) return;  // a player read may be another entry now
  // The players whose profile was set since the token: what was read of
  // them may be older than that (and a set outside the top is not held).
  // When the ring no longer reaches back to the token, every player.
  std::unordered_set<size_t> set_since;
  const bool all_set = impl_->token.sets != token.sets &&
                       (impl_->recent_sets.empty() || impl_->recent_sets.front().first > token.sets + 1);
  for (auto it = impl_->recent_sets.rbegin(); it != impl_->recent_sets.rend() && it->first > token.sets; ++it)
    set_since.insert(it->second);
  bool top_changed = false;
  for (const auto& id : asked) {
    auto [player, marked] = impl_->players.Lookup(id);
    if (!player || !marked) continue;
    const bool unchanged = !all_set && !set_since.count(Impl::IdHash(id));
    auto f = found.find(id);
    if (f == found.end() || !f->second) {
      // The store has none: unmark, unless a profile arrived meanwhile (and
      // publish the top again: its entry says to read the store).
      if (unchanged) {
        impl_->players.Mark(id, false);
        top_changed |= impl_->InTop(player->first);
      }
      continue;
    }
    // Held only when no profile of the player was set since the token: one
    // set outside the top is not held, so a read from before it could not
    // be told from a newer one once the player enters the top.
    if (!unchanged || !impl_->InTop(player->first)) continue;
    auto held = impl_->profiles.find(id);
    if (held == impl_->profiles.end())
      impl_->profiles.emplace(id, f->second);
    else if (held->second->seq < f->second->seq)
      held->second = f->second;
    else
      continue;
    top_changed = true;
  }
  if (top_changed) Publish();
}

size_t Board::profiles_held() const {
  std::shared_lock lock(mutex_);
  return impl_->profiles.size();
}

bool Board::Erase(std::string_view client_id) {
  std::unique_lock lock(mutex_);
  const Node* n = impl_->players.Find(client_id);
  if (!n) return false;
  Key key = n->first;
  impl_->players.Erase(client_id);
  impl_->tree.erase(key);
  if (auto p = impl_->profiles.find(client_id); p != impl_->profiles.end()) impl_->profiles.erase(p);
  ++impl_->token.erases;
  Publish();
  return true;
}

void Board::Publish() {
  auto snap = std::make_shared<Snapshot>();
  snap->total = static_cast<int64_t>(impl_->tree.size());
  snap->top = impl_->Range(0, std::min<int64_t>(kPageLimitMax, snap->total));
  // Profiles of players that left the top are no longer held.
  if (impl_->profiles.size() > 0) {
    size_t shown = 0;
    for (const auto& e : snap->top) shown += e.profile != nullptr;
    if (shown < impl_->profiles.size()) {
      std::unordered_set<std::string_view> in_top;
      for (const auto& e : snap->top) in_top.insert(e.client_id);
      std::erase_if(impl_->profiles, [&](const auto& p) { return !in_top.count(p.first); });
    }
  }
  snapshot_.store(std::move(snap), std::memory_order_release);
}

std::optional<PlayerView> Board::Player(std::string_view client_id, std::optional<int64_t> around) const {
  std::shared_lock lock(mutex_);
  const Node* n = impl_->players.Find(client_id);
  if (!n) return std::nullopt;
  const Key& key = n->first;
  auto position = static_cast<int64_t>(impl_->tree.order_of_key(key));
  PlayerView view{{impl_->Rank(position, key), n->second, impl_->ScoreOf(key)}, std::nullopt};
  impl_->FillProfile(view.entry);
  if (around) {
    int64_t size = static_cast<int64_t>(impl_->tree.size());
    view.around = impl_->Range(std::max<int64_t>(0, position - *around), std::min(size, position + *around + 1));
  }
  return view;
}

std::vector<Entry> Board::Locate(const std::vector<std::string>& client_ids) const {
  std::vector<std::pair<int64_t, Entry>> placed;  // (position, entry)
  {
    std::shared_lock lock(mutex_);
    for (const auto& id : client_ids) {
      const Node* n = impl_->players.Find(id);
      if (!n) continue;
      const Key& key = n->first;
      auto position = static_cast<int64_t>(impl_->tree.order_of_key(key));
      placed.push_back({position, Entry{impl_->Rank(position, key), n->second, impl_->ScoreOf(key)}});
      impl_->FillProfile(placed.back().second);
    }
  }
  std::sort(placed.begin(), placed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Entry> out;
  for (auto& [position, entry] : placed) out.push_back(std::move(entry));
  return out;
}

int64_t Board::RankOf(int64_t score, int64_t seq) const {
  std::shared_lock lock(mutex_);
  Key key = impl_->KeyOf(score, seq);
  return impl_->Rank(static_cast<int64_t>(impl_->tree.order_of_key(key)), key);
}

int64_t Board::RankOfPast(std::string_view client_id, int64_t score, int64_t seq) const {
  std::shared_lock lock(mutex_);
  Key key = impl_->KeyOf(score, seq);
  int64_t rank = impl_->Rank(static_cast<int64_t>(impl_->tree.order_of_key(key)), key);
  const Node* n = impl_->players.Find(client_id);
  if (!n) return rank;
  const Key& now = n->first;
  // The player's entry now, if it counts before the past one, is not another player.
  bool before = impl_->ranking == Ranking::kUnique ? now < key : now.first < key.first;
  return before ? rank - 1 : rank;
}

Page Board::Top(int64_t offset, int64_t limit) const {
  if (offset + limit <= kPageLimitMax) {
    auto snap = snapshot_.load(std::memory_order_acquire);
    int64_t total = snap->total;
    // Shares the snapshot (an aliasing shared_ptr): no copy, no allocation.
    std::shared_ptr<const std::vector<Entry>> top(snap, &snap->top);
    return Page::Slice(std::move(top), offset, limit, total);
  }
  std::shared_lock lock(mutex_);
  int64_t size = static_cast<int64_t>(impl_->tree.size());
  return Page::Own(offset < size ? impl_->Range(offset, std::min(size, offset + limit)) : std::vector<Entry>{}, size);
}

int64_t Board::size() const {
  std::shared_lock lock(mutex_);
  return static_cast<int64_t>(impl_->tree.size());
}

}  // namespace hotrow::leaderboard
