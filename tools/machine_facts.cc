#include "machine_facts.h"

#include <sys/resource.h>

#include <ctime>
#include <fstream>
#include <thread>

namespace uswap::tools {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const auto first = line.find_first_not_of(" \t", colon + 1);
    if (first == std::string::npos) continue;
    return line.substr(first, line.find_last_not_of(" \t") + 1 - first);
  }
  return "unknown CPU";
}

unsigned cpu_count() { return std::thread::hardware_concurrency(); }

std::string machine_description() {
  return std::to_string(cpu_count()) + " CPUs, " + cpu_model();
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

cpu_times thread_times() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return {static_cast<double>(ru.ru_utime.tv_sec) + static_cast<double>(ru.ru_utime.tv_usec) / 1e6,
          static_cast<double>(ru.ru_stime.tv_sec) + static_cast<double>(ru.ru_stime.tv_usec) / 1e6,
          thread_cpu_seconds()};
}

}  // namespace uswap::tools
