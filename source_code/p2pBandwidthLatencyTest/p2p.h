// p2p.h - shared declarations of the course's peer-to-peer bandwidth and latency test.
//
// Written for the gputopo course from the CUDA Runtime API documentation.
// Layout of the program:
//   options.cpp  command line
//   kernels.cu   the only device code: gate (host-flag spin), fill/poison/verify, SM copy
//   bench.cpp    buffers, peer state, timed batches of copies
//   report.cpp   text matrices (NVIDIA's section titles and layout) and the JSON file
//   main.cpp     device discovery, the order of the measurements, exit codes
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#define P2P_PROG "p2pBandwidthLatencyTest"
#define P2P_VERSION "1.1"  // 1.1: the diagonal counts read and write, as NVIDIA

// Exit codes: 0 all good, 1 a CUDA failure or a data mismatch, 2 bad usage or nothing to measure.
enum { EXIT_MISMATCH_OR_CUDA = 1, EXIT_USAGE = 2 };

// Every CUDA runtime call goes through this: on failure one line on stderr and exit 1.
void p2p_cuda_fail(cudaError_t err, const char *call, const char *file, int line);
#define CUDA_TRY(call)                                                               \
  do {                                                                               \
    cudaError_t p2p_err_ = (call);                                                   \
    if (p2p_err_ != cudaSuccess) p2p_cuda_fail(p2p_err_, #call, __FILE__, __LINE__); \
  } while (0)

// One line on stderr in the project's format, then exit with `code`.
[[noreturn]] void p2p_die(int code, const std::string &what);

// ---------------------------------------------------------------- options
struct Options {
  bool p2p_read = false;            // unidirectional/latency: destination GPU pulls (reads)
  bool sm_copy = false;             // copy with a kernel instead of the copy engine
  size_t num_elems = 256ull << 20;  // 4-byte elements per copy (1 GiB; lowered to fit memory)
  bool num_elems_given = false;     // --numElems was on the command line
  std::vector<int> devices;         // empty: all visible GPUs
  int iters = 4;                    // copies queued in one timed batch (each into its own buffer)
  int reps = 5;                     // timed batches per cell; the median is reported
  int warmup = 1;                   // untimed batches per cell before the timed ones
  int lat_iters = 100;              // tiny copies queued in one latency batch
  int ce_streams = 1;               // copy engine: split each copy over this many streams
  int sm_blocks = 0;                // SM copy: blocks per copy kernel (0: automatic)
  int sm_threads = 512;             // SM copy: threads per block
  double timeout_s = 10.0;          // the gate kernel gives up after this long
  std::string json_path;            // --json FILE (must not exist: results are never overwritten)
  bool inject_fault = false;        // test only: corrupt one copied element before the data check
  std::string command_line;
};

// Parses argv; prints help and exits 0 for --help; bad input: one line, exit 2.
Options parse_options(int argc, char **argv);
void print_help(FILE *out);

// ---------------------------------------------------------------- kernels (kernels.cu)
// Launch wrappers; each launches on `stream`, whose device must be current.
void launch_gate(cudaStream_t stream, const volatile int *flag, int *timed_out,
                 unsigned long long timeout_ns);
void launch_fill(cudaStream_t stream, int *buf, size_t n, uint32_t seed);
void launch_poison(cudaStream_t stream, int *buf, size_t n_per_slot, size_t stride, int slots,
                   uint32_t seed);
// Counts elements of `slots` buffers (each n_per_slot long, `stride` apart) that differ
// from the pattern of `seed`; the count and the first bad flat index go to bad[0], bad[1].
void launch_verify(cudaStream_t stream, const int *buf, size_t n_per_slot, size_t stride, int slots,
                   uint32_t seed, unsigned long long *bad);
void launch_sm_copy(cudaStream_t stream, int *dst, const int *src, size_t n, int blocks,
                    int threads);
// Host copy of the pattern function (for messages).
uint32_t pattern_value(size_t index, uint32_t seed);
// Maximum resident blocks of the copy kernel per multiprocessor.
int sm_copy_blocks_per_sm(int threads);

// ---------------------------------------------------------------- the bench (bench.cpp)
struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int pci_bus = 0, pci_device = 0, pci_domain = 0;
  int major = 0, minor = 0, sm_count = 0;
  size_t total_mem = 0;
  int compute_mode = 0;
};

// One direction of traffic inside a batch.
struct Flow {
  int src = 0, dst = 0;  // indices into Bench::gpus (not CUDA ordinals)
  int issuer = 0;        // whose stream issues the copy (src: writes, dst: reads)
  int first_slot = 0, slot_step = 1, copies = 0;  // destination buffers used
  int stream_base = 0;                            // streams of the issuer used by this flow
};

// GB/s (10^9 bytes/s) of a batch whose copies wrote `bytes` in `ms`. A copy inside one GPU
// (the diagonal) reads and writes that GPU's memory, so its bytes count twice, as NVIDIA's
// sample counts them (cuda-samples p2pBandwidthLatencyTest.cu, both bandwidth matrices:
// "if (i == j) gb *= 2", read and write); between two GPUs each byte crosses the link once.
inline double bandwidth_gbs(unsigned long long bytes, double ms, bool same_gpu) {
  return (same_gpu ? 2.0 : 1.0) * static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
}

struct BatchResult {
  double gpu_ms = 0;   // start to stop event
  double host_us = 0;  // host time spent issuing the copies
  unsigned long long bytes = 0;
  bool gate_timed_out = false;
  bool gated = true;  // false: staged copies, timed without the gate
};

struct Gpu {
  DeviceInfo info;
  std::vector<cudaStream_t> streams;
  std::vector<cudaEvent_t> joined;  // one per stream, no timing
  cudaEvent_t start = nullptr, stop = nullptr;
  int *src = nullptr;                 // the source pattern
  int *slots = nullptr;               // iters destination buffers, `stride` elements apart
  unsigned long long *bad = nullptr;  // verify counters (device)
  volatile int *gate_dev = nullptr;   // the host flag as this device sees it
  int *timeout_dev = nullptr;
};

class Bench {
 public:
  Bench(const Options &opt, const std::vector<DeviceInfo> &devs);
  ~Bench();
  int count() const { return (int)gpus_.size(); }
  const Gpu &gpu(int k) const { return gpus_[k]; }
  bool can_access(int a, int b) const { return can_[a][b]; }
  // Enables (where the pair allows it) or disables peer access both ways between a and b.
  void set_peer(int a, int b, bool on);
  // Runs one batch of large copies (bandwidth) or tiny ones (latency) and checks the data.
  BatchResult run(const std::vector<Flow> &flows, bool tiny, bool use_kernel, const char *what);
  unsigned long long copies_checked() const { return copies_checked_; }
  unsigned long long bytes_checked() const { return bytes_checked_; }
  unsigned long long mismatches() const { return mismatches_; }
  int gate_timeouts() const { return gate_timeouts_; }
  size_t stride() const { return stride_; }
  int sm_blocks_used(int k) const;

 private:
  void issue(const Flow &f, int k, bool tiny, bool use_kernel, int chunks);
  void verify(const Flow &f, bool tiny, uint32_t seed, const char *what);
  const Options &opt_;
  std::vector<Gpu> gpus_;
  std::vector<std::vector<bool>> can_, on_;
  int *gate_host_ = nullptr;  // [0]: release flag, [1]: timed-out flag
  size_t stride_ = 0;
  uint32_t seed_ = 0x2545F491u;
  unsigned long long copies_checked_ = 0, bytes_checked_ = 0, mismatches_ = 0;
  int gate_timeouts_ = 0;
  bool fault_injected_ = false;
  void inject_fault(const Flow &f, bool tiny);
};

// ---------------------------------------------------------------- report (report.cpp)
struct Matrix {
  std::string title;   // NVIDIA's section title
  std::string key;     // JSON key under bandwidth_gbs / latency_us
  std::string corner;  // "D\\D", "GPU" or "CPU"
  std::vector<std::vector<double>> median;
  std::vector<std::vector<std::vector<double>>> samples;
};

struct Report {
  std::string date_utc, driver_version, cuda_driver, cuda_runtime, method;
  std::vector<DeviceInfo> devices;
  std::vector<std::vector<int>> connectivity;
  std::vector<Matrix> bandwidth;                   // printed in this order
  std::vector<std::pair<Matrix, Matrix>> latency;  // (GPU, CPU) pairs
  std::vector<std::string> notes;
  unsigned long long copies_checked = 0, bytes_checked = 0, mismatches = 0;
  int gate_timeouts = 0;
};

void print_matrix(FILE *out, const Matrix &m, const std::vector<DeviceInfo> &devs);
void print_connectivity(FILE *out, const std::vector<std::vector<int>> &c,
                        const std::vector<DeviceInfo> &devs);
// Returns false (and says why on stderr) when the file cannot be written.
// The file must not exist (opened with O_EXCL): a run never replaces an earlier result.
bool write_json(const std::string &path, const Report &r, const Options &opt);
std::string driver_version_string();
std::string cuda_version_string(int v);
