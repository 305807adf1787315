// kernels.cu - all device code of host_copy_bench, with small host-side launch wrappers.
#include "host_copy.h"
#include "pattern.h"

namespace {

__device__ inline unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Holds its stream until the host writes a non-zero value to *flag (pinned host memory
// mapped into the GPU's address space): the copies queued behind it then start together,
// and the interval between the events around them holds none of the host's cost of issuing
// them. Gives up after timeout_ns and says so in *timed_out.
__global__ void gate_kernel(const volatile int *flag, int *timed_out,
                            unsigned long long timeout_ns) {
  const unsigned long long began = now_ns();
  while (*flag == 0) {
    if (now_ns() - began > timeout_ns) {
      *timed_out = 1;
      break;
    }
    __nanosleep(200);
  }
}

// blockIdx.y picks the buffer ("slot"); whole 32-bit words first, the last n % 4 bytes by
// the first thread of each slot.
__global__ void fill_kernel(unsigned char *buf, size_t n, size_t stride, uint32_t seed,
                            uint32_t flip) {
  unsigned char *slot = buf + (size_t)blockIdx.y * stride;
  const size_t words = n / 4;
  const size_t step = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t *w = reinterpret_cast<uint32_t *>(slot);  // slots are 256-byte aligned
  for (size_t i = first; i < words; i += step) w[i] = hcb::mix(i, seed) ^ flip;
  if (first == 0)
    for (size_t i = 4 * words; i < n; ++i)
      slot[i] = (unsigned char)(hcb::pattern_byte(i, seed) ^ flip);
}

__device__ inline unsigned bytes_differing(uint32_t x) {
  return (x & 0xFFu ? 1u : 0u) + (x & 0xFF00u ? 1u : 0u) + (x & 0xFF0000u ? 1u : 0u) +
         (x & 0xFF000000u ? 1u : 0u);
}

__global__ void verify_kernel(const unsigned char *buf, size_t n, size_t stride, uint32_t seed,
                              unsigned long long *bad) {
  const unsigned char *slot = buf + (size_t)blockIdx.y * stride;
  const size_t words = n / 4;
  const size_t step = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t *w = reinterpret_cast<const uint32_t *>(slot);
  unsigned long long wrong = 0, at = ~0ull;
  for (size_t i = first; i < words; i += step) {
    const uint32_t x = w[i] ^ hcb::mix(i, seed);
    if (x) {
      if (wrong == 0) at = 4 * i + (__ffs(x) - 1) / 8;  // the first wrong byte of the word
      wrong += bytes_differing(x);
    }
  }
  if (first == 0)
    for (size_t i = 4 * words; i < n; ++i)
      if (slot[i] != hcb::pattern_byte(i, seed)) {
        if (wrong == 0 || i < at) at = i;
        ++wrong;
      }
  if (wrong) {
    atomicAdd(&bad[0], wrong);
    atomicMin(&bad[1], (size_t)blockIdx.y * n + at);
  }
}

unsigned grid_for(size_t n) {
  size_t blocks = (n / 4 + 255) / 256;
  if (blocks > 2048) blocks = 2048;
  return blocks ? (unsigned)blocks : 1u;
}

}  // namespace

void launch_gate(cudaStream_t stream, const volatile int *flag, int *timed_out,
                 unsigned long long timeout_ns) {
  gate_kernel<<<1, 1, 0, stream>>>(flag, timed_out, timeout_ns);
  CUDA_TRY(cudaGetLastError());
}

void launch_fill(cudaStream_t stream, unsigned char *buf, size_t n, size_t stride, int slots,
                 uint32_t seed, bool invert) {
  dim3 grid(grid_for(n), (unsigned)slots);
  fill_kernel<<<grid, 256, 0, stream>>>(buf, n, stride, seed, invert ? 0xFFFFFFFFu : 0u);
  CUDA_TRY(cudaGetLastError());
}

void launch_verify(cudaStream_t stream, const unsigned char *buf, size_t n, size_t stride,
                   int slots, uint32_t seed, unsigned long long *bad) {
  dim3 grid(grid_for(n), (unsigned)slots);
  verify_kernel<<<grid, 256, 0, stream>>>(buf, n, stride, seed, bad);
  CUDA_TRY(cudaGetLastError());
}
