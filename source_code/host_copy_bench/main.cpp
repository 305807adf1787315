// main.cpp - the device, the order of the measurements, and the exit status.
#include <cstdio>
#include <ctime>
#include <fstream>

#include "host_copy.h"

namespace {

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return b;
}

std::string cuda_version(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

// A line of /proc/self/status ("Cpus_allowed_list", "Mems_allowed_list"): what numactl or a
// batch system left this process; "?" where the file does not say.
std::string proc_status(const std::string &key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.compare(0, key.size() + 1, key + ":") == 0) {
      const size_t at = line.find_first_not_of(" \t", key.size() + 1);
      return at == std::string::npos ? "?" : line.substr(at);
    }
  return "?";
}

}  // namespace

int main(int argc, char **argv) {
  const Options opt = parse_options(argc, argv);

  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
    hcb_die(EXIT_USAGE, "no CUDA GPU is visible, nothing to measure (cudaGetDeviceCount: " +
                            (err != cudaSuccess ? std::string(cudaGetErrorName(err)) + ": " +
                                                      cudaGetErrorString(err)
                                                : std::string("0 devices")) + ")");
  if (opt.device >= count)
    hcb_die(EXIT_USAGE, "--device " + std::to_string(opt.device) + ": only " +
                            std::to_string(count) + " CUDA device(s) visible (0 to " +
                            std::to_string(count - 1) + ")");

  Bench bench(opt);
  RunInfo info;
  info.date_utc = utc_now();
  info.device = opt.device;
  info.device_name = bench.prop().name;
  info.sm_major = bench.prop().major;
  info.sm_minor = bench.prop().minor;
  char bus[32] = "?";
  CUDA_TRY(cudaDeviceGetPCIBusId(bus, sizeof bus, opt.device));
  info.pci_bus_id = bus;
  int v = 0;
  CUDA_TRY(cudaDriverGetVersion(&v));
  info.driver = cuda_version(v);
  CUDA_TRY(cudaRuntimeGetVersion(&v));
  info.runtime = cuda_version(v);
  info.cpus_allowed = proc_status("Cpus_allowed_list");
  info.mems_allowed = proc_status("Mems_allowed_list");
  print_header(opt, info);

  struct Kind { Direction d; Memory m; bool on; };
  const Kind kinds[] = {{Direction::H2D, Memory::Pinned, opt.h2d && opt.pinned},
                        {Direction::D2H, Memory::Pinned, opt.d2h && opt.pinned},
                        {Direction::H2D, Memory::Pageable, opt.h2d && opt.pageable},
                        {Direction::D2H, Memory::Pageable, opt.d2h && opt.pageable}};
  std::vector<Row> rows;
  unsigned long long copies = 0, wrong = 0;
  int timeouts = 0;
  for (size_t bytes = opt.min_bytes; bytes <= opt.max_bytes;) {
    for (const Kind &k : kinds) {
      if (!k.on) continue;
      rows.push_back(bench.measure(bytes, k.d, k.m));
      print_row(rows.back());
      copies += rows.back().copies_checked;
      wrong += rows.back().wrong;
      timeouts += rows.back().gate_timeouts;
    }
    if (bytes > opt.max_bytes / opt.step_factor) break;
    bytes *= opt.step_factor;
  }
  print_footer(copies, wrong, timeouts);
  if (!opt.json_path.empty() && !write_json(opt.json_path, opt, info, rows))
    return EXIT_MISMATCH_OR_CUDA;
  return wrong ? EXIT_MISMATCH_OR_CUDA : 0;
}
