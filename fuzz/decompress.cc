// Fuzz target: decompression of bytes nobody vouches for, for every codec.
//   mode 0: the input's bytes, as they are, decompressed into one page: EIO or success, never a
//           read past the input or a write past the page (both are exact-size heap buffers, so
//           AddressSanitizer sees one byte too far);
//   mode 1: a page built from the input is compressed and must decompress to exactly that page;
//           then the compressed bytes are damaged as the input says (bytes flipped, truncated,
//           extended) and decompressed again: EIO, or a page (lz4 and lzo cannot always notice);
//   mode 2: a page stored in a zram device whose object the input overwrites through the pool
//           (a memory error in the store): with checksums the read is EIO and a zeroed page
//           unless the bytes did not change; without them EIO or some page, never a crash.
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "uswap/compress/zcomp.h"
#include "uswap/compress/zcomp_ops.h"
#include "uswap/zram/zram.h"
#include "uswap/zsmalloc/zsmalloc.h"

namespace {

using namespace uswap;
using namespace uswap::fuzz;

// Decompresses exactly `src` into a fresh page-sized heap buffer; returns the status and leaves
// the page in `out`.
status decompress_exact(zcomp_ctx& ctx, const std::vector<uint8_t>& src, std::vector<uint8_t>& out) {
  // Copies into buffers of exactly the right size: a vector's capacity may exceed its size, and
  // a read past the data must hit ASan's redzone, not spare capacity.
  std::unique_ptr<uint8_t[]> in(new uint8_t[src.size() ? src.size() : 1]);
  if (!src.empty()) std::memcpy(in.get(), src.data(), src.size());
  std::unique_ptr<uint8_t[]> dst(new uint8_t[page_size]);
  const status st = ctx.decompress(in.get(), src.size(), dst.get(), page_size);
  out.assign(dst.get(), dst.get() + page_size);
  return st;
}

void check_decompress_result(const status& st, const char* codec) {
  FUZZ_CHECK(st.ok() || st.code() == EIO,
             std::string(codec) + ": decompress of bad input is EIO, not " + describe(st));
}

void raw_bytes(const zcomp_ops& ops, FuzzedDataProvider& in) {
  auto ctx = ops.create_ctx({});
  FUZZ_CHECK(ctx.ok(), "create_ctx");
  std::vector<uint8_t> out;
  const std::vector<uint8_t> src = in.ConsumeRemainingBytes<uint8_t>();
  check_decompress_result(decompress_exact(**ctx, src, out), std::string(ops.name()).c_str());
}

void damaged_stream(const zcomp_ops& ops, FuzzedDataProvider& in) {
  auto ctx = ops.create_ctx({});
  FUZZ_CHECK(ctx.ok(), "create_ctx");
  const std::string name(ops.name());
  alignas(8) page_bytes page;
  fill_bytes(page.data(), page_size, consume_kind(in), in.ConsumeIntegral<uint16_t>(), in);
  std::vector<uint8_t> comp(ops.compress_bound(page_size));
  auto len = (*ctx)->compress(page.data(), page_size, comp.data(), comp.size());
  FUZZ_CHECK(len.ok() && *len <= comp.size(), name + ": compress");
  comp.resize(*len);
  std::vector<uint8_t> out;
  status st = decompress_exact(**ctx, comp, out);
  FUZZ_CHECK(st.ok(), name + ": decompress of a valid stream: " + describe(st));
  FUZZ_CHECK(std::memcmp(out.data(), page.data(), page_size) == 0, name + ": round trip");
  // The damage.
  while (in.remaining_bytes() > 0) {
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
      case 0:
        if (!comp.empty())
          comp[in.ConsumeIntegralInRange<size_t>(0, comp.size() - 1)] ^= in.ConsumeIntegral<uint8_t>();
        break;
      case 1:
        comp.resize(in.ConsumeIntegralInRange<size_t>(0, comp.size()));
        break;
      case 2:
        comp.push_back(in.ConsumeIntegral<uint8_t>());
        break;
      case 3:
        if (!comp.empty())
          comp[in.ConsumeIntegralInRange<size_t>(0, comp.size() - 1)] = in.ConsumeIntegral<uint8_t>();
        break;
    }
  }
  check_decompress_result(decompress_exact(**ctx, comp, out), name.c_str());
}

void corrupt_stored_object(const char* codec, FuzzedDataProvider& in) {
  zram_options o;
  o.name = "fuzz";
  o.disksize = 2 * page_size;
  o.comp_algorithm = codec;
  o.checksum = in.ConsumeBool();
  o.huge_page_chunks = false;
  auto dev = zram_device::create(o);
  FUZZ_CHECK(dev.ok(), "create");
  alignas(8) page_bytes page;
  // Not same-filled: those have no object to damage.
  fill_bytes(page.data(), page_size,
             in.ConsumeBool() ? page_kind::compressible : page_kind::incompressible,
             in.ConsumeIntegral<uint16_t>(), in);
  FUZZ_CHECK((*dev)->write_page(1, page.data()).ok(), "write_page");
  auto info = (*dev)->slot_info(1);
  FUZZ_CHECK(info.ok() && (info->kind == zram_slot_kind::compressed ||
                           info->kind == zram_slot_kind::huge), "the page has an object");
  zs_pool& pool = (*dev)->mem_pool();
  std::vector<uint8_t> object;
  {
    auto ref = pool.obj_read_begin(info->handle);
    FUZZ_CHECK(ref.ok(), "obj_read_begin");
    // The object: the stored bytes and, for a compressed one with checksums, the checksum.
    const size_t len = info->kind == zram_slot_kind::compressed && o.checksum ? info->size + 4
                                                                               : info->size;
    object.assign(ref->data(), ref->data() + len);
  }
  const std::vector<uint8_t> original = object;
  while (in.remaining_bytes() > 0 && !object.empty()) {
    const size_t at = in.ConsumeIntegralInRange<size_t>(0, object.size() - 1);
    object[at] ^= in.ConsumeIntegral<uint8_t>();
  }
  FUZZ_CHECK(pool.obj_write(info->handle, object.data(), object.size()).ok(), "obj_write");
  std::unique_ptr<uint8_t[]> got(new uint8_t[page_size]);
  std::memset(got.get(), 0xEE, page_size);
  const status st = (*dev)->read_page(1, got.get());
  if (object == original) {
    FUZZ_CHECK(st.ok() && std::memcmp(got.get(), page.data(), page_size) == 0,
               "an untouched object reads back");
  } else if (o.checksum) {
    FUZZ_CHECK(st.code() == EIO, std::string(codec) + ": a damaged object is EIO: " + describe(st));
    for (size_t b = 0; b < page_size; ++b) FUZZ_CHECK(got[b] == 0, "EIO leaves a zeroed page");
  } else {
    check_decompress_result(st, codec);
  }
  // The neighbour and a rewrite are unaffected.
  FUZZ_CHECK((*dev)->read_page(0, got.get()).ok(), "the neighbour reads");
  FUZZ_CHECK((*dev)->write_page(1, page.data()).ok(), "rewrite");
  FUZZ_CHECK((*dev)->read_page(1, got.get()).ok() &&
                 std::memcmp(got.get(), page.data(), page_size) == 0, "a rewritten page reads");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const auto backends = zcomp_backends();
  const zcomp_ops& ops = *backends[in.ConsumeIntegralInRange<size_t>(0, backends.size() - 1)];
  switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0: raw_bytes(ops, in); break;
    case 1: damaged_stream(ops, in); break;
    case 2: corrupt_stored_object(std::string(ops.name()).c_str(), in); break;
  }
  return 0;
}
