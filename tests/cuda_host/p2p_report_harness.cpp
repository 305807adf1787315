// Host-only harness for tests/test_cuda_outputs.py: links the P2P test's options.cpp and
// report.cpp (no CUDA call, no GPU) and writes a report whose numbers include NaN and
// infinities, to check that the --json file stays valid JSON (null for those) and that the
// command line is parsed as the real program parses it; it also prints what p2p.h's
// bandwidth_gbs makes of one batch between two GPUs and inside one.
#include <cmath>
#include <cstdio>
#include <limits>

#include "p2p.h"

int main(int argc, char **argv) {
  Options opt = parse_options(argc, argv);
  std::printf("inject_fault=%d json=%s\n", opt.inject_fault ? 1 : 0, opt.json_path.c_str());
  // 10^9 bytes in 100 ms between two GPUs, and inside one (the diagonal): p2p.h's counting
  std::printf("bandwidth pair=%g diagonal=%g\n", bandwidth_gbs(1000000000ull, 100.0, false),
              bandwidth_gbs(1000000000ull, 100.0, true));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  Report r;
  r.date_utc = "2026-01-01T00:00:00Z";
  DeviceInfo a, b;
  a.ordinal = 0;
  b.ordinal = 1;
  a.name = b.name = "harness";
  r.devices = {a, b};
  r.connectivity = {{1, 1}, {1, 1}};
  Matrix bw;
  bw.title = "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)";
  bw.key = "unidirectional_write";
  bw.corner = "D\\D";
  bw.median = {{1.5, nan}, {inf, 2.25}};
  bw.samples = {{{1.5}, {nan, 3.0}}, {{inf, -inf}, {2.25}}};
  r.bandwidth = {bw};
  Matrix g = bw, c = bw;
  g.key = "write_gpu";
  c.key = "write_cpu";
  g.median = {{-inf, 4.0}, {5.0, 6.0}};
  c.median = {{7.0, 8.0}, {9.0, nan}};
  r.latency = {{g, c}};
  print_matrix(stdout, bw, r.devices);
  if (opt.json_path.empty()) return 0;
  return write_json(opt.json_path, r, opt) ? 0 : 1;
}
