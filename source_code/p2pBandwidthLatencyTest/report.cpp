// report.cpp - the text matrices (same section titles and layout as NVIDIA's
// p2pBandwidthLatencyTest, so that one parser reads both) and the --json file.
#include <dlfcn.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "json_writer.h"
#include "p2p.h"

void print_connectivity(FILE *out, const std::vector<std::vector<int>> &c,
                        const std::vector<DeviceInfo> &devs) {
  std::fprintf(out, "P2P Connectivity Matrix\n     D\\D");
  for (const DeviceInfo &d : devs) std::fprintf(out, "%6d", d.ordinal);
  std::fprintf(out, "\n");
  for (size_t i = 0; i < devs.size(); ++i) {
    std::fprintf(out, "%6d\t", devs[i].ordinal);
    for (size_t j = 0; j < devs.size(); ++j) std::fprintf(out, "%6d", c[i][j]);
    std::fprintf(out, "\n");
  }
}

void print_matrix(FILE *out, const Matrix &m, const std::vector<DeviceInfo> &devs) {
  std::fprintf(out, "%6s", m.corner.c_str());
  for (const DeviceInfo &d : devs) std::fprintf(out, "%6d ", d.ordinal);
  std::fprintf(out, "\n");
  for (size_t i = 0; i < devs.size(); ++i) {
    std::fprintf(out, "%6d ", devs[i].ordinal);
    for (size_t j = 0; j < devs.size(); ++j) {
      if (std::isfinite(m.median[i][j]))
        std::fprintf(out, "%6.2f ", m.median[i][j]);
      else
        std::fprintf(out, "%6s ", "N/A");  // no number (e.g. a zero-length timing)
    }
    std::fprintf(out, "\n");
  }
}

std::string cuda_version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

// The kernel driver's version: from /proc on Linux, else from NVML if it can be loaded.
std::string driver_version_string() {
  std::ifstream f("/proc/driver/nvidia/version");
  std::string line;
  if (f && std::getline(f, line)) {
    std::istringstream words(line);
    std::string w;
    while (words >> w) {
      int dots = 0;
      bool digits = !w.empty();
      for (char ch : w) {
        if (ch == '.')
          ++dots;
        else if (ch < '0' || ch > '9')
          digits = false;
      }
      if (digits && dots >= 1) return w;
    }
  }
  void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return "unknown";
  typedef int (*init_fn)(void);
  typedef int (*version_fn)(char *, unsigned int);
  init_fn init = (init_fn)dlsym(lib, "nvmlInit_v2");
  version_fn version = (version_fn)dlsym(lib, "nvmlSystemGetDriverVersion");
  init_fn shutdown = (init_fn)dlsym(lib, "nvmlShutdown");
  std::string result = "unknown";
  char buf[96] = {0};
  if (init && version && init() == 0) {
    if (version(buf, sizeof buf) == 0) result = buf;
    if (shutdown) shutdown();
  }
  dlclose(lib);
  return result;
}

namespace {

// Bandwidths and latencies with four decimals (the text matrices show two).
std::string jnum(double v) {
  return json::number(v, "%.4f");
}

std::string jmatrix(const std::vector<std::vector<double>> &m) {
  std::string o = "[";
  for (size_t i = 0; i < m.size(); ++i) {
    o += i ? ", [" : "[";
    for (size_t j = 0; j < m[i].size(); ++j) o += (j ? ", " : "") + jnum(m[i][j]);
    o += "]";
  }
  return o + "]";
}

std::string jsamples(const std::vector<std::vector<std::vector<double>>> &s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    o += i ? ", [" : "[";
    for (size_t j = 0; j < s[i].size(); ++j) {
      o += j ? ", [" : "[";
      for (size_t k = 0; k < s[i][j].size(); ++k) o += (k ? ", " : "") + jnum(s[i][j][k]);
      o += "]";
    }
    o += "]";
  }
  return o + "]";
}

}  // namespace

bool write_json(const std::string &path, const Report &r, const Options &opt) {
  std::ostringstream j;
  j << "{\n  \"tool\": \"" P2P_PROG "\",\n  \"tool_version\": \"" P2P_VERSION "\",\n";
  j << "  \"command\": " << json::quote(opt.command_line) << ",\n";
  j << "  \"date_utc\": " << json::quote(r.date_utc) << ",\n";
  j << "  \"driver_version\": " << json::quote(r.driver_version) << ",\n";
  j << "  \"cuda_driver_version\": " << json::quote(r.cuda_driver) << ",\n";
  j << "  \"cuda_runtime_version\": " << json::quote(r.cuda_runtime) << ",\n";
  j << "  \"method\": " << json::quote(r.method) << ",\n";
  // How a bandwidth cell on the diagonal counts its bytes (p2p.h bandwidth_gbs).
  j << "  \"diagonal_bytes\": \"read and write (x2), as NVIDIA's sample\",\n";
  j << "  \"options\": {\"p2p_read\": " << json::boolean(opt.p2p_read)
    << ", \"sm_copy\": " << json::boolean(opt.sm_copy) << ", \"num_elems\": " << opt.num_elems
    << ", \"bytes_per_copy\": " << opt.num_elems * 4 << ", \"iters\": " << opt.iters
    << ", \"reps\": " << opt.reps << ", \"warmup\": " << opt.warmup
    << ", \"lat_iters\": " << opt.lat_iters << ", \"ce_streams\": " << opt.ce_streams
    << ", \"sm_blocks\": " << opt.sm_blocks << ", \"sm_threads\": " << opt.sm_threads << "},\n";
  j << "  \"devices\": [";
  for (size_t i = 0; i < r.devices.size(); ++i) {
    const DeviceInfo &d = r.devices[i];
    char bus[32];
    std::snprintf(bus, sizeof bus, "%04x:%02x:%02x", d.pci_domain, d.pci_bus, d.pci_device);
    j << (i ? ", " : "") << "{\"index\": " << d.ordinal << ", \"name\": " << json::quote(d.name)
      << ", \"pci_bus_id\": \"" << bus << "\", \"compute_capability\": \"" << d.major << "."
      << d.minor << "\", \"multiprocessors\": " << d.sm_count
      << ", \"memory_bytes\": " << d.total_mem << "}";
  }
  j << "],\n  \"connectivity\": [";
  for (size_t i = 0; i < r.connectivity.size(); ++i) {
    j << (i ? ", [" : "[");
    for (size_t k = 0; k < r.connectivity[i].size(); ++k)
      j << (k ? ", " : "") << r.connectivity[i][k];
    j << "]";
  }
  j << "],\n  \"bandwidth_gbs\": {";
  for (size_t i = 0; i < r.bandwidth.size(); ++i)
    j << (i ? ",\n    " : "\n    ") << json::quote(r.bandwidth[i].key) << ": "
      << jmatrix(r.bandwidth[i].median);
  j << "\n  },\n  \"latency_us\": {";
  bool first = true;
  for (const auto &p : r.latency)
    for (const Matrix *m : {&p.first, &p.second}) {
      j << (first ? "\n    " : ",\n    ") << json::quote(m->key) << ": " << jmatrix(m->median);
      first = false;
    }
  j << "\n  },\n  \"titles\": {";
  first = true;
  for (const Matrix &m : r.bandwidth) {
    j << (first ? "\n    " : ",\n    ") << json::quote(m.key) << ": " << json::quote(m.title);
    first = false;
  }
  for (const auto &p : r.latency) {
    j << ",\n    " << json::quote(p.first.key) << ": " << json::quote(p.first.title);
    j << ",\n    " << json::quote(p.second.key) << ": " << json::quote(p.second.title);
  }
  j << "\n  },\n  \"samples\": {";
  first = true;
  for (const Matrix &m : r.bandwidth) {
    j << (first ? "\n    " : ",\n    ") << json::quote(m.key) << ": " << jsamples(m.samples);
    first = false;
  }
  for (const auto &p : r.latency)
    for (const Matrix *m : {&p.first, &p.second})
      j << ",\n    " << json::quote(m->key) << ": " << jsamples(m->samples);
  j << "\n  },\n  \"notes\": [";
  for (size_t i = 0; i < r.notes.size(); ++i) j << (i ? ", " : "") << json::quote(r.notes[i]);
  j << "],\n  \"verification\": {\"copies_checked\": " << r.copies_checked
    << ", \"bytes_checked\": " << r.bytes_checked << ", \"mismatched_elements\": " << r.mismatches
    << ", \"ok\": " << json::boolean(r.mismatches == 0)
    << "},\n  \"gate_timeouts\": " << r.gate_timeouts << "\n}\n";

  // A file that appeared while we measured is refused too, never replaced.
  switch (json::create_new_file(path, j.str())) {
    case json::WriteError::None:
      return true;
    case json::WriteError::NotCreated:
      std::fprintf(stderr, "%s: error: cannot write the JSON file: %s (%s)\n", P2P_PROG,
                   std::strerror(errno), path.c_str());
      return false;
    case json::WriteError::NotWritten:
      break;
  }
  std::fprintf(stderr, "%s: error: writing the JSON file failed (%s)\n", P2P_PROG, path.c_str());
  return false;
}
