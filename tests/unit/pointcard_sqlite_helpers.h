// What the point card's SQLite unit tests share: the contract's small data
// set and rows written by hand.
#pragma once

#include "contract/pointcard_contract.h"
#include "db/sqlite.h"
#include "pointcard/seed.h"

namespace hotrow::testing {

// A history row written by hand: its values follow, then ")".
inline constexpr const char* kInsertRow =
    "INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND, TRANSACTION_ID, ACTOR) "
    "VALUES (";
inline constexpr const char* kNextId = "(SELECT COALESCE(MAX(TRANSACTION_ID), 0) + 1 FROM H_TRANSACTION)";

inline Status SeedSmall(db::sqlite::Connection& conn) {
  pointcard::SeedOptions o;
  o.cards = kContractCards;
  o.stores = kContractStores;
  o.history = kContractHistory;
  o.seed = 7;
  return pointcard::SeedPointCard(conn, o, nullptr);
}

}  // namespace hotrow::testing
