// Catalog: the date-plan read model, answering every read without the store.
//
// It holds every live plan by id, a RandomSet of all ids and one per
// category (uniform random pick, with or without a category), and the
// ranking as an ordered set of (likes descending, id ascending).
//
// Consistency: only the commit path writes it (Put / Erase / SetLike are
// called after the commit that made the change durable and before the
// client is answered), so a read that starts after a 2xx sees that write,
// and nothing uncommitted is ever visible. Likes only grow: SetLike keeps
// the larger count, so completions that arrive out of order (several
// database connections, several instances) cannot move a count backwards.
//
// Versions: Put keeps the fields of the newer version (Plan::version) and
// the larger like count, and a deleted id never comes back (ids are never
// reused, so a Put for an erased id is an edit that completed after the
// delete): changes that arrive out of order, from several connections or
// instances, cannot resurrect a plan or bring an old title back.
//
// Rendering: Put renders each plan's JSON up to its like count once, with
// RapidJSON (Plan::json_head), so serving a plan is a copy plus one number.
//
// Concurrency: one writer-preferring RwLock. Readers visit a plan under the
// shared lock (serialising it there, so no copy is made); writers hold the
// exclusive lock for a few hash and tree operations.
//
// Cost: Get O(1); Random O(1); Ranking(k) O(log N + k); Categories O(C log C)
// for C categories; SetLike O(log N).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/rw_lock.h"
#include "dateplan/plan.h"
#include "dateplan/random_set.h"

namespace hotrow::dateplan {

struct RankEntry {
  int64_t id;
  std::string title;
  std::string category;
  int64_t like;
};

struct CategoryCount {
  std::string name;
  size_t count;
};

class Catalog {
 public:
  // Inserts or replaces a plan (its like count included), unless the
  // catalog holds a newer version of it or the plan was erased.
  void Put(Plan plan);
  // False when absent. The id is remembered as erased.
  bool Erase(int64_t id);
  // Raises the plan's like count to `like` if that is larger.
  void SetLike(int64_t id, int64_t like);
  // Replaces every plan at once (readers see the old set or the new one).
  void ReplaceAll(std::vector<Plan> plans);

  // Calls visit(const Plan&) under the shared lock; false when absent.
  template <typename Visit>
  bool With(int64_t id, Visit&& visit) const {
    std::shared_lock lock(mutex_);
    auto it = plans_.find(id);
    if (it == plans_.end()) return false;
    visit(it->second);
    return true;
  }

  // Calls visit(const Plan&) for a uniformly random plan (within `category`
  // when given); false when there is none.
  template <typename Rng, typename Visit>
  bool WithRandom(std::optional<std::string_view> category, Rng& rng, Visit&& visit) const {
    std::shared_lock lock(mutex_);
    const RandomSet<const Plan*>* set = &all_;
    if (category) {
      auto it = categories_.find(*category);
      if (it == categories_.end()) return false;
      set = &it->second;
    }
    if (set->empty()) return false;
    visit(*set->Pick(rng));
    return true;
  }

  // The top `limit` plans by likes (descending), then id (ascending).
  std::vector<RankEntry> Ranking(size_t limit) const;
  // Every category with its number of plans, most plans first, then by name.
  std::vector<CategoryCount> Categories() const;
  size_t size() const;

 private:
  using RankKey = std::pair<int64_t, int64_t>;  // (-like, id)

  void EraseLocked(std::unordered_map<int64_t, Plan>::iterator it);
  void PutLocked(Plan plan);

  mutable RwLock mutex_;
  std::unordered_map<int64_t, Plan> plans_;
  RandomSet<const Plan*> all_;  // plans_ is node-based: pointers stay valid
  std::map<std::string, RandomSet<const Plan*>, std::less<>> categories_;
  std::set<RankKey> ranking_;
  std::unordered_set<int64_t> erased_;  // ids deleted while this catalog ran
};

}  // namespace hotrow::dateplan
