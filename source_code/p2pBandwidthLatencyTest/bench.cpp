// bench.cpp - buffers, peer access, and one timed batch of copies at a time.
//
// A batch: the issuing stream first runs a gate kernel that spins on a flag in mapped
// host memory; the start event, then every copy of the batch, then the stop event are
// queued behind it; only then does the host raise the flag. So the interval between the
// two events holds the copies and none of the cost of issuing them.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <set>

#include "p2p.h"

void p2p_cuda_fail(cudaError_t err, const char *call, const char *file, int line) {
  std::fprintf(stderr, "%s: error: CUDA call %s failed: %s: %s (%s:%d)\n", P2P_PROG, call,
               cudaGetErrorName(err), cudaGetErrorString(err), file, line);
  std::exit(EXIT_MISMATCH_OR_CUDA);
}

namespace {

void *device_alloc(size_t bytes, const DeviceInfo &d, const Options &opt) {
  void *p = nullptr;
  cudaError_t err = cudaMalloc(&p, bytes);
  if (err == cudaErrorMemoryAllocation) {
    char msg[400];
    std::snprintf(msg, sizeof msg,
                  "cannot allocate %.2f GiB on GPU %d for --numElems=%zu with --iters=%d; "
                  "lower one of them (cudaMalloc: %s)",
                  bytes / 1073741824.0, d.ordinal, opt.num_elems, opt.iters,
                  cudaGetErrorString(err));
    p2p_die(EXIT_USAGE, msg);
  }
  CUDA_TRY(err);
  return p;
}

}  // namespace

Bench::Bench(const Options &opt, const std::vector<DeviceInfo> &devs) : opt_(opt) {
  const int n = (int)devs.size();
  gpus_.resize(n);
  stride_ = (opt.num_elems + 63) / 64 * 64;  // keep every destination 256-byte aligned
  const int nstreams = 2 * opt.ce_streams;   // two flows may share one GPU (diagonal)

  // gate_host_[0]: the release flag; gate_host_[1]: set by a gate kernel that timed out.
  CUDA_TRY(cudaHostAlloc((void **)&gate_host_, 2 * sizeof(int),
                         cudaHostAllocMapped | cudaHostAllocPortable));
  gate_host_[0] = 0;
  gate_host_[1] = 0;

  for (int k = 0; k < n; ++k) {
    Gpu &g = gpus_[k];
    g.info = devs[k];
    CUDA_TRY(cudaSetDevice(g.info.ordinal));
    g.streams.resize(nstreams);
    g.joined.resize(nstreams);
    for (int s = 0; s < nstreams; ++s) {
      CUDA_TRY(cudaStreamCreateWithFlags(&g.streams[s], cudaStreamNonBlocking));
      CUDA_TRY(cudaEventCreateWithFlags(&g.joined[s], cudaEventDisableTiming));
    }
    CUDA_TRY(cudaEventCreate(&g.start));
    CUDA_TRY(cudaEventCreate(&g.stop));
    g.src = (int *)device_alloc(stride_ * sizeof(int), g.info, opt);
    g.slots = (int *)device_alloc(stride_ * sizeof(int) * (size_t)opt.iters, g.info, opt);
    g.bad = (unsigned long long *)device_alloc(2 * sizeof(unsigned long long), g.info, opt);
    void *p = nullptr;
    CUDA_TRY(cudaHostGetDevicePointer(&p, gate_host_, 0));
    g.gate_dev = (volatile int *)p;
    g.timeout_dev = (int *)p + 1;
  }
  can_.assign(n, std::vector<bool>(n, false));
  on_.assign(n, std::vector<bool>(n, false));
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      int ok = 0;
      CUDA_TRY(cudaDeviceCanAccessPeer(&ok, gpus_[a].info.ordinal, gpus_[b].info.ordinal));
      can_[a][b] = ok != 0;
    }
}

Bench::~Bench() {
  const int n = count();
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (on_[a][b]) {
        CUDA_TRY(cudaSetDevice(gpus_[a].info.ordinal));
        CUDA_TRY(cudaDeviceDisablePeerAccess(gpus_[b].info.ordinal));
      }
  for (Gpu &g : gpus_) {
    CUDA_TRY(cudaSetDevice(g.info.ordinal));
    CUDA_TRY(cudaDeviceSynchronize());
    for (size_t s = 0; s < g.streams.size(); ++s) {
      CUDA_TRY(cudaStreamDestroy(g.streams[s]));
      CUDA_TRY(cudaEventDestroy(g.joined[s]));
    }
    CUDA_TRY(cudaEventDestroy(g.start));
    CUDA_TRY(cudaEventDestroy(g.stop));
    CUDA_TRY(cudaFree(g.src));
    CUDA_TRY(cudaFree(g.slots));
    CUDA_TRY(cudaFree(g.bad));
  }
  CUDA_TRY(cudaFreeHost(gate_host_));
}

void Bench::set_peer(int a, int b, bool on) {
  if (a == b) return;
  const int pairs[2][2] = {{a, b}, {b, a}};
  for (const auto &pr : pairs) {
    int x = pr[0], y = pr[1];
    if (on && can_[x][y] && !on_[x][y]) {
      CUDA_TRY(cudaSetDevice(gpus_[x].info.ordinal));
      CUDA_TRY(cudaDeviceEnablePeerAccess(gpus_[y].info.ordinal, 0));
      on_[x][y] = true;
    } else if (!on && on_[x][y]) {
      CUDA_TRY(cudaSetDevice(gpus_[x].info.ordinal));
      CUDA_TRY(cudaDeviceDisablePeerAccess(gpus_[y].info.ordinal));
      on_[x][y] = false;
    }
  }
}

int Bench::sm_blocks_used(int k) const {
  if (opt_.sm_blocks > 0) return opt_.sm_blocks;
  return gpus_[k].info.sm_count * sm_copy_blocks_per_sm(opt_.sm_threads);
}

void Bench::issue(const Flow &f, int k, bool tiny, bool use_kernel, int chunks) {
  Gpu &S = gpus_[f.src], &D = gpus_[f.dst], &I = gpus_[f.issuer];
  const int *src;
  int *dst;
  size_t n;
  if (tiny) {  // element k of the source into element k of the first destination buffer
    src = S.src + k;
    dst = D.slots + k;
    n = 1;
  } else {
    src = S.src;
    dst = D.slots + (size_t)(f.first_slot + k * f.slot_step) * stride_;
    n = opt_.num_elems;
  }
  if (use_kernel) {
    CUDA_TRY(cudaSetDevice(I.info.ordinal));
    launch_sm_copy(I.streams[f.stream_base], dst, src, n, sm_blocks_used(f.issuer),
                   opt_.sm_threads);
    return;
  }
  // Copy engine; with chunks > 1 the copy is cut into pieces (multiples of 64 elements)
  // on as many streams of the issuing GPU.
  size_t piece = (n + chunks - 1) / chunks;
  piece = (piece + 63) / 64 * 64;
  for (int c = 0; c < chunks; ++c) {
    size_t off = (size_t)c * piece;
    if (off >= n) break;
    size_t len = (off + piece <= n) ? piece : n - off;
    cudaStream_t st = I.streams[f.stream_base + c];
    if (f.src == f.dst)
      CUDA_TRY(
          cudaMemcpyAsync(dst + off, src + off, len * sizeof(int), cudaMemcpyDeviceToDevice, st));
    else
      CUDA_TRY(cudaMemcpyPeerAsync(dst + off, D.info.ordinal, src + off, S.info.ordinal,
                                   len * sizeof(int), st));
  }
}

void Bench::verify(const Flow &f, bool tiny, uint32_t seed, const char *what) {
  Gpu &D = gpus_[f.dst];
  CUDA_TRY(cudaSetDevice(D.info.ordinal));
  size_t n = tiny ? (size_t)f.copies : opt_.num_elems;
  size_t stride = tiny ? 0 : stride_ * f.slot_step;
  int slots = tiny ? 1 : f.copies;
  const int *base = tiny ? D.slots : D.slots + (size_t)f.first_slot * stride_;
  launch_verify(D.streams[0], base, n, stride, slots, seed, D.bad);
  unsigned long long bad[2];
  CUDA_TRY(cudaMemcpyAsync(bad, D.bad, sizeof bad, cudaMemcpyDeviceToHost, D.streams[0]));
  CUDA_TRY(cudaStreamSynchronize(D.streams[0]));
  copies_checked_ += f.copies;
  bytes_checked_ += (unsigned long long)n * slots * sizeof(int);
  if (bad[0] == 0) return;
  mismatches_ += bad[0];
  size_t copy = bad[1] / n, elem = bad[1] % n;
  int got = 0;
  const int *where = tiny ? base + elem : base + copy * stride + elem;
  CUDA_TRY(cudaMemcpy(&got, where, sizeof got, cudaMemcpyDeviceToHost));
  uint32_t expect = pattern_value(elem, seed);
  std::fprintf(stderr,
               "%s: error: data mismatch in %s, GPU %d -> GPU %d: %llu of %llu elements "
               "wrong; first in copy %zu at element %zu: read 0x%08x, expected 0x%08x\n",
               P2P_PROG, what, gpus_[f.src].info.ordinal, D.info.ordinal, bad[0],
               (unsigned long long)n * slots, tiny ? elem : copy, elem, (unsigned)got,
               (unsigned)expect);
}

// Test only (--inject-fault): flips the lowest bit of one element that the copies of `f`
// wrote, once per run, so that the data check can be seen to catch a wrong element.
void Bench::inject_fault(const Flow &f, bool tiny) {
  fault_injected_ = true;
  Gpu &D = gpus_[f.dst];
  CUDA_TRY(cudaSetDevice(D.info.ordinal));
  size_t n = tiny ? (size_t)f.copies : opt_.num_elems;
  size_t elem = n / 2;
  int *where = (tiny ? D.slots : D.slots + (size_t)f.first_slot * stride_) + elem;
  int value = 0;
  CUDA_TRY(cudaMemcpy(&value, where, sizeof value, cudaMemcpyDeviceToHost));
  value ^= 1;
  CUDA_TRY(cudaMemcpy(where, &value, sizeof value, cudaMemcpyHostToDevice));
  CUDA_TRY(cudaDeviceSynchronize());  // the flipped value is in place before the check
  std::fprintf(stderr,
               "%s: --inject-fault: flipped one bit of element %zu in copy 0, "
               "GPU %d -> GPU %d\n",
               P2P_PROG, elem, gpus_[f.src].info.ordinal, D.info.ordinal);
}

BatchResult Bench::run(const std::vector<Flow> &flows, bool tiny, bool use_kernel,
                       const char *what) {
  BatchResult r;
  seed_ = seed_ * 1664525u + 1013904223u;  // a new pattern for every batch
  auto seed_of = [&](int src) { return seed_ ^ (0x01000193u * (uint32_t)(src + 1)); };

  // 1. Write the pattern into each source, poison each destination, wait for both.
  std::set<int> sources, dests, touched;
  for (const Flow &f : flows) {
    sources.insert(f.src);
    dests.insert(f.dst);
  }
  const size_t n_fill = tiny ? (size_t)opt_.lat_iters : opt_.num_elems;
  for (int s : sources) {
    CUDA_TRY(cudaSetDevice(gpus_[s].info.ordinal));
    launch_fill(gpus_[s].streams[0], gpus_[s].src, n_fill, seed_of(s));
    touched.insert(s);
  }
  for (const Flow &f : flows) {
    Gpu &D = gpus_[f.dst];
    CUDA_TRY(cudaSetDevice(D.info.ordinal));
    // poison with the inverse of the very pattern the copies must bring
    if (tiny)
      launch_poison(D.streams[0], D.slots, n_fill, 0, 1, seed_of(f.src));
    else
      launch_poison(D.streams[0], D.slots + (size_t)f.first_slot * stride_, n_fill,
                    stride_ * f.slot_step, f.copies, seed_of(f.src));
    touched.insert(f.dst);
  }
  for (int k : touched) {
    CUDA_TRY(cudaSetDevice(gpus_[k].info.ordinal));
    CUDA_TRY(cudaStreamSynchronize(gpus_[k].streams[0]));
  }

  // 2. Gate, start event, copies, joins, stop event; then release the gate.
  // A copy between GPUs without peer access goes through the runtime's staged path, which
  // makes the host wait for it: queued behind a closed gate it would never start. Such
  // batches are timed without the gate (their copies are slow, so issuing them is cheap
  // by comparison).
  bool staged = false;
  for (const Flow &f : flows)
    if (f.src != f.dst && !on_[f.issuer][f.issuer == f.src ? f.dst : f.src]) staged = true;
  r.gated = !staged;
  const int chunks = (tiny || use_kernel) ? 1 : opt_.ce_streams;
  Gpu &P = gpus_[flows[0].issuer];
  cudaStream_t primary = P.streams[flows[0].stream_base];
  std::atomic_thread_fence(std::memory_order_seq_cst);
  ((volatile int *)gate_host_)[0] = 0;
  ((volatile int *)gate_host_)[1] = 0;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  CUDA_TRY(cudaSetDevice(P.info.ordinal));
  if (r.gated)
    launch_gate(primary, P.gate_dev, P.timeout_dev, (unsigned long long)(opt_.timeout_s * 1e9));
  CUDA_TRY(cudaEventRecord(P.start, primary));
  std::vector<std::pair<int, int>> workers;  // (gpu, stream index) other than primary
  for (const Flow &f : flows)
    for (int c = 0; c < chunks; ++c) {
      Gpu &I = gpus_[f.issuer];
      cudaStream_t st = I.streams[f.stream_base + c];
      if (st == primary) continue;
      CUDA_TRY(cudaStreamWaitEvent(st, P.start, 0));
      workers.push_back({f.issuer, f.stream_base + c});
    }
  int most = 0;
  for (const Flow &f : flows) most = f.copies > most ? f.copies : most;
  auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < most; ++k)
    for (const Flow &f : flows)
      if (k < f.copies) issue(f, k, tiny, use_kernel, chunks);
  auto t1 = std::chrono::steady_clock::now();
  for (const auto &w : workers) {
    Gpu &I = gpus_[w.first];
    CUDA_TRY(cudaSetDevice(I.info.ordinal));
    CUDA_TRY(cudaEventRecord(I.joined[w.second], I.streams[w.second]));
    CUDA_TRY(cudaStreamWaitEvent(primary, I.joined[w.second], 0));
  }
  CUDA_TRY(cudaSetDevice(P.info.ordinal));
  CUDA_TRY(cudaEventRecord(P.stop, primary));
  std::atomic_thread_fence(std::memory_order_seq_cst);
  ((volatile int *)gate_host_)[0] = 1;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  CUDA_TRY(cudaEventSynchronize(P.stop));

  float ms = 0;
  CUDA_TRY(cudaEventElapsedTime(&ms, P.start, P.stop));
  r.gpu_ms = ms;
  r.host_us = std::chrono::duration<double, std::micro>(t1 - t0).count();
  r.gate_timed_out = ((volatile int *)gate_host_)[1] != 0;
  if (r.gate_timed_out) {
    ++gate_timeouts_;
    std::fprintf(stderr,
                 "%s: warning: the start gate timed out after %.1f s in %s; that timing "
                 "includes the cost of issuing the copies\n",
                 P2P_PROG, opt_.timeout_s, what);
  }
  for (const Flow &f : flows)
    r.bytes += (unsigned long long)f.copies * (tiny ? 1 : opt_.num_elems) * sizeof(int);

  // 3. Check every destination buffer against the pattern.
  if (opt_.inject_fault && !fault_injected_) inject_fault(flows[0], tiny);
  for (const Flow &f : flows) verify(f, tiny, seed_of(f.src), what);
  return r;
}
