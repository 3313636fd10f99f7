// A program whose executable defines operator new and operator delete (the unsized forms) over an
// allocator of its own, and exports them, as Firefox's does over mozjemalloc, but not the sized
// delete, the array forms or the nothrow new, which libstdc++ implements by calling the unsized
// ones. Under the shim those others are the shim's: they must call the program's, or a block of
// the program's allocator reaches mimalloc's free (Firefox's media process crashed so, freeing a
// vector in libhwy's constructor with the sized delete). Its allocator puts a header before each
// block and counts; each delete checks the header. Exits 0, printing the contents' checksum, when
// every block of the test's own (the strings' 401-byte buffers, freed with the sized delete, and
// the 256-byte arrays, freed with delete[]) went back through the program's own delete; 1, saying
// what went wrong, otherwise. (Under the shim the pager's own C++ allocations reach this
// allocator too, as any library's would: they are not counted.)
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace {

constexpr uint64_t magic = 0x6f776e6f70735f31;  // "own_ops1"
struct header {
  uint64_t magic;
  uint64_t size;
};
long live_marked = 0, total_marked = 0;  // blocks of the sizes only the test allocates
bool marked(size_t n) { return n == 401 || n == 256; }

// A bump allocator over mappings of its own, 8 MiB each (anonymous and private: routed into the
// arena once the shim's constructor ran, as a program's own allocator's memory is; the first is
// mapped before it, by libstdc++'s start-up), never reused: a block freed twice, or a block not
// of this allocator, shows in the header or the counts.
unsigned char* chunk = nullptr;
size_t chunk_used = 0;
constexpr size_t chunk_bytes = size_t{8} << 20;

}  // namespace

void* operator new(std::size_t n) {
  const size_t need = (sizeof(header) + n + 15) & ~size_t{15};
  if (need > chunk_bytes) throw std::bad_alloc();
  if (!chunk || chunk_used + need > chunk_bytes) {
    void* p =
        mmap(nullptr, chunk_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    chunk = static_cast<unsigned char*>(p);
    chunk_used = 0;
  }
  auto* h = reinterpret_cast<header*>(chunk + chunk_used);
  chunk_used += need;
  h->magic = magic;
  h->size = n;
  if (marked(n)) {
    ++live_marked;
    ++total_marked;
  }
  return h + 1;
}

void operator delete(void* p) noexcept {
  if (!p) return;
  auto* h = static_cast<header*>(p) - 1;
  if (h->magic != magic) {
    std::fprintf(stderr, "own_operators: a block not of this allocator reached its delete\n");
    std::_Exit(1);
  }
  h->magic = ~magic;  // freed: a second delete is caught
  if (marked(h->size)) --live_marked;
}

int main() {
  uint64_t sum = 0;
  {
    // Sized delete (GCC emits _ZdlPvm for these), array new and delete, nothrow new,
    // containers: 200 000 blocks, 100 MiB, more than the limit.
    std::vector<std::unique_ptr<std::string>> strings;
    for (int i = 0; i < 200000; ++i) {
      strings.push_back(std::make_unique<std::string>(400, static_cast<char>('a' + i % 26)));
      if (i % 3 == 0) {
        auto* a = new int[64];
        for (int k = 0; k < 64; ++k) a[k] = i + k;
        sum += static_cast<uint64_t>(a[i % 64]);
        delete[] a;
      }
      if (i % 5 == 0) {
        auto* q = new (std::nothrow) uint64_t(i);
        sum += *q;
        delete q;
      }
    }
    for (const auto& s : strings) sum = sum * 31 + static_cast<unsigned char>((*s)[s->size() / 2]);
  }
  if (live_marked != 0 || total_marked < 200000) {
    std::fprintf(stderr,
                 "own_operators: %ld of %ld blocks never came back to the program's delete\n",
                 live_marked, total_marked);
    return 1;
  }
  std::printf("%llu\n", static_cast<unsigned long long>(sum));
  return 0;
}
