#include <gtest/gtest.h>

#include "compile_farm/diagnostics.h"

namespace leap {
namespace {

TEST(Diagnostics, StartsAtFirstErrorAndRenamesTempPath) {
  std::string out =
      "/tmp/j/candidate.cpp:1:1: warning: unused\n"
      "/tmp/j/candidate.cpp: In function 'int f()':\n"
      "/tmp/j/candidate.cpp:3:5: error: 'x' was not declared\n"
      "    3 |     x = 1;\n";
  auto d = trim_diagnostics(out, "/tmp/j/candidate.cpp", "relu.cpp", 10);
  EXPECT_EQ(d.find("warning"), std::string::npos) << d;
  EXPECT_EQ(d.rfind("relu.cpp: In function", 0), 0u) << d;
  EXPECT_NE(d.find("relu.cpp:3:5: error"), std::string::npos) << d;
  EXPECT_EQ(d.find("/tmp/j"), std::string::npos) << d;
}

TEST(Diagnostics, BoundedWithCountOfDroppedLines) {
  std::string out;
  for (int i = 0; i < 100; ++i) out += "a.cpp:" + std::to_string(i) + ":1: error: e\n";
  auto d = trim_diagnostics(out, "/x/a.cpp", "a.cpp", 5);
  EXPECT_NE(d.find("(95 more lines)"), std::string::npos) << d;
}

TEST(Diagnostics, LinkerErrorsKeepTheUndefinedReference) {
  std::string out =
      "/usr/bin/ld: /tmp/cc1.o: in function `leap_kernel':\n"
      "candidate.cpp:(.text+0x1): undefined reference to `fast_relu'\n"
      "collect2: error: ld returned 1 exit status\n";
  auto d = trim_diagnostics(out, "/tmp/j/candidate.cpp", "relu.cpp", 10);
  EXPECT_NE(d.find("relu.cpp:(.text+0x1): undefined reference to `fast_relu'"), std::string::npos) << d;
}

}  // namespace
}  // namespace leap
