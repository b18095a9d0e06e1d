// Where leap finds its data (built-in suite, ABI header) and its sibling executables.
#pragma once
#include <string>

namespace leap {

// $LEAP_DATA_DIR, else the source tree leap was built from.
std::string data_dir();
// Folder with include/leap/candidate.h (and dlpack when bundled).
std::string abi_include_dir();
// Directory of the running executable.
std::string exe_dir();
// The leap-evald beside the running executable, else $LEAP_EVALD.
std::string evald_path();
// leap-nvrtc ($LEAP_NVRTC, else beside or one folder above the running executable); "" if absent.
std::string nvrtc_path();
// $LEAP_CACHE_DIR, else $XDG_CACHE_HOME/leap, else ~/.cache/leap.
std::string default_cache_dir();
// Reads a whole file; throws LeapError naming the file.
std::string read_file(const std::string& path);
// Writes `text` to `path` (replacing it); throws LeapError naming the path when it cannot.
void write_file(const std::string& path, const std::string& text);

}  // namespace leap
