// The simulator's reports: the reference's tables as text (8.1 to 8.6), the
// same as JSON, an SVG chart of OK/s against parallelism, and an HTML page
// with both.
#pragma once

#include <string>

#include "tools/simulator.h"

namespace hotrow::tools {

std::string ReportText(const SimulationResult& result);
std::string ReportJson(const SimulationResult& result);
std::string ReportSvg(const SimulationResult& result);
// The reference's chart 8.2.2: the median of successes under 1 s.
std::string ReportMedianSvg(const SimulationResult& result);
std::string ReportHtml(const SimulationResult& result);

}  // namespace hotrow::tools
