// zstd over libzstd (kernel: backend_zstd.c). Each stream owns one compression and one
// decompression context, created once, so a page costs no allocation. The frame records its
// content size (libzstd's default), which decompress() checks against the page size.
#include <zstd.h>
#include <zstd_errors.h>

#include <new>
#include <string>

#include "backends.h"

namespace uswap::backends {
namespace {

class zstd_ctx : public zcomp_ctx {
 public:
  zstd_ctx(ZSTD_CCtx* c, ZSTD_DCtx* d, int level) : cctx_(c), dctx_(d), level_(level) {}
  ~zstd_ctx() override {
    ZSTD_freeCCtx(cctx_);
    ZSTD_freeDCtx(dctx_);
  }

  result<size_t> compress(const uint8_t* src, size_t src_len, uint8_t* dst,
                          size_t dst_cap) override {
    const size_t n = ZSTD_compressCCtx(cctx_, dst, dst_cap, src, src_len, level_);
    if (ZSTD_isError(n)) {
      if (ZSTD_getErrorCode(n) == ZSTD_error_dstSize_tooSmall)
        return error(E2BIG, "zstd: output does not fit " + std::to_string(dst_cap) + " bytes");
      return error(EIO, std::string("zstd: ") + ZSTD_getErrorName(n));
    }
    return n;
  }

  status decompress(const uint8_t* src, size_t src_len, uint8_t* dst, size_t dst_len) override {
    const unsigned long long content = ZSTD_getFrameContentSize(src, src_len);
    if (content == ZSTD_CONTENTSIZE_ERROR) return corrupt_input("zstd", "not a zstd frame");
    if (content != ZSTD_CONTENTSIZE_UNKNOWN && content != dst_len)
      return wrong_length("zstd", static_cast<size_t>(content), dst_len);
    const size_t n = ZSTD_decompressDCtx(dctx_, dst, dst_len, src, src_len);
    if (ZSTD_isError(n)) return corrupt_input("zstd", ZSTD_getErrorName(n));
    if (n != dst_len) return wrong_length("zstd", n, dst_len);
    return {};
  }

 private:
  ZSTD_CCtx* cctx_;
  ZSTD_DCtx* dctx_;
  int level_;
};

class zstd_ops : public zcomp_ops {
 public:
  std::string_view name() const noexcept override { return "zstd"; }
  size_t compress_bound(size_t src_len) const noexcept override {
    return ZSTD_compressBound(src_len);
  }
  bool has_level() const noexcept override { return true; }
  // The kernel's zstd_default_clevel() and libzstd's ZSTD_CLEVEL_DEFAULT.
  int default_level() const noexcept override { return ZSTD_CLEVEL_DEFAULT; }
  int min_level() const noexcept override { return ZSTD_minCLevel(); }
  int max_level() const noexcept override { return ZSTD_maxCLevel(); }

  result<std::unique_ptr<zcomp_ctx>> create_ctx(const zcomp_params& params) const override {
    auto level = resolve_level(params);
    if (!level) return level.error();
    ZSTD_CCtx* c = ZSTD_createCCtx();
    ZSTD_DCtx* d = ZSTD_createDCtx();
    zstd_ctx* ctx = (c && d) ? new (std::nothrow) zstd_ctx(c, d, *level) : nullptr;
    if (!ctx) {
      ZSTD_freeCCtx(c);
      ZSTD_freeDCtx(d);
      return error(ENOMEM, "zstd: cannot allocate a context");
    }
    return std::unique_ptr<zcomp_ctx>(ctx);
  }
};

constinit const zstd_ops zstd_instance;

}  // namespace

const zcomp_ops& backend_zstd = zstd_instance;

}  // namespace uswap::backends
