#include "report.h"

#include <cerrno>
#include <cstdio>
#include <fstream>

namespace uswap {

void to_json(nlohmann::json& j, const lock_stats& s) {
  j = {{"name", s.name},
       {"acquisitions", s.acquisitions},
       {"contended", s.contended},
       {"wait_total_ns", s.wait_total_ns},
       {"wait_max_ns", s.wait_max_ns}};
}

}  // namespace uswap

namespace uswap::tools {

std::string strprintf(const char* format, ...) {
  va_list ap;
  va_start(ap, format);
  va_list again;
  va_copy(again, ap);
  const int n = std::vsnprintf(nullptr, 0, format, ap);
  va_end(ap);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, again);
  va_end(again);
  return out;
}

status write_json_file(const std::string& path, const nlohmann::json& j) {
  std::ofstream f(path);
  f << j.dump(2) << "\n";
  if (!f) return error(EIO, "cannot write " + path);
  return {};
}

}  // namespace uswap::tools
