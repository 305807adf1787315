// main.cpp - device discovery, the order of the measurements, and the exit status.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>

#include "p2p.h"

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return b;
}

enum Kind { UNI, BIDIR, LATENCY };

struct Runner {
  const Options &opt;
  Bench &bench;
  int n;

  std::vector<Flow> flows_for(Kind kind, int a, int b) const {
    std::vector<Flow> flows;
    auto one = [&](int src, int dst, int first, int step, int copies, int base) {
      Flow f;
      f.src = src;
      f.dst = dst;
      f.issuer = (opt.p2p_read ? dst : src);
      f.first_slot = first;
      f.slot_step = step;
      f.copies = copies;
      f.stream_base = base;
      if (copies > 0) flows.push_back(f);
    };
    if (kind == LATENCY) {
      one(a, b, 0, 1, opt.lat_iters, 0);
    } else if (kind == UNI) {
      one(a, b, 0, 1, opt.iters, 0);
    } else if (a != b) {
      one(a, b, 0, 1, opt.iters, 0);
      one(b, a, 0, 1, opt.iters, 0);
    } else {  // both directions inside one GPU: even and odd destination buffers
      one(a, a, 0, 2, (opt.iters + 1) / 2, 0);
      one(a, a, 1, 2, opt.iters / 2, opt.ce_streams);
    }
    return flows;
  }

  // Fills m (bandwidth) or gpu/cpu (latency) for every cell.
  void measure(Kind kind, bool enabled, const char *what, Matrix *m, Matrix *cpu) {
    m->median.assign(n, std::vector<double>(n, 0));
    m->samples.assign(n, std::vector<std::vector<double>>(n));
    if (cpu) {
      cpu->median = m->median;
      cpu->samples = m->samples;
    }
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) {
        bench.set_peer(a, b, enabled);
        bool kernel = opt.sm_copy && (a == b || (enabled && bench.can_access(a, b)));
        std::vector<Flow> flows = flows_for(kind, a, b);
        for (int w = 0; w < opt.warmup; ++w) bench.run(flows, kind == LATENCY, kernel, what);
        std::vector<double> gpu_v, cpu_v;
        for (int r = 0; r < opt.reps; ++r) {
          BatchResult br = bench.run(flows, kind == LATENCY, kernel, what);
          if (kind == LATENCY) {
            gpu_v.push_back(br.gpu_ms * 1000.0 / opt.lat_iters);
            cpu_v.push_back(br.host_us / opt.lat_iters);
          } else {
            gpu_v.push_back(bandwidth_gbs(br.bytes, br.gpu_ms, a == b));
          }
        }
        m->samples[a][b] = gpu_v;
        m->median[a][b] = median_of(gpu_v);
        if (cpu) {
          cpu->samples[a][b] = cpu_v;
          cpu->median[a][b] = median_of(cpu_v);
        }
        bench.set_peer(a, b, false);
      }
  }
};

Matrix make(const std::string &title, const std::string &key, const std::string &corner) {
  Matrix m;
  m.title = title;
  m.key = key;
  m.corner = corner;
  return m;
}

}  // namespace

int main(int argc, char **argv) {
  Options opt = parse_options(argc, argv);

  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::string why = err != cudaSuccess
                          ? std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err)
                          : "the runtime reports 0 devices";
    p2p_die(EXIT_USAGE,
            "no CUDA GPU is visible, nothing to measure (cudaGetDeviceCount: " + why + ")");
  }
  std::vector<int> ordinals = opt.devices;
  if (ordinals.empty())
    for (int d = 0; d < count; ++d) ordinals.push_back(d);
  for (int d : ordinals)
    if (d >= count)
      p2p_die(EXIT_USAGE, "--devices names GPU " + std::to_string(d) + " but only " +
                              std::to_string(count) + " GPU(s) are visible (ordinals 0.." +
                              std::to_string(count - 1) + ")");

  const char *cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  bool mig = cvd && std::string(cvd).find("MIG-") != std::string::npos;
  std::vector<DeviceInfo> devs;
  for (int d : ordinals) {
    cudaDeviceProp p;
    CUDA_TRY(cudaGetDeviceProperties(&p, d));
    DeviceInfo di;
    di.ordinal = d;
    di.name = p.name;
    di.pci_bus = p.pciBusID;
    di.pci_device = p.pciDeviceID;
    di.pci_domain = p.pciDomainID;
    di.major = p.major;
    di.minor = p.minor;
    di.sm_count = p.multiProcessorCount;
    di.total_mem = p.totalGlobalMem;
    CUDA_TRY(cudaDeviceGetAttribute(&di.compute_mode, cudaDevAttrComputeMode, d));
    if (di.name.find(" MIG ") != std::string::npos) mig = true;
    if (di.compute_mode == cudaComputeModeProhibited)
      p2p_die(EXIT_USAGE, "GPU " + std::to_string(d) +
                              " is in compute-prohibited mode, so no program may use it (" +
                              "nvidia-smi -i " + std::to_string(d) +
                              " -c DEFAULT, as root, lifts that)");
    CUDA_TRY(cudaSetDevice(d));
    cudaError_t e = cudaFree(nullptr);  // creates the context now, to name a busy GPU
    if (e == cudaErrorDevicesUnavailable)
      p2p_die(EXIT_USAGE, "GPU " + std::to_string(d) +
                              " is in an exclusive compute mode and another process holds it; "
                              "wait for it, pick other GPUs with --devices, or ask for the "
                              "DEFAULT compute mode");
    CUDA_TRY(e);
    devs.push_back(di);
  }

  Report rep;
  rep.date_utc = utc_now();
  rep.driver_version = driver_version_string();
  int drv = 0, rt = 0;
  CUDA_TRY(cudaDriverGetVersion(&drv));
  CUDA_TRY(cudaRuntimeGetVersion(&rt));
  rep.cuda_driver = cuda_version_string(drv);
  rep.cuda_runtime = cuda_version_string(rt);
  rep.devices = devs;

  // Without --numElems, keep the (iters + 1) buffers of a GPU within 45% of its memory.
  std::string fitted;
  if (!opt.num_elems_given) {
    size_t smallest = devs[0].total_mem;
    for (const DeviceInfo &d : devs) smallest = std::min(smallest, d.total_mem);
    size_t fit = (size_t)(0.45 * (double)smallest) / (4 * (size_t)(opt.iters + 1)) / 64 * 64;
    fit = std::max(fit, std::max((size_t)opt.lat_iters, (size_t)64));
    if (fit < opt.num_elems) {
      fitted = "The default --numElems=" + std::to_string(opt.num_elems) + " was lowered to " +
               std::to_string(fit) + " so that the buffers fit in the smallest GPU's memory.";
      opt.num_elems = fit;
    }
  }
  Bench bench(opt, devs);
  const int n = bench.count();
  char method[600];
  std::snprintf(method, sizeof method,
                "%s, P2P %s; %zu elements (%.1f MiB) per copy, %d copies per timing, median "
                "of %d timings after %d warm-up(s); latency: %d one-element copies per timing",
                opt.sm_copy ? "SM copy kernel (16-byte loads/stores)"
                            : (opt.ce_streams > 1 ? "copy engine (cudaMemcpyPeerAsync, each copy "
                                                    "split over several streams)"
                                                  : "copy engine (cudaMemcpyPeerAsync)"),
                opt.p2p_read ? "reads" : "writes", opt.num_elems, opt.num_elems * 4.0 / 1048576.0,
                opt.iters, opt.reps, opt.warmup, opt.lat_iters);
  rep.method = method;
  rep.method += "; diagonal: bytes counted twice (read and write), as NVIDIA's sample";
  if (opt.ce_streams > 1 && !opt.sm_copy)
    rep.method += "; " + std::to_string(opt.ce_streams) + " streams per copy";
  if (opt.sm_copy)
    rep.method += "; " + std::to_string(bench.sm_blocks_used(0)) + " blocks of " +
                  std::to_string(opt.sm_threads) + " threads";

  std::map<std::string, int> names;
  for (const DeviceInfo &d : devs) names[d.name]++;
  std::string gpu_list;
  for (const auto &kv : names)
    gpu_list += (gpu_list.empty() ? "" : ", ") + std::to_string(kv.second) + " x " + kv.first;

  std::printf("[%s %s (gputopo course): GPU peer-to-peer bandwidth and latency]\n", P2P_PROG,
              P2P_VERSION);
  std::printf("Versions: NVIDIA driver %s, CUDA driver API %s, CUDA runtime %s; GPUs: %s\n",
              rep.driver_version.c_str(), rep.cuda_driver.c_str(), rep.cuda_runtime.c_str(),
              gpu_list.c_str());
  std::printf("Date: %s\nMethod: %s\n", rep.date_utc.c_str(), rep.method.c_str());
  for (const DeviceInfo &d : devs)
    std::printf("Device: %d, %s, pciBusID: %x, pciDeviceID: %x, pciDomainID:%x\n", d.ordinal,
                d.name.c_str(), d.pci_bus, d.pci_device, d.pci_domain);
  bool any_staged = false;
  rep.connectivity.assign(n, std::vector<int>(n, 1));
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      bool ok = bench.can_access(a, b);
      rep.connectivity[a][b] = ok ? 1 : 0;
      any_staged |= !ok;
      std::printf("Device=%d %s Access Peer Device=%d\n", devs[a].ordinal, ok ? "CAN" : "CANNOT",
                  devs[b].ordinal);
    }
  if (!fitted.empty()) rep.notes.push_back(fitted);
  if (mig)
    rep.notes.push_back(
        "MIG is on: CUDA shows one MIG instance per process and there is no "
        "peer access between MIG instances; only local copies are measured.");
  if (n < 2)
    rep.notes.push_back(
        "Only one GPU is selected: P2P needs two GPUs, so every matrix holds "
        "the copy inside GPU " +
        std::to_string(devs[0].ordinal) + " alone.");
  if (any_staged)
    rep.notes.push_back(
        "A 0 in the connectivity matrix marks a pair without peer access: in "
        "the P2P=Enabled matrices that pair is measured through the staged "
        "path (through host memory), the same path as P2P=Disabled.");
  rep.notes.push_back(
      "P2P=Disabled cells always use the runtime's staged copy; the diagonal "
      "is a copy inside one GPU, whose bytes count twice (each is read and "
      "written there), as NVIDIA's sample counts them. GB/s = 10^9 bytes per "
      "second.");
  rep.notes.push_back(
      "Staged copies make the host wait, so they are timed without the start "
      "gate; their intervals include the cost of issuing them.");
  for (const DeviceInfo &d : devs)
    if (d.compute_mode != cudaComputeModeDefault)
      rep.notes.push_back("GPU " + std::to_string(d.ordinal) +
                          " is in an exclusive compute mode; this run holds it.");
  std::printf("\n");
  for (const std::string &note : rep.notes) std::printf("Note: %s\n", note.c_str());
  std::printf("\n");

  Runner run{opt, bench, n};
  const std::string mode = opt.p2p_read ? "Reads" : "Writes";
  const std::string mkey = opt.p2p_read ? "read" : "write";

  print_connectivity(stdout, rep.connectivity, devs);
  std::fflush(stdout);

  auto bw = [&](Kind kind, bool enabled, const std::string &title, const std::string &key) {
    Matrix m = make(title, key, "D\\D");
    run.measure(kind, enabled, title.c_str(), &m, nullptr);
    std::printf("%s\n", title.c_str());
    print_matrix(stdout, m, devs);
    std::fflush(stdout);
    rep.bandwidth.push_back(m);
  };
  bw(UNI, false, "Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)", "unidirectional_disabled");
  bw(UNI, true, "Unidirectional P2P=Enabled Bandwidth (P2P " + mode + ") Matrix (GB/s)",
     "unidirectional_" + mkey);
  bw(BIDIR, false, "Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)", "bidirectional_disabled");
  bw(BIDIR, true, "Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)", "bidirectional_enabled");

  auto lat = [&](bool enabled, const std::string &title, const std::string &prefix) {
    Matrix g = make(title, prefix + "_gpu", "GPU"), c = make(title, prefix + "_cpu", "CPU");
    run.measure(LATENCY, enabled, title.c_str(), &g, &c);
    std::printf("%s\n", title.c_str());
    print_matrix(stdout, g, devs);
    std::printf("\n");
    print_matrix(stdout, c, devs);
    std::fflush(stdout);
    rep.latency.push_back({g, c});
  };
  lat(false, "P2P=Disabled Latency Matrix (us)", "disabled");
  lat(true, "P2P=Enabled Latency (P2P " + mode + ") Matrix (us)", mkey);

  rep.copies_checked = bench.copies_checked();
  rep.bytes_checked = bench.bytes_checked();
  rep.mismatches = bench.mismatches();
  rep.gate_timeouts = bench.gate_timeouts();
  std::printf(
      "\nData check: %llu copies (%.2f GB) compared with their pattern, %llu "
      "elements wrong: %s\n",
      rep.copies_checked, rep.bytes_checked / 1e9, rep.mismatches,
      rep.mismatches ? "FAILED" : "PASSED");
  if (rep.gate_timeouts)
    std::printf(
        "Warning: the start gate timed out %d time(s); those timings include the "
        "cost of issuing the copies.\n",
        rep.gate_timeouts);
  std::fflush(stdout);

  bool json_ok = true;
  if (!opt.json_path.empty()) json_ok = write_json(opt.json_path, rep, opt);
  if (rep.mismatches) return EXIT_MISMATCH_OR_CUDA;
  return json_ok ? 0 : EXIT_MISMATCH_OR_CUDA;
}
