// bench.cpp - buffers, gated batches, one-copy timings, and the check of every copy.
//
// A gated batch: the stream first runs a gate kernel that spins on a flag in mapped host
// memory; the start event, the batch's copies and the stop event are queued behind it; only
// then does the host raise the flag. The interval between the events holds the copies and
// none of the cost of issuing them: the per-copy time on the GPU.
// A one-copy timing: the host clock around one cudaMemcpyAsync and the
// cudaStreamSynchronize that waits for it: the latency of one copy, start to arrival.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "host_copy.h"
#include "pattern.h"

void hcb_cuda_fail(cudaError_t err, const char *call, const char *file, int line) {
  std::fprintf(stderr, "%s: error: CUDA call %s failed: %s: %s (%s:%d)\n", HCB_PROG, call,
               cudaGetErrorName(err), cudaGetErrorString(err), file, line);
  std::exit(EXIT_MISMATCH_OR_CUDA);
}

// One row's memory. Host to GPU: one host source, `slots` GPU destinations. GPU to host:
// one GPU source, `slots` host destinations and the bytes they must hold (`expected`).
struct Bench::Buffers {
  size_t bytes = 0, stride = 0;
  int slots = 0;
  Direction direction = Direction::H2D;
  Memory memory = Memory::Pinned;
  uint32_t seed = 0;
  unsigned char *host = nullptr, *dev = nullptr;
  unsigned char *expected = nullptr, *poison = nullptr;  // GPU to host: the pattern, its inverse
  std::string what;  // "h2d pinned copies of 8 B", for messages
};

namespace {

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

[[noreturn]] void too_big(const char *where, size_t bytes, cudaError_t err) {
  char msg[300];
  std::snprintf(msg, sizeof msg,
                "cannot allocate %.3f GiB of %s memory (%s); lower -e or -n", bytes / 1073741824.0,
                where, err == cudaSuccess ? "out of memory" : cudaGetErrorString(err));
  hcb_die(EXIT_USAGE, msg);
}

}  // namespace

Bench::Bench(const Options &opt) : opt_(opt) {
  CUDA_TRY(cudaSetDevice(opt.device));
  CUDA_TRY(cudaGetDeviceProperties(&prop_, opt.device));
  CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUDA_TRY(cudaEventCreate(&start_));
  CUDA_TRY(cudaEventCreate(&stop_));
  CUDA_TRY(cudaHostAlloc((void **)&gate_host_, 2 * sizeof(int), cudaHostAllocMapped));
  gate_host_[0] = gate_host_[1] = 0;
  void *p = nullptr;
  CUDA_TRY(cudaHostGetDevicePointer(&p, gate_host_, 0));
  gate_dev_ = (volatile int *)p;
  timeout_dev_ = (int *)p + 1;
  CUDA_TRY(cudaMalloc(&bad_dev_, 2 * sizeof(unsigned long long)));
}

Bench::~Bench() {
  CUDA_TRY(cudaStreamSynchronize(stream_));
  CUDA_TRY(cudaFree(bad_dev_));
  CUDA_TRY(cudaFreeHost(gate_host_));
  CUDA_TRY(cudaEventDestroy(start_));
  CUDA_TRY(cudaEventDestroy(stop_));
  CUDA_TRY(cudaStreamDestroy(stream_));
}

void Bench::copy(Buffers &b, int slot) {
  const size_t at = (size_t)slot * b.stride;
  if (b.direction == Direction::H2D)
    CUDA_TRY(cudaMemcpyAsync(b.dev + at, b.host, b.bytes, cudaMemcpyHostToDevice, stream_));
  else
    CUDA_TRY(cudaMemcpyAsync(b.host + at, b.dev, b.bytes, cudaMemcpyDeviceToHost, stream_));
}

// The inverse of the pattern into the first `slots` destinations, so that a copy that never
// happened, or stopped short, cannot pass the check.
void Bench::poison(Buffers &b, int slots) {
  if (b.direction == Direction::H2D) {
    launch_fill(stream_, b.dev, b.bytes, b.stride, slots, b.seed, true);
    CUDA_TRY(cudaStreamSynchronize(stream_));
  } else {  // a copy of the inverse computed once per row: memcpy runs at memory speed
    for (int k = 0; k < slots; ++k) std::memcpy(b.host + k * b.stride, b.poison, b.bytes);
  }
}

void Bench::check(Buffers &b, Row &row, int slots, const char *what) {
  hcb::Mismatch m;
  int copy_index = 0;
  unsigned got = 0;
  if (b.direction == Direction::H2D) {
    unsigned long long bad[2] = {0, ~0ull};
    CUDA_TRY(cudaMemcpyAsync(bad_dev_, bad, sizeof bad, cudaMemcpyHostToDevice, stream_));
    launch_verify(stream_, b.dev, b.bytes, b.stride, slots, b.seed, bad_dev_);
    CUDA_TRY(cudaMemcpyAsync(bad, bad_dev_, sizeof bad, cudaMemcpyDeviceToHost, stream_));
    CUDA_TRY(cudaStreamSynchronize(stream_));
    m.count = bad[0];
    if (m.count) {
      copy_index = (int)(bad[1] / b.bytes);
      m.first = bad[1] % b.bytes;
      unsigned char byte = 0;
      CUDA_TRY(cudaMemcpy(&byte, b.dev + copy_index * b.stride + m.first, 1,
                          cudaMemcpyDeviceToHost));
      got = byte;
    }
  } else {
    for (int k = 0; k < slots; ++k) {
      hcb::Mismatch one = hcb::compare_host(b.host + k * b.stride, b.expected, b.bytes);
      if (one.count && !m.count) {
        copy_index = k;
        m.first = one.first;
        got = b.host[k * b.stride + one.first];
      }
      m.count += one.count;
    }
  }
  row.copies_checked += (unsigned long long)slots;
  row.wrong += m.count;
  if (m.count)
    std::fprintf(stderr,
                 "%s: error: data mismatch in %s (%s): %llu of %llu bytes wrong; first in copy "
                 "%d at byte %zu: read 0x%02x, expected 0x%02x\n",
                 HCB_PROG, b.what.c_str(), what, m.count, (unsigned long long)slots * b.bytes,
                 copy_index, m.first, got, (unsigned)hcb::pattern_byte(m.first, b.seed));
}

// Test only (--inject-fault): flips the lowest bit of the middle byte of copy 0, once per
// run, after the copies and before their check, which must then report it.
void Bench::plant_fault(Buffers &b) {
  fault_planted_ = true;
  const size_t at = b.bytes / 2;
  if (b.direction == Direction::H2D) {
    unsigned char byte = 0;
    CUDA_TRY(cudaMemcpy(&byte, b.dev + at, 1, cudaMemcpyDeviceToHost));
    byte ^= 1;
    CUDA_TRY(cudaMemcpy(b.dev + at, &byte, 1, cudaMemcpyHostToDevice));
  } else {
    b.host[at] ^= 1;
  }
  std::fprintf(stderr, "%s: --inject-fault: flipped one bit of byte %zu of copy 0 (%s)\n",
               HCB_PROG, at, b.what.c_str());
}

double Bench::gated_batch(Buffers &b, Row &row) {
  poison(b, b.slots);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  ((volatile int *)gate_host_)[0] = 0;
  ((volatile int *)gate_host_)[1] = 0;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  launch_gate(stream_, gate_dev_, timeout_dev_, (unsigned long long)(opt_.timeout_s * 1e9));
  CUDA_TRY(cudaEventRecord(start_, stream_));
  for (int k = 0; k < b.slots; ++k) copy(b, k);
  CUDA_TRY(cudaEventRecord(stop_, stream_));
  std::atomic_thread_fence(std::memory_order_seq_cst);
  ((volatile int *)gate_host_)[0] = 1;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  CUDA_TRY(cudaEventSynchronize(stop_));
  float ms = 0;
  CUDA_TRY(cudaEventElapsedTime(&ms, start_, stop_));
  if (((volatile int *)gate_host_)[1] != 0) {
    ++row.gate_timeouts;
    std::fprintf(stderr, "%s: warning: the gate timed out after %g s in %s; that batch's time "
                 "includes the cost of issuing its copies\n", HCB_PROG, opt_.timeout_s,
                 b.what.c_str());
  }
  if (opt_.inject_fault && !fault_planted_) plant_fault(b);
  check(b, row, b.slots, "a gated batch");
  return ms * 1000.0 / b.slots;
}

void Bench::one_copy_round(Buffers &b, Row &row, int count, std::vector<double> *times) {
  if (count == 0) return;
  const int used = count < b.slots ? count : b.slots;
  poison(b, used);
  for (int k = 0; k < count; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    copy(b, k % b.slots);
    CUDA_TRY(cudaStreamSynchronize(stream_));
    const auto t1 = std::chrono::steady_clock::now();
    if (times) times->push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  if (times && opt_.inject_fault && !fault_planted_) plant_fault(b);
  check(b, row, used, times ? "copies timed alone" : "warm-up copies");
}

Row Bench::measure(size_t bytes, Direction d, Memory m) {
  Row row;
  row.bytes = bytes;
  row.direction = d;
  row.memory = m;
  Buffers b;
  b.bytes = bytes;
  b.stride = round_up(bytes, 256);  // every GPU slot starts 256-byte aligned
  b.slots = row.copies = copies_for(opt_, bytes);
  b.direction = d;
  b.memory = m;
  seed_ = seed_ * 1664525u + 1013904223u;  // a new pattern for every row
  b.seed = seed_;
  b.what = std::string(name_of(d)) + " " + name_of(m) + " copies of " + std::to_string(bytes) +
           " B";

  const int host_slots = d == Direction::H2D ? 1 : b.slots;
  const int dev_slots = d == Direction::H2D ? b.slots : 1;
  const size_t host_bytes = round_up(host_slots * b.stride, 4096);
  if (m == Memory::Pinned) {
    cudaError_t err = cudaHostAlloc((void **)&b.host, host_bytes, cudaHostAllocDefault);
    if (err == cudaErrorMemoryAllocation) too_big("pinned host", host_bytes, err);
    CUDA_TRY(err);
  } else {
    b.host = (unsigned char *)std::aligned_alloc(4096, host_bytes);
    if (!b.host) too_big("pageable host", host_bytes, cudaSuccess);
  }
  cudaError_t err = cudaMalloc(&b.dev, dev_slots * b.stride);
  if (err == cudaErrorMemoryAllocation) too_big("GPU", dev_slots * b.stride, err);
  CUDA_TRY(err);

  if (d == Direction::H2D) {
    hcb::fill_host(b.host, bytes, b.seed);
  } else {
    b.expected = (unsigned char *)std::malloc(bytes);
    b.poison = (unsigned char *)std::malloc(bytes);
    if (!b.expected || !b.poison) too_big("host (the expected bytes)", 2 * bytes, cudaSuccess);
    hcb::fill_host(b.expected, bytes, b.seed);
    for (size_t i = 0; i < bytes; ++i) b.poison[i] = (unsigned char)~b.expected[i];
    launch_fill(stream_, b.dev, bytes, b.stride, 1, b.seed, false);
    CUDA_TRY(cudaStreamSynchronize(stream_));
  }

  one_copy_round(b, row, opt_.warmup, nullptr);
  for (int r = 0; r < opt_.batches; ++r) {
    if (m == Memory::Pinned) row.gpu_us.push_back(gated_batch(b, row));
    one_copy_round(b, row, b.slots, &row.latency_us);
  }
  row.gpu_median_us = row.gpu_us.empty() ? std::nan("") : median_of(row.gpu_us);
  row.latency_median_us = median_of(row.latency_us);

  std::free(b.expected);
  std::free(b.poison);
  CUDA_TRY(cudaFree(b.dev));
  if (m == Memory::Pinned)
    CUDA_TRY(cudaFreeHost(b.host));
  else
    std::free(b.host);
  return row;
}
