// How much CUDA contexts being made and torn down by other processes disturb a timed kernel:
// the measurement behind leap's rule that a runner makes its context under the GPU lock.
// examples/cuda/matmul.tuned.cu (a 4096^3 tiled SGEMM, through its leap_kernel) is timed with events, alone
// and while N other processes (this program, "ctx" mode) make and destroy contexts in a loop,
// with the timed process under the driver's 8 hardware queues and under one.
// Build and run on the GPU machine (bench/gpu-report.sh OUT interference does):
//   nvcc -O3 -arch=sm_90 -Iinclude -I<dlpack> bench/context_interference.cu -o ci && ./ci
#include <cuda_runtime.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../examples/cuda/matmul.tuned.cu"  // the candidate itself, as leap times it

namespace {

__global__ void fill(float* p, size_t n, unsigned s) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) p[i] = ((i * 2654435761u + s) % 1000) / 1000.0f - 0.5f;
}

struct Stats {
  double median, p90, max, cv;
};

// Times `iters` SGEMMs in a child process (its own context, `connections` hardware queues).
Stats timed(const char* self, int iters, const char* connections) {
  int fd[2];
  if (pipe(fd) != 0) std::exit(1);
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    dup2(fd[1], 1);
    if (connections) setenv("CUDA_DEVICE_MAX_CONNECTIONS", connections, 1);
    else unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
    execl(self, self, "time", std::to_string(iters).c_str(), (char*)nullptr);
    _exit(127);
  }
  close(fd[1]);
  Stats s{};
  FILE* f = fdopen(fd[0], "r");
  if (!f || fscanf(f, "%lf %lf %lf %lf", &s.median, &s.p90, &s.max, &s.cv) != 4) std::fprintf(stderr, "no timing\n");
  if (f) fclose(f);
  waitpid(pid, nullptr, 0);
  return s;
}

int time_sgemm(int iters) {
  const int n = 4096;
  float *A, *B, *C;
  cudaMalloc(&A, sizeof(float) * n * n);
  cudaMalloc(&B, sizeof(float) * n * n);
  cudaMalloc(&C, sizeof(float) * n * n);
  fill<<<(n * n + 255) / 256, 256>>>(A, (size_t)n * n, 1);
  fill<<<(n * n + 255) / 256, 256>>>(B, (size_t)n * n, 2);
  cudaStream_t st;
  cudaStreamCreate(&st);
  int64_t shape[2] = {n, n};
  auto tensor = [&](float* p) {
    DLTensor t{};
    t.data = p;
    t.device = {kDLCUDA, 0};
    t.ndim = 2;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
    return t;
  };
  DLTensor in[2] = {tensor(A), tensor(B)}, out[1] = {tensor(C)};
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> t;
  for (int i = 0; i < iters + 5; ++i) {
    cudaEventRecord(a, st);
    if (leap_kernel(in, 2, out, 1, st) != 0) return 1;
    cudaEventRecord(b, st);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    if (i >= 5) t.push_back(ms * 1000.0);
  }
  if (cudaGetLastError() != cudaSuccess) return 1;
  std::sort(t.begin(), t.end());
  double m = 0, v = 0;
  for (double x : t) m += x;
  m /= t.size();
  for (double x : t) v += (x - m) * (x - m);
  std::printf("%f %f %f %f\n", t[t.size() / 2], t[t.size() * 9 / 10], t.back(), 100 * std::sqrt(v / t.size()) / m);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "ctx") return cudaFree(nullptr) == cudaSuccess ? 0 : 1;  // one context made and torn down
  if (mode == "time") return time_sgemm(std::atoi(argv[2]));
  const int iters = 400, churners = 2;
  std::printf("| timed process | other processes | median us | p90 us | max us | CV | p90 vs alone |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|\n");
  for (const char* conn : {(const char*)nullptr, "1"}) {
    Stats alone = timed(argv[0], iters, conn);
    const char* name = conn ? "1 queue" : "8 queues";
    std::printf("| %s | none | %.1f | %.1f | %.1f | %.2f %% | 1.00x |\n", name, alone.median, alone.p90, alone.max, alone.cv);
    for (const char* churn_conn : {(const char*)nullptr, "1"}) {
      std::vector<pid_t> churn;
      for (int c = 0; c < churners; ++c) {
        pid_t p = fork();
        if (p == 0) {
          if (churn_conn) setenv("CUDA_DEVICE_MAX_CONNECTIONS", churn_conn, 1);
          for (;;) {
            pid_t q = fork();
            if (q == 0) {
              execl(argv[0], argv[0], "ctx", (char*)nullptr);
              _exit(127);
            }
            waitpid(q, nullptr, 0);
          }
        }
        churn.push_back(p);
      }
      usleep(500000);
      Stats s = timed(argv[0], iters, conn);
      for (pid_t p : churn) kill(p, SIGKILL);
      for (pid_t p : churn) waitpid(p, nullptr, 0);
      std::printf("| %s | %d making contexts (%s) | %.1f | %.1f | %.1f | %.2f %% | %.2fx |\n", name, churners,
                  churn_conn ? "1 queue" : "8 queues", s.median, s.p90, s.max, s.cv, s.p90 / alone.p90);
    }
  }
  return 0;
}
