// Monotonic clock helpers shared by every stage timer.
#pragma once
#include <chrono>

namespace leap {

using Clock = std::chrono::steady_clock;

// Seconds on the monotonic clock: differences only (deadlines, ages), never across processes.
inline double monotonic_seconds() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

inline double micros_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// Wall-clock seconds since the Unix epoch: stage timestamps comparable across processes.
inline double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

inline double millis_until(Clock::time_point deadline) {
  return std::chrono::duration<double, std::milli>(deadline - Clock::now()).count();
}

inline Clock::time_point after_seconds(double s) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace leap
