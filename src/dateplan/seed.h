// Demo and benchmark data: varied, realistic date plans in Japanese and
// English, about 200 bytes of JSON each.
#pragma once

#include <cstdint>
#include <functional>
#include <random>

#include "dateplan/plan.h"
#include "db/sqlite.h"

namespace hotrow::dateplan {

// One plausible plan drawn from `rng` (deterministic for a given seed).
PlanFields GeneratePlan(std::mt19937_64& rng);

// Inserts `count` generated plans with ids 1..count in one transaction.
// The table must be empty (the ids are what benchmarks address).
// progress(done) is called every few thousand rows.
Status SeedPlans(db::sqlite::Connection& conn, int64_t count, uint64_t seed,
                 const std::function<void(int64_t)>& progress);

}  // namespace hotrow::dateplan
