// The backend singletons (internal to the compress layer); zcomp_ops.cc lists them by name.
//
// Thread-safety: immutable objects.
#pragma once

#include "uswap/compress/zcomp_ops.h"

namespace uswap::backends {

extern const zcomp_ops& backend_lz4;
extern const zcomp_ops& backend_lz4hc;
extern const zcomp_ops& backend_zstd;
extern const zcomp_ops& backend_lzo;

// Messages for the two ways a decompression fails.
status corrupt_input(std::string_view backend, std::string_view what);
status wrong_length(std::string_view backend, size_t got, size_t want);

}  // namespace uswap::backends
