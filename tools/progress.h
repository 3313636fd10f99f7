// progress_line: what a long-running `uswap` subcommand shows on stderr while it works.
//
// On a terminal the line is rewritten in place ("\r", the text, erase to the end of the line)
// and erased when the work is done, so that only the report stays on the screen. Without a
// terminal (a log, a test capturing 2>&1) rewriting makes no sense: a shown text becomes a line
// of its own, at most one per `plain_interval_s` (so that a log stays readable), and a finished
// step (step()) always does.
//
// Thread-safety: show(), step() and clear() may be called from any thread (usemem's monitor
// thread reports while the main thread waits); one mutex orders them.
// Invariants: nothing is written to stdout; the terminal line never exceeds `width` characters
// of text; after clear() (and the destructor) the terminal line is empty.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>

namespace uswap::tools {

class progress_line {
 public:
  struct style {
    // Without a terminal, a show() becomes a line when at least this long passed since the last
    // line: 0 (default) every one, a negative value never (only step() lines).
    double plain_interval_s = 0;
    // show() calls earlier than this after construction are dropped (a run that ends quickly
    // shows no progress at all). Default 0.
    double delay_s = 0;
    // When not empty, every text is prefixed with "[<phase> <elapsed> s] ". Default empty.
    std::string phase;
    // At most this many characters on the terminal (0: no limit). Default 100.
    size_t width = 100;
  };

  progress_line() : progress_line(style{}) {}
  explicit progress_line(style s);
  ~progress_line() { clear(); }
  progress_line(const progress_line&) = delete;
  progress_line& operator=(const progress_line&) = delete;

  // The current state of the work.
  void show(std::string_view text);
  // A finished step: rewritten in place on a terminal, always its own line otherwise.
  void step(std::string_view text);
  // Erases the terminal line, if one is shown.
  void clear();
  // Seconds since construction.
  double elapsed_s() const;

 private:
  void emit(std::string_view text, bool force_line);

  style style_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  double last_line_s_ = -1;  // when the last plain line was written (-1: never)
  bool shown_ = false;       // a terminal line is on the screen
  std::mutex lock_;
};

}  // namespace uswap::tools
