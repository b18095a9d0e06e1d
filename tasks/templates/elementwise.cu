// y = OP(x) elementwise over rows x d. Row order: consecutive threads take consecutive chunks
// of a row (coalesced); column order: consecutive threads take consecutive rows (stride d).
__global__ void elementwise(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t d) {
  const int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t per_row = (d + CHUNK - 1) / CHUNK;
  if (g >= rows * per_row) return;
#if LEAP_ORDER_COLUMN
  const int64_t r = g % rows, c = g / rows;
#else
  const int64_t r = g / per_row, c = g % per_row;
#endif
  // Each thread owns one chunk of its row; the remainder chunk follows the tail choice.
  const int64_t begin = c * CHUNK, main_end = d - d % CHUNK;
  const float* xr = x + r * d;
  float* yr = y + r * d;
  if (begin < main_end) {
#pragma unroll
    for (int u = 0; u < CHUNK; ++u) { const float v = xr[begin + u]; yr[begin + u] = LEAP_OP(v); }
    return;
  }
  span(d - main_end, 0, 1, [&](int64_t j, bool keep) {
    const float v = xr[main_end + j];
    yr[main_end + j] = keep ? LEAP_OP(v) : 0.0f;
  });
}

LEAP_ENTRY int leap_kernel(const DLTensor* in, int n_in, DLTensor* out, int n_out, void* stream) {
  (void)n_in; (void)n_out;
  const int64_t d = in[0].shape[in[0].ndim - 1], rows = leap_numel(&in[0]) / d;
  const int64_t items = rows * ((d + CHUNK - 1) / CHUNK);
  elementwise<<<(unsigned)((items + THREADS - 1) / THREADS), THREADS, 0, (cudaStream_t)stream>>>(
      LEAP_DATA(const float, &in[0]), LEAP_DATA(float, &out[0]), rows, d);
  return launch_status();
}
