// RandomSet: a set of ids with O(1) insert, erase and uniform random pick.
//
// Why: "a random date plan" must give every live plan the same chance, also
// after deletes leave gaps in the ids. The tempting SQL tricks fail that:
// ORDER BY RANDOM() sorts the whole table per request (O(N log N)), and "the
// first id >= a random number" picks a plan that follows a long gap far more
// often than its neighbours (a plan after a gap of g deleted ids is g+1
// times as likely).
//
// Algorithm: the ids live densely in a vector, in no particular order, and a
// hash map gives each id's slot. A pick draws a uniform slot in [0, size)
// (std::uniform_int_distribution rejects the biased tail, so it is exactly
// uniform) and returns the id there. Erase moves the last id into the
// erased slot, so the vector never has holes.
//
// Invariants: ids_[slot_[id]] == id for every member; ids_ has no
// duplicates. Cost: pick O(1); insert and erase O(1) expected; memory about
// 40 bytes per id. Not thread-safe: the Catalog locks around it.
#pragma once

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

namespace hotrow::dateplan {

class RandomSet {
 public:
  // False when `id` is already present.
  bool Insert(int64_t id) {
    if (!slot_.try_emplace(id, ids_.size()).second) return false;
    ids_.push_back(id);
    return true;
  }

  // False when `id` is absent.
  bool Erase(int64_t id) {
    auto it = slot_.find(id);
    if (it == slot_.end()) return false;
    size_t hole = it->second;
    int64_t last = ids_.back();
    ids_[hole] = last;
    slot_[last] = hole;
    ids_.pop_back();
    slot_.erase(id);
    return true;
  }

  bool Contains(int64_t id) const { return slot_.count(id) != 0; }
  size_t size() const { return ids_.size(); }
  bool empty() const { return ids_.empty(); }

  // A uniformly random member; the set must not be empty.
  template <typename Rng>
  int64_t Pick(Rng& rng) const {
    std::uniform_int_distribution<size_t> slot(0, ids_.size() - 1);
    return ids_[slot(rng)];
  }

 private:
  std::vector<int64_t> ids_;
  std::unordered_map<int64_t, size_t> slot_;
};

}  // namespace hotrow::dateplan
