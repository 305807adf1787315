// Host-only harness for tests/test_host_copy_bench.py: links source_code/host_copy_bench's
// own options.cpp and report.cpp, reads its arguments with the real option parser, and prints
// the real header, three rows with the values below and the footer (left out with
// HCB_NO_FOOTER=1, as in a run cut short), then writes -J's file if one is named.
//   8 B h2d pinned:    per-copy time on the GPU 1.25 us (batches 1.5, 1.25, 1.0),
//                      latency of one copy 5.5 us (4.0, 5.5, 7.0), nothing wrong
//   8 B h2d pageable:  no GPU time (N/A), latency 6.25 us, nothing wrong
//   64 MiB d2h pinned: GPU 1250 us, latency 1300 us, 3 wrong bytes (HCB_WRONG=1 only)
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "host_copy.h"

int main(int argc, char **argv) {
  Options opt = parse_options(argc, argv);
  RunInfo info;
  info.date_utc = "2026-12-05T00:00:00Z";
  info.device_name = "Stand-in GPU";
  info.pci_bus_id = "00000000:19:00.0";
  info.driver = "13.0";
  info.runtime = "13.0";
  info.cpus_allowed = "0-15";
  info.mems_allowed = "0";
  info.sm_major = 9;
  std::vector<Row> rows(3);
  rows[0].bytes = 8;
  rows[0].copies = 20;
  rows[0].gpu_us = {1.5, 1.25, 1.0};
  rows[0].latency_us = {4.0, 5.5, 7.0};
  rows[1].bytes = 8;
  rows[1].memory = Memory::Pageable;
  rows[1].copies = 20;
  rows[1].latency_us = {6.25};
  rows[2].bytes = 64ull << 20;
  rows[2].direction = Direction::D2H;
  rows[2].copies = 16;
  rows[2].gpu_us = {1250.0};
  rows[2].latency_us = {1300.0};
  rows[2].wrong = std::getenv("HCB_WRONG") ? 3 : 0;
  unsigned long long copies = 0, wrong = 0;
  print_header(opt, info);
  for (Row &r : rows) {
    r.gpu_median_us = r.gpu_us.empty() ? std::nan("") : median_of(r.gpu_us);
    r.latency_median_us = median_of(r.latency_us);
    r.copies_checked = 2ull * r.copies;
    copies += r.copies_checked;
    wrong += r.wrong;
    print_row(r);
  }
  if (!std::getenv("HCB_NO_FOOTER")) print_footer(copies, wrong, 0);
  if (!opt.json_path.empty() && !write_json(opt.json_path, opt, info, rows)) return 1;
  return 0;
}
