// Reading one sample out of a Prometheus text exposition (GET /metrics, or
// metrics::Registry::Expose()).
#pragma once

#include <sstream>
#include <string>

namespace hotrow::testing {

// The value of the one sample `name{labels}` in an exposition, or -1.
inline double Sample(const std::string& exposition, const std::string& series) {
  std::istringstream in(exposition);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

}  // namespace hotrow::testing
