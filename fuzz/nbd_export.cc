// Fuzz target: the NBD request path (nbd_export), as nbdkit would call it for a client that
// sends anything: pread, pwrite, trim, zero with and without may_trim, flush, cache and extents
// (with and without req_one, and an extent list that fills up) at arbitrary offsets, counts and
// flags, in every lock mode, checked against a map of page contents:
//   - a request with count 0 succeeds and changes nothing; one outside the device is EINVAL and
//     changes nothing; every read returns the model's bytes;
//   - trim frees whole pages only; zero with may_trim frees whole pages, without it stores them
//     as zero pages (extents: ZERO but not HOLE); partial pages get zeroed bytes;
//   - extents are consecutive, start at the page holding the offset, cover the request (or stop
//     at req_one or a full list), and carry HOLE|ZERO for holes, ZERO for zero pages, 0 for data;
//   - nbd_stat counts every request, its bytes, and the failed ones.
// Fast zero (NBD_CMD_FLAG_FAST_ZERO) never reaches nbd_export: zeroing never compresses, so the
// plugin always honours it and calls zero() as for any other zero request.
#include <cerrno>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "uswap/nbd/nbd_export.h"

namespace {

using namespace uswap;
using namespace uswap::fuzz;

bool in_range(uint64_t offset, uint64_t count, uint64_t size) {
  return offset < size && count <= size - offset;
}

uint32_t expected_flags(const page_model& m, uint64_t index) {
  if (m.is_hole(index)) return nbd_extent_hole | nbd_extent_zero;
  return m.page(index) == page_bytes{} ? nbd_extent_zero : 0;
}

void check_contents(nbd_export& e, const page_model& m) {
  // Through the device, not pread: the model's own reads stay out of nbd_stat.
  std::vector<uint8_t> got(m.size()), want(m.size());
  const status st = e.device().read(0, got.data(), m.size());
  FUZZ_CHECK(st.ok(), "pread of the whole device: " + describe(st));
  m.read(0, want.data(), m.size());
  FUZZ_CHECK(got == want, "the device differs from the model");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  nbd_config c;
  const uint64_t nr_pages = in.ConsumeIntegralInRange<uint64_t>(1, 10);
  // size= as a client's administrator would type it; the device rounds it up to pages.
  const uint64_t asked = nr_pages * page_size - in.ConsumeIntegralInRange<uint64_t>(0, page_size - 1);
  FUZZ_CHECK(c.set("size", std::to_string(asked)).ok(), "size=");
  FUZZ_CHECK(c.set("lock", to_string(all_zram_lock_modes[in.ConsumeIntegralInRange<size_t>(0, 2)]))
                 .ok(), "lock=");
  constexpr const char* comps[] = {"lz4", "zstd", "lzo", "lz4hc"};
  FUZZ_CHECK(c.set("comp", comps[in.ConsumeIntegralInRange<size_t>(0, 3)]).ok(), "comp=");
  FUZZ_CHECK(c.set("checksum", in.ConsumeBool() ? "on" : "off").ok(), "checksum=");
  if (in.ConsumeBool())
    FUZZ_CHECK(c.set("mem_limit", std::to_string(page_size * in.ConsumeIntegralInRange<int>(1, 3))).ok(),
               "mem_limit=");
  auto created = nbd_export::create(c);
  FUZZ_CHECK(created.ok(), "create: " + describe(created.error()));
  nbd_export& e = **created;
  FUZZ_CHECK(e.size() == nr_pages * page_size, "export size");
  page_model m(nr_pages);
  const uint64_t bytes = m.size();
  nbd_stat want;  // what stats() should say

  std::vector<uint8_t> buf, got;
  for (int ops = 0; ops < 64 && in.remaining_bytes() > 0; ++ops) {
    const int op = in.ConsumeIntegralInRange<int>(0, 7);
    const uint64_t offset = in.ConsumeBool() ? in.ConsumeIntegral<uint64_t>() : consume_offset(in, bytes);
    const uint32_t count = in.ConsumeIntegralInRange<uint8_t>(0, 9) == 0
                               ? in.ConsumeIntegral<uint32_t>()
                               : static_cast<uint32_t>(consume_length(in));
    const bool ok_range = in_range(offset, count, bytes);
    status st;
    switch (op) {
      case 0: {  // pread
        ++want.pread;
        want.pread_bytes += count;
        if (!ok_range) {
          // A client's count may be huge: the buffer is only what a valid request would need.
          st = e.pread(nullptr, count, offset);
          break;
        }
        got.assign(count, 0x5A);
        st = e.pread(got.data(), count, offset);
        FUZZ_CHECK(st.ok(), "pread: " + describe(st));
        buf.resize(count);
        m.read(offset, buf.data(), count);
        FUZZ_CHECK(got == buf, "pread returned other bytes than the model");
        break;
      }
      case 1: {  // pwrite
        ++want.pwrite;
        want.pwrite_bytes += count;
        if (!ok_range) {
          st = e.pwrite(nullptr, count, offset);
          break;
        }
        buf.resize(count);
        fill_bytes(buf.data(), count, consume_kind(in), in.ConsumeIntegral<uint16_t>(), in);
        st = e.pwrite(buf.data(), count, offset);
        if (st.ok()) {
          m.write(offset, buf.data(), count);
        } else {
          // Refused at mem_limit: NBD leaves a failed write's range unspecified, so the model
          // takes what the device now holds there, after checking nothing outside it changed.
          FUZZ_CHECK(st.code() == ENOSPC, "pwrite: " + describe(st));
          got.resize(bytes);
          FUZZ_CHECK(e.device().read(0, got.data(), bytes).ok(), "read");
          std::vector<uint8_t> before(bytes);
          m.read(0, before.data(), bytes);
          for (uint64_t b = 0; b < bytes; ++b)
            if (b < offset || b >= offset + count)
              FUZZ_CHECK(got[b] == before[b], "a failed pwrite changed a byte outside its range");
          for (uint64_t i = offset / page_size; i <= (offset + count - 1) / page_size; ++i) {
            auto info = e.device().slot_info(i);
            if (info->kind == zram_slot_kind::empty) {
              m.free_page(i);
            } else {
              m.set_page(i, got.data() + i * page_size);
            }
          }
        }
        break;
      }
      case 2:  // trim
        ++want.trim;
        want.trim_bytes += count;
        st = e.trim(count, offset);
        if (st.ok() && count) m.discard_range(offset, count);
        break;
      case 3:
      case 4: {  // zero, with may_trim (3) or without (4)
        const bool may_trim = op == 3;
        ++want.zero;
        want.zero_bytes += count;
        st = e.zero(count, offset, may_trim);
        if (!ok_range || count == 0) break;
        if (!st.ok()) {
          // Only a partial page can be refused (a whole zero page holds no pool memory).
          FUZZ_CHECK(st.code() == ENOSPC, "zero: " + describe(st));
          page_model z = m;
          z.write_zeroes(offset, count);
          for (uint64_t i = offset / page_size; i <= (offset + count - 1) / page_size; ++i) {
            got.resize(page_size);
            FUZZ_CHECK(e.device().read_page(i, got.data()).ok(), "read_page");
            if (std::equal(got.begin(), got.end(), z.page(i).begin())) {
              if (e.device().slot_info(i)->kind == zram_slot_kind::empty) {
                m.free_page(i);
              } else {
                m.set_page(i, got.data());
              }
            } else {
              FUZZ_CHECK(std::equal(got.begin(), got.end(), m.page(i).begin()),
                         "a failed zero left a page neither zeroed nor as it was");
            }
          }
          break;
        }
        if (may_trim) {
          m.write_zeroes(offset, count);
        } else {
          buf.assign(count, 0);
          m.write(offset, buf.data(), count);  // every page touched is stored, none a hole
        }
        break;
      }
      case 5:  // flush
        ++want.flush;
        st = e.flush();
        FUZZ_CHECK(st.ok(), "flush");
        break;
      case 6:  // cache
        ++want.cache;
        want.cache_bytes += count;
        st = e.cache(count, offset);
        break;
      case 7: {  // extents
        ++want.extents;
        const bool req_one = in.ConsumeBool();
        const size_t room = in.ConsumeIntegralInRange<size_t>(1, 4);  // the client's list size
        std::vector<std::array<uint64_t, 3>> list;
        st = e.extents(count, offset, req_one, [&](uint64_t off, uint64_t len, uint32_t flags) {
          list.push_back({off, len, flags});
          return list.size() < room;
        });
        if (!ok_range || count == 0) {
          FUZZ_CHECK(list.empty(), "extents of an empty or bad request added some");
          break;
        }
        FUZZ_CHECK(st.ok(), "extents: " + describe(st));
        FUZZ_CHECK(!list.empty(), "extents added none");
        uint64_t at = offset / page_size * page_size;
        for (const auto& [off, len, flags] : list) {
          FUZZ_CHECK(off == at && len > 0 && len % page_size == 0, "extents are not consecutive");
          for (uint64_t i = off / page_size; i < (off + len) / page_size; ++i)
            FUZZ_CHECK(flags == expected_flags(m, i), "extent flags of page " + std::to_string(i));
          at = off + len;
        }
        FUZZ_CHECK(at <= (offset + count + page_size - 1) / page_size * page_size,
                   "extents past the request's last page");
        const bool covered = at >= offset + count;
        FUZZ_CHECK(covered || req_one || list.size() == room, "extents stopped early");
        if (req_one) FUZZ_CHECK(list.size() == 1, "req_one gave more than one extent");
        break;
      }
    }
    // A request fails for its range (EINVAL), or a write or a zero at mem_limit (ENOSPC, handled
    // above); nothing else fails.
    if (count != 0 && !ok_range && op != 5) {
      FUZZ_CHECK(st.code() == EINVAL, "a bad range is EINVAL: " + describe(st));
    } else if (op != 1 && op != 3 && op != 4) {
      FUZZ_CHECK(st.ok(), "request " + std::to_string(op) + " at " + std::to_string(offset) + "+" +
                              std::to_string(count) + ": " + describe(st));
    }
    want.errors += !st.ok();
  }
  check_contents(e, m);
  const nbd_stat s = e.stats();
  FUZZ_CHECK(s.pread == want.pread && s.pread_bytes == want.pread_bytes, "pread counts");
  FUZZ_CHECK(s.pwrite == want.pwrite && s.pwrite_bytes == want.pwrite_bytes, "pwrite counts");
  FUZZ_CHECK(s.trim == want.trim && s.trim_bytes == want.trim_bytes, "trim counts");
  FUZZ_CHECK(s.zero == want.zero && s.zero_bytes == want.zero_bytes, "zero counts");
  FUZZ_CHECK(s.flush == want.flush && s.cache == want.cache && s.cache_bytes == want.cache_bytes,
             "flush and cache counts");
  FUZZ_CHECK(s.extents == want.extents, "extents count");
  FUZZ_CHECK(s.errors == want.errors, "errors: " + std::to_string(s.errors) + ", expected " +
                                          std::to_string(want.errors));
  return 0;
}
