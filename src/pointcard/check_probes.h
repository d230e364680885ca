// What check.cc shares with the files of its other checks (check_holds.cc).
#pragma once

#include <string>

#include "db/sqlite.h"
#include "pointcard/check.h"

namespace hotrow::pointcard::checking {

// Counts a violation of `kind` and keeps the first kCheckExamplesMax.
struct Reporter {
  CheckReport* report;
  void operator()(const std::string& kind, const std::string& detail) {
    ++report->violations[kind];
    if (report->examples.size() < kCheckExamplesMax) report->examples.push_back(kind + ": " + detail);
  }
};

// 13. holds (point-card schema 5) and 14. lots (schema 6), on one snapshot
// (check_holds.cc).
Status CheckHolds(db::sqlite::Connection& conn, const CheckScope& scope, Reporter& problem);
Status CheckLots(db::sqlite::Connection& conn, const CheckScope& scope, Reporter& problem);

}  // namespace hotrow::pointcard::checking
