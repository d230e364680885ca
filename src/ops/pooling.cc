#include "ops/pooling.h"

#include <cstdlib>
#include <cstring>

namespace hotrow::pooling {

bool Enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("HOTROW_POOLING");
    return !(v && (std::strcmp(v, "off") == 0 || std::strcmp(v, "0") == 0));
  }();
  return enabled;
}

}  // namespace hotrow::pooling
