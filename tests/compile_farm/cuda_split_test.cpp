// The NVRTC fast path of the compile farm: the source split (pure text) and real builds with
// NVRTC, the host compiler and nvcc (the toolkit compiles here; running needs the GPU tests).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/paths.h"
#include "compile_farm/cuda_split.h"
#include "compile_farm/elf_symbols.h"
#include "compile_farm/farm.h"
#include "compile_farm/nvrtc_server.h"
#include "support/test_util.h"
#include "tasks/schedule.h"

namespace leap {
namespace {

namespace fs = std::filesystem;

const char* kSoftmaxLike = R"(#include <leap/candidate.h>
#include <cuda_runtime.h>

// a comment with { braces and a "string" }
template <bool kMax>
__device__ float reduce(float v) { return v; }

__global__ void __launch_bounds__(256) rows(const float* __restrict__ x, float* y, int64_t d) {
  y[blockIdx.x] = reduce<true>(x[blockIdx.x * d]);
}

static int blocks_for(int64_t n) { return (int)((n + 255) / 256); }

LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  const int64_t n = in[0].shape[0];
  rows<<<blocks_for(n), 256, 0, (cudaStream_t)stream>>>(LEAP_DATA(const float, &in[0]),
      LEAP_DATA(float, &out[0]), in[0].shape[1]);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
)";

size_t lines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

TEST(CudaSplit, SeparatesDeviceAndHostKeepingLineNumbers) {
  std::string why;
  auto split = split_cuda_source(kSoftmaxLike, &why);
  ASSERT_TRUE(split) << why;
  EXPECT_EQ(split->kernels, std::vector<std::string>{"rows"});
  EXPECT_EQ(lines(split->device_source), lines(kSoftmaxLike));
  EXPECT_EQ(lines(split->host_source), lines(kSoftmaxLike));
  // Device pass: the kernel with C linkage, device helpers kept, host functions gone.
  EXPECT_NE(split->device_source.find("extern \"C\" __global__ void __launch_bounds__(256) rows("), std::string::npos);
  EXPECT_NE(split->device_source.find("reduce<true>"), std::string::npos);
  EXPECT_EQ(split->device_source.find("<<<"), std::string::npos);
  EXPECT_EQ(split->device_source.find("cudaGetLastError"), std::string::npos);
  EXPECT_EQ(split->device_source.find("leap_kernel"), std::string::npos);
  EXPECT_EQ(split->device_source.find("blocks_for"), std::string::npos);
  // Host pass: no device code, the kernel as a declaration, the launch rewritten.
  EXPECT_EQ(split->host_source.find("reduce"), std::string::npos);
  EXPECT_EQ(split->host_source.find("blockIdx"), std::string::npos);
  EXPECT_NE(split->host_source.find("int64_t d) ;"), std::string::npos);
  EXPECT_NE(split->host_source.find("__leap_launch<decltype(rows)>(\"rows\",blocks_for(n), 256, 0, (cudaStream_t)stream)("),
            std::string::npos);
  EXPECT_NE(split->host_source.find("a comment with { braces"), std::string::npos);
}

// A KernelBench answer's cuda_sources (load_inline): PyTorch's headers and host code using them
// stay in the host pass; NVRTC sees the kernels. Without the load_inline flag such includes are
// what NVRTC lacks, and nvcc builds the source.
const char* kLoadInlineSource = R"(#include <torch/types.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <vector>

__global__ void relu_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  auto y = torch::empty_like(x);
  const int64_t n = x.numel();
  relu_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
)";

TEST(CudaSplit, LoadInlineSourcesKeepPyTorchInTheHostPass) {
  std::string why;
  EXPECT_FALSE(split_cuda_source(kLoadInlineSource, &why));
  EXPECT_NE(why.find("torch/types.h"), std::string::npos) << why;
  auto split = split_cuda_source(kLoadInlineSource, &why, /*torch=*/true);
  ASSERT_TRUE(split) << why;
  EXPECT_EQ(split->kernels, std::vector<std::string>{"relu_kernel"});
  EXPECT_EQ(split->device_source.find("torch"), std::string::npos) << split->device_source;
  EXPECT_EQ(split->device_source.find("cuda.h"), std::string::npos);
  EXPECT_NE(split->device_source.find("#include <cuda_runtime.h>"), std::string::npos);
  EXPECT_NE(split->device_source.find("extern \"C\" __global__ void relu_kernel("), std::string::npos);
  EXPECT_NE(split->host_source.find("#include <ATen/cuda/CUDAContext.h>"), std::string::npos);
  EXPECT_NE(split->host_source.find("__leap_launch<decltype(relu_kernel)>(\"relu_kernel\",(n + 255) / 256, 256, 0, "
                                    "at::cuda::getCurrentCUDAStream())("),
            std::string::npos)
      << split->host_source;
  EXPECT_EQ(lines(split->host_source), lines(kLoadInlineSource));
}

TEST(CudaSplit, KernelsInNamespacesAndLinkageBlocks) {
  const char* src = R"(#include <leap/candidate.h>
namespace {
__global__ void k1(float* y) { y[0] = 1; }
}
extern "C" {
__global__ void k2(float* y) { y[0] = 2; }
}
LEAP_ENTRY int leap_kernel(const DLTensor* in, int, DLTensor* out, int, void* s) {
  k1<<<1, 1, 0, (cudaStream_t)s>>>((float*)out[0].data);
  k2<<<1, 1, 0, (cudaStream_t)s>>>((float*)out[0].data);
  return 0;
}
)";
  auto split = split_cuda_source(src);
  ASSERT_TRUE(split);
  EXPECT_EQ(split->kernels, (std::vector<std::string>{"k1", "k2"}));
  EXPECT_NE(split->device_source.find("extern \"C\" __global__ void k1"), std::string::npos);
  // The unnamed namespace is named (internal linkage would drop the C name) and used.
  EXPECT_NE(split->device_source.find("namespace __leap_unnamed_0 {"), std::string::npos);
  EXPECT_NE(split->device_source.find("} using namespace __leap_unnamed_0;"), std::string::npos);
  // Already C linkage: not declared twice.
  EXPECT_EQ(split->device_source.find("extern \"C\" __global__ void k2"), std::string::npos);
}

TEST(CudaSplit, WhatNvrtcCannotCarryGoesToNvcc) {
  struct Case {
    const char* source;
    const char* reason;
  } cases[] = {
      {"template <int N> __global__ void k(float* y) {}\nint f(float* y) { k<4><<<1, 1>>>(y); return 0; }\n",
       "templated kernel"},
      {"__constant__ float c[4];\n__global__ void k(float* y) { y[0] = c[0]; }\n", "__constant__"},
      {"#include <cublas_v2.h>\n__global__ void k(float* y) {}\n", "includes <cublas_v2.h>"},
      {"__global__ void k(float* y) {}\n__global__ void k(int* y) {}\n", "defined twice"},
      {"void f(float* y) { auto p = &g; p<<<1, 1>>>(y); }\n", "not a kernel defined before"},
      {"__global__ void k(float* y) { y[0] = 0; \n", "unbalanced braces"},
  };
  for (const auto& c : cases) {
    std::string why;
    EXPECT_FALSE(split_cuda_source(c.source, &why)) << c.source;
    EXPECT_NE(why.find(c.reason), std::string::npos) << "reason '" << why << "' for:\n" << c.source;
  }
}

// Real builds: NVRTC + host compiler when leap-nvrtc and the CUDA toolkit are there.
class NvrtcFarm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (nvrtc_path().empty()) GTEST_SKIP() << "leap-nvrtc not built (no CUDA toolkit with NVRTC)";
    cfg_.cache_dir = dir_.path() + "/cache";
    cfg_.jobs = 2;
    try {
      farm_ = std::make_unique<CompileFarm>(cfg_, make_nvcc_driver(cfg_));
    } catch (const std::exception& e) {
      GTEST_SKIP() << "nvcc does not run here: " << e.what();
    }
    ASSERT_TRUE(farm_->nvrtc_enabled());
  }
  test::TempDir dir_;
  CompileConfig cfg_;
  std::unique_ptr<CompileFarm> farm_;
};

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The embedded image is a CUDA ELF (e_machine 190) inside the host library.
bool embeds_cubin(const std::string& lib) {
  std::string bytes = read(lib);
  for (size_t p = bytes.find("\x7f" "ELF", 1); p != std::string::npos; p = bytes.find("\x7f" "ELF", p + 1))
    if (p + 20 <= bytes.size() && static_cast<unsigned char>(bytes[p + 18]) == 190) return true;
  return false;
}

TEST_F(NvrtcFarm, EveryCudaExampleBuildsThroughNvrtc) {
  std::vector<std::pair<std::string, std::shared_future<CompileResult>>> jobs;
  for (const auto& e : fs::directory_iterator(test::source_dir() + "/examples/cuda"))
    jobs.emplace_back(e.path().filename().string(),
                      farm_->submit({e.path().filename().string(), read(e.path().string()), Backend::cuda}));
  ASSERT_GE(jobs.size(), 30u);
  // The host pass's prelude was precompiled once into the cache.
  bool pch = false;
  for (const auto& e : fs::directory_iterator(cfg_.cache_dir))
    pch = pch || fs::exists(e.path() / "nvrtc_host.h.gch");
  EXPECT_TRUE(pch);
  for (auto& [name, fut] : jobs) {
    const CompileResult& r = fut.get();
    ASSERT_TRUE(r.ok) << name << ": " << r.diagnostics;
    EXPECT_EQ(r.compiler, "nvrtc") << name << " went to nvcc: " << r.nvrtc_fallback;
    EXPECT_TRUE(embeds_cubin(r.library_path)) << name;
    // Every kernel of the image has its plain C name (what the host pass launches by).
    std::string bytes = read(r.library_path);
    auto split = split_cuda_source(read(test::source_dir() + "/examples/cuda/" + name));
    ASSERT_TRUE(split) << name;
    for (const auto& k : split->kernels)
      EXPECT_NE(bytes.find(std::string(1, '\0') + k + std::string(1, '\0')), std::string::npos) << name << ": " << k;
    auto symbols = read_dynamic_symbols(r.library_path);
    auto imports = [&](const std::string& s) {
      return std::any_of(symbols.imports.begin(), symbols.imports.end(),
                         [&](const std::string& i) { return i.rfind(s, 0) == 0; });
    };
    EXPECT_TRUE(imports("cudaLaunchKernel") && imports("cudaLibraryLoadData")) << name;
  }
}

TEST_F(NvrtcFarm, HostileCandidatesAndScheduleTemplatesTakeTheExpectedPath) {
  // Hostile candidates keep their behaviour: only cuBLAS, pthread, mmap, clock and ELF users (headers NVRTC lacks), the
  // compile error and sources with host variables at namespace scope (the device pass does not
  // drop those) go to nvcc.
  for (const auto& e : fs::directory_iterator(test::source_dir() + "/tests/fixtures/hostile/cuda")) {
    std::string name = e.path().filename().string();
    std::string source = read(e.path().string());
    auto r = farm_->compile({name, source, Backend::cuda});
    bool host_globals = source.find("\nstatic long ") != std::string::npos ||
                        source.find("\nstatic bool ") != std::string::npos ||
                        source.find("\nstatic float ") != std::string::npos ||
                        source.find("\nstatic int ") != std::string::npos ||
                        source.find("\nstatic volatile ") != std::string::npos;
    bool nvcc = name.find("cublas") != std::string::npos || name.find("compile_error") != std::string::npos ||
                host_globals || source.find("<pthread.h>") != std::string::npos ||
                source.find("<sys/mman.h>") != std::string::npos || source.find("<time.h>") != std::string::npos ||
                source.find("<elf.h>") != std::string::npos;
    EXPECT_EQ(r.compiler, nvcc ? "nvcc" : "nvrtc") << name << ": " << r.nvrtc_fallback;
    EXPECT_EQ(r.ok, name.find("compile_error") == std::string::npos) << name << ": " << r.diagnostics;
  }
  // Every CUDA schedule template renders to a source the fast path takes.
  std::vector<std::shared_future<CompileResult>> jobs;
  std::vector<std::string> names;
  for (const auto& task : load_suite("builtin")) {
    if (!has_schedule(task.name)) continue;
    Choice c(schedule_knobs().size(), 0);
    names.push_back(task.name);
    jobs.push_back(farm_->submit({task.name + ".cu", render_schedule(task, Backend::cuda, c), Backend::cuda}));
  }
  ASSERT_EQ(jobs.size(), schedule_tasks().size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(jobs[i].get().ok) << names[i] << ": " << jobs[i].get().diagnostics;
    EXPECT_EQ(jobs[i].get().compiler, "nvrtc") << names[i] << ": " << jobs[i].get().nvrtc_fallback;
  }
}

TEST_F(NvrtcFarm, FailuresAreJudgedByNvcc) {
  // A compile error: NVRTC fails, nvcc gives the verdict and the feedback, with line numbers.
  auto bad = farm_->compile({"bad.cu", "#include <leap/candidate.h>\n__global__ void k(float* y) { y[0] = zero; }\n",
                             Backend::cuda});
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.compiler, "nvcc");
  EXPECT_NE(bad.nvrtc_fallback.find("NVRTC"), std::string::npos) << bad.nvrtc_fallback;
  EXPECT_NE(bad.diagnostics.find("bad.cu(2): error: identifier \"zero\" is undefined"), std::string::npos)
      << bad.diagnostics;
  // A header NVRTC lacks: straight to nvcc, which builds it.
  auto lib = farm_->compile({"lib.cu", "#include <leap/candidate.h>\n#include <cuda_fp16.h>\n"
                             "LEAP_ENTRY int leap_kernel(const DLTensor*, int, DLTensor*, int, void*) { return 0; }\n",
                             Backend::cuda});
  EXPECT_TRUE(lib.ok) << lib.diagnostics;
  EXPECT_EQ(lib.compiler, "nvcc");
  EXPECT_NE(lib.nvrtc_fallback.find("cuda_fp16.h"), std::string::npos);
  // nvcc flags the NVRTC path reproduces (macros) keep it on, in both passes; others switch it off.
  const std::string uses_macro =
      "#include <leap/candidate.h>\n__global__ void k(float* y) { y[0] = SCALE; }\n"
      "LEAP_ENTRY int leap_kernel(const DLTensor*, int, DLTensor* o, int, void* s) {\n"
      "  k<<<SCALE, 1, 0, (cudaStream_t)s>>>((float*)o[0].data);\n  return 0;\n}\n";
  CompileConfig with_macro = cfg_;
  with_macro.nvcc_flags = {"-std=c++17", "-O3", "-DSCALE=2"};
  CompileFarm macro_farm(with_macro, make_nvcc_driver(with_macro));
  ASSERT_TRUE(macro_farm.nvrtc_enabled());
  auto m = macro_farm.compile({"macro.cu", uses_macro, Backend::cuda});
  EXPECT_TRUE(m.ok) << m.diagnostics;
  EXPECT_EQ(m.compiler, "nvrtc") << m.nvrtc_fallback;
  CompileConfig other = cfg_;
  other.nvcc_flags = {"-std=c++17", "-O3", "-lineinfo"};
  EXPECT_FALSE(CompileFarm(other, make_nvcc_driver(other)).nvrtc_enabled());
  // Switched off in the config: nvcc for everything, a different cache entry.
  CompileConfig off = cfg_;
  off.nvrtc = false;
  CompileFarm nvcc_only(off, make_nvcc_driver(off));
  EXPECT_FALSE(nvcc_only.nvrtc_enabled());
  std::string relu = read(test::source_dir() + "/examples/cuda/relu.cu");
  EXPECT_NE(nvcc_only.key_of(relu), farm_->key_of(relu));
  auto r = nvcc_only.compile({"relu.cu", relu, Backend::cuda});
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.compiler, "nvcc");
}

}  // namespace
}  // namespace leap

namespace leap {
namespace {

TEST(NvrtcServers, ServesManyCompilesAndReplacesDeadOrStuckServers) {
  if (nvrtc_path().empty()) GTEST_SKIP() << "leap-nvrtc not built (no CUDA toolkit with NVRTC)";
  test::TempDir dir;
  auto src = dir.write("k.cu", "extern \"C\" __global__ void k(float* y) { y[threadIdx.x] = 1.0f; }\n");
  auto bad = dir.write("bad.cu", "__global__ void k(float* y) { y[0] = zero; }\n");
  NvrtcServers servers({nvrtc_path(), "--include-dir", abi_include_dir(), "--serve"});
  for (int i = 0; i < 3; ++i) {
    auto r = servers.compile(src, dir.path() + "/k" + std::to_string(i) + ".cubin", 60);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(fs::file_size(dir.path() + "/k" + std::to_string(i) + ".cubin") > 0);
  }
  auto e = servers.compile(bad, dir.path() + "/bad.cubin", 60);
  EXPECT_EQ(e.exit_code, 1);
  EXPECT_NE(e.output.find("identifier \"zero\" is undefined"), std::string::npos) << e.output;
  // A server that dies, and one that never answers: failures, not hangs.
  NvrtcServers dying({"/bin/sh", "-c", "read line; exit 1"});
  auto d = dying.compile(src, dir.path() + "/d.cubin", 10);
  EXPECT_NE(d.exit_code, 0);
  EXPECT_NE(d.output.find("ended unexpectedly"), std::string::npos) << d.output;
  NvrtcServers stuck({"/bin/sh", "-c", "read line; sleep 30"});
  auto t0 = std::chrono::steady_clock::now();
  auto s = stuck.compile(src, dir.path() + "/s.cubin", 0.5);
  EXPECT_TRUE(s.timed_out);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

}  // namespace
}  // namespace leap
