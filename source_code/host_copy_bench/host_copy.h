// host_copy.h - shared declarations of the course's host <-> GPU copy benchmark.
//
// Written for the gputopo course from the CUDA Runtime API documentation.
// Layout of the program:
//   pattern.h    the bytes a copy must carry; the host half of the data check
//   options.cpp  command line (getopt_long through ../cuda_common/cli.h)
//   kernels.cu   the only device code: gate (host-flag spin), fill, poison, verify
//   bench.cpp    buffers, gated batches, one-copy timings, checks
//   report.cpp   header, rows, footer (nccl-tests' layout), the JSON file
//   main.cpp     the device, the order of the measurements, exit codes
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#define HCB_PROG "host_copy_bench"

// Exit codes: 0 all good, 1 a CUDA failure or a data mismatch, 2 bad usage or no GPU.
enum { EXIT_MISMATCH_OR_CUDA = 1, EXIT_USAGE = 2 };

[[noreturn]] void hcb_die(int code, const std::string &what);
void hcb_cuda_fail(cudaError_t err, const char *call, const char *file, int line);
#define CUDA_TRY(call)                                                            \
  do {                                                                            \
    cudaError_t hcb_err_ = (call);                                                \
    if (hcb_err_ != cudaSuccess) hcb_cuda_fail(hcb_err_, #call, __FILE__, __LINE__); \
  } while (0)

// ---------------------------------------------------------------- options (options.cpp)
struct Options {
  size_t min_bytes = 8;           // -b
  size_t max_bytes = 1ull << 30;  // -e
  size_t step_factor = 2;         // -f
  int iters = 20;                 // -n: copies per gated batch (fewer where they would not fit)
  int warmup = 5;                 // -w: untimed copies before each row
  int batches = 5;                // --batches: gated batches and one-copy rounds per row
  double timeout_s = 10.0;        // -T: the gate gives up after this long
  int device = 0;                 // --device: CUDA ordinal
  bool pinned = true, pageable = true;  // --memory
  bool h2d = true, d2h = true;          // --direction
  std::string json_path;          // -J: must not exist (results are never overwritten)
  bool inject_fault = false;      // test only: corrupt one copied byte before its check
  std::string command_line;
};

Options parse_options(int argc, char **argv);
void print_help(FILE *out);
// Copies in one batch of `bytes`: -n, but no more than fit in BATCH_BYTES (at least 1).
int copies_for(const Options &opt, size_t bytes);
constexpr size_t BATCH_BYTES = 1ull << 30;

// ---------------------------------------------------------------- kernels (kernels.cu)
void launch_gate(cudaStream_t stream, const volatile int *flag, int *timed_out,
                 unsigned long long timeout_ns);
// Writes the pattern of `seed` (or its inverse) into `slots` buffers, `stride` bytes apart.
void launch_fill(cudaStream_t stream, unsigned char *buf, size_t n, size_t stride, int slots,
                 uint32_t seed, bool invert);
// Counts the bytes of `slots` buffers that differ from the pattern; bad[0] += count,
// bad[1] = min(first wrong flat index). The caller zeroes bad[0] and sets bad[1] to ~0.
void launch_verify(cudaStream_t stream, const unsigned char *buf, size_t n, size_t stride,
                   int slots, uint32_t seed, unsigned long long *bad);

// ---------------------------------------------------------------- the bench (bench.cpp)
enum class Direction { H2D, D2H };
enum class Memory { Pinned, Pageable };
const char *name_of(Direction d);
const char *name_of(Memory m);

struct Row {
  size_t bytes = 0;
  Direction direction = Direction::H2D;
  Memory memory = Memory::Pinned;
  int copies = 0;                       // per gated batch and per one-copy round
  std::vector<double> gpu_us;           // per-copy time on the GPU, one per batch (pinned only)
  std::vector<double> latency_us;       // one per copy timed alone
  double gpu_median_us = 0;             // NaN where not measured (pageable)
  double latency_median_us = 0;
  unsigned long long wrong = 0;         // bytes that differed from the pattern, all copies
  unsigned long long copies_checked = 0;
  int gate_timeouts = 0;
};

class Bench {
 public:
  Bench(const Options &opt);
  ~Bench();
  // Measures one row; every copy it makes is checked.
  Row measure(size_t bytes, Direction d, Memory m);
  const cudaDeviceProp &prop() const { return prop_; }

 private:
  struct Buffers;
  double gated_batch(Buffers &b, Row &row);
  void one_copy_round(Buffers &b, Row &row, int count, std::vector<double> *times);
  void poison(Buffers &b, int slots);
  void check(Buffers &b, Row &row, int slots, const char *what);
  void plant_fault(Buffers &b);
  void copy(Buffers &b, int slot);
  const Options &opt_;
  cudaDeviceProp prop_{};
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  int *gate_host_ = nullptr;            // [0]: release flag, [1]: set by a gate that timed out
  volatile int *gate_dev_ = nullptr;
  int *timeout_dev_ = nullptr;
  unsigned long long *bad_dev_ = nullptr;
  uint32_t seed_ = 0x51ED2701u;
  bool fault_planted_ = false;
};

// ---------------------------------------------------------------- report (report.cpp)
struct RunInfo {
  std::string date_utc, device_name, pci_bus_id, driver, runtime, cpus_allowed, mems_allowed;
  int device = 0, sm_major = 0, sm_minor = 0;
};

void print_header(const Options &opt, const RunInfo &info);
void print_row(const Row &row);
void print_footer(unsigned long long copies, unsigned long long wrong, int gate_timeouts);
// Returns false (and says why on stderr) when the file cannot be created or written.
bool write_json(const std::string &path, const Options &opt, const RunInfo &info,
                const std::vector<Row> &rows);
double median_of(std::vector<double> v);
