// lz4 and lz4hc over liblz4 (kernel: backend_lz4.c, backend_lz4hc.c). The context is the
// library's external compression state, allocated once per stream so that compressing a page
// allocates nothing. Decompression is stateless (LZ4_decompress_safe bounds every write by the
// destination capacity).
#include <lz4.h>
#include <lz4hc.h>

#include <climits>
#include <cstdlib>
#include <new>
#include <string>

#include "backends.h"

namespace uswap::backends {
namespace {

status lz4_decompress(std::string_view name, const uint8_t* src, size_t src_len, uint8_t* dst,
                      size_t dst_len) {
  if (src_len == 0 || src_len > INT_MAX || dst_len > INT_MAX)
    return corrupt_input(name, "length " + std::to_string(src_len));
  const int n = LZ4_decompress_safe(reinterpret_cast<const char*>(src), reinterpret_cast<char*>(dst),
                                    static_cast<int>(src_len), static_cast<int>(dst_len));
  if (n < 0) return corrupt_input(name, "LZ4_decompress_safe error " + std::to_string(n));
  if (static_cast<size_t>(n) != dst_len) return wrong_length(name, static_cast<size_t>(n), dst_len);
  return {};
}

// Both contexts hold one malloc'ed state block of the library's size.
class lz4_state_ctx : public zcomp_ctx {
 public:
  lz4_state_ctx(void* state, int level, bool hc) : state_(state), level_(level), hc_(hc) {}
  ~lz4_state_ctx() override { std::free(state_); }

  result<size_t> compress(const uint8_t* src, size_t src_len, uint8_t* dst,
                          size_t dst_cap) override {
    const std::string_view name = hc_ ? "lz4hc" : "lz4";
    if (src_len > LZ4_MAX_INPUT_SIZE) return error(EINVAL, std::string(name) + ": input too large");
    const int cap = dst_cap > INT_MAX ? INT_MAX : static_cast<int>(dst_cap);
    const auto* s = reinterpret_cast<const char*>(src);
    auto* d = reinterpret_cast<char*>(dst);
    const int n = hc_ ? LZ4_compress_HC_extStateHC(state_, s, d, static_cast<int>(src_len), cap,
                                                   level_)
                      : LZ4_compress_fast_extState(state_, s, d, static_cast<int>(src_len), cap,
                                                   level_);
    if (n <= 0)
      return error(E2BIG, std::string(name) + ": output does not fit " + std::to_string(dst_cap) +
                              " bytes");
    return static_cast<size_t>(n);
  }

  status decompress(const uint8_t* src, size_t src_len, uint8_t* dst, size_t dst_len) override {
    return lz4_decompress(hc_ ? "lz4hc" : "lz4", src, src_len, dst, dst_len);
  }

 private:
  void* state_;
  int level_;
  bool hc_;
};

class lz4_ops : public zcomp_ops {
 public:
  constexpr explicit lz4_ops(bool hc) : hc_(hc) {}
  std::string_view name() const noexcept override { return hc_ ? "lz4hc" : "lz4"; }
  size_t compress_bound(size_t src_len) const noexcept override {
    return src_len > LZ4_MAX_INPUT_SIZE ? 0 : static_cast<size_t>(LZ4_compressBound(static_cast<int>(src_len)));
  }
  bool has_level() const noexcept override { return true; }
  // lz4: the level is the acceleration factor, as the kernel's backend_lz4 passes it.
  int default_level() const noexcept override { return hc_ ? LZ4HC_CLEVEL_DEFAULT : 1; }
  int min_level() const noexcept override { return 1; }
  int max_level() const noexcept override { return hc_ ? LZ4HC_CLEVEL_MAX : 65537; }

  result<std::unique_ptr<zcomp_ctx>> create_ctx(const zcomp_params& params) const override {
    auto level = resolve_level(params);
    if (!level) return level.error();
    const int size = hc_ ? LZ4_sizeofStateHC() : LZ4_sizeofState();
    void* state = std::malloc(static_cast<size_t>(size));
    if (!state) return error(ENOMEM, std::string(name()) + ": cannot allocate the state");
    auto* ctx = new (std::nothrow) lz4_state_ctx(state, *level, hc_);
    if (!ctx) {
      std::free(state);
      return error(ENOMEM, std::string(name()) + ": cannot allocate a context");
    }
    return std::unique_ptr<zcomp_ctx>(ctx);
  }

 private:
  bool hc_;
};

constinit const lz4_ops lz4_instance{false};
constinit const lz4_ops lz4hc_instance{true};

}  // namespace

const zcomp_ops& backend_lz4 = lz4_instance;
const zcomp_ops& backend_lz4hc = lz4hc_instance;

}  // namespace uswap::backends
