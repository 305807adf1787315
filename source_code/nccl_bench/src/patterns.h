// Input patterns and result checks, run as kernels on each GPU.
//
// Every input element is a small non-negative integer that depends on the rank that owns it
// and on its index:
//     input(rank, i) = (13 * i + 29 * rank) mod m
// m is chosen so that the sum over all ranks stays below the largest integer the data type
// holds exactly (2^24 for float, 2^11 for half, 2^8 for bfloat16, ...). Every partial sum is
// then exact too, whatever order NCCL adds in, so a correct result equals the expected value
// bit for bit; min and max are exact anyway. For -o prod one rank per element brings a
// factor (2, 3, 5 or 7) and every other rank 1, so that no product is rounded; -o avg divides
// the exact sum by the number of ranks (NCCL: integers rounded down, floating-point types
// multiplied by 1/n, exact for a power-of-two n only, which the caller checks).
// Output buffers are first filled with "poison" (-1, never a pattern value or a result of
// them), so an operation that writes nothing is caught.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#include "collectives.h"
#include "options.h"

// What the inputs of one run are made of.
struct Pattern {
  RedOp op;  // the reduction operator the inputs are made for
  int nranks;
  unsigned modulus;  // m above
};

// The pattern for this type, operator and number of ranks.
Pattern make_pattern(DType type, RedOp op, int nranks);

// Writes input(rank, i) for i in [0, count), or poison if rank < 0.
void launch_fill(DType type, const Pattern &p, void *data, std::size_t count, int rank,
                 cudaStream_t stream);

// Adds to wrong[0] (device memory) the number of elements of out that differ from what
// `expect` says they must hold, and lowers wrong[1] (start it at ~0) to the index of the
// first of them.
void launch_verify(DType type, const Pattern &p, const void *out, const Expectation &expect,
                   unsigned long long *wrong, cudaStream_t stream);
