// The monkey's action log: the last few hundred actions, kept so that a
// crash, a sanitizer report, a hang or a failed check can print them.
#pragma once

#include <string>

namespace monkey_log {

// The line printed above the tail (the seed).
void setHeader(const std::string& header);
void add(const std::string& line);
// The last action (for "late after ...").
std::string last();
// Prints the header and the last 60 lines to stderr. Callable from any
// thread and from a dying process (it does not wait for a lock held
// elsewhere).
void dumpTail(const char* why);

}  // namespace monkey_log
