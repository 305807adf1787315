// What a run will measure, worked out before any GPU is touched: the sweeps (one per data
// type of -d, operator of -o and root of -r, as nccl-tests runs them), their rows, the
// buffers they need, and what the header and the JSON say about the run.
//
// Host code only: tests/cuda_host/nccl_plan_harness.cpp links it to check each option's
// meaning without a GPU.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives.h"
#include "options.h"
#include "report.h"

// One sweep over the sizes: a data type, a reduction operator and a root.
struct Variant {
  DType type;
  RedOp op;
  int root;  // -1 for a collective without a root
};

struct Sweep {
  Variant variant;
  std::vector<Counts> rows;
};

struct Plan {
  std::vector<Sweep> sweeps;
  std::size_t send_bytes = 0;  // the largest buffers any row needs, per rank
  std::size_t recv_bytes = 0;
  std::size_t first_bytes = 0;  // the smallest and the largest row
  std::size_t last_bytes = 0;
};

// Throws UsageError when no row is left, for a root outside the ranks, and for -o avg that
// cannot be checked exactly.
Plan plan_runs(const Options &opt, int nranks);

// The header's and the JSON's facts that the options and the plan give (not the GPUs'; the
// caller adds those): nranks ranks; argc/argv are echoed in the JSON.
RunInfo run_info(const Options &opt, const Plan &plan, int nranks, int argc, char **argv);

// One row of the table before it is measured.
Row row_for(const Options &opt, const Variant &v, const Counts &k);
