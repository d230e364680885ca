// The release and commit this binary was built from (CMakeLists.txt).
#pragma once

#include <string_view>

namespace hotrow {

std::string_view Version();  // "0.3.0"
std::string_view Commit();   // 12 hex digits, or "unknown"

}  // namespace hotrow
