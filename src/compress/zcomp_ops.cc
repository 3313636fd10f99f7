#include "uswap/compress/zcomp_ops.h"

#include <array>
#include <string>

#include "backends.h"

namespace uswap {

result<int> zcomp_ops::resolve_level(const zcomp_params& params) const {
  if (params.level == zcomp_param_no_level) return default_level();
  if (!has_level())
    return error(EINVAL, std::string(name()) + ": this algorithm takes no level (got " +
                             std::to_string(params.level) + ")");
  if (params.level < min_level() || params.level > max_level())
    return error(EINVAL, std::string(name()) + ": level " + std::to_string(params.level) +
                             " outside " + std::to_string(min_level()) + ".." +
                             std::to_string(max_level()));
  return params.level;
}

std::span<const zcomp_ops* const> zcomp_backends() noexcept {
  static const std::array<const zcomp_ops*, 4> all = {
      &backends::backend_lzo, &backends::backend_lz4, &backends::backend_lz4hc,
      &backends::backend_zstd};
  return all;
}

const zcomp_ops* find_zcomp_ops(std::string_view name) noexcept {
  for (const zcomp_ops* ops : zcomp_backends())
    if (ops->name() == name) return ops;
  return nullptr;
}

namespace backends {

status corrupt_input(std::string_view backend, std::string_view what) {
  return error(EIO, std::string(backend) + ": corrupt compressed object (" + std::string(what) +
                        ")");
}

status wrong_length(std::string_view backend, size_t got, size_t want) {
  return error(EIO, std::string(backend) + ": compressed object decodes to " +
                        std::to_string(got) + " bytes, expected " + std::to_string(want));
}

}  // namespace backends
}  // namespace uswap
