// The C API (include/uswap/uffd/region_c.h) over pager and region.
#include "uswap/uffd/region_c.h"

#include <cerrno>
#include <memory>
#include <new>
#include <string>

#include "uswap/uffd/pager.h"
#include "uswap/uffd/region.h"

struct uswap_pager {
  std::shared_ptr<uswap::pager> p;
};

struct uswap_region {
  std::unique_ptr<uswap::region> r;
  uswap_pager view;  // what uswap_region_pager() lends out
};

namespace {

thread_local std::string last_error;

int fail(const uswap::status& st) {
  last_error = st.to_string();
  return st.code() ? st.code() : EINVAL;
}

int fail(int code, const char* what) {
  last_error = std::string(uswap::errno_name(code)) + ": " + what;
  return code;
}

uswap::pager_options convert(const uswap_pager_options& c) {
  uswap::pager_options o;
  o.limit = c.limit;
  o.max_size = c.max_size;
  o.swap_size = c.swap_size;
  if (c.comp_algorithm) o.comp_algorithm = c.comp_algorithm;
  o.mode = c.fault_mode == USWAP_FAULT_HANDLER_THREAD ? uswap::fault_mode::handler_thread
                                                      : uswap::fault_mode::sigbus;
  o.handler_threads = c.handler_threads;
  o.access = c.access == USWAP_UFFD_FULL             ? uswap::uffd_access::full
             : c.access == USWAP_UFFD_USER_MODE_ONLY ? uswap::uffd_access::user_mode_only
                                                     : uswap::uffd_access::automatic;
  o.reclaim_batch = c.reclaim_batch;
  o.readahead_max = c.readahead_max;
  o.track_writes = c.track_writes != 0;
  return o;
}

bool valid_enums(const uswap_pager_options& c) {
  return (c.fault_mode == USWAP_FAULT_SIGBUS || c.fault_mode == USWAP_FAULT_HANDLER_THREAD) &&
         (c.access >= USWAP_UFFD_AUTO && c.access <= USWAP_UFFD_USER_MODE_ONLY);
}

}  // namespace

extern "C" {

void uswap_pager_options_init(uswap_pager_options* o) {
  const uswap::pager_options d;
  o->limit = d.limit;
  o->max_size = d.max_size;
  o->swap_size = d.swap_size;
  o->comp_algorithm = "lz4";
  o->fault_mode = USWAP_FAULT_SIGBUS;
  o->handler_threads = d.handler_threads;
  o->access = USWAP_UFFD_AUTO;
  o->reclaim_batch = d.reclaim_batch;
  o->readahead_max = d.readahead_max;
  o->track_writes = d.track_writes ? 1 : 0;
}

int uswap_pager_create(const uswap_pager_options* o, uswap_pager** out) {
  if (!o || !out) return fail(EINVAL, "uffd: null argument");
  if (!valid_enums(*o)) return fail(EINVAL, "uffd: unknown fault_mode or access");
  auto p = uswap::pager::create(convert(*o));
  if (!p) return fail(p.error());
  auto* h = new (std::nothrow) uswap_pager{std::move(p).value()};
  if (!h) return fail(ENOMEM, "uffd: no memory for a pager handle");
  *out = h;
  return 0;
}

void uswap_pager_destroy(uswap_pager* p) { delete p; }

int uswap_pager_kernel_faults(const uswap_pager* p) { return p && p->p->kernel_faults() ? 1 : 0; }

void uswap_pager_get_stats(const uswap_pager* p, struct uswap_pager_stats* out) {
  const uswap::pager_stats s = p->p->stats();
  *out = {s.limit_pages,      s.resident_pages,       s.peak_resident_pages,
                           s.mapped_bytes,     s.faults,               s.wp_faults,
                           s.zero_fills,       s.swap_ins,             s.readahead_pages,
                           s.swap_outs,        s.clean_evictions,      s.zero_evictions,
                           s.reclaim_passes,   s.pages_scanned,        s.pages_rotated,
                           s.overcharges,      s.swap_out_failures,    s.fault_ns,
                           s.swap_out_bytes,   s.compressed_bytes,     s.swap_pages_used,
                           s.zram_orig_data_size, s.zram_compr_data_size, s.zram_mem_used_total,
                           s.zram_mem_used_max};
}

uint64_t uswap_pager_reclaim(uswap_pager* p, uint64_t nr_pages) {
  return p ? p->p->reclaim(nr_pages) : 0;
}

int uswap_region_create(uswap_pager* p, uint64_t length, uswap_region** out) {
  if (!p || !out) return fail(EINVAL, "uffd: null argument");
  auto r = uswap::region::create(p->p, length);
  if (!r) return fail(r.error());
  auto* h = new (std::nothrow) uswap_region{std::move(r).value(), {p->p}};
  if (!h) return fail(ENOMEM, "uffd: no memory for a region handle");
  *out = h;
  return 0;
}

int uswap_region_create_standalone(uint64_t length, const uswap_pager_options* o,
                                   uswap_region** out) {
  if (!o || !out) return fail(EINVAL, "uffd: null argument");
  if (!valid_enums(*o)) return fail(EINVAL, "uffd: unknown fault_mode or access");
  auto r = uswap::region::create(length, convert(*o));
  if (!r) return fail(r.error());
  std::shared_ptr<uswap::pager> owner = (*r)->shared_owner();
  auto* h = new (std::nothrow) uswap_region{std::move(r).value(), {std::move(owner)}};
  if (!h) return fail(ENOMEM, "uffd: no memory for a region handle");
  *out = h;
  return 0;
}

void uswap_region_destroy(uswap_region* r) { delete r; }

void* uswap_region_data(const uswap_region* r) { return r->r->data(); }
uint64_t uswap_region_size(const uswap_region* r) { return r->r->size(); }
uswap_pager* uswap_region_pager(uswap_region* r) { return &r->view; }

int uswap_region_pin(uswap_region* r, const void* addr, uint64_t len, int write) {
  if (!r) return fail(EINVAL, "uffd: null region");
  const uswap::status st = r->r->pin(addr, len, write != 0);
  return st.ok() ? 0 : fail(st);
}

int uswap_region_unpin(uswap_region* r, const void* addr, uint64_t len) {
  if (!r) return fail(EINVAL, "uffd: null region");
  const uswap::status st = r->r->unpin(addr, len);
  return st.ok() ? 0 : fail(st);
}

int uswap_region_discard(uswap_region* r, void* addr, uint64_t len) {
  if (!r) return fail(EINVAL, "uffd: null region");
  const uswap::status st = r->r->discard(addr, len);
  return st.ok() ? 0 : fail(st);
}

const char* uswap_last_error(void) { return last_error.c_str(); }

}  // extern "C"
