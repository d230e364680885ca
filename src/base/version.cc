#include "base/version.h"

namespace hotrow {

std::string_view Version() { return HOTROW_VERSION; }
std::string_view Commit() { return HOTROW_COMMIT; }

}  // namespace hotrow
