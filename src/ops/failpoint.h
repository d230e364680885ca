// Failpoints: named places where a test can make the process die on purpose,
// to prove that a crash there loses nothing acknowledged and leaves nothing
// half-applied.
//
//   HOTROW_FAILPOINT=grant.write:5000   abort() when a SQLite grant has
//                                       staged its 5,000th card (after the
//                                       INSERT of up to 64 that holds it,
//                                       inside its uncommitted chunk)
//   HOTROW_FAILPOINT=grant.commit       abort() right after the grant commits
//                                       (its apply), before anyone is told
//   HOTROW_FAILPOINT=grant.stage        abort() right after a PostgreSQL
//                                       grant's credits are staged, before
//                                       its apply
//   HOTROW_FAILPOINT=grant.fold:5       abort() after the 5th fold chunk
//                                       (PostgreSQL), or once the history
//                                       rows of the SQLite chunk that holds
//                                       the 5th folded card are written,
//                                       before its balances
//   HOTROW_FAILPOINT=writer.commit:20   abort() right after the SQLite writer's
//                                       20th group commit, before any of its
//                                       writes is answered
//   HOTROW_FAILPOINT=follow.fetch:1     the first re-read of a plan another
//                                       instance changed fails
//   HOTROW_FAILPOINT=split.copy:3       abort() after the 3rd table is copied
//                                       while the point card moves into its own
//                                       file (also split.rename, split.drop:
//                                       before those steps)
//   HOTROW_FAILPOINT=grant.slow:3000    the grant's query phase takes 3,000 ms
//                                       longer (a request that outlives the
//                                       shutdown grace period)
//   HOTROW_FAILPOINT=grant.apply.slow:3000
//                                       the grant waits 3,000 ms between its
//                                       staging and its apply (a card closed
//                                       then is dropped by the apply)
//
// Read once at start-up from the environment; a failpoint that is not set
// costs one predictable branch.
#pragma once

#include <cstdint>
#include <string_view>

namespace hotrow::failpoint {

// True when `name` is armed and its count (default 1) is reached with
// `hits` (1-based); the caller then aborts (or fails, for the failpoints
// that make an operation fail instead of the process).
bool Hit(std::string_view name, int64_t hits = 1);

// abort()s the process (SIGABRT, no destructors, no flush) when Hit().
void MaybeCrash(std::string_view name, int64_t hits = 1);

// Sleeps the armed count in milliseconds when `name` is armed.
void MaybeDelay(std::string_view name);

}  // namespace hotrow::failpoint
