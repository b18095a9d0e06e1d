#include <gtest/gtest.h>

#include <algorithm>

#include "common/error.h"
#include "common/subprocess.h"
#include "compile_farm/elf_symbols.h"
#include "support/test_util.h"

namespace leap {
namespace {

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

TEST(ElfSymbols, ImportsAndExportsOfARealLibrary) {
  test::TempDir dir;
  auto src = dir.write("k.c",
                       "#include <math.h>\n#include <unistd.h>\n"
                       "__attribute__((visibility(\"default\"))) int leap_kernel(void) { return (int)expf(getpid()); }\n"
                       "static int hidden(void) { return 1; }\n int (*keep)(void) = hidden;\n");
  auto lib = dir.path() + "/k.so";
  auto r = run_command({"gcc", "-shared", "-fPIC", "-o", lib, src, "-lm"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto s = read_dynamic_symbols(lib);
  EXPECT_TRUE(has(s.exports, "leap_kernel"));
  EXPECT_FALSE(has(s.exports, "hidden"));
  EXPECT_TRUE(has(s.imports, "expf"));
  EXPECT_TRUE(has(s.imports, "getpid"));
}

TEST(ElfSymbols, NonElfIsAnError) {
  test::TempDir dir;
  EXPECT_THROW(read_dynamic_symbols(dir.write("x.so", "not an elf file at all, sorry")), LeapError);
  EXPECT_THROW(read_dynamic_symbols(dir.write("y.so", "\x7f" "ELF")), LeapError);
}

}  // namespace
}  // namespace leap
