#include "judge/check/anti_hacking.h"

#include "common/error.h"
#include "compile_farm/elf_symbols.h"

#include <cstring>

namespace leap {
namespace {

const char* const kForbidden[] = {
    // processes
    "fork", "vfork", "clone", "clone3", "execve", "execv", "execvp", "execvpe", "execl", "execlp", "execle", "fexecve",
    "system", "popen", "posix_spawn", "posix_spawnp", "daemon", "kill", "killpg", "ptrace", "syscall",
    // network
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "sendto", "sendmsg", "recvfrom",
    "recvmsg", "getaddrinfo", "gethostbyname",
    // dynamic loading
    "dlopen", "dlmopen", "dlsym", "dlvsym",
    // files
    "open", "open64", "openat", "openat64", "creat", "creat64", "fopen", "fopen64", "freopen", "freopen64", "remove",
    "unlink", "unlinkat", "rename", "renameat", "mkdir", "truncate", "ftruncate", "shm_open", "memfd_create"};

// libstdc++ file streams (mangled names contain these).
const char* const kForbiddenFragments[] = {"basic_ofstream", "basic_fstream", "basic_filebuf", "14basic_ifstream"};

// The job is to write the kernel: vendor libraries (GPU and CPU BLAS/LAPACK) and LibTorch are off limits.
const char* const kForbiddenPrefixes[] = {"cublas",  "cudnn",  "cufft",    "curand",   "cusparse",  "cusolver",
                                          "cutlass", "cblas_", "LAPACKE_", "openblas", "mkl_",      "MKL_",
                                          "bli_",    "dnnl_",  "_ZN2at",   "_ZN3c10",  "_ZN5torch", "THP"};
// Fortran BLAS/LAPACK entry points (sgemm_, dgemv_, ...): a letter, the routine, an underscore.
const char* const kFortranBlas[] = {"gemm_", "gemv_", "symm_", "syrk_", "trsm_",  "trmm_", "axpy_", "scal_",
                                    "copy_", "dot_",  "nrm2_", "ger_",  "getrf_", "gesv_", "potrf_"};

}  // namespace

std::optional<std::string> forbidden_import(const std::vector<std::string>& imports) {
  for (const auto& full : imports) {
    std::string name = full.substr(0, full.find('@'));
    for (const char* f : kForbidden)
      if (name == f) return name;
    for (const char* f : kForbiddenFragments)
      if (name.find(f) != std::string::npos) return name;
    for (const char* f : kForbiddenPrefixes)
      if (name.rfind(f, 0) == 0) return name;
    for (const char* f : kFortranBlas)
      if (name.size() == std::strlen(f) + 1 && std::strchr("sdcz", name[0]) &&
          name.compare(1, std::string::npos, f) == 0)
        return name;
  }
  return std::nullopt;
}

bool imports_allowed(const std::string& path, EvalOutcome& o) {
  DynamicSymbols symbols;
  try {
    symbols = read_dynamic_symbols(path);
  } catch (const LeapError& e) {
    o.status = Status::runtime_error;
    o.feedback = e.what();
    return false;
  }
  if (auto bad = forbidden_import(symbols.imports)) {
    o.status = Status::cheat_detected;
    o.check = Check::forbidden_import;
    o.feedback = "the candidate calls '" + *bad +
                 "': kernels may not create processes, open files, use the network, load libraries, or call "
                 "vendor libraries (cuBLAS, cuDNN, CPU BLAS) or LibTorch";
    return false;
  }
  return true;
}

}  // namespace leap
