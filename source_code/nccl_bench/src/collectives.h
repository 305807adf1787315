// What each operation moves, how it is issued to NCCL, and its busbw factor.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>
#include <nccl.h>

#include "options.h"

// The element counts of one row of the table.
struct Shape {
    std::size_t bytes;       // the "size" column: total bytes of the operation
    std::size_t elements;    // the "count" column: bytes / element size
    std::size_t send_count;  // elements each rank sends (its input buffer)
    std::size_t recv_count;  // elements each rank receives (its output buffer)
    std::size_t block;       // per-rank part of all_gather / reduce_scatter
};

// Rounds `bytes` down to what the operation can move on `nranks` ranks with
// this element size; elements == 0 means the size is too small to run.
Shape shape_for(Op op, std::size_t bytes, int nranks, std::size_t element_bytes);

// algbw x factor = busbw: the bytes each link carries relative to the
// operation's size for the ring algorithm (2(n-1)/n, (n-1)/n or 1).
double busbw_factor(Op op, int nranks);

// Whether the operation reduces (the "redop" column says sum, else none).
bool op_reduces(Op op);

// Whether an in-place variant exists (sendrecv has none).
bool has_in_place(Op op);

// Pointers one rank passes to NCCL, given its two buffers. In place, both
// point into `recv_buffer` as NCCL's documentation describes.
struct RankBuffers {
    const void* send;
    void* recv;
};
RankBuffers buffers_for(Op op, bool in_place, void* send_buffer, void* recv_buffer,
                        const Shape& shape, int rank, std::size_t element_bytes);

// Issues the operation for one rank; call between ncclGroupStart/End.
void enqueue(Op op, const RankBuffers& buffers, const Shape& shape, ncclDataType_t type,
             int rank, int nranks, int root, ncclComm_t comm, cudaStream_t stream);
