// write_file_atomically: a small file replaced whole, for the statistics directories other
// programs read while uswap runs (`uswap serve`'s statsdir=, `uswap run --stats-dir`): written
// to DIR/.NAME.tmp and renamed over DIR/NAME, so a reader sees the old contents or the new,
// never a part.
//
// Thread-safety: concurrent calls for the same DIR/NAME race on the temporary file; callers
// write each directory from one thread.
// Invariants: on failure DIR/NAME is as it was and no temporary file is left.
#pragma once

#include <string>

#include "uswap/base/status.h"

namespace uswap {

// Errors carry the errno of the step that failed (open, write, close or rename) and name the path.
status write_file_atomically(const std::string& dir, const char* name, const std::string& text);

}  // namespace uswap
