// lzo over liblzo2 (kernel: backend_lzo.c): lzo1x_1 compression with a per-stream dictionary
// (LZO1X_1_MEM_COMPRESS bytes), lzo1x_decompress_safe for decompression, which checks every
// read and write against the buffers and reports trailing input.
#include <lzo/lzo1x.h>

#include <cstdlib>
#include <new>
#include <string>

#include "backends.h"

namespace uswap::backends {
namespace {

// lzo_init() checks the library's ABI once per process; its answer is cached.
bool lzo_ready() noexcept {
  static const bool ok = lzo_init() == LZO_E_OK;
  return ok;
}

class lzo_ctx : public zcomp_ctx {
 public:
  explicit lzo_ctx(void* wrkmem) : wrkmem_(wrkmem) {}
  ~lzo_ctx() override { std::free(wrkmem_); }

  result<size_t> compress(const uint8_t* src, size_t src_len, uint8_t* dst,
                          size_t dst_cap) override {
    // lzo1x_1_compress has no output bound: it needs compress_bound() bytes.
    if (dst_cap < src_len + src_len / 16 + 64 + 3)
      return error(E2BIG, "lzo: output buffer of " + std::to_string(dst_cap) +
                              " bytes is below the worst case");
    lzo_uint out = 0;
    const int r = lzo1x_1_compress(src, src_len, dst, &out, wrkmem_);
    if (r != LZO_E_OK) return error(EIO, "lzo: lzo1x_1_compress error " + std::to_string(r));
    return static_cast<size_t>(out);
  }

  status decompress(const uint8_t* src, size_t src_len, uint8_t* dst, size_t dst_len) override {
    lzo_uint out = dst_len;
    const int r = lzo1x_decompress_safe(src, src_len, dst, &out, nullptr);
    if (r != LZO_E_OK) return corrupt_input("lzo", "lzo1x_decompress_safe error " + std::to_string(r));
    if (out != dst_len) return wrong_length("lzo", out, dst_len);
    return {};
  }

 private:
  void* wrkmem_;
};

class lzo_ops : public zcomp_ops {
 public:
  std::string_view name() const noexcept override { return "lzo"; }
  size_t compress_bound(size_t src_len) const noexcept override {
    return src_len + src_len / 16 + 64 + 3;
  }
  bool has_level() const noexcept override { return false; }
  int default_level() const noexcept override { return 0; }
  int min_level() const noexcept override { return 0; }
  int max_level() const noexcept override { return 0; }

  result<std::unique_ptr<zcomp_ctx>> create_ctx(const zcomp_params& params) const override {
    auto level = resolve_level(params);
    if (!level) return level.error();
    if (!lzo_ready()) return error(EIO, "lzo: lzo_init() failed (library ABI mismatch)");
    void* wrkmem = std::malloc(LZO1X_1_MEM_COMPRESS);
    auto* ctx = wrkmem ? new (std::nothrow) lzo_ctx(wrkmem) : nullptr;
    if (!ctx) {
      std::free(wrkmem);
      return error(ENOMEM, "lzo: cannot allocate the dictionary");
    }
    return std::unique_ptr<zcomp_ctx>(ctx);
  }
};

constinit const lzo_ops lzo_instance;

}  // namespace

const zcomp_ops& backend_lzo = lzo_instance;

}  // namespace uswap::backends
