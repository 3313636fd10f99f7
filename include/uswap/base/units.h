// Sizes as people type them: "4096", "16K", "200M", "1.5G", "4KiB". One parser for every
// command-line option and plugin parameter, so "K" means the same everywhere.
//
// Convention: binary multiples, as iozone, fio, usemem and zramctl use them: K = 1024,
// M = 1024^2, G = 1024^3, T = 1024^4. Case-insensitive; an optional "B" or "iB" suffix is
// accepted ("16KB" = "16KiB" = "16k"). A fraction is allowed with a suffix ("1.5G") when the
// result is a whole number of bytes.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "uswap/base/status.h"

namespace uswap {

// Parses a size; errors (EINVAL) name the offending text: empty input, an unknown suffix,
// a negative number, trailing garbage, a fraction of a byte. Values above 2^63 give ERANGE.
result<uint64_t> parse_size(std::string_view text);

// "512 B", "16.0 KiB", "1.50 GiB": for reports.
std::string format_size(uint64_t bytes);

}  // namespace uswap
