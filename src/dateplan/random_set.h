// RandomSet: a set keyed by id with O(1) insert, erase and uniform random pick.
//
// Why: "a random date plan" must give every live plan the same chance, also
// after deletes leave gaps in the ids. The tempting SQL tricks fail that:
// ORDER BY RANDOM() sorts the whole table per request (O(N log N)), and "the
// first id >= a random number" picks a plan that follows a long gap far more
// often than its neighbours (a plan after a gap of g deleted ids is g+1
// times as likely).
//
// Algorithm: the members live densely in a vector, in no particular order,
// and a hash map gives each id's slot. A pick draws a uniform slot in
// [0, size) (std::uniform_int_distribution rejects the biased tail, so it is
// exactly uniform) and returns the value there. Erase moves the last member
// into the erased slot, so the vector never has holes. Each member carries a
// value (the Catalog stores a pointer to the plan), so a pick needs no
// further lookup.
//
// Invariants: members_[slot_[id]].id == id for every member; no id twice.
// Cost: pick O(1) with one cache miss; insert and erase O(1) expected;
// memory about 56 bytes per member. Not thread-safe: the Catalog locks.
#pragma once

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

namespace hotrow::dateplan {

template <typename Value = int64_t>
class RandomSet {
 public:
  // False when `id` is already present.
  bool Insert(int64_t id, Value value) {
    if (!slot_.try_emplace(id, members_.size()).second) return false;
    members_.push_back({id, value});
    return true;
  }
  bool Insert(int64_t id) { return Insert(id, Value(id)); }

  // False when `id` is absent.
  bool Erase(int64_t id) {
    auto it = slot_.find(id);
    if (it == slot_.end()) return false;
    size_t hole = it->second;
    slot_.erase(it);
    if (hole != members_.size() - 1) {
      members_[hole] = members_.back();
      slot_[members_[hole].id] = hole;
    }
    members_.pop_back();
    return true;
  }

  bool Contains(int64_t id) const { return slot_.count(id) != 0; }
  size_t size() const { return members_.size(); }
  bool empty() const { return members_.empty(); }

  // A uniformly random member's value; the set must not be empty.
  template <typename Rng>
  const Value& Pick(Rng& rng) const {
    std::uniform_int_distribution<size_t> slot(0, members_.size() - 1);
    return members_[slot(rng)].value;
  }

 private:
  struct Member {
    int64_t id;
    Value value;
  };
  std::vector<Member> members_;
  std::unordered_map<int64_t, size_t> slot_;
};

}  // namespace hotrow::dateplan
