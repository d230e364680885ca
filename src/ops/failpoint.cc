#include "ops/failpoint.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace hotrow::failpoint {

namespace {
struct Armed {
  std::string name;
  int64_t count = 1;
  Armed() {
    const char* env = std::getenv("HOTROW_FAILPOINT");
    if (!env || !*env) return;
    std::string spec(env);
    auto colon = spec.find(':');
    name = spec.substr(0, colon);
    if (colon != std::string::npos) count = std::strtoll(spec.c_str() + colon + 1, nullptr, 10);
  }
};
const Armed& Get() {
  static const Armed armed;
  return armed;
}
}  // namespace

bool Hit(std::string_view name, int64_t hits) {
  const Armed& a = Get();
  return !a.name.empty() && a.name == name && hits == a.count;
}

void MaybeCrash(std::string_view name, int64_t hits) {
  if (!Hit(name, hits)) return;
  std::fprintf(stderr, "failpoint %.*s hit at %lld: aborting\n", static_cast<int>(name.size()), name.data(),
               static_cast<long long>(hits));
  std::fflush(stderr);
  std::abort();
}

void MaybeDelay(std::string_view name) {
  const Armed& a = Get();
  if (a.name.empty() || a.name != name) return;
  std::this_thread::sleep_for(std::chrono::milliseconds(a.count));
}

}  // namespace hotrow::failpoint
