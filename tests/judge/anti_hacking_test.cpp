#include <gtest/gtest.h>

#include "judge/check/anti_hacking.h"

namespace leap {
namespace {

TEST(ForbiddenImport, KernelImportsPass) {
  EXPECT_FALSE(forbidden_import({"expf", "memcpy", "malloc", "free", "pthread_create", "_Znwm", "__cxa_throw"}));
}

TEST(ForbiddenImport, ProcessNetworkLoadingAndFilesAreCaught) {
  for (const char* sym : {"fork", "execve", "system", "popen", "socket", "connect", "dlopen", "dlsym", "fopen",
                          "open64", "kill", "syscall"})
    EXPECT_EQ(forbidden_import({"expf", sym}).value_or(""), sym);
  EXPECT_EQ(forbidden_import({"fork@GLIBC_2.2.5"}).value_or(""), "fork");
  EXPECT_TRUE(forbidden_import({"_ZNSt14basic_ofstreamIcSt11char_traitsIcEEC1EPKcSt13_Ios_Openmode"}));
  EXPECT_FALSE(forbidden_import({"forked_sum", "opener"}));
}

}  // namespace
}  // namespace leap
