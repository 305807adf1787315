// Command-line options of nccl_bench and the tables of data types and reduction operators.
//
// Every option that nccl-tests 2.19 also has (src/common.cu, v2.19.6: its getopt_long table
// and the USAGE text) is spelled as there and means what it means there; the collective is
// the first word that is no option (nccl_bench all_gather -b 8 ...) or --collective NAME.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nccl.h>

#include "collectives.h"
#include "launch.h"

enum class DType { Int8, Uint8, Int32, Uint32, Int64, Uint64, Half, Float, Double, Bfloat16 };

struct TypeInfo {
  DType type;
  const char *name;  // as nccl-tests prints it in the type column
  ncclDataType_t nccl;
  std::size_t bytes;
  double exact_limit;  // every integer in [0, exact_limit] is exact in this type
};

// nccl-tests' -o names, in nccl-tests' order (test_opnames: sum prod max min avg).
enum class RedOp { Sum, Prod, Max, Min, Avg };

struct OpInfo {
  RedOp op;
  const char *name;
  ncclRedOp_t nccl;
};

const TypeInfo &type_info(DType type);
const OpInfo &op_info(RedOp op);
const std::vector<DType> &all_types();
const std::vector<RedOp> &all_ops();
// Whether -o avg on this type and number of ranks can be checked bit for bit: NCCL divides
// the integer sum by n, but multiplies each floating-point input by 1/n, exact for n = 2^k.
bool average_is_exact(DType type, int nranks);

constexpr int kEveryRoot = -1;  // -r -1: broadcast from every rank in turn (as nccl-tests)

struct Options {
  const Collective *collective = &kCollectives[0];  // all_reduce
  std::vector<DType> types{DType::Float};           // -d (all: every type)
  std::vector<RedOp> ops{RedOp::Sum};               // -o (all: every operator)
  std::size_t min_bytes = 8;                        // -b
  std::size_t max_bytes = std::size_t(128) << 20;   // -e
  std::size_t step_factor = 2;                      // -f; 1: add step_bytes instead
  std::size_t step_bytes = std::size_t(1) << 20;    // -i
  int warmup = 5;                                   // -w: untimed iterations per size
  int iters = 20;                                   // -n: timed iterations per size
  int check = 1;                                    // -c: checked runs per size (0: none)
  int ngpus = -1;                                   // -g: -1: every visible GPU
  int root = 0;                                     // -r: broadcast root, or kEveryRoot
  int blocking = 0;                                 // -z 0..3
  int graph_launches = 0;                           // -G: 0: no CUDA graph
  int average = 1;                                  // -a: 0 rank 0, 1 mean, 2 min, 3 max
  std::string json_path;                            // -J: empty: no JSON
  std::string nccl_log;       // keep NCCL's INFO log here (empty: temporary file); must not exist
  bool inject_fault = false;  // test only: corrupt one output element before the first check
  LauncherChoice launcher = LauncherChoice::Auto;  // one process per GPU: launch.h
  std::string id_dir;                     // where rank 0 leaves the ncclUniqueId ("": /tmp)
  double id_timeout = kDefaultIdTimeout;  // seconds the other ranks wait for it
  bool print_launch = false;  // say what the launcher's variables give, touch no GPU, exit
  bool help = false;
  // -f 1, or -i without -f: sizes grow by step_bytes (nccl-tests: stepfactor <= 1).
  bool linear_steps() const { return step_factor <= 1; }
};

// Throws UsageError with a one-line message for anything it cannot accept.
Options parse_options(int argc, char **argv);

// The sizes -b, -e, -f, -i ask for, in order (before any rounding by the collective).
std::vector<std::size_t> requested_sizes(const Options &opt);

void print_usage();
