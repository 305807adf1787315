// The collectives nccl_bench measures, one struct each, laid out as nccl-tests lays out one
// test (src/all_reduce.cu, all_gather.cu, ... at v2.19.6: struct testColl with its name, its
// getCollByteCount, initData, getBw and runColl). Adding a collective is one entry in
// kCollectives (collectives.cpp); nothing else names them.
//
// Host code only (no kernel): tests/cuda_host/nccl_collectives_harness.cpp links it to check
// every collective's sizes and busbw factor without a GPU.
#pragma once

#include <cstddef>
#include <string>

#include <cuda_runtime.h>
#include <nccl.h>

// The element counts of one row of the table for one rank, as nccl-tests' getCollByteCount
// gives them (sendcount, recvcount, paramcount, sendInplaceOffset, recvInplaceOffset).
struct Counts {
  std::size_t bytes = 0;        // the "size" column: max(send, recv) x element size
  std::size_t count = 0;        // the "count" column: the count NCCL is called with
  std::size_t send = 0;         // elements of this rank's input
  std::size_t recv = 0;         // elements of this rank's output
  std::size_t send_offset = 0;  // in place: the input starts at rank x send_offset elements
  std::size_t recv_offset = 0;  // of the output buffer, the output at rank x recv_offset
};

// What one rank's output must hold (patterns.cu checks it), in terms of every rank's input
// input(q, k), the pattern value of rank q's element k:
//   reduced:     out[i] = redop over every rank q of input(q, first + i)
//   source >= 0: out[i] = input(source, i)
//   source < 0:  out[i] = input(i / block, i % block)        (the ranks' blocks side by side)
struct Expectation {
  std::size_t count = 0;  // output elements to check
  bool reduced = false;
  int source = 0;
  std::size_t first = 0;
  std::size_t block = 1;
};

// Everything one rank passes to NCCL for one operation.
struct Call {
  const void *send;
  void *recv;
  const Counts *counts;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
  int rank;
  int nranks;
  ncclComm_t comm;
  cudaStream_t stream;
};

struct Collective {
  const char *name;  // "all_reduce", as nccl-tests' program all_reduce_perf
  bool reduces;      // takes a reduction operator (-o); else the redop column says "none"
  bool rooted;       // takes a root rank (-r)
  bool in_place;     // has an in-place variant (nccl_bench's sendrecv has none)
  // bytes: the size asked for (-b ... -e); element_bytes: the data type's size.
  Counts (*counts)(std::size_t bytes, std::size_t element_bytes, int nranks);
  // busbw = algbw x factor (nccl-tests' doc/PERFORMANCE.md); algbw = size / time.
  double (*busbw_factor)(int nranks);
  Expectation (*expect)(const Counts &counts, int rank, int nranks, int root);
  // Issues the operation for one rank (inside ncclGroupStart/End); the first failure.
  ncclResult_t (*run)(const Call &call);
};

extern const Collective kCollectives[];
extern const int kCollectiveCount;

// The collective of that name ("all_gather"; nccl-tests' "all_gather_perf" and dashes are
// accepted too); nullptr if none.
const Collective *find_collective(const std::string &name);

// "all_reduce, all_gather, reduce_scatter, broadcast or sendrecv".
std::string collective_names();

// The in-place pointers of one rank: its input and output inside its output buffer.
void *in_place_input(const Counts &k, void *recv, int rank, std::size_t element_bytes);
void *in_place_output(const Counts &k, void *recv, int rank, std::size_t element_bytes);
