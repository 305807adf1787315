// For each size and placement (out-of-place, then in-place), measure() does:
//   1. the data check, -c times: fill the inputs with the rank- and index-dependent pattern
//      and the outputs with poison (patterns.h), run the operation once, count the wrong
//      elements on the GPUs (summed over the ranks; a failed round ends the check);
//   2. -w untimed iterations;
//   3. the timed iterations: a CUDA event on every GPU's stream, -n iterations back to back
//      (each one ncclGroupStart/End over this process's GPUs; waited for one by one with -z;
//      captured once and launched -G times with -G), a second event; the slowest GPU's
//      elapsed time / iterations. One process per GPU: the ranks' times combined as -a says
//      (an NCCL all-reduce or broadcast outside the timing).
// Checking happens outside the timed iterations, so it costs no bandwidth.
#include "bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "check.h"
#include "patterns.h"

Bench::Bench(const Options &opt, int ngpus) : opt_(opt), gpus_(ngpus), nranks_(ngpus) {
  for (int r = 0; r < ngpus; ++r) gpus_[r].device = gpus_[r].rank = r;
}

Bench::Bench(const Options &opt, int device, int rank, int nranks)
    : opt_(opt), gpus_(1), nranks_(nranks), per_rank_(true) {
  gpus_[0].device = device;
  gpus_[0].rank = rank;
}

void Bench::remember(cudaError_t status, const char *what) {
  if (status != cudaSuccess && release_error_.empty())
    release_error_ = std::string(what) + " failed: " + cudaGetErrorString(status);
}

// Communicators are finalized in one group (several communicators on one thread), then
// destroyed; after a failure they are aborted instead. Graphs go first: NCCL (>= 2.26) waits
// in ncclCommDestroy/Abort until every graph that uses the communicator is destroyed.
void Bench::release() {
  drop_graphs();
  bool any_comm = false;
  for (Gpu &g : gpus_) any_comm = any_comm || g.comm != nullptr;
  if (any_comm && failed_) {
    for (Gpu &g : gpus_) {
      if (g.comm) ncclCommAbort(g.comm);
      g.comm = nullptr;
    }
  } else if (any_comm) {
    ncclResult_t status = ncclSuccess;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
    status = ncclGroupStart();
    for (Gpu &g : gpus_)
      if (g.comm && status == ncclSuccess) status = ncclCommFinalize(g.comm);
    const ncclResult_t end = ncclGroupEnd();
    if (status == ncclSuccess) status = end;
#endif
    for (Gpu &g : gpus_) {
      if (g.comm) {
        const ncclResult_t s =
            status == ncclSuccess ? ncclCommDestroy(g.comm) : ncclCommAbort(g.comm);
        if (s != ncclSuccess && release_error_.empty())
          release_error_ = std::string("ncclCommDestroy failed: ") + ncclGetErrorString(s);
      }
      g.comm = nullptr;
    }
    if (status != ncclSuccess && release_error_.empty())
      release_error_ = std::string("ncclCommFinalize failed: ") + ncclGetErrorString(status);
  }
  for (Gpu &g : gpus_) {
    if (cudaSetDevice(g.device) != cudaSuccess) continue;
    for (void **p : {&g.send, &g.recv, reinterpret_cast<void **>(&g.wrong), &g.across}) {
      remember(*p ? cudaFree(*p) : cudaSuccess, "cudaFree");
      *p = nullptr;
    }
    remember(g.start ? cudaEventDestroy(g.start) : cudaSuccess, "cudaEventDestroy");
    remember(g.stop ? cudaEventDestroy(g.stop) : cudaSuccess, "cudaEventDestroy");
    remember(g.stream ? cudaStreamDestroy(g.stream) : cudaSuccess, "cudaStreamDestroy");
    g.start = g.stop = nullptr;
    g.stream = nullptr;
  }
}

void Bench::init(std::size_t send_bytes, std::size_t recv_bytes, const ncclUniqueId *id) {
  if (id == nullptr) {
    std::vector<ncclComm_t> comms(gpus_.size(), nullptr);
    std::vector<int> devices;
    for (const Gpu &g : gpus_) devices.push_back(g.device);
    NCCL_CHECK(ncclCommInitAll(comms.data(), static_cast<int>(gpus_.size()), devices.data()));
    for (std::size_t i = 0; i < gpus_.size(); ++i) gpus_[i].comm = comms[i];
  } else {
    Gpu &g = gpus_[0];
    CUDA_CHECK(cudaSetDevice(g.device));
    NCCL_CHECK(ncclCommInitRank(&g.comm, nranks_, *id, g.rank));
  }
  for (Gpu &g : gpus_) {
    CUDA_CHECK(cudaSetDevice(g.device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreate(&g.start));
    CUDA_CHECK(cudaEventCreate(&g.stop));
    CUDA_CHECK(cudaMalloc(&g.send, std::max<std::size_t>(send_bytes, 1)));
    CUDA_CHECK(cudaMalloc(&g.recv, std::max<std::size_t>(recv_bytes, 1)));
    CUDA_CHECK(cudaMalloc(&g.wrong, 2 * sizeof(unsigned long long)));
    if (per_rank_) CUDA_CHECK(cudaMalloc(&g.across, 4 * sizeof(double)));
  }
}

namespace {

// What one rank tells the others about its GPU (one process per GPU).
struct DeviceRecord {
  int rank;
  int device;
  long pid;
  char host[64];
  char name[96];
  char bus[32];
};

DeviceInfo local_device(int rank, int device) {
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  char bus[32];
  std::snprintf(bus, sizeof bus, "%04x:%02x:%02x", prop.pciDomainID, prop.pciBusID,
                prop.pciDeviceID);
  return DeviceInfo{rank, device, prop.name, bus, -1, std::string()};
}

}  // namespace

std::vector<DeviceInfo> Bench::describe(const std::string &host, long pid) {
  std::vector<DeviceInfo> out;
  for (const Gpu &g : gpus_) out.push_back(local_device(g.rank, g.device));
  if (!per_rank_) return out;
  DeviceRecord record{};
  record.rank = out[0].rank;
  record.device = out[0].device;
  record.pid = pid;
  std::snprintf(record.host, sizeof record.host, "%s", host.c_str());
  std::snprintf(record.name, sizeof record.name, "%s", out[0].name.c_str());
  std::snprintf(record.bus, sizeof record.bus, "%s", out[0].pci_bus_id.c_str());
  std::vector<DeviceRecord> all(static_cast<std::size_t>(nranks_));
  Gpu &g = gpus_[0];
  CUDA_CHECK(cudaSetDevice(g.device));
  void *buffer = nullptr;
  const std::size_t bytes = sizeof(DeviceRecord) * all.size();
  CUDA_CHECK(cudaMalloc(&buffer, bytes));
  try {
    char *slot =
        static_cast<char *>(buffer) + sizeof(DeviceRecord) * static_cast<std::size_t>(g.rank);
    // All on this rank's stream, in order (the stream does not wait for the default one).
    CUDA_CHECK(cudaMemcpyAsync(slot, &record, sizeof record, cudaMemcpyHostToDevice, g.stream));
    NCCL_CHECK(ncclAllGather(slot, buffer, sizeof(DeviceRecord), ncclUint8, g.comm, g.stream));
    CUDA_CHECK(cudaMemcpyAsync(all.data(), buffer, bytes, cudaMemcpyDeviceToHost, g.stream));
    CUDA_CHECK(cudaStreamSynchronize(g.stream));
  } catch (...) {
    cudaFree(buffer);
    throw;
  }
  CUDA_CHECK(cudaFree(buffer));
  out.clear();
  for (DeviceRecord &r : all) {
    r.host[sizeof r.host - 1] = r.name[sizeof r.name - 1] = r.bus[sizeof r.bus - 1] = '\0';
    out.push_back(DeviceInfo{r.rank, r.device, r.name, r.bus, r.pid, r.host});
  }
  return out;
}

Call Bench::call_for(const Gpu &g, const Variant &v, const Counts &k, bool in_place) const {
  const std::size_t elt = type_info(v.type).bytes;
  Call c{g.send,  g.recv, &k,      type_info(v.type).nccl, op_info(v.op).nccl, v.root, g.rank,
         nranks_, g.comm, g.stream};
  if (in_place) {  // both inside the output buffer, as nccl-tests places them
    c.send = in_place_input(k, g.recv, g.rank, elt);
    c.recv = in_place_output(k, g.recv, g.rank, elt);
  }
  return c;
}

void Bench::issue(const Variant &v, const Counts &k, bool in_place) {
  NCCL_CHECK(ncclGroupStart());
  try {
    for (const Gpu &g : gpus_) NCCL_CHECK(opt_.collective->run(call_for(g, v, k, in_place)));
  } catch (...) {
    ncclGroupEnd();  // close the group before the comms are aborted; the first error wins
    throw;
  }
  NCCL_CHECK(ncclGroupEnd());
}

void Bench::synchronize() {
  for (Gpu &g : gpus_) {
    CUDA_CHECK(cudaSetDevice(g.device));
    CUDA_CHECK(cudaStreamSynchronize(g.stream));
  }
}

// -z 1 and 3: every process waits for the others. One process has no one to wait for (as
// nccl-tests' Barrier with one thread and no MPI); one process per GPU: an all-reduce of one
// value that the host waits for.
void Bench::barrier() {
  if (!per_rank_) return;
  Gpu &g = gpus_[0];
  CUDA_CHECK(cudaSetDevice(g.device));
  double *value = static_cast<double *>(g.across) + 3;
  NCCL_CHECK(ncclAllReduce(value, value, 1, ncclFloat64, ncclSum, g.comm, g.stream));
  CUDA_CHECK(cudaStreamSynchronize(g.stream));
}

unsigned long long Bench::sum_over_ranks(unsigned long long value) {
  if (!per_rank_) return value;
  Gpu &g = gpus_[0];
  CUDA_CHECK(cudaSetDevice(g.device));
  unsigned long long *d =
      reinterpret_cast<unsigned long long *>(static_cast<double *>(g.across) + 2);
  CUDA_CHECK(cudaMemcpyAsync(d, &value, sizeof value, cudaMemcpyHostToDevice, g.stream));
  NCCL_CHECK(ncclAllReduce(d, d, 1, ncclUint64, ncclSum, g.comm, g.stream));
  CUDA_CHECK(cudaMemcpyAsync(&value, d, sizeof value, cudaMemcpyDeviceToHost, g.stream));
  CUDA_CHECK(cudaStreamSynchronize(g.stream));
  return value;
}

// One process per GPU: the ranks' times as -a says (0 rank 0's, 1 the mean, 2 the shortest,
// 3 the longest) and the slowest host issue time, outside the timed iterations.
void Bench::combine_over_ranks(Measurement *m) {
  Gpu &g = gpus_[0];
  CUDA_CHECK(cudaSetDevice(g.device));
  double times[2] = {m->time_us, m->host_us};
  double *d = static_cast<double *>(g.across);
  CUDA_CHECK(cudaMemcpyAsync(d, times, sizeof times, cudaMemcpyHostToDevice, g.stream));
  const ncclRedOp_t ops[4] = {ncclSum, ncclSum, ncclMin, ncclMax};
  NCCL_CHECK(ncclGroupStart());
  const ncclResult_t first =
      opt_.average == 0 ? ncclBroadcast(d, d, 1, ncclFloat64, 0, g.comm, g.stream)
                        : ncclAllReduce(d, d, 1, ncclFloat64, ops[opt_.average], g.comm, g.stream);
  const ncclResult_t second =
      ncclAllReduce(d + 1, d + 1, 1, ncclFloat64, ncclMax, g.comm, g.stream);
  NCCL_CHECK(ncclGroupEnd());
  NCCL_CHECK(first);
  NCCL_CHECK(second);
  CUDA_CHECK(cudaMemcpyAsync(times, d, sizeof times, cudaMemcpyDeviceToHost, g.stream));
  CUDA_CHECK(cudaStreamSynchronize(g.stream));
  m->time_us = opt_.average == 1 ? times[0] / nranks_ : times[0];
  m->host_us = times[1];
}

// Fills the inputs and poisons the outputs, runs the operation once and returns the number
// of wrong elements over all ranks. round: which of the -c checks this is. With -c 0 the
// inputs are filled (so that NCCL moves real numbers) and nothing is checked.
unsigned long long Bench::check(const Variant &v, const Counts &k, bool in_place, int round) {
  const Pattern p = make_pattern(v.type, v.op, nranks_);
  for (Gpu &g : gpus_) {
    CUDA_CHECK(cudaSetDevice(g.device));
    const Call c = call_for(g, v, k, in_place);
    if (in_place)  // the whole buffer the two share, then the input inside it
      launch_fill(v.type, p, g.recv, std::max(k.send, k.recv), -1, g.stream);
    else
      launch_fill(v.type, p, c.recv, k.recv, -1, g.stream);
    launch_fill(v.type, p, const_cast<void *>(c.send), k.send, g.rank, g.stream);
    CUDA_CHECK(cudaMemsetAsync(g.wrong, 0, sizeof(unsigned long long), g.stream));
    CUDA_CHECK(cudaMemsetAsync(g.wrong + 1, 0xff, sizeof(unsigned long long), g.stream));
  }
  issue(v, k, in_place);
  if (opt_.check == 0) {
    synchronize();
    return 0;
  }
  if (round == 0 && opt_.inject_fault && !fault_injected_ && gpus_[0].rank == 0)
    inject_fault(v, k, in_place);
  unsigned long long total = 0;
  for (Gpu &g : gpus_) {
    CUDA_CHECK(cudaSetDevice(g.device));
    const Call c = call_for(g, v, k, in_place);
    const Expectation e = opt_.collective->expect(k, g.rank, nranks_, v.root);
    launch_verify(v.type, p, c.recv, e, g.wrong, g.stream);
    unsigned long long wrong[2] = {0, 0};
    CUDA_CHECK(cudaMemcpyAsync(wrong, g.wrong, sizeof wrong, cudaMemcpyDeviceToHost, g.stream));
    CUDA_CHECK(cudaStreamSynchronize(g.stream));
    if (wrong[0] != 0)
      std::fprintf(stderr,
                   "nccl_bench: error: data check failed on rank %d (GPU %d), %s, %s, %s, %zu "
                   "bytes, %s: %llu of %zu output elements wrong; first at element %llu\n",
                   g.rank, g.device, opt_.collective->name, type_info(v.type).name,
                   opt_.collective->reduces ? op_info(v.op).name : "none", k.bytes,
                   in_place ? "in-place" : "out-of-place", wrong[0], e.count, wrong[1]);
    total += wrong[0];
  }
  return sum_over_ranks(total);
}

// Test only (--inject-fault): after the operation and before its check, flips the lowest bit
// of one output element of rank 0, once per run, so the check can be seen to fail.
void Bench::inject_fault(const Variant &v, const Counts &k, bool in_place) {
  fault_injected_ = true;
  Gpu &g = gpus_[0];
  CUDA_CHECK(cudaSetDevice(g.device));
  CUDA_CHECK(cudaStreamSynchronize(g.stream));
  if (k.recv == 0) return;
  const std::size_t elt = type_info(v.type).bytes;
  const std::size_t element = k.recv / 2;
  unsigned char *where =
      static_cast<unsigned char *>(call_for(g, v, k, in_place).recv) + element * elt;
  unsigned char byte = 0;  // the lowest byte (little-endian): flipping it changes the value
  CUDA_CHECK(cudaMemcpy(&byte, where, 1, cudaMemcpyDeviceToHost));
  byte ^= 1;
  CUDA_CHECK(cudaMemcpy(where, &byte, 1, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaDeviceSynchronize());
  std::fprintf(stderr,
               "nccl_bench: --inject-fault: flipped one bit of element %zu of rank 0's output "
               "(%zu bytes, %s)\n",
               element, k.bytes, in_place ? "in-place" : "out-of-place");
}

// Records opt_.iters iterations into one CUDA graph per GPU. NCCL's documentation allows
// capturing its calls; each GPU's stream is captured separately (thread-local mode, so
// NCCL's own threads are unaffected).
void Bench::capture(const Variant &v, const Counts &k, bool in_place) {
  drop_graphs();
  for (Gpu &g : gpus_) {
    CUDA_CHECK(cudaSetDevice(g.device));
    CUDA_CHECK(cudaStreamBeginCapture(g.stream, cudaStreamCaptureModeThreadLocal));
  }
  try {
    for (int i = 0; i < opt_.iters; ++i) issue(v, k, in_place);
  } catch (...) {
    for (Gpu &g : gpus_) {  // leave no stream capturing
      cudaGraph_t partial = nullptr;
      if (cudaSetDevice(g.device) == cudaSuccess &&
          cudaStreamEndCapture(g.stream, &partial) == cudaSuccess && partial)
        cudaGraphDestroy(partial);
    }
    throw;
  }
  for (Gpu &g : gpus_) {
    CUDA_CHECK(cudaSetDevice(g.device));
    CUDA_CHECK(cudaStreamEndCapture(g.stream, &g.graph));
  }
  for (Gpu &g : gpus_) {
    CUDA_CHECK(cudaSetDevice(g.device));
    CUDA_CHECK(cudaGraphInstantiate(&g.graph_exec, g.graph, 0));
    CUDA_CHECK(cudaGraphUpload(g.graph_exec, g.stream));  // the upload is not timed
  }
}

void Bench::drop_graphs() {
  for (Gpu &g : gpus_) {
    if (g.graph_exec == nullptr && g.graph == nullptr) continue;
    if (cudaSetDevice(g.device) == cudaSuccess) {
      remember(g.graph_exec ? cudaGraphExecDestroy(g.graph_exec) : cudaSuccess,
               "cudaGraphExecDestroy");
      remember(g.graph ? cudaGraphDestroy(g.graph) : cudaSuccess, "cudaGraphDestroy");
    }
    g.graph_exec = nullptr;
    g.graph = nullptr;
  }
}

// The longest start-to-stop time of this process's GPUs, in ms (the stop events recorded).
double Bench::slowest_elapsed_ms() {
  float slowest = 0.0f;
  for (Gpu &g : gpus_) {
    CUDA_CHECK(cudaSetDevice(g.device));
    CUDA_CHECK(cudaEventSynchronize(g.stop));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, g.start, g.stop));
    slowest = std::max(slowest, ms);
  }
  return slowest;
}

// The time of one iteration in us (this process's slowest GPU); *host_us: how long the host
// took to issue one. If the two are close, the GPUs waited for the host (launch-bound).
double Bench::time_iterations(const Variant &v, const Counts &k, bool in_place, double *host_us) {
  auto record = [&](bool start) {
    for (Gpu &g : gpus_) {
      CUDA_CHECK(cudaSetDevice(g.device));
      CUDA_CHECK(cudaEventRecord(start ? g.start : g.stop, g.stream));
    }
  };
  using clock = std::chrono::steady_clock;
  double elapsed_ms = 0.0;
  double issued_us = 0.0;
  if (opt_.graph_launches > 0) {
    capture(v, k, in_place);
    synchronize();
    record(true);
    const auto t0 = clock::now();
    for (int l = 0; l < opt_.graph_launches; ++l)
      for (Gpu &g : gpus_) {
        CUDA_CHECK(cudaSetDevice(g.device));
        CUDA_CHECK(cudaGraphLaunch(g.graph_exec, g.stream));
      }
    issued_us = std::chrono::duration<double, std::micro>(clock::now() - t0).count();
    record(false);
    elapsed_ms = slowest_elapsed_ms();
    drop_graphs();
  } else if (opt_.blocking == 3) {  // each iteration timed alone, the barrier left out
    for (int i = 0; i < opt_.iters; ++i) {
      record(true);
      const auto t0 = clock::now();
      issue(v, k, in_place);
      issued_us += std::chrono::duration<double, std::micro>(clock::now() - t0).count();
      record(false);
      elapsed_ms += slowest_elapsed_ms();
      barrier();
    }
  } else {
    record(true);
    for (int i = 0; i < opt_.iters; ++i) {
      const auto t0 = clock::now();
      issue(v, k, in_place);
      issued_us += std::chrono::duration<double, std::micro>(clock::now() - t0).count();
      if (opt_.blocking != 0) synchronize();  // -z 1, 2: wait for this iteration
      if (opt_.blocking == 1) barrier();
    }
    record(false);
    elapsed_ms = slowest_elapsed_ms();
  }
  const double launches = opt_.graph_launches > 0 ? opt_.graph_launches : 1;
  *host_us = issued_us / (opt_.iters * launches);
  return 1000.0 * elapsed_ms / (opt_.iters * launches);
}

Measurement Bench::measure(const Variant &v, const Counts &k, bool in_place) {
  Measurement m;
  m.valid = true;
  m.checked = opt_.check > 0;
  for (int round = 0; round < std::max(opt_.check, 1); ++round) {
    m.wrong = check(v, k, in_place, round);
    if (m.wrong != 0) break;  // the same on every rank: summed over the ranks
  }
  for (int i = 0; i < opt_.warmup; ++i) issue(v, k, in_place);
  synchronize();
  m.time_us = time_iterations(v, k, in_place, &m.host_us);
  if (per_rank_) combine_over_ranks(&m);
  m.algbw = m.time_us > 0.0 ? static_cast<double>(k.bytes) / (m.time_us * 1000.0) : 0.0;
  m.busbw = m.algbw * opt_.collective->busbw_factor(nranks_);
  return m;
}
