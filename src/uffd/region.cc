#include "uswap/uffd/region.h"

#include <cerrno>

#include "uswap/base/page.h"

namespace uswap {

result<std::unique_ptr<region>> region::create(uint64_t length, pager_options opts) {
  if (length == 0) return error(EINVAL, "uffd: region of 0 bytes");
  opts.max_size = round_up_to_page(length);
  auto p = pager::create(opts);
  if (!p) return p.error();
  return create(std::move(p).value(), length);
}

result<std::unique_ptr<region>> region::create(std::shared_ptr<pager> owner, uint64_t length,
                                               uint64_t alignment) {
  if (!owner) return error(EINVAL, "uffd: region without a pager");
  auto m = owner->map(length, alignment);
  if (!m) return m.error();
  return std::unique_ptr<region>(new region(std::move(owner), *m, round_up_to_page(length)));
}

region::~region() { (void)owner_->unmap(data_, size_); }

bool region::inside(const void* addr, uint64_t len) const noexcept {
  const auto a = reinterpret_cast<uintptr_t>(addr), d = reinterpret_cast<uintptr_t>(data_);
  return len != 0 && a >= d && a - d <= size_ && len <= size_ - (a - d);
}

status region::pin(const void* addr, uint64_t len, bool write) {
  if (!inside(addr, len)) return error(EINVAL, "uffd: pin outside the region");
  return owner_->pin(addr, len, write);
}

status region::unpin(const void* addr, uint64_t len) {
  if (!inside(addr, len)) return error(EINVAL, "uffd: unpin outside the region");
  return owner_->unpin(addr, len);
}

status region::discard(void* addr, uint64_t len) {
  if (!inside(addr, len)) return error(EINVAL, "uffd: discard outside the region");
  return owner_->discard(addr, len);
}

}  // namespace uswap
