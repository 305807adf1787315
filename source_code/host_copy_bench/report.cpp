// report.cpp - the text table (nccl-tests' layout: comment lines, then one row per size and
// kind, then a footer) and the JSON file.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "host_copy.h"
#include "json_writer.h"

const char *name_of(Direction d) { return d == Direction::H2D ? "h2d" : "d2h"; }
const char *name_of(Memory m) { return m == Memory::Pinned ? "pinned" : "pageable"; }

double median_of(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void print_header(const Options &opt, const RunInfo &info) {
  std::printf("# %s (gputopo course): copies between host memory and GPU %d, every copy checked\n",
              HCB_PROG, info.device);
  std::printf("# device %d: %s (PCI %s, compute capability %d.%d); CUDA driver %s, runtime %s\n",
              info.device, info.device_name.c_str(), info.pci_bus_id.c_str(), info.sm_major,
              info.sm_minor, info.driver.c_str(), info.runtime.c_str());
  std::printf("# minBytes %zu  maxBytes %zu  step: x%zu  warmup iters: %d  iters: %d  "
              "batches: %d\n", opt.min_bytes, opt.max_bytes, opt.step_factor, opt.warmup,
              opt.iters, opt.batches);
  std::printf("# host: cpus allowed %s, memory nodes allowed %s (the program pins no thread: "
              "numactl chooses)\n", info.cpus_allowed.c_str(), info.mems_allowed.c_str());
  std::printf("# per-copy time on the GPU: `copies` copies wait behind a gate kernel, CUDA events "
              "around them,\n#   divided by copies; median of %d batches. N/A for pageable memory: "
              "the driver makes the\n#   host wait for such copies, so none can wait behind a "
              "gate\n", opt.batches);
  std::printf("# latency of one copy: host clock around one cudaMemcpyAsync and the "
              "cudaStreamSynchronize\n#   after it; median of every copy timed alone (%d x "
              "copies)\n", opt.batches);
  std::printf("# GB/s = 10^9 bytes per second; #wrong: bytes that differed from the pattern, "
              "every copy checked\n");
  std::printf("# date %s; command: %s\n#\n", info.date_utc.c_str(), opt.command_line.c_str());
  std::printf("# %60s%23s\n", "per-copy time on the GPU", "latency of one copy");
  std::printf("# %11s %10s %9s %6s %10s %9s   %10s %9s %8s\n", "size", "direction", "memory",
              "copies", "time", "algbw", "time", "algbw", "#wrong");
  std::printf("# %11s %10s %9s %6s %10s %9s   %10s %9s\n", "(B)", "", "", "", "(us)",
              "(GB/s)", "(us)", "(GB/s)");
  std::fflush(stdout);
}

namespace {

void cell(double us, size_t bytes) {
  if (std::isfinite(us) && us > 0)
    std::printf(" %10.2f %9.2f", us, bytes / us / 1e3);
  else
    std::printf(" %10s %9s", "N/A", "N/A");
}

std::string json_list(const std::vector<double> &v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + json::number(v[i], "%.6g");
  return out + "]";
}

}  // namespace

void print_row(const Row &r) {
  std::printf("  %11zu %10s %9s %6d", r.bytes, name_of(r.direction), name_of(r.memory),
              r.copies);
  cell(r.gpu_median_us, r.bytes);
  std::printf("  ");
  cell(r.latency_median_us, r.bytes);
  std::printf(" %8llu\n", r.wrong);
  std::fflush(stdout);  // a run cut short keeps every row it finished
}

void print_footer(unsigned long long copies, unsigned long long wrong, int gate_timeouts) {
  if (gate_timeouts)
    std::printf("# gate timeouts: %d (those batches' times include the cost of issuing their "
                "copies)\n", gate_timeouts);
  if (wrong == 0)
    std::printf("# data check: all copies correct (%llu copies checked)\n", copies);
  else
    std::printf("# data check: %llu wrong byte%s in %llu copies\n", wrong, wrong == 1 ? "" : "s",
                copies);
  std::fflush(stdout);
}

bool write_json(const std::string &path, const Options &opt, const RunInfo &info,
                const std::vector<Row> &rows) {
  std::string s = "{\n  \"program\": " + json::quote(HCB_PROG) +
                  ",\n  \"date_utc\": " + json::quote(info.date_utc) +
                  ",\n  \"command\": " + json::quote(opt.command_line) +
                  ",\n  \"device\": {\"ordinal\": " + std::to_string(info.device) +
                  ", \"name\": " + json::quote(info.device_name) +
                  ", \"pci_bus_id\": " + json::quote(info.pci_bus_id) +
                  ", \"compute_capability\": " + json::quote(std::to_string(info.sm_major) + "." +
                                                             std::to_string(info.sm_minor)) +
                  "},\n  \"cuda_driver\": " + json::quote(info.driver) +
                  ", \"cuda_runtime\": " + json::quote(info.runtime) +
                  ",\n  \"cpus_allowed\": " + json::quote(info.cpus_allowed) +
                  ", \"mems_allowed\": " + json::quote(info.mems_allowed) +
                  ",\n  \"batches\": " + std::to_string(opt.batches) +
                  ", \"warmup_iters\": " + std::to_string(opt.warmup) + ",\n  \"rows\": [";
  unsigned long long wrong = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row &r = rows[i];
    wrong += r.wrong;
    s += std::string(i ? "," : "") + "\n    {\"bytes\": " + std::to_string(r.bytes) +
         ", \"direction\": " + json::quote(name_of(r.direction)) +
         ", \"memory\": " + json::quote(name_of(r.memory)) +
         ", \"copies\": " + std::to_string(r.copies) +
         ", \"gpu_us\": " + json::number(r.gpu_median_us, "%.6g") +
         ", \"latency_us\": " + json::number(r.latency_median_us, "%.6g") +
         ", \"wrong\": " + std::to_string(r.wrong) +
         ", \"gpu_us_samples\": " + json_list(r.gpu_us) +
         ", \"latency_us_samples\": " + json_list(r.latency_us) + "}";
  }
  s += "\n  ],\n  \"all_correct\": " + json::boolean(wrong == 0) + "\n}\n";
  switch (json::create_new_file(path, s)) {
    case json::WriteError::None:
      return true;
    case json::WriteError::NotCreated:
      std::fprintf(stderr, "%s: error: cannot create %s: %s\n", HCB_PROG, path.c_str(),
                   std::strerror(errno));
      return false;
    default:
      std::fprintf(stderr, "%s: error: could not write all of %s\n", HCB_PROG, path.c_str());
      return false;
  }
}
