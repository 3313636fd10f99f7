// A library of the own-malloc program whose constructor allocates, as some of Chromium's
// libraries do: it runs before the shim's constructor, so the program's malloc, holding its
// lock, maps its first chunk through the shim's mmap, which finds the C library's functions
// then. Had that lookup allocated (glibc's dlopen does), it would have come back into the
// program's malloc under its lock: EDEADLK here, a spin forever in Chromium.
#include <stdlib.h>
#include <string.h>

char* own_malloc_early_block;

__attribute__((constructor)) static void allocate_early(void) {
  own_malloc_early_block = malloc(64);
  if (own_malloc_early_block) strcpy(own_malloc_early_block, "allocated by a constructor");
}
