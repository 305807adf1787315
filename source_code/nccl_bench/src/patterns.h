// Input patterns and result checks, run as kernels on each GPU.
//
// Every element starts as a small non-negative integer that depends on the
// rank that owns it and on its index:
//     value(rank, i) = (13 * i + 29 * rank) mod m
// m is chosen so that the sum over all ranks stays below the largest integer
// the data type holds exactly (2^24 for float, 2^11 for half, 2^8 for
// bfloat16, ...). Every partial sum is then exact too, whatever order NCCL
// adds in, so a correct result equals the expected value bit for bit.
// Output buffers are first filled with "poison" (-1, never a pattern value
// or a sum of them), so an operation that writes nothing is caught.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#include "options.h"

struct Expectation {
    Op op;
    int nranks;
    int rank;           // rank whose output is checked
    int root;           // broadcast root
    std::size_t count;  // elements to check
    std::size_t block;  // elements per rank of all_gather / reduce_scatter
    unsigned modulus;   // m above
};

// The m above for this type and number of ranks.
unsigned pattern_modulus(DType type, int nranks);

// Writes value(rank, first_index + i) for i in [0, count), or poison if rank < 0.
void launch_fill(DType type, void* data, std::size_t count, std::size_t first_index, int rank,
                 unsigned modulus, cudaStream_t stream);

// Adds to wrong[0] (device memory) the number of elements of out that differ
// from the expectation, and lowers wrong[1] (start it at ~0) to the index of the
// first of them.
void launch_verify(DType type, const void* out, const Expectation& expect,
                   unsigned long long* wrong, cudaStream_t stream);
