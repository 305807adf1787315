#include "patterns.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "check.h"

namespace {

constexpr unsigned kMaxModulus = 1021;  // a prime, so patterns repeat slowly
constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 4096;

__host__ __device__ inline unsigned long long input_value(const Pattern &p, int rank,
                                                          std::size_t index) {
  if (p.op == RedOp::Prod) {  // one owner per element brings a prime, the others 1
    const std::size_t n = static_cast<std::size_t>(p.nranks);
    if (index % n != static_cast<std::size_t>(rank)) return 1;
    const unsigned primes[4] = {2, 3, 5, 7};
    return primes[(index / n) % 4];
  }
  return (13ull * (index % p.modulus) + 29ull * static_cast<unsigned>(rank)) % p.modulus;
}

// Conversions between the element types and double, exact for the small integers used here.
template <typename T>
__device__ inline T from_double(double v) {
  return static_cast<T>(v);
}
template <>
__device__ inline __half from_double<__half>(double v) {
  return __double2half(v);
}
template <>
__device__ inline __nv_bfloat16 from_double<__nv_bfloat16>(double v) {
  return __float2bfloat16(static_cast<float>(v));
}

template <typename T>
__device__ inline double to_double(T v) {
  return static_cast<double>(v);
}
template <>
__device__ inline double to_double<__half>(__half v) {
  return static_cast<double>(__half2float(v));
}
template <>
__device__ inline double to_double<__nv_bfloat16>(__nv_bfloat16 v) {
  return static_cast<double>(__bfloat162float(v));
}

// Poison: -1, or the largest value of an unsigned type. Never a pattern value or a result.
template <typename T>
__device__ inline T poison_value() {
  return from_double<T>(-1.0);
}
template <>
__device__ inline uint8_t poison_value<uint8_t>() {
  return 0xFFu;
}
template <>
__device__ inline uint32_t poison_value<uint32_t>() {
  return 0xFFFFFFFFu;
}
template <>
__device__ inline uint64_t poison_value<uint64_t>() {
  return ~0ull;
}

template <typename T>
__global__ void fill_kernel(T *data, std::size_t count, int rank, Pattern p) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    data[i] =
        rank < 0 ? poison_value<T>() : from_double<T>(static_cast<double>(input_value(p, rank, i)));
  }
}

__device__ inline double reduced_value(const Pattern &p, std::size_t index, bool integer) {
  unsigned long long acc = input_value(p, 0, index);
  for (int q = 1; q < p.nranks; ++q) {
    const unsigned long long v = input_value(p, q, index);
    switch (p.op) {
      case RedOp::Prod:
        acc *= v;
        break;
      case RedOp::Max:
        acc = v > acc ? v : acc;
        break;
      case RedOp::Min:
        acc = v < acc ? v : acc;
        break;
      default:
        acc += v;
        break;  // sum, avg
    }
  }
  if (p.op != RedOp::Avg) return static_cast<double>(acc);
  // NCCL's ncclAvg: the sum divided by n, rounded down for integers (sum then divide); for
  // floating-point types each input times 1/n, exact here (n is a power of two).
  return integer ? static_cast<double>(acc / static_cast<unsigned long long>(p.nranks))
                 : static_cast<double>(acc) / p.nranks;
}

__device__ inline double expected_value(const Pattern &p, const Expectation &e, std::size_t i,
                                        bool integer) {
  if (e.reduced) return reduced_value(p, e.first + i, integer);
  if (e.source >= 0) return static_cast<double>(input_value(p, e.source, i));
  return static_cast<double>(input_value(p, static_cast<int>(i / e.block), i % e.block));
}

template <typename T>
__global__ void verify_kernel(const T *out, Pattern p, Expectation e, bool integer,
                              unsigned long long *wrong) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned long long mine = 0, first = ~0ull;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < e.count;
       i += stride) {
    if (to_double(out[i]) != expected_value(p, e, i, integer)) {
      if (mine == 0) first = i;
      ++mine;
    }
  }
  if (mine != 0) {
    atomicAdd(&wrong[0], mine);
    atomicMin(&wrong[1], first);
  }
}

unsigned blocks_for(std::size_t count) {
  const std::size_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(blocks, kMaxBlocks)));
}

template <typename T>
void fill_as(const Pattern &p, void *data, std::size_t count, int rank, cudaStream_t s) {
  if (count == 0) return;
  fill_kernel<T><<<blocks_for(count), kThreads, 0, s>>>(static_cast<T *>(data), count, rank, p);
  CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void verify_as(const Pattern &p, const void *out, const Expectation &e, bool integer,
               unsigned long long *wrong, cudaStream_t s) {
  if (e.count == 0) return;
  verify_kernel<T>
      <<<blocks_for(e.count), kThreads, 0, s>>>(static_cast<const T *>(out), p, e, integer, wrong);
  CUDA_CHECK(cudaGetLastError());
}

bool is_integer(DType type) {
  return type != DType::Half && type != DType::Float && type != DType::Double &&
         type != DType::Bfloat16;
}

}  // namespace

Pattern make_pattern(DType type, RedOp op, int nranks) {
  // Largest prime m other than 13 and 29 (the pattern's factors) with nranks * (m - 1) <=
  // the exact limit of the type. A prime keeps the period at m elements, never a power of
  // two, so a block moved by a power-of-two offset cannot match, and 29 * rank tells the
  // ranks apart.
  const double limit = type_info(type).exact_limit / static_cast<double>(nranks);
  const double bound = std::min<double>(kMaxModulus, limit + 1.0);
  unsigned m = bound < 2.0 ? 2u : static_cast<unsigned>(bound);
  auto usable = [](unsigned v) {
    if (v == 13 || v == 29) return false;
    for (unsigned d = 2; d * d <= v; ++d)
      if (v % d == 0) return false;
    return true;
  };
  while (m > 2 && !usable(m)) --m;
  return Pattern{op, nranks, m};
}

#define NCCL_BENCH_DISPATCH(type, CALL) \
  switch (type) {                       \
    case DType::Int8:                   \
      CALL(int8_t);                     \
      break;                            \
    case DType::Uint8:                  \
      CALL(uint8_t);                    \
      break;                            \
    case DType::Int32:                  \
      CALL(int32_t);                    \
      break;                            \
    case DType::Uint32:                 \
      CALL(uint32_t);                   \
      break;                            \
    case DType::Int64:                  \
      CALL(int64_t);                    \
      break;                            \
    case DType::Uint64:                 \
      CALL(uint64_t);                   \
      break;                            \
    case DType::Half:                   \
      CALL(__half);                     \
      break;                            \
    case DType::Float:                  \
      CALL(float);                      \
      break;                            \
    case DType::Double:                 \
      CALL(double);                     \
      break;                            \
    case DType::Bfloat16:               \
      CALL(__nv_bfloat16);              \
      break;                            \
  }

void launch_fill(DType type, const Pattern &p, void *data, std::size_t count, int rank,
                 cudaStream_t stream) {
#define FILL(T) fill_as<T>(p, data, count, rank, stream)
  NCCL_BENCH_DISPATCH(type, FILL)
#undef FILL
}

void launch_verify(DType type, const Pattern &p, const void *out, const Expectation &expect,
                   unsigned long long *wrong, cudaStream_t stream) {
  const bool integer = is_integer(type);
#define VERIFY(T) verify_as<T>(p, out, expect, integer, wrong, stream)
  NCCL_BENCH_DISPATCH(type, VERIFY)
#undef VERIFY
}
