// docs/openapi.yaml as JSON, compiled in (CMakeLists.txt converts it with
// scripts/openapi-json.py): GET /openapi.json.
#pragma once

#include <string_view>

namespace hotrow::cmd {

std::string_view OpenApiJson();

}  // namespace hotrow::cmd
