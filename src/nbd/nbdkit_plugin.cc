// nbdkit-uswap-plugin.so: the nbdkit C plugin API (NBDKIT_API_VERSION 2, nbdkit-plugin(3)) over
// uswap::nbd_export. Everything here is glue: each callback makes one nbd_export call and turns
// a failed status into nbdkit_error(message) + nbdkit_set_error(nbd_errno(status)), which nbdkit
// sends to the client as the NBD error of the request.
//
//   nbdkit [-U SOCKET | -p PORT] build/lib/nbdkit-uswap-plugin.so size=4G comp=lz4 ...
//
// Life cycle, in nbdkit's order: .config for each key=value (validated at once, so nbdkit names
// the bad parameter before anything starts); .config_complete; .get_ready creates the zram
// device (before nbdkit daemonizes, so that a bad algorithm or backing file fails the start);
// .after_fork starts the statistics / writeback thread (a thread would not survive the fork);
// .cleanup stops it and writes the statistics a last time; .unload frees the device.
//
// Thread-safety: THREAD_MODEL PARALLEL - nbdkit calls the data callbacks from many threads of
// many connections at once; all of them share the one device, whose per-page atomicity makes
// multi-conn safe (every connection sees every completed write).
#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <new>
#include <string>

#include "uswap/nbd/nbd_export.h"

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

namespace {

uswap::nbd_config config;
std::unique_ptr<uswap::nbd_export> dev_export;

static_assert(uswap::nbd_extent_hole == NBDKIT_EXTENT_HOLE);
static_assert(uswap::nbd_extent_zero == NBDKIT_EXTENT_ZERO);

int report(const uswap::status& st) {
  nbdkit_error("%.*s", static_cast<int>(st.message().size()), st.message().data());
  nbdkit_set_error(uswap::nbd_errno(st));
  return -1;
}

// Runs a callback body; no C++ exception may cross into nbdkit's C frames.
template <class F>
int guarded(F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return report(uswap::error(ENOMEM, "uswap: out of memory"));
  } catch (const std::exception& e) {
    return report(uswap::error(EIO, std::string("uswap: ") + e.what()));
  }
}

int uswap_config(const char* key, const char* value) {
  return guarded([&] {
    const uswap::status st = config.set(key, value);
    return st.ok() ? 0 : report(st);
  });
}

int uswap_config_complete() {
  return guarded([] {
    const uswap::status st = config.complete();
    return st.ok() ? 0 : report(st);
  });
}

int uswap_get_ready() {
  return guarded([] {
    auto made = uswap::nbd_export::create(config);
    if (!made.ok()) return report(made.error());
    dev_export = std::move(*made);
    return 0;
  });
}

int uswap_after_fork() {
  return guarded([] {
    const uswap::status st = dev_export->start_housekeeping();
    return st.ok() ? 0 : report(st);
  });
}

void uswap_cleanup() {
  if (dev_export) dev_export->stop_housekeeping();
}

void uswap_unload() { dev_export.reset(); }

void uswap_dump_plugin() {
  std::printf("uswap_comp=lz4,zstd,lzo,lz4hc\n");
  std::printf("uswap_lock=global_rwlock,slot_cas,slot_bitlock\n");
}

void* uswap_open(int /*readonly*/) { return NBDKIT_HANDLE_NOT_NEEDED; }

int64_t uswap_get_size(void*) { return static_cast<int64_t>(dev_export->size()); }

// The store is memory: a completed write is as durable as it will ever be, so FUA costs nothing.
int uswap_can_fua(void*) { return NBDKIT_FUA_NATIVE; }
int uswap_can_multi_conn(void*) { return 1; }
int uswap_can_cache(void*) { return NBDKIT_CACHE_NATIVE; }
int uswap_can_fast_zero(void*) { return 1; }

int uswap_pread(void*, void* buf, uint32_t count, uint64_t offset, uint32_t) {
  return guarded([&] {
    const uswap::status st = dev_export->pread(buf, count, offset);
    return st.ok() ? 0 : report(st);
  });
}

int uswap_pwrite(void*, const void* buf, uint32_t count, uint64_t offset, uint32_t) {
  return guarded([&] {
    const uswap::status st = dev_export->pwrite(buf, count, offset);
    return st.ok() ? 0 : report(st);
  });
}

int uswap_flush(void*, uint32_t) {
  return guarded([&] {
    const uswap::status st = dev_export->flush();
    return st.ok() ? 0 : report(st);
  });
}

int uswap_trim(void*, uint32_t count, uint64_t offset, uint32_t) {
  return guarded([&] {
    const uswap::status st = dev_export->trim(count, offset);
    return st.ok() ? 0 : report(st);
  });
}

// NBDKIT_FLAG_FAST_ZERO needs no check: neither way of zeroing compresses or copies data.
int uswap_zero(void*, uint32_t count, uint64_t offset, uint32_t flags) {
  return guarded([&] {
    const uswap::status st = dev_export->zero(count, offset, flags & NBDKIT_FLAG_MAY_TRIM);
    return st.ok() ? 0 : report(st);
  });
}

int uswap_extents(void*, uint32_t count, uint64_t offset, uint32_t flags,
                  struct nbdkit_extents* extents) {
  return guarded([&] {
    bool add_failed = false;
    const uswap::status st = dev_export->extents(
        count, offset, flags & NBDKIT_FLAG_REQ_ONE,
        [&](uint64_t off, uint64_t len, uint32_t type) {
          if (nbdkit_add_extent(extents, off, len, type) == -1) {
            add_failed = true;  // nbdkit has already said why (nbdkit_error, errno)
            return false;
          }
          return true;
        });
    if (add_failed) return -1;
    return st.ok() ? 0 : report(st);
  });
}

int uswap_cache(void*, uint32_t count, uint64_t offset, uint32_t) {
  return guarded([&] {
    const uswap::status st = dev_export->cache(count, offset);
    return st.ok() ? 0 : report(st);
  });
}

// nbdkit refuses a read or write longer than this (MAX_REQUEST_SIZE in its server/internal.h,
// the same from 1.32 to today) with ENOMEM before the plugin sees it, and hangs up on a write too
// long to skip. Any alignment works (sub-page requests are read-modify-writes), but whole aligned
// pages are the fast path: clients that honour the preferred size never make the plugin merge
// pages.
constexpr uint32_t nbdkit_max_request = 64u << 20;

// The maximum is nbdkit's limit, not "none" (0xffffffff): a client that asks for the sizes
// promises to honour them, and must then never be refused a request it was told is fine.
int uswap_block_size(void*, uint32_t* minimum, uint32_t* preferred, uint32_t* maximum) {
  *minimum = 1;
  *preferred = 4096;
  *maximum = nbdkit_max_request;
  return 0;
}

// Filled field by field (C++ designated initializers would have to name every field of the
// struct to satisfy -Wmissing-field-initializers); unset callbacks stay null, nbdkit's defaults.
struct nbdkit_plugin make_plugin() {
  struct nbdkit_plugin p{};
  p.name = "uswap";
  p.longname = "uswap zram device";
  p.version = USWAP_VERSION;
  p.description =
      "A compressed RAM block device: uswap's zram (lz4/zstd/lzo pages in a zsmalloc pool, "
      "per-slot locks, same-filled pages, writeback)";
  p.unload = uswap_unload;
  p.config = uswap_config;
  p.config_complete = uswap_config_complete;
  p.config_help = uswap::nbd_config::help();
  p.open = uswap_open;
  p.get_size = uswap_get_size;
  p.errno_is_preserved = 0;
  p.dump_plugin = uswap_dump_plugin;
  p.can_fua = uswap_can_fua;
  p.pread = uswap_pread;
  p.pwrite = uswap_pwrite;
  p.flush = uswap_flush;
  p.trim = uswap_trim;
  p.zero = uswap_zero;
  p.magic_config_key = "size";
  p.can_multi_conn = uswap_can_multi_conn;
  p.extents = uswap_extents;
  p.can_cache = uswap_can_cache;
  p.cache = uswap_cache;
  p.can_fast_zero = uswap_can_fast_zero;
  p.get_ready = uswap_get_ready;
  p.after_fork = uswap_after_fork;
  p.cleanup = uswap_cleanup;
  p.block_size = uswap_block_size;
  return p;
}

struct nbdkit_plugin plugin = make_plugin();

}  // namespace

NBDKIT_REGISTER_PLUGIN(plugin)
