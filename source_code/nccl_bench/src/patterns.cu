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

__host__ __device__ inline unsigned long long pattern_value(int rank, std::size_t index,
                                                            unsigned modulus) {
    return (13ull * (index % modulus) + 29ull * static_cast<unsigned>(rank)) % modulus;
}

// Conversions between the element types and double, exact for the small
// integers used here.
template <typename T>
__device__ inline T from_double(double v) { return static_cast<T>(v); }
template <>
__device__ inline __half from_double<__half>(double v) { return __double2half(v); }
template <>
__device__ inline __nv_bfloat16 from_double<__nv_bfloat16>(double v) {
    return __float2bfloat16(static_cast<float>(v));
}

template <typename T>
__device__ inline double to_double(T v) { return static_cast<double>(v); }
template <>
__device__ inline double to_double<__half>(__half v) { return static_cast<double>(__half2float(v)); }
template <>
__device__ inline double to_double<__nv_bfloat16>(__nv_bfloat16 v) {
    return static_cast<double>(__bfloat162float(v));
}

// Poison: -1, or the largest value of an unsigned type. Never a pattern
// value or a sum of them (see pattern_modulus).
template <typename T>
__device__ inline T poison_value() { return from_double<T>(-1.0); }
template <>
__device__ inline uint8_t poison_value<uint8_t>() { return 0xFFu; }
template <>
__device__ inline uint32_t poison_value<uint32_t>() { return 0xFFFFFFFFu; }
template <>
__device__ inline uint64_t poison_value<uint64_t>() { return ~0ull; }

template <typename T>
__global__ void fill_kernel(T* data, std::size_t count, std::size_t first_index, int rank,
                            unsigned modulus) {
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
         i < count; i += stride) {
        data[i] = rank < 0 ? poison_value<T>()
                           : from_double<T>(static_cast<double>(pattern_value(rank, first_index + i, modulus)));
    }
}

__device__ inline double expected_value(const Expectation& e, std::size_t i) {
    switch (e.op) {
        case Op::AllReduce: {
            unsigned long long sum = 0;
            for (int q = 0; q < e.nranks; ++q) sum += pattern_value(q, i, e.modulus);
            return static_cast<double>(sum);
        }
        case Op::AllGather:
            return static_cast<double>(pattern_value(static_cast<int>(i / e.block), i % e.block, e.modulus));
        case Op::ReduceScatter: {
            unsigned long long sum = 0;
            const std::size_t source_index = static_cast<std::size_t>(e.rank) * e.block + i;
            for (int q = 0; q < e.nranks; ++q) sum += pattern_value(q, source_index, e.modulus);
            return static_cast<double>(sum);
        }
        case Op::Broadcast:
            return static_cast<double>(pattern_value(e.root, i, e.modulus));
        case Op::SendRecv:
            return static_cast<double>(pattern_value((e.rank + e.nranks - 1) % e.nranks, i, e.modulus));
    }
    return -2.0;
}

template <typename T>
__global__ void verify_kernel(const T* out, Expectation expect, unsigned long long* wrong) {
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    unsigned long long mine = 0, first = ~0ull;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
         i < expect.count; i += stride) {
        if (to_double(out[i]) != expected_value(expect, i)) {
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
    std::size_t blocks = (count + kThreads - 1) / kThreads;
    return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(blocks, kMaxBlocks)));
}

template <typename T>
void fill_as(void* data, std::size_t count, std::size_t first, int rank, unsigned m, cudaStream_t s) {
    if (count == 0) return;
    fill_kernel<T><<<blocks_for(count), kThreads, 0, s>>>(static_cast<T*>(data), count, first, rank, m);
    CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void verify_as(const void* out, const Expectation& e, unsigned long long* wrong, cudaStream_t s) {
    if (e.count == 0) return;
    verify_kernel<T><<<blocks_for(e.count), kThreads, 0, s>>>(static_cast<const T*>(out), e, wrong);
    CUDA_CHECK(cudaGetLastError());
}

}  // namespace

unsigned pattern_modulus(DType type, int nranks) {
    // Largest prime m other than 13 and 29 (the pattern's factors) with
    // nranks * (m - 1) <= exact limit of the type. A prime keeps the period at
    // m elements, never a power of two, so a block moved by a power-of-two
    // offset cannot match, and 29 * rank tells the ranks apart.
    double limit = type_info(type).exact_limit / static_cast<double>(nranks);
    double bound = std::min<double>(kMaxModulus, limit + 1.0);
    unsigned m = bound < 2.0 ? 2u : static_cast<unsigned>(bound);
    auto usable = [](unsigned v) {
        if (v == 13 || v == 29) return false;
        for (unsigned d = 2; d * d <= v; ++d) {
            if (v % d == 0) return false;
        }
        return true;
    };
    while (m > 2 && !usable(m)) --m;
    return m;
}

#define NCCL_BENCH_DISPATCH(type, CALL)                       \
    switch (type) {                                           \
        case DType::Int8: CALL(int8_t); break;                \
        case DType::Uint8: CALL(uint8_t); break;              \
        case DType::Int32: CALL(int32_t); break;              \
        case DType::Uint32: CALL(uint32_t); break;            \
        case DType::Int64: CALL(int64_t); break;              \
        case DType::Uint64: CALL(uint64_t); break;            \
        case DType::Half: CALL(__half); break;                \
        case DType::Float: CALL(float); break;                \
        case DType::Double: CALL(double); break;              \
        case DType::Bfloat16: CALL(__nv_bfloat16); break;     \
    }

void launch_fill(DType type, void* data, std::size_t count, std::size_t first_index, int rank,
                 unsigned modulus, cudaStream_t stream) {
#define FILL(T) fill_as<T>(data, count, first_index, rank, modulus, stream)
    NCCL_BENCH_DISPATCH(type, FILL)
#undef FILL
}

void launch_verify(DType type, const void* out, const Expectation& expect,
                   unsigned long long* wrong, cudaStream_t stream) {
#define VERIFY(T) verify_as<T>(out, expect, wrong, stream)
    NCCL_BENCH_DISPATCH(type, VERIFY)
#undef VERIFY
}
