#include "dateplan/catalog.h"

#include <algorithm>
#include <cassert>

#include "dateplan/plan_json.h"

namespace hotrow::dateplan {

void Catalog::Put(Plan plan) {
  plan.json_head = RenderPlanHead(plan);  // outside the lock: readers wait for nothing but the insert
  std::unique_lock lock(mutex_);
  PutLocked(std::move(plan));
}

void Catalog::ReplaceAll(std::vector<Plan> plans) {
  for (auto& p : plans) p.json_head = RenderPlanHead(p);
  std::unique_lock lock(mutex_);
  plans_.clear();
  all_ = {};
  categories_.clear();
  ranking_.clear();
  for (auto& p : plans) PutLocked(std::move(p));
}

void Catalog::PutLocked(Plan plan) {
  assert(mutex_.HeldExclusively() && "Catalog::PutLocked without the exclusive lock");
  if (erased_.count(plan.id)) return;
  auto it = plans_.find(plan.id);
  if (it != plans_.end()) {
    if (plan.version < it->second.version) {  // an older edit, late: keep the fields, raise the likes
      if (plan.like > it->second.like) {
        auto node = ranking_.extract({-it->second.like, plan.id});
        it->second.like = plan.like;
        node.value() = {-plan.like, plan.id};
        ranking_.insert(std::move(node));
      }
      return;
    }
    plan.like = std::max(plan.like, it->second.like);
    EraseLocked(it);
  }
  int64_t id = plan.id;
  const Plan* stored = &plans_.emplace(id, std::move(plan)).first->second;
  all_.Insert(id, stored);
  categories_[stored->category].Insert(id, stored);
  ranking_.insert({-stored->like, id});
}

bool Catalog::Erase(int64_t id) {
  std::unique_lock lock(mutex_);
  erased_.insert(id);
  auto it = plans_.find(id);
  if (it == plans_.end()) return false;
  EraseLocked(it);
  return true;
}

void Catalog::EraseLocked(std::unordered_map<int64_t, Plan>::iterator it) {
  assert(mutex_.HeldExclusively() && "Catalog::EraseLocked without the exclusive lock");
  const Plan& p = it->second;
  all_.Erase(p.id);
  auto cat = categories_.find(p.category);
  if (cat != categories_.end()) {
    cat->second.Erase(p.id);
    if (cat->second.empty()) categories_.erase(cat);
  }
  ranking_.erase({-p.like, p.id});
  plans_.erase(it);  // last: p refers into it
}

void Catalog::SetLike(int64_t id, int64_t like) {
  // The likes of one commit all report its final count: only the first of
  // them changes anything, so the others stop at a shared lock.
  {
    std::shared_lock lock(mutex_);
    auto it = plans_.find(id);
    if (it == plans_.end() || like <= it->second.like) return;
  }
  std::unique_lock lock(mutex_);
  auto it = plans_.find(id);
  if (it == plans_.end() || like <= it->second.like) return;
  // Move the ranking's node rather than erase and insert: no allocation.
  auto node = ranking_.extract({-it->second.like, id});
  it->second.like = like;
  node.value() = {-like, id};
  ranking_.insert(std::move(node));
}

std::vector<RankEntry> Catalog::Ranking(size_t limit) const {
  std::shared_lock lock(mutex_);
  std::vector<RankEntry> out;
  out.reserve(std::min(limit, ranking_.size()));
  for (auto it = ranking_.begin(); it != ranking_.end() && out.size() < limit; ++it) {
    const Plan& p = plans_.at(it->second);
    out.push_back({p.id, p.title, p.category, p.like});
  }
  return out;
}

std::vector<CategoryCount> Catalog::Categories() const {
  std::vector<CategoryCount> out;
  {
    std::shared_lock lock(mutex_);
    out.reserve(categories_.size());
    for (const auto& [name, set] : categories_) out.push_back({name, set.size()});
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.count > b.count; });
  return out;
}

size_t Catalog::size() const {
  std::shared_lock lock(mutex_);
  return plans_.size();
}

}  // namespace hotrow::dateplan
