// Facts about the machine and the calling thread that the `uswap` subcommands put beside their
// figures: the CPU model and count, the load average, a thread's CPU time.
//
// Why one home: every report names the machine it ran on (the project's figures are ratios taken
// on a shared 2-core machine, and a reader needs to know which), and every rate per CPU-second
// reads the thread's CPU clock; four copies of the /proc/cpuinfo parser and three of the CPU
// clock read had already started to differ in how they trimmed the model name.
//
// Thread-safety: every function may be called from any thread; thread_cpu_seconds() and
// thread_times() measure the calling thread.
// Invariants: cpu_model() is never empty ("unknown CPU" when /proc/cpuinfo has no model name);
// load_average() is the first three fields of /proc/loadavg separated by single spaces.
#pragma once

#include <string>

namespace uswap::tools {

// /proc/cpuinfo's first "model name", without the surrounding blanks.
std::string cpu_model();
// The CPUs online (std::thread::hardware_concurrency()).
unsigned cpu_count();
// "N CPUs, <model>": the machine line of the reports that name both.
std::string machine_description();
// /proc/loadavg's three averages, "0.52 0.61 0.70": how busy the shared machine was.
std::string load_average();

// The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), in seconds.
double thread_cpu_seconds();

struct cpu_times {
  double user = 0, sys = 0;  // RUSAGE_THREAD: the kernel's tick-sampled split, for display
  double total = 0;          // CLOCK_THREAD_CPUTIME_ID: exact to the nanosecond, for rates
  cpu_times operator-(const cpu_times& o) const { return {user - o.user, sys - o.sys, total - o.total}; }
};
// The calling thread's CPU time so far. Rates divide by `total`: a run of a millisecond or two
// (bench seeds --quick) gave user + sys deltas of 0 from getrusage on this machine, and a
// flt/cpu/s of 0 with them.
cpu_times thread_times();

}  // namespace uswap::tools
