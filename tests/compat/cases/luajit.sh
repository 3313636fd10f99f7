# A JIT-compiled interpreter with a garbage collector of its own: LuaJIT interns 6 million
# strings (every lookup walks its string hash table) and keeps 3 million of them in a table.
# A hang detector, not a speed test: at half its peak every pass pages the working set, and a
# CI run took 233 s of the 300 s floor under uswap. 600 s leaves a slower host room.
case_min_timeout=600
case_max_timeout=600
description="luajit: 3M strings interned and kept in a table, their lengths summed"
packages=(luajit)
program="luajit"
prepare() { :; }
cost=35
command=(luajit -e 'local t = {} for i = 1, 3000000 do t[i] = tostring(i) .. ":x" end
local s = 0 for i = 1, #t do s = s + #t[i] end print(s)')
