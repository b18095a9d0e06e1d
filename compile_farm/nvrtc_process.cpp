// leap-nvrtc: the device pass of a CUDA candidate through NVRTC, as a process of its own so
// that a compiler crash or a runaway compile costs a child, not the worker rank.
//   leap-nvrtc --arch sm_90 --include-dir DIR -o out.cubin device.cu   (exit 0: cubin written)
//   leap-nvrtc --arch sm_90 --include-dir DIR --serve   (requests on stdin, see serve())
//   leap-nvrtc --version
// Headers: leap/candidate.h and dlpack come from DIR; the C and CUDA headers a kernel file
// usually includes are provided here (NVRTC has no system headers).

#include "compile_farm/nvrtc_process.h"

#include <nvrtc.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

const char* const kStdint = R"(#pragma once
typedef signed char int8_t; typedef short int16_t; typedef int int32_t; typedef long int64_t;
typedef unsigned char uint8_t; typedef unsigned short uint16_t; typedef unsigned int uint32_t;
typedef unsigned long uint64_t; typedef long intptr_t; typedef unsigned long uintptr_t;
#define INT8_MAX 127
#define INT16_MAX 32767
#define INT32_MAX 2147483647
#define INT64_MAX 9223372036854775807L
#define INT32_MIN (-INT32_MAX - 1)
#define INT64_MIN (-INT64_MAX - 1L)
#define UINT32_MAX 4294967295U
#define UINT64_MAX 18446744073709551615UL
#ifdef __cplusplus
namespace std { using ::int8_t; using ::int16_t; using ::int32_t; using ::int64_t; using ::uint8_t;
using ::uint16_t; using ::uint32_t; using ::uint64_t; using ::intptr_t; using ::uintptr_t; }
#endif
)";

const char* const kStddef = R"(#pragma once
typedef long ptrdiff_t;
#ifndef NULL
#define NULL 0
#endif
#define offsetof(t, m) __builtin_offsetof(t, m)
#ifdef __cplusplus
namespace std { using ::size_t; using ::ptrdiff_t; }
#endif
)";

const char* const kMath = R"(#pragma once
#define INFINITY __int_as_float(0x7f800000)
#define HUGE_VALF __int_as_float(0x7f800000)
#define HUGE_VAL __longlong_as_double(0x7ff0000000000000LL)
#define NAN __int_as_float(0x7fffffff)
#define M_E 2.7182818284590452354
#define M_LOG2E 1.4426950408889634074
#define M_LN2 0.69314718055994530942
#define M_LN10 2.30258509299404568402
#define M_PI 3.14159265358979323846
#define M_PI_2 1.57079632679489661923
#define M_2_SQRTPI 1.12837916709551257390
#define M_SQRT2 1.41421356237309504880
#define M_SQRT1_2 0.70710678118654752440
)";

const char* const kFloat = R"(#pragma once
#define FLT_MAX 3.402823466e+38F
#define FLT_MIN 1.175494351e-38F
#define FLT_EPSILON 1.192092896e-07F
#define DBL_MAX 1.7976931348623158e+308
#define DBL_MIN 2.2250738585072014e-308
#define DBL_EPSILON 2.2204460492503131e-016
)";

const char* const kLimits = R"(#pragma once
#define CHAR_BIT 8
#define INT_MAX 2147483647
#define INT_MIN (-INT_MAX - 1)
#define UINT_MAX 4294967295U
#define LONG_MAX 9223372036854775807L
#define LLONG_MAX 9223372036854775807LL
)";

// Host-side types a host function's signature may name (its body is not compiled here).
const char* const kCudaRuntime = R"(#pragma once
#include <stdint.h>
#include <stddef.h>
)";

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Compiler {
  std::string arch, include_dir;
  std::vector<std::string> defines;
  std::vector<std::string> options;  // further NVRTC options (--use_fast_math)
  std::vector<std::pair<std::string, std::string>> headers;

  void load_headers() {
    std::string dlpack;
    for (const std::string& dir : {include_dir, std::string(LEAP_DLPACK_INCLUDE_DIR)}) {
      std::ifstream probe(dir + "/dlpack/dlpack.h");
      if (probe) {
        dlpack = read(dir + "/dlpack/dlpack.h");
        break;
      }
    }
    headers = {{"leap/candidate.h", read(include_dir + "/leap/candidate.h")},
               {"dlpack/dlpack.h", dlpack},
               {"stdint.h", kStdint}, {"cstdint", kStdint}, {"stddef.h", kStddef}, {"cstddef", kStddef},
               {"math.h", kMath}, {"cmath", kMath}, {"float.h", kFloat}, {"cfloat", kFloat},
               {"limits.h", kLimits}, {"climits", kLimits},
               {"cuda_runtime.h", kCudaRuntime}, {"cuda_runtime_api.h", kCudaRuntime}};
  }

  // 0: cubin written; 1: the source does not compile (log says why); 3: our failure.
  int compile(const std::string& src, const std::string& out, std::string& log) const {
    std::string source;
    try {
      source = read(src);
    } catch (const std::exception& e) {
      log = e.what();
      return 3;
    }
    std::vector<const char*> contents, names;
    for (const auto& [name, text] : headers) {
      names.push_back(name.c_str());
      contents.push_back(text.c_str());
    }
    nvrtcProgram prog;
    if (nvrtcCreateProgram(&prog, source.c_str(), src.c_str(), static_cast<int>(headers.size()), contents.data(),
                           names.data()) != NVRTC_SUCCESS) {
      log = "cannot create the program";
      return 3;
    }
    std::vector<std::string> opts{"-arch=" + arch, "-std=c++17"};
    for (const auto& d : defines) opts.push_back("-D" + d);
    opts.insert(opts.end(), options.begin(), options.end());
    std::vector<const char*> copts;
    for (const auto& o : opts) copts.push_back(o.c_str());
    nvrtcResult res = nvrtcCompileProgram(prog, static_cast<int>(copts.size()), copts.data());
    size_t log_size = 0;
    nvrtcGetProgramLogSize(prog, &log_size);
    log.assign(log_size, '\0');
    if (log_size > 1) nvrtcGetProgramLog(prog, log.data());
    log.resize(log_size > 0 ? log_size - 1 : 0);
    if (res != NVRTC_SUCCESS) {
      nvrtcDestroyProgram(&prog);
      return 1;
    }
    size_t size = 0;
    nvrtcGetCUBINSize(prog, &size);
    std::string cubin(size, '\0');
    nvrtcGetCUBIN(prog, cubin.data());
    nvrtcDestroyProgram(&prog);
    std::ofstream o(out, std::ios::binary);
    o.write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
    if (!o) {
      log = "cannot write " + out;
      return 3;
    }
    return 0;
  }
};

// One request per line, "SOURCE<TAB>OUTPUT"; one reply each, "CODE LOG_BYTES\n" then the log.
// Serving many compiles from one process pays the loading of NVRTC (hundreds of ms of page
// faults on some machines) once. Ends at end of input: the farm closing the pipe, or dying.
int serve(const Compiler& c) {
  for (std::string line; std::getline(std::cin, line);) {
    size_t tab = line.find('\t');
    std::string log;
    int code = tab == std::string::npos ? 3 : c.compile(line.substr(0, tab), line.substr(tab + 1), log);
    if (tab == std::string::npos) log = "malformed request";
    std::cout << code << " " << log.size() << "\n" << log << std::flush;
  }
  return 0;
}

}  // namespace

int leap::nvrtc_process_main(int argc, char** argv) {
  CLI::App app{"leap-nvrtc: the device pass of a CUDA candidate through NVRTC"};
  std::string arch = "sm_90", include_dir, out, src;
  bool version = false, serve_mode = false;
  std::vector<std::string> defines;
  app.add_option("--arch", arch, "target (sm_XX: a cubin)");
  app.add_option("--include-dir", include_dir, "folder with leap/candidate.h (and dlpack/dlpack.h)");
  std::vector<std::string> options;
  app.add_option("-D", defines, "macro definitions");
  app.add_option("--nvrtc-option", options, "a further NVRTC option (e.g. --use_fast_math)");
  app.add_option("-o", out, "output cubin");
  app.add_option("source", src, "device source");
  app.add_flag("--version", version, "print the NVRTC version");
  app.add_flag("--serve", serve_mode, "compile requests read from stdin until it closes");
  CLI11_PARSE(app, argc, argv);
  if (version) {
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    std::cout << "nvrtc " << major << "." << minor << "\n";
    return 0;
  }
  if (include_dir.empty()) {
    std::cerr << "leap-nvrtc: --include-dir is required\n";
    return 2;
  }
  Compiler c{arch, include_dir, defines, options, {}};
  try {
    c.load_headers();
  } catch (const std::exception& e) {
    std::cerr << "leap-nvrtc: " << e.what() << "\n";
    return 3;
  }
  if (serve_mode) return serve(c);
  if (src.empty() || out.empty()) {
    std::cerr << "leap-nvrtc: -o and a source are required\n";
    return 2;
  }
  std::string log;
  int code = c.compile(src, out, log);
  std::cerr << log;
  return code;
}
