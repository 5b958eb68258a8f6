// The monkey's action log: a bounded list of lines under a mutex.
#include "monkey_log.h"

#include <cstdio>
#include <deque>
#include <mutex>

namespace monkey_log {
namespace {

constexpr std::size_t kKept = 300;
constexpr std::size_t kPrinted = 60;

// Never destroyed: LeakSanitizer's report runs after static destructors
// and its death callback prints this log (a destroyed deque was read there).
std::mutex& mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::deque<std::string>& lines() {
  static auto* l = new std::deque<std::string>;
  return *l;
}
std::string& header() {
  static auto* h = new std::string;
  return *h;
}

}  // namespace

void setHeader(const std::string& h) {
  std::lock_guard<std::mutex> lock(mutex());
  header() = h;
}

void add(const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex());
  lines().push_back(line);
  if (lines().size() > kKept) lines().pop_front();
}

std::string last() {
  std::lock_guard<std::mutex> lock(mutex());
  for (auto it = lines().rbegin(); it != lines().rend(); ++it)
    if (it->rfind("  qt: ", 0) != 0) return *it;
  return {};
}

void dumpTail(const char* why) {
  std::unique_lock<std::mutex> lock(mutex(), std::try_to_lock);
  std::fprintf(stderr, "test_monkey: %s; %s; replay with --seed and the same --seconds. Last actions:\n", why,
               header().c_str());
  const std::deque<std::string>& l = lines();
  const std::size_t from = l.size() > kPrinted ? l.size() - kPrinted : 0;
  for (std::size_t i = from; i < l.size(); ++i) std::fprintf(stderr, "  %s\n", l[i].c_str());
  std::fflush(stderr);
}

}  // namespace monkey_log
