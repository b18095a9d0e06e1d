// A per-row normalisation: softmax family (max, sum of exponentials) or norm family (mean and
// variance, or mean square), then an elementwise epilogue. Row order: a block of THREADS per
// row with block reductions; column order: one thread per row, consecutive threads on
// consecutive rows (stride d, no cooperation). With LEAP_DIM0 the groups are the columns
// (softmax over dim 0, batch norm): group r's element j is x[j * rows + r], so the column order
// reads coalesced and the row order strides.
__device__ float reduce(float v, bool is_max) {
#if LEAP_ORDER_COLUMN
  return v;
#else
  __shared__ float part[THREADS / 32];
  for (int o = 16; o > 0; o >>= 1) {
    const float u = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, u) : v + u;
  }
  __syncthreads();
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  v = part[0];
  for (int w = 1; w < THREADS / 32; ++w) v = is_max ? fmaxf(v, part[w]) : v + part[w];
  return v;
#endif
}

__global__ void rowwise(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                        float* __restrict__ y, int64_t rows, int64_t d) {
#if LEAP_ORDER_COLUMN
  const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int t = 0, nt = 1;
  if (r >= rows) return;
#else
  const int64_t r = blockIdx.x;
  const int t = threadIdx.x, nt = blockDim.x;
#endif
#if LEAP_DIM0
  const int64_t step = rows;
  const float* xr = x + r;
  float* yr = y + r;
#define PARAM_AT(j) (r)
#else
  const int64_t step = 1;
  const float* xr = x + r * d;
  float* yr = y + r * d;
#define PARAM_AT(j) (j)
#endif
  (void)w; (void)b;
#if LEAP_SOFTMAX
  float m = -INFINITY;
  span(d, t, nt, [&](int64_t j, bool c) { if (c) m = fmaxf(m, LEAP_PRE(xr[j * step])); });
  m = reduce(m, true);
  float s = 0.0f;
  span(d, t, nt, [&](int64_t j, bool c) { if (c) s += expf(LEAP_PRE(xr[j * step]) - m); });
  s = reduce(s, false);
  span(d, t, nt, [&](int64_t j, bool c) {
    const float v = LEAP_PRE(xr[j * step]) - m;
#if LEAP_LOG
    yr[j * step] = c ? v - logf(s) : 0.0f;
#else
    yr[j * step] = c ? expf(v) / s : 0.0f;
#endif
  });
#else
  float mean = 0.0f;
#if LEAP_CENTER
  span(d, t, nt, [&](int64_t j, bool c) { if (c) mean += xr[j * step]; });
  mean = reduce(mean, false) / (float)d;
#endif
  float ss = 0.0f;
  span(d, t, nt, [&](int64_t j, bool c) { const float v = xr[j * step] - mean; if (c) ss += v * v; });
  const float inv = rsqrtf(reduce(ss, false) / (float)d + (float)LEAP_EPS);
  span(d, t, nt, [&](int64_t j, bool c) {
    float v = (xr[j * step] - mean) * inv * w[PARAM_AT(j)];
#if LEAP_CENTER
    v += b[PARAM_AT(j)];
#endif
    yr[j * step] = c ? LEAP_POST(v) : 0.0f;
  });
#endif
}

LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  const int64_t rows = in[0].shape[LEAP_DIM0 ? 1 : 0], d = in[0].shape[LEAP_DIM0 ? 0 : 1];
  const float* w = n_in > 1 ? LEAP_DATA(const float, &in[1]) : nullptr;
  const float* b = n_in > 2 ? LEAP_DATA(const float, &in[2]) : nullptr;
  (void)n_out;
#if LEAP_ORDER_COLUMN
  const unsigned blocks = (unsigned)((rows + THREADS - 1) / THREADS);
#else
  const unsigned blocks = (unsigned)rows;
#endif
  rowwise<<<blocks, THREADS, 0, (cudaStream_t)stream>>>(LEAP_DATA(const float, &in[0]), w, b,
                                                        LEAP_DATA(float, &out[0]), rows, d);
  return launch_status();
}
