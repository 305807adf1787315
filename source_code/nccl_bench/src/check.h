// Error handling shared by every file of nccl_bench.
//
// Two kinds of failure, two exit codes:
//   * UsageError (bad arguments, too few GPUs): one line on stderr, exit 2.
//   * RuntimeFailure (a CUDA or NCCL call failed): one line on stderr, exit 1.
// Both are exceptions so that destructors free GPU memory, streams, events
// and communicators on the way out.
#pragma once

#include <string>

#include <cuda_runtime.h>
#include <nccl.h>

#include "errors.h"

std::string where_text(const char *file, int line);

inline void cuda_ok(cudaError_t status, const char *call, const char *file, int line) {
  if (status != cudaSuccess) {
    throw RuntimeFailure(std::string(call) + " failed: " + cudaGetErrorString(status) + " (" +
                         where_text(file, line) + ")");
  }
}

inline void nccl_ok(ncclResult_t status, const char *call, const char *file, int line) {
  if (status != ncclSuccess) {
    std::string detail = ncclGetErrorString(status);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
    const char *last = ncclGetLastError(nullptr);
    if (last != nullptr && last[0] != '\0') detail += std::string("; ") + last;
#endif
    throw RuntimeFailure(std::string(call) + " failed: " + detail + " (" + where_text(file, line) +
                         ")");
  }
}

#define CUDA_CHECK(call) cuda_ok((call), #call, __FILE__, __LINE__)
#define NCCL_CHECK(call) nccl_ok((call), #call, __FILE__, __LINE__)
