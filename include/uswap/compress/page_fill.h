// Page contents with a chosen compressibility, for tests and benchmarks of the compression path.
//
// fill_compressible() reproduces fio's buffer_compress_percentage (lib/rand.c,
// __fill_random_buf_percentage): the buffer is cut into chunks of `chunk` bytes (fio's
// buffer_compress_chunk, default 512); each chunk starts with (100 - percentage)% random bytes and
// ends with zeros. percentage = 50 gives the "50%-compressible" set that the zram benchmarks and the
// comparison with the kernel's zram use (docs/METHODOLOGY.md): each 4 KiB page is eight runs of 256 random bytes followed
// by 256 zero bytes. percentage = 0 is fully random (incompressible), 100 all zeros.
//
// Thread-safety: pure functions of their arguments (the generator state is local).
#pragma once

#include <cstddef>
#include <cstdint>

namespace uswap {

// Fills buf[0, len) with pseudo-random bytes from `seed` (splitmix64; the same seed gives the
// same bytes on every run).
void fill_random(void* buf, size_t len, uint64_t seed) noexcept;

// fio's buffer_compress_percentage fill (see above). percentage is clamped to 100; chunk 0 means
// one chunk for the whole buffer.
void fill_compressible(void* buf, size_t len, unsigned percentage, uint64_t seed,
                       size_t chunk = 512) noexcept;

}  // namespace uswap
