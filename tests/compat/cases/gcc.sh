# A compiler: gcc -O2 on a generated 230 KB C file (600 functions, all inlined into main: cc1's
# GC heap and obstacks are many small allocations); output: the object's disassembly.
description="gcc -O2 -c on a generated C file (600 functions)"
packages=(gcc binutils)
program="gcc -O2"
prepare() {
  /usr/bin/python3 - 600 >big.c <<'PY'
import random, sys
rng = random.Random(3)
n = int(sys.argv[1])
out = ["#include <stdio.h>", "#include <stdint.h>"]
for f in range(n):
    a, b, c = rng.randrange(1, 1000), rng.randrange(1, 1000), rng.randrange(1, 64)
    out.append(f"static uint64_t f{f}(uint64_t x, const uint32_t *t) {{\n  uint64_t acc = {a}u;\n"
               f"  for (int i = 0; i < {c}; i++) {{\n    acc = acc * {b}u + (x ^ t[(i + {f}) & 255]);\n"
               f"    if (acc & {1 << (f % 17)}u) acc ^= acc >> {1 + f % 13}; else acc += x << {f % 7};\n"
               f"    switch ((acc + i) & 3) {{ case 0: x += {a}; break; case 1: x ^= acc; break; "
               f"case 2: x *= {b | 1}u; break; default: x -= i; }}\n  }}\n  return acc + x;\n}}")
out.append("int main(void) {\n  static uint32_t t[256];\n"
           "  for (int i = 0; i < 256; i++) t[i] = i * 2654435761u;\n  uint64_t s = 0;")
for f in range(n):
    out.append(f"  s += f{f}(s + {f}, t);")
out.append('  printf("%llu\\n", (unsigned long long)s);\n  return 0;\n}')
print("\n".join(out))
PY
}
command=(gcc -O2 -c "$IN/big.c" -o big.o)
# The object's code (objdump's header names the file: skipped), and the linked program's output.
check() {
  objdump -d big.o | tail -n +4 | sha256sum
  gcc big.o -o big && ./big
}
