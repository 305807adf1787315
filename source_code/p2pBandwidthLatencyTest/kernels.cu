// kernels.cu - all device code of the P2P test, with small host-side launch wrappers.
#include "p2p.h"

namespace {

// Pattern of element `index` for a given seed: a cheap integer mix, so that a buffer that
// was not copied, copied from the wrong place or copied only in part does not match.
__host__ __device__ inline uint32_t mix(size_t index, uint32_t seed) {
  uint32_t x = (uint32_t)index * 2654435761u + seed;
  x ^= (uint32_t)(index >> 32) * 0x9E3779B9u;
  x ^= x >> 15;
  x *= 0x2C1B3C6Du;
  x ^= x >> 12;
  x *= 0x297A2D39u;
  x ^= x >> 15;
  return x;
}

__device__ inline unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Holds its stream until the host writes a non-zero value to *flag (host memory mapped
// into the device's address space), so that the copies queued behind it start together
// and the timed interval holds no launch overhead. Gives up after timeout_ns.
__global__ void gate_kernel(const volatile int *flag, int *timed_out,
                            unsigned long long timeout_ns) {
  unsigned long long began = now_ns();
  while (*flag == 0) {
    if (now_ns() - began > timeout_ns) {
      *timed_out = 1;
      break;
    }
    __nanosleep(256);
  }
}

__global__ void fill_kernel(int *buf, size_t n, uint32_t seed) {
  size_t step = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
    buf[i] = (int)mix(i, seed);
}

// blockIdx.y selects the destination buffer ("slot").
__global__ void poison_kernel(int *buf, size_t n, size_t stride, uint32_t seed) {
  int *slot = buf + (size_t)blockIdx.y * stride;
  size_t step = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
    slot[i] = (int)~mix(i, seed);
}

__global__ void verify_kernel(const int *buf, size_t n, size_t stride, uint32_t seed,
                              unsigned long long *bad) {
  const int *slot = buf + (size_t)blockIdx.y * stride;
  size_t step = (size_t)gridDim.x * blockDim.x;
  unsigned long long wrong = 0, first = ~0ull;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    if ((uint32_t)slot[i] != mix(i, seed)) {
      if (wrong == 0) first = (size_t)blockIdx.y * n + i;
      ++wrong;
    }
  }
  if (wrong) {
    atomicAdd(&bad[0], wrong);
    atomicMin(&bad[1], first);
  }
}

// Copy with 16-byte loads and stores, four in flight per thread, streaming cache hints
// (the data is touched once). Both pointers must be 16-byte aligned; the last n % 4
// elements are copied one by one.
__global__ void __launch_bounds__(1024)
    sm_copy_kernel(int *__restrict__ dst, const int *__restrict__ src, size_t n) {
  const size_t n16 = n / 4;
  const int4 *s = reinterpret_cast<const int4 *>(src);
  int4 *d = reinterpret_cast<int4 *>(dst);
  const size_t step = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 3 * step < n16; i += 4 * step) {
    int4 a = __ldcs(s + i);
    int4 b = __ldcs(s + i + step);
    int4 c = __ldcs(s + i + 2 * step);
    int4 e = __ldcs(s + i + 3 * step);
    __stcs(d + i, a);
    __stcs(d + i + step, b);
    __stcs(d + i + 2 * step, c);
    __stcs(d + i + 3 * step, e);
  }
  for (; i < n16; i += step) __stcs(d + i, __ldcs(s + i));
  size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n - n16 * 4) dst[n16 * 4 + t] = src[n16 * 4 + t];
}

// Element by element, for unaligned or tiny copies (the latency test moves one element).
__global__ void sm_copy_scalar_kernel(int *dst, const int *src, size_t n) {
  size_t step = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) dst[i] = src[i];
}

unsigned grid_for(size_t n, unsigned threads) {
  size_t blocks = (n + threads - 1) / threads;
  if (blocks > 4096) blocks = 4096;
  if (blocks == 0) blocks = 1;
  return (unsigned)blocks;
}

}  // namespace

uint32_t pattern_value(size_t index, uint32_t seed) {
  return mix(index, seed);
}

void launch_gate(cudaStream_t stream, const volatile int *flag, int *timed_out,
                 unsigned long long timeout_ns) {
  gate_kernel<<<1, 1, 0, stream>>>(flag, timed_out, timeout_ns);
  CUDA_TRY(cudaGetLastError());
}

void launch_fill(cudaStream_t stream, int *buf, size_t n, uint32_t seed) {
  fill_kernel<<<grid_for(n, 256), 256, 0, stream>>>(buf, n, seed);
  CUDA_TRY(cudaGetLastError());
}

void launch_poison(cudaStream_t stream, int *buf, size_t n, size_t stride, int slots,
                   uint32_t seed) {
  dim3 grid(grid_for(n, 256), (unsigned)slots);
  poison_kernel<<<grid, 256, 0, stream>>>(buf, n, stride, seed);
  CUDA_TRY(cudaGetLastError());
}

void launch_verify(cudaStream_t stream, const int *buf, size_t n, size_t stride, int slots,
                   uint32_t seed, unsigned long long *bad) {
  // bad[0] = 0 (count), bad[1] = all ones (no first index yet)
  CUDA_TRY(cudaMemsetAsync(bad, 0, sizeof(unsigned long long), stream));
  CUDA_TRY(cudaMemsetAsync(bad + 1, 0xFF, sizeof(unsigned long long), stream));
  dim3 grid(grid_for(n, 256), (unsigned)slots);
  verify_kernel<<<grid, 256, 0, stream>>>(buf, n, stride, seed, bad);
  CUDA_TRY(cudaGetLastError());
}

void launch_sm_copy(cudaStream_t stream, int *dst, const int *src, size_t n, int blocks,
                    int threads) {
  bool aligned = ((uintptr_t)dst % 16 == 0) && ((uintptr_t)src % 16 == 0);
  if (aligned && n >= 4) {
    sm_copy_kernel<<<blocks, threads, 0, stream>>>(dst, src, n);
  } else {
    sm_copy_scalar_kernel<<<grid_for(n, 32), 32, 0, stream>>>(dst, src, n);
  }
  CUDA_TRY(cudaGetLastError());
}

int sm_copy_blocks_per_sm(int threads) {
  int per_sm = 0;
  CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, sm_copy_kernel, threads, 0));
  return per_sm > 0 ? per_sm : 1;
}
