// Host-only harness for tests/test_nccl_bench_flags.py: links nccl_bench's options.cpp,
// plan.cpp, collectives.cpp, report.cpp and transports.cpp (NCCL linked, never called; no
// GPU), reads a command line exactly as the program does and prints what the run would do:
//   nccl_plan_harness NRANKS [nccl_bench arguments...]
// "sweep TYPE REDOP ROOT" per sweep with "row SIZE COUNT" per row, then the table header the
// program prints (the options it echoes), then "options ..." for what the header leaves out.
// Usage errors: the program's line on stderr, exit 2.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "errors.h"
#include "options.h"
#include "plan.h"
#include "report.h"

std::string where_text(const char *file, int line) {
  return std::string(file) + ":" + std::to_string(line);
}

int main(int argc, char **argv) {
  if (argc < 2) return 3;
  try {
    const int nranks = std::atoi(argv[1]);
    const Options opt = parse_options(argc - 1, argv + 1);  // argv[1] stands for the name
    const Plan plan = plan_runs(opt, nranks);
    for (const Sweep &s : plan.sweeps) {
      const Row first = row_for(opt, s.variant, s.rows.front());
      std::printf("sweep %s %s %d\n", first.type.c_str(), first.redop.c_str(), first.root);
      for (const Counts &k : s.rows) std::printf("row %zu %zu\n", k.bytes, k.count);
    }
    RunInfo info = run_info(opt, plan, nranks, argc - 1, argv + 1);
    info.per_rank = std::getenv("HARNESS_PER_RANK") != nullptr;
    info.launcher = "torchrun";
    print_header(info);
    std::printf("options ngpus=%d json=%s inject_fault=%d buffers=%zu,%zu\n", opt.ngpus,
                opt.json_path.c_str(), opt.inject_fault, plan.send_bytes, plan.recv_bytes);
    return 0;
  } catch (const UsageError &e) {
    std::fprintf(stderr, "nccl_bench: error: %s\n", e.what());
    return 2;
  }
}
