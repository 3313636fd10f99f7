#include "progress.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

namespace uswap::tools {

progress_line::progress_line(style s)
    : style_(std::move(s)), tty_(isatty(STDERR_FILENO)), start_(std::chrono::steady_clock::now()) {}

double progress_line::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void progress_line::show(std::string_view text) { emit(text, false); }

void progress_line::step(std::string_view text) { emit(text, true); }

void progress_line::emit(std::string_view text, bool force_line) {
  const double s = elapsed_s();
  if (!force_line && s < style_.delay_s) return;
  std::string line;
  if (!style_.phase.empty()) {
    char head[64];
    std::snprintf(head, sizeof head, "[%s %4.1f s] ", style_.phase.c_str(), s);
    line = head;
  }
  line += text;
  std::lock_guard lk(lock_);
  if (tty_) {
    if (style_.width && line.size() > style_.width) line.resize(style_.width);
    std::cerr << "\r\033[K" << line << std::flush;
    shown_ = true;
    return;
  }
  const bool due = style_.plain_interval_s >= 0 &&
                   (last_line_s_ < 0 || s >= last_line_s_ + style_.plain_interval_s);
  if (force_line || due) {
    std::cerr << line << "\n";
    last_line_s_ = s;
  }
}

void progress_line::clear() {
  std::lock_guard lk(lock_);
  if (tty_ && shown_) std::cerr << "\r\033[K" << std::flush;
  shown_ = false;
}

}  // namespace uswap::tools
