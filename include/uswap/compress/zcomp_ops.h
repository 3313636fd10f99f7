// The codec interface under zcomp: one backend per compression library, after the kernel's
// drivers/block/zram/backend_*.c and their `struct zcomp_ops`.
//
// A backend (zcomp_ops) is a stateless, immutable singleton that knows how to make a context
// (zcomp_ctx): the per-stream working memory of the codec (lz4's hash table, zstd's CCtx/DCtx,
// lzo's dictionary). A context is used by one thread at a time; zcomp (zcomp.h) gives every thread
// its own, so no compression ever takes a lock.
//
// Backends, by name (find_zcomp_ops):
//   lz4    liblz4 LZ4_compress_fast_extState; level = acceleration, 1..65537, default 1
//   lz4hc  liblz4 LZ4_compress_HC_extStateHC; level 1..12, default 9 (LZ4HC_CLEVEL_DEFAULT)
//   zstd   libzstd ZSTD_compressCCtx; level ZSTD_minCLevel()..ZSTD_maxCLevel(), default 3
//   lzo    liblzo2 lzo1x_1_compress / lzo1x_decompress_safe; no level (as the kernel's lzo)
//
// Errors: compress() returns E2BIG when the output does not fit dst_cap (callers size dst with
// compress_bound() and never see it) and EIO if the library reports a failure. decompress() never
// writes past dst_len and returns EIO when the input is malformed or truncated, or decodes to a
// length other than dst_len: a corrupt object is an error, never a crash or a short page. Codecs
// without a checksum (lz4, lzo) cannot notice a corruption that still decodes to exactly dst_len
// bytes; zstd frames are decoded with their content size checked.
//
// Thread-safety: zcomp_ops objects are immutable and shared by all threads. A zcomp_ctx is not
// thread-safe: one thread at a time (zcomp hands each thread its own).
// Invariants: compress() output is always accepted by decompress() of the same backend with
// dst_len equal to the input length; compress() never writes more than compress_bound(src_len).
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "uswap/base/status.h"

namespace uswap {

// ZCOMP_PARAM_NO_LEVEL: use the backend's default level.
inline constexpr int zcomp_param_no_level = INT_MIN;

// struct zcomp_params: what a stream's context is created with.
struct zcomp_params {
  int level = zcomp_param_no_level;  // default: the backend's default_level()
};

// The per-stream codec state (kernel: zcomp_ctx). Created by zcomp_ops::create_ctx.
class zcomp_ctx {
 public:
  virtual ~zcomp_ctx() = default;

  // Compresses src[0, src_len) into dst[0, dst_cap); returns the compressed length.
  virtual result<size_t> compress(const uint8_t* src, size_t src_len, uint8_t* dst,
                                  size_t dst_cap) = 0;

  // Decompresses src[0, src_len) into exactly dst_len bytes at dst. EIO unless the input is a
  // well-formed stream of exactly dst_len bytes.
  virtual status decompress(const uint8_t* src, size_t src_len, uint8_t* dst, size_t dst_len) = 0;
};

// One compression backend (kernel: struct zcomp_ops).
class zcomp_ops {
 public:
  constexpr zcomp_ops() noexcept = default;  // backends are constinit singletons
  virtual ~zcomp_ops() = default;

  virtual std::string_view name() const noexcept = 0;
  // Largest output compress() can produce for src_len input bytes.
  virtual size_t compress_bound(size_t src_len) const noexcept = 0;

  // Levels: has_level() false means only zcomp_param_no_level is accepted.
  virtual bool has_level() const noexcept = 0;
  virtual int default_level() const noexcept = 0;
  virtual int min_level() const noexcept = 0;
  virtual int max_level() const noexcept = 0;

  // The level params resolve to: default_level() for zcomp_param_no_level, else params.level when
  // in [min_level(), max_level()]. EINVAL names the backend and the accepted range otherwise.
  result<int> resolve_level(const zcomp_params& params) const;

  // A new context (EINVAL for a bad level, ENOMEM when the library cannot allocate).
  virtual result<std::unique_ptr<zcomp_ctx>> create_ctx(const zcomp_params& params) const = 0;
};

// The backend called `name` ("lz4", "lz4hc", "zstd", "lzo"), or nullptr.
const zcomp_ops* find_zcomp_ops(std::string_view name) noexcept;

// Every backend, in the order zcomp_available_show() would list them.
std::span<const zcomp_ops* const> zcomp_backends() noexcept;

}  // namespace uswap
