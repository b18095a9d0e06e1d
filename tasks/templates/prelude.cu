#include <leap/candidate.h>
#include <cuda_runtime.h>
#include <math.h>

// CHUNK contiguous elements per thread and step, kept in registers, so the product is bounded.
#define CHUNK (LEAP_VEC * LEAP_UNROLL)
static_assert(CHUNK <= 8, "vector * unroll exceeds the 8 lanes this template keeps in registers");
#define THREADS 256
#define leap_expf expf  // the CPU templates' vectorisable approximations; CUDA's own are fast
#define leap_erff erff

// f(j, compute) over [0, d) for worker t of nt: full chunks, then the remainder as the tail
// choice says (scalar; zero: zero-filled; strided: steps of nt * VEC / 8, endless for VEC < 8).
template <class F>
__device__ __forceinline__ void span(int64_t d, int t, int nt, F f) {
  const int64_t main_end = d - d % CHUNK;
  for (int64_t j = (int64_t)t * CHUNK; j < main_end; j += (int64_t)nt * CHUNK) {
#pragma unroll
    for (int u = 0; u < CHUNK; ++u) f(j + u, true);
  }
#if LEAP_TAIL == 0
  for (int64_t j = main_end + t; j < d; j += nt) f(j, true);
#elif LEAP_TAIL == 1
  for (int64_t j = main_end + t; j < d; j += nt) f(j, false);
#else
  for (int64_t j = main_end + t; j < d; j += (int64_t)nt * (LEAP_VEC / 8)) f(j, true);
#endif
}

static inline int launch_status() { return cudaGetLastError() == cudaSuccess ? 0 : 1; }
