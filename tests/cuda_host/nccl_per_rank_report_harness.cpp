// Host-only harness for tests/test_nccl_bench_launch.py: writes the table and the JSON of a
// per-rank run (one process per GPU) through nccl_bench's real report.cpp, with two ranks on
// two hosts whose pids and names are given here, so the test can check what the parser and the
// JSON make of them. No CUDA call, no GPU. argv[1]: the JSON file to create.
#include <cstdio>
#include <string>
#include <vector>

#include "json_writer.h"
#include "report.h"

std::string where_text(const char *file, int line) {
  return std::string(file) + ":" + std::to_string(line);
}

int main(int argc, char **argv) {
  if (argc != 2) return 3;
  RunInfo info;
  info.collective = "all_reduce";
  info.nranks = 2;
  info.factor = 1.0;
  info.warmup = 1;
  info.iters = 5;
  info.min_bytes = info.max_bytes = 8;
  info.step = 2;
  info.average = 1;
  info.per_rank = true;
  info.launcher = "torchrun";
  info.host = "unused-host";
  info.pid = 999;
  info.transport_note = "harness";
  info.devices = {DeviceInfo{0, 0, "GPU A", "0000:18:00", 111, "nodeA"},
                  DeviceInfo{1, 3, "GPU B", "0000:9a:00", 222, "nodeB"}};
  std::vector<Row> rows(1);
  rows[0].bytes = 8;
  rows[0].count = 2;
  rows[0].type = "float";
  rows[0].redop = "sum";
  rows[0].out_of_place = {true, true, 10.0, 0.25, 0.25, 0, 9.5};
  rows[0].in_place = {true, true, 11.0, 0.5, 0.5, 0, 9.0};
  info.json_path = argv[1];
  print_header(info);
  print_row(info, rows[0]);
  const double avg = print_footer(info, rows, 0);
  return json::create_new_file(argv[1], json_document(info, rows, avg, 0, "end")) ==
                 json::WriteError::None
             ? 0
             : 1;
}
