// Board: the in-memory leaderboard of the embedded backend.
//
// Two structures, as Redis keeps for a sorted set (t_zset.c): a hash from
// player to (score, seq) for O(1) lookups, and an order-statistic tree keyed
// by (-score, seq) on a board whose highest score is first (Order::kDesc),
// (score, seq) on one whose lowest is (kAsc) -- ascending key order is rank
// order -- whose nodes know their subtree sizes, so "the entry at position
// p" and "the position of this key" are both O(log N). The tree is
// libstdc++'s policy-based red-black tree (__gnu_pbds::tree with
// tree_order_statistics_node_update). A shared rank (Ranking::kShared) is 1 +
// the position of the first key with that score, one more O(log N) search.
//
//   Top / page (offset, limit):   O(log N + limit)
//   rank of a player:             O(1) hash + O(log N)
//   around-me (K either side):    O(log N + K)
//   set / erase a player:         O(log N)
//
// Profiles: see SetProfile.
//
// Consistency: written only after the commit that made the change durable
// (see db/sqlite_writer.h), so reads never see uncommitted scores.
//
// Thread safety: a writer-preferring RwLock for player lookups. The hot read
// -- a page within the top 100, the reference's "top 10" -- takes no lock at
// all: every change that touches the top 100 or the total publishes a fresh
// immutable snapshot of them (an atomic shared_ptr swap), so a thousand
// readers never queue behind the commit thread, and a descheduled writer
// never stalls them. Cost per change: O(log N) to find out whether the top
// 100 moved, plus O(100) to rebuild it when it did.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/rw_lock.h"
#include "leaderboard/model.h"

namespace hotrow::leaderboard {

class Board {
 public:
  explicit Board(Order order = Order::kDesc, Ranking ranking = Ranking::kUnique);
  ~Board();

  // Sets a player's stored score and sequence number (inserting the player).
  void Set(std::string_view client_id, int64_t score, int64_t seq);
  // Sets it only when `seq` is newer than the stored one (or the player is
  // new): changes that arrive out of order from other instances cannot
  // move a player back.
  void SetIfNewer(std::string_view client_id, int64_t score, int64_t seq);
  // Profiles (display names and metadata) are held apart from the rank
  // structure, for the top kPageLimitMax only: a player costs one bit for
  // "may have a profile" (a bit of the index's slot), and the store of
  // record keeps the profiles. An entry of a marked player whose profile
  // is not held comes back with `profile_unread`: the caller takes a
  // profile_token(), reads those from the store, fills them in, and hands
  // them back to CacheProfiles, which keeps those in the top (and unmarks
  // players the store had none for).
  //
  // SetProfile marks a player on the board, and holds `profile` when the
  // player is in the top and it is newer (its seq) than the one held. With
  // none held, one older than the player's score may be a late answer of
  // an entry removed since: left to the store.
  void SetProfile(std::string_view client_id, std::shared_ptr<const Profile> profile);
  struct ProfileToken {
    uint64_t erases = 0;  // Erase and ReplaceAll
    uint64_t sets = 0;    // SetProfile
  };
  ProfileToken profile_token() const;
  // `found`: the profiles the store held for `asked` (read after `token`
  // was taken). Dropped when a player was erased since; a player whose
  // profile was set since (or any, past the last 128 sets) is neither held
  // nor unmarked (the next read reads it again).
  void CacheProfiles(ProfileToken token, const std::vector<std::string_view>& asked, const ProfileMap& found);
  size_t profiles_held() const;
  // False when absent. The profile goes too.
  bool Erase(std::string_view client_id);
  // Replaces every player at once, marking those that have a profile
  // (none is held until a read of the top hands them back); a player
  // listed twice gets the newer (higher seq) of the two.
  void ReplaceAll(const std::vector<std::pair<std::string, Stored>>& players);

  // The player's entry with its rank, and the K entries either side.
  std::optional<PlayerView> Player(std::string_view client_id, std::optional<int64_t> around) const;
  Page Top(int64_t offset, int64_t limit) const;
  // The entries of those of `client_ids` that are on the board, in rank
  // order (equal shared ranks in sequence order), from one moment.
  std::vector<Entry> Locate(const std::vector<std::string>& client_ids) const;
  int64_t size() const;
  // The 1-based rank an entry (score, seq) has, or would have, now.
  int64_t RankOf(int64_t score, int64_t seq) const;
  // The rank a past entry (score, seq) of `client_id` would have now among
  // the others (a replayed answer: the player may have moved on since, and
  // is not counted twice).
  int64_t RankOfPast(std::string_view client_id, int64_t score, int64_t seq) const;
  Order order() const { return order_; }
  Ranking ranking() const { return ranking_; }

 private:
  struct Snapshot {
    std::vector<Entry> top;  // the first kPageLimitMax entries
    int64_t total = 0;
  };
  void Publish();                                                          // under the exclusive lock
  void SetLocked(std::string_view client_id, int64_t score, int64_t seq);  // under the exclusive lock

  struct Impl;
  const Order order_;
  const Ranking ranking_;
  std::unique_ptr<Impl> impl_;
  mutable RwLock mutex_;
  std::atomic<std::shared_ptr<const Snapshot>> snapshot_;
};

}  // namespace hotrow::leaderboard
