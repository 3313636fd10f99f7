// Fuzz target: a small zram device driven by a sequence of operations decoded from the input -
// whole-page and byte-granular writes at any offset, reads, discards, write_zeroes, mark_idle,
// writeback, recompress, compact, mem_limit changes, slot_free_notify - in every lock mode, each
// checked against a map of page contents (fuzz_util.h's page_model):
//   - every read returns the model's bytes; a request outside the device is EINVAL and changes
//     nothing; a write refused at mem_limit (ENOSPC) leaves the pages it did not reach as they
//     were;
//   - post-processing never changes what a page reads;
//   - slot_info, extent_at and mm_stat agree with the model: holes are empty, same-filled pages
//     are ZRAM_SAME with their word, orig_data_size counts the stored pages.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "fuzz_util.h"
#include "uswap/zram/zram.h"

namespace {

using namespace uswap;
using namespace uswap::fuzz;

// The device clock (zram_options::clock): seconds that only the input moves forward.
uint32_t fake_now = 0;
uint32_t fake_clock() { return fake_now; }

// One backing file for the whole run, in a directory of its own that is removed at exit.
const std::string& backing_path() {
  static const std::string path = [] {
    std::string dir = (std::filesystem::temp_directory_path() / "uswap-fuzz-zram-XXXXXX").string();
    if (!::mkdtemp(dir.data())) fail("mkdtemp failed");
    static std::string keep_dir;
    keep_dir = dir;
    std::atexit([] { std::filesystem::remove_all(keep_dir); });
    return dir + "/backing";
  }();
  return path;
}

constexpr const char* codecs[] = {"lzo", "lz4", "zstd", "lz4hc"};

void expect_page(zram_device& dev, const page_model& m, uint64_t index) {
  alignas(8) page_bytes got;
  const status st = dev.read_page(index, got.data());
  FUZZ_CHECK(st.ok(), "read_page " + std::to_string(index) + ": " + describe(st));
  FUZZ_CHECK(got == m.page(index), "page " + std::to_string(index) + " differs from the model");
}

// The whole device against the model: contents, slot kinds, extents and the stored-page counts.
void check_state(zram_device& dev, const page_model& m) {
  uint64_t same = 0;
  for (uint64_t i = 0; i < m.nr_pages(); ++i) {
    expect_page(dev, m, i);
    auto info = dev.slot_info(i);
    FUZZ_CHECK(info.ok(), "slot_info");
    auto ext = dev.extent_at(i, 1);
    FUZZ_CHECK(ext.ok() && ext->nr_pages == 1, "extent_at");
    const std::string at = "slot " + std::to_string(i);
    uint64_t word = 0;
    if (m.is_hole(i)) {
      FUZZ_CHECK(info->kind == zram_slot_kind::empty, at + " should be empty");
      FUZZ_CHECK(ext->type == zram_extent_type::hole, at + " should be a hole extent");
    } else if (same_filled(m.page(i).data(), &word)) {
      ++same;
      FUZZ_CHECK(info->kind == zram_slot_kind::same && info->fill == word, at + " should be same");
      FUZZ_CHECK(ext->type == (word ? zram_extent_type::data : zram_extent_type::zero),
                 at + " extent of a same-filled page");
    } else {
      FUZZ_CHECK(info->kind == zram_slot_kind::compressed || info->kind == zram_slot_kind::huge ||
                     info->kind == zram_slot_kind::written_back,
                 at + " should hold an object or a backing block");
      FUZZ_CHECK(ext->type == zram_extent_type::data, at + " should be a data extent");
    }
  }
  const zram_mm_stat mm = dev.mm_stat();
  FUZZ_CHECK(mm.orig_data_size == m.stored_pages() * page_size, "orig_data_size");
  FUZZ_CHECK(mm.same_pages == same, "same_pages");
}

bool in_range(uint64_t offset, uint64_t len, uint64_t size) {
  return len != 0 && offset < size && len <= size - offset;
}

// After a write or a zeroing that failed with ENOSPC part way: the device applies a request a
// page at a time, so the pages before the refused one are as `wanted` says, the refused one and
// those after it as they were. A page is compared by what it reads and by whether it is a hole.
// Brings the model up to date.
void settle_failed(zram_device& dev, page_model& m, const page_model& wanted, uint64_t offset,
                   uint64_t len) {
  const uint64_t first = offset / page_size, last = (offset + len - 1) / page_size;
  alignas(8) page_bytes got;
  bool reached = true;  // still in the prefix of pages the request got to
  for (uint64_t i = first; i <= last; ++i) {
    FUZZ_CHECK(dev.read_page(i, got.data()).ok(), "read after a failed request");
    auto info = dev.slot_info(i);
    FUZZ_CHECK(info.ok(), "slot_info");
    const bool hole = info->kind == zram_slot_kind::empty;
    if (reached && got == wanted.page(i) && hole == wanted.is_hole(i)) {
      if (hole) {
        m.free_page(i);
      } else {
        m.set_page(i, got.data());
      }
      continue;
    }
    reached = false;
    FUZZ_CHECK(got == m.page(i) && hole == m.is_hole(i),
               "page " + std::to_string(i) + " changed though the request failed before it");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  zram_options o;
  o.name = "fuzz";
  const uint64_t nr_pages = in.ConsumeIntegralInRange<uint64_t>(1, 12);
  o.disksize = nr_pages * page_size - in.ConsumeIntegralInRange<uint64_t>(0, page_size - 1);
  o.lock_mode = all_zram_lock_modes[in.ConsumeIntegralInRange<size_t>(0, 2)];
  o.comp_algorithm = codecs[in.ConsumeIntegralInRange<size_t>(0, 3)];
  for (int n = in.ConsumeIntegralInRange<int>(0, 2); n > 0; --n)
    o.recomp_algorithms.push_back(codecs[in.ConsumeIntegralInRange<size_t>(0, 3)]);
  o.checksum = in.ConsumeBool();
  o.huge_page_chunks = false;
  o.clock = fake_clock;
  const bool with_backing = in.ConsumeBool();
  if (with_backing) {
    o.backing_dev = backing_path();
    o.backing_dev_size = page_size * in.ConsumeIntegralInRange<uint64_t>(1, 6);
  }
  fake_now = 1000;
  auto created = zram_device::create(o);
  FUZZ_CHECK(created.ok(), "create: " + describe(created.error()));
  zram_device& dev = **created;
  FUZZ_CHECK(dev.nr_pages() == nr_pages && dev.disksize() == nr_pages * page_size, "size");
  page_model m(nr_pages);
  const uint64_t bytes = m.size();

  std::vector<uint8_t> buf, got;
  for (int ops = 0; ops < 64 && in.remaining_bytes() > 0; ++ops) {
    switch (in.ConsumeIntegralInRange<int>(0, 14)) {
      case 0: {  // write_page
        const uint64_t index = in.ConsumeIntegralInRange<uint64_t>(0, nr_pages);
        alignas(8) page_bytes p;
        fill_bytes(p.data(), page_size, consume_kind(in), in.ConsumeIntegral<uint16_t>(), in);
        const status st = dev.write_page(index, p.data());
        if (index >= nr_pages) {
          FUZZ_CHECK(st.code() == EINVAL, "write_page past the end: " + describe(st));
        } else if (st.ok()) {
          m.set_page(index, p.data());
        } else {
          FUZZ_CHECK(st.code() == ENOSPC, "write_page: " + describe(st));
          expect_page(dev, m, index);
        }
        break;
      }
      case 1: {  // byte write at any offset
        const uint64_t offset = consume_offset(in, bytes), len = consume_length(in);
        buf.resize(len);
        fill_bytes(buf.data(), len, consume_kind(in), in.ConsumeIntegral<uint16_t>(), in);
        const status st = dev.write(offset, buf.data(), len);
        if (!in_range(offset, len, bytes)) {
          FUZZ_CHECK(st.code() == EINVAL, "write outside the device: " + describe(st));
        } else if (st.ok()) {
          m.write(offset, buf.data(), len);
        } else {
          FUZZ_CHECK(st.code() == ENOSPC, "write: " + describe(st));
          page_model wanted = m;
          wanted.write(offset, buf.data(), len);
          settle_failed(dev, m, wanted, offset, len);
        }
        break;
      }
      case 2: {  // byte read at any offset
        const uint64_t offset = consume_offset(in, bytes), len = consume_length(in);
        got.assign(len, 0xA5);
        const status st = dev.read(offset, got.data(), len);
        if (!in_range(offset, len, bytes)) {
          FUZZ_CHECK(st.code() == EINVAL, "read outside the device: " + describe(st));
          break;
        }
        FUZZ_CHECK(st.ok(), "read: " + describe(st));
        buf.resize(len);
        m.read(offset, buf.data(), len);
        FUZZ_CHECK(got == buf, "read returned other bytes than the model");
        break;
      }
      case 3: {  // discard(index, n)
        const uint64_t index = in.ConsumeIntegralInRange<uint64_t>(0, nr_pages);
        const uint64_t n = in.ConsumeIntegralInRange<uint64_t>(0, nr_pages + 1);
        const status st = dev.discard(index, n);
        if (n == 0 || index >= nr_pages || n > nr_pages - index) {
          FUZZ_CHECK(st.code() == EINVAL, "discard outside the device: " + describe(st));
          break;
        }
        FUZZ_CHECK(st.ok(), "discard: " + describe(st));
        for (uint64_t i = index; i < index + n; ++i) m.free_page(i);
        break;
      }
      case 4: {  // discard_range: whole pages only
        const uint64_t offset = consume_offset(in, bytes), len = consume_length(in);
        const status st = dev.discard_range(offset, len);
        if (!in_range(offset, len, bytes)) {
          FUZZ_CHECK(st.code() == EINVAL, "discard_range outside: " + describe(st));
          break;
        }
        FUZZ_CHECK(st.ok(), "discard_range: " + describe(st));
        m.discard_range(offset, len);
        break;
      }
      case 5: {  // write_zeroes
        const uint64_t offset = consume_offset(in, bytes), len = consume_length(in);
        const status st = dev.write_zeroes(offset, len);
        if (!in_range(offset, len, bytes)) {
          FUZZ_CHECK(st.code() == EINVAL, "write_zeroes outside: " + describe(st));
        } else if (st.ok()) {
          m.write_zeroes(offset, len);
        } else {
          // Refused at mem_limit on a partial page, whose zeroing is a write of zero bytes.
          FUZZ_CHECK(st.code() == ENOSPC, "write_zeroes: " + describe(st));
          page_model wanted = m;
          wanted.write_zeroes(offset, len);
          settle_failed(dev, m, wanted, offset, len);
          check_state(dev, m);
        }
        break;
      }
      case 6: {  // mark_idle, whole device or a range, with or without an age
        std::optional<uint32_t> age;
        if (in.ConsumeBool()) age = in.ConsumeIntegralInRange<uint32_t>(0, 20);
        if (in.ConsumeBool()) {
          const uint64_t first = in.ConsumeIntegralInRange<uint64_t>(0, nr_pages + 1);
          const uint64_t n = in.ConsumeIntegralInRange<uint64_t>(0, nr_pages + 1);
          FUZZ_CHECK(dev.mark_idle_range(first, n, age) <= nr_pages, "mark_idle_range count");
        } else {
          const uint64_t marked = dev.mark_idle(age);
          if (!age) {
            // Every stored slot that is neither same-filled nor written back.
            uint64_t want = 0;
            for (uint64_t i = 0; i < nr_pages; ++i) {
              auto info = dev.slot_info(i);
              want += info->kind == zram_slot_kind::compressed || info->kind == zram_slot_kind::huge;
            }
            FUZZ_CHECK(marked == want, "mark_idle marked " + std::to_string(marked) + " of " +
                                           std::to_string(want));
          }
        }
        break;
      }
      case 7: {  // writeback
        zram_writeback_params p;
        p.type = static_cast<zram_writeback_type>(in.ConsumeIntegralInRange<uint8_t>(0, 3));
        p.first_page = in.ConsumeIntegralInRange<uint64_t>(0, nr_pages);
        p.nr_pages = in.ConsumeIntegralInRange<uint64_t>(0, nr_pages);
        p.max_pages = in.ConsumeIntegralInRange<uint64_t>(0, 3);
        auto r = dev.writeback(p);
        if (!with_backing) {
          FUZZ_CHECK(!r.ok() && r.error().code() == EINVAL, "writeback without a backing file");
        } else if (p.first_page >= nr_pages || (p.nr_pages && p.nr_pages > nr_pages - p.first_page)) {
          FUZZ_CHECK(!r.ok() && r.error().code() == EINVAL, "writeback outside the device");
        } else if (r.ok()) {
          FUZZ_CHECK(!p.max_pages || *r <= p.max_pages, "writeback past max_pages");
        } else {
          FUZZ_CHECK(r.error().code() == ENOSPC, "writeback: " + describe(r.error()));
        }
        check_state(dev, m);
        break;
      }
      case 8: {  // recompress
        zram_recompress_params p;
        p.type = static_cast<zram_recompress_type>(in.ConsumeIntegralInRange<uint8_t>(0, 3));
        p.threshold = in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange<uint32_t>(0, page_size);
        p.max_pages = in.ConsumeIntegralInRange<uint64_t>(0, 3);
        p.priority = in.ConsumeIntegralInRange<uint32_t>(0, 3);
        auto r = dev.recompress(p);
        const bool bad = o.recomp_algorithms.empty() || p.priority > o.recomp_algorithms.size() ||
                         p.threshold >= dev.huge_class_size();
        if (bad) {
          FUZZ_CHECK(!r.ok() && r.error().code() == EINVAL, "recompress with bad parameters");
        } else if (!r.ok()) {
          FUZZ_CHECK(r.error().code() == ENOSPC || r.error().code() == ENOMEM,
                     "recompress: " + describe(r.error()));
        }
        check_state(dev, m);
        break;
      }
      case 9:  // compact
        dev.compact();
        check_state(dev, m);
        break;
      case 10:  // time passes
        fake_now += in.ConsumeIntegralInRange<uint32_t>(0, 30);
        break;
      case 11:  // mem_limit: none, or a few pages (writes start failing with ENOSPC)
        dev.set_mem_limit(in.ConsumeBool() ? 0 : page_size * in.ConsumeIntegralInRange<uint64_t>(1, 4));
        break;
      case 12: {  // slot_free_notify: nothing holds a lock, so it always frees
        const uint64_t index = in.ConsumeIntegralInRange<uint64_t>(0, nr_pages);
        const bool freed = dev.slot_free_notify(index);
        FUZZ_CHECK(freed == (index < nr_pages), "slot_free_notify");
        if (freed) m.free_page(index);
        break;
      }
      case 13: {  // extent_at over a run
        const uint64_t index = in.ConsumeIntegralInRange<uint64_t>(0, nr_pages);
        const uint64_t max = in.ConsumeIntegralInRange<uint64_t>(0, nr_pages + 1);
        auto e = dev.extent_at(index, max);
        if (index >= nr_pages || max == 0) {
          FUZZ_CHECK(!e.ok() && e.error().code() == EINVAL, "extent_at outside");
          break;
        }
        FUZZ_CHECK(e.ok() && e->nr_pages >= 1 && e->nr_pages <= max &&
                       e->nr_pages <= nr_pages - index, "extent_at length");
        for (uint64_t i = index; i < index + e->nr_pages; ++i) {
          auto one = dev.extent_at(i, 1);
          FUZZ_CHECK(one.ok() && one->type == e->type, "extent_at run is not uniform");
        }
        const uint64_t next = index + e->nr_pages;
        if (next < nr_pages && e->nr_pages < max) {
          auto after = dev.extent_at(next, 1);
          FUZZ_CHECK(after.ok() && after->type != e->type, "extent_at stopped inside a run");
        }
        break;
      }
      case 14:
        check_state(dev, m);
        break;
    }
  }
  check_state(dev, m);
  return 0;
}
