// The point-card data generator: regions, stores, cards and an initial
// history, random but reproducible (same seed, same data), consistent with
// every invariant `hotrow check pointcard` verifies.
#pragma once

#include <cstdint>
#include <functional>

#include "base/status.h"
#include "db/sqlite.h"
#include "pointcard/model.h"

namespace hotrow::pointcard {

struct SeedOptions {
  int64_t cards = 1000000;
  int64_t stores = 10000;
  int64_t history = 1000000;
  uint64_t seed = 42;
  // The initial history lies in [period_end - period, period_end).
  int64_t period_end_us = 0;  // 0: one second before now
  int64_t period_us = 30ll * 24 * 3600 * 1000000;
};

// Where generated rows go (SQLite inserts, PostgreSQL COPY).
class PointCardSink {
 public:
  virtual ~PointCardSink() = default;
  virtual Status AddRegion(const Region& region) = 0;
  virtual Status AddStore(const StoreInfo& store) = 0;
  virtual Status AddCard(const Card& card) = 0;
  // Called in primary-key order: (PAYMENT_TIME, CARD_ID, STORE_ID).
  virtual Status AddHistory(const HistoryRow& row) = 0;
  virtual Status Finish() = 0;
};

// Generates the data set into `sink` (see SeedPointCard for its shape).
Status GeneratePointCard(const SeedOptions& options, PointCardSink& sink,
                         const std::function<void(int64_t, int64_t)>& progress);

// Fills empty point-card tables (conflict if S_ACCOUNT has rows). Cards
// 1..cards live in random regions; history rows go to random cards, each
// card's rows in time order, its first row always a charge, payments never
// taking the balance below zero; S_ACCOUNT holds each card's final balance
// and the time of its last row (the period's start for cards without rows).
// progress(done, total) is called now and then.
Status SeedPointCard(db::sqlite::Connection& conn, const SeedOptions& options,
                     const std::function<void(int64_t, int64_t)>& progress);

}  // namespace hotrow::pointcard
