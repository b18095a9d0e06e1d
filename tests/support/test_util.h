// Helpers shared by the test suites: temporary folders and files.
#pragma once
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace leap::test {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "leap-test.XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string write(const std::string& name, const std::string& text) const {
    auto p = std::filesystem::path(path_) / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }

 private:
  std::string path_;
};

inline std::string source_dir() { return LEAP_TEST_SOURCE_DIR; }
inline std::string build_dir() { return LEAP_TEST_BUILD_DIR; }

}  // namespace leap::test
