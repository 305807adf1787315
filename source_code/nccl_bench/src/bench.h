// The GPUs of this process, their communicators and buffers, and one measurement: the data
// check, the warm-up and the timed iterations of one size, one placement, for either launch
// mode (one process driving every GPU, or one process per GPU under a launcher).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "collectives.h"
#include "options.h"
#include "plan.h"
#include "report.h"

class Bench {
 public:
  // One process driving CUDA devices 0..ngpus-1 as ranks 0..ngpus-1.
  Bench(const Options &opt, int ngpus);
  // One process per GPU: this process is `rank` of `nranks` on CUDA device `device`.
  Bench(const Options &opt, int device, int rank, int nranks);
  ~Bench() { release(); }
  Bench(const Bench &) = delete;
  Bench &operator=(const Bench &) = delete;

  // id: nullptr for one process (ncclCommInitAll), else the run's id (ncclCommInitRank).
  void init(std::size_t send_bytes, std::size_t recv_bytes, const ncclUniqueId *id);
  // Every rank's device line; one process per GPU: gathered from the ranks with NCCL.
  std::vector<DeviceInfo> describe(const std::string &host, long pid);
  Measurement measure(const Variant &v, const Counts &k, bool in_place);

  // Frees everything; safe to call twice. After mark_failed() communicators are aborted.
  void release();
  void mark_failed() { failed_ = true; }
  const std::string &release_error() const { return release_error_; }

 private:
  struct Gpu {
    int device = 0;
    int rank = 0;
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;
    void *send = nullptr;
    void *recv = nullptr;
    unsigned long long *wrong = nullptr;  // count, first index (device memory)
    void *across = nullptr;               // one process per GPU: values reduced over the ranks
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t graph_exec = nullptr;
  };

  Call call_for(const Gpu &g, const Variant &v, const Counts &k, bool in_place) const;
  void issue(const Variant &v, const Counts &k, bool in_place);
  void synchronize();
  void barrier();
  unsigned long long check(const Variant &v, const Counts &k, bool in_place, int round);
  void inject_fault(const Variant &v, const Counts &k, bool in_place);
  double time_iterations(const Variant &v, const Counts &k, bool in_place, double *host_us);
  double slowest_elapsed_ms();
  void capture(const Variant &v, const Counts &k, bool in_place);
  void drop_graphs();
  unsigned long long sum_over_ranks(unsigned long long value);
  void combine_over_ranks(Measurement *m);
  void remember(cudaError_t status, const char *what);

  Options opt_;
  std::vector<Gpu> gpus_;
  int nranks_ = 0;         // ranks of the communicator: gpus_.size(), or the launcher's size
  bool per_rank_ = false;  // one process per GPU (gpus_ holds this rank's GPU only)
  bool failed_ = false;
  bool fault_injected_ = false;
  std::string release_error_;
};
