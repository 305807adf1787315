#include "options.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "cli.h"
#include "errors.h"

namespace {

// Integers up to 2^24 are exact in float, 2^53 in double, 2^11 in half and 2^8 in bfloat16;
// the integer types are exact up to their maximum (one less for the unsigned ones, whose
// maximum is the poison value of patterns.cu). nccl-tests' names and order (test_typenames).
const TypeInfo kTypes[] = {
    {DType::Int8, "int8", ncclInt8, 1, 127.0},
    {DType::Uint8, "uint8", ncclUint8, 1, 254.0},
    {DType::Int32, "int32", ncclInt32, 4, 2147483647.0},
    {DType::Uint32, "uint32", ncclUint32, 4, 4294967294.0},
    {DType::Int64, "int64", ncclInt64, 8, 9.0e15},
    {DType::Uint64, "uint64", ncclUint64, 8, 9.0e15},
    {DType::Half, "half", ncclFloat16, 2, 2048.0},
    {DType::Float, "float", ncclFloat32, 4, 16777216.0},
    {DType::Double, "double", ncclFloat64, 8, 9007199254740992.0},
    {DType::Bfloat16, "bfloat16", ncclBfloat16, 2, 256.0},
};

const struct {
  const char *alias;
  DType type;
} kTypeAliases[] = {
    {"float32", DType::Float}, {"fp32", DType::Float},     {"float16", DType::Half},
    {"fp16", DType::Half},     {"float64", DType::Double}, {"fp64", DType::Double},
    {"bf16", DType::Bfloat16}, {"int", DType::Int32},      {"char", DType::Int8},
};

const OpInfo kOps[] = {
    {RedOp::Sum, "sum", ncclSum}, {RedOp::Prod, "prod", ncclProd},
    {RedOp::Max, "max", ncclMax}, {RedOp::Min, "min", ncclMin},
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    {RedOp::Avg, "avg", ncclAvg},
#endif
};

// nccl-tests' options that nccl_bench does not have: named in the error, not "unknown".
const struct {
  int val;
  const char *name;
} kNotImplemented[] = {
    {'t', "nthreads"},
    {'m', "agg_iters"},
    {'N', "run_cycles"},
    {'p', "parallel_init"},
    {'y', "stream_null"},
    {'T', "timeout"},
    {'C', "report_cputime"},
    {'S', "report_timestamps"},
    {'R', "local_register"},
    {'x', "cta_policy"},
    {'D', "device_implementation"},
    {'V', "device_cta_count"},
    {'M', "memory"},
    {'u', "unalign"},
    {'I', "per_iter_timing"},
    {'K', "per_iter_skip"},
};

[[noreturn]] void bad(const std::string &what, const std::string &where) {
  throw UsageError(what + " (" + where + ")");
}

// nccl-tests' sizes (parsesize: a number, then K, M or G for 2^10, 2^20, 2^30): "8", "64K",
// "1.5M", "2G"; a B after the letter is allowed.
std::size_t parse_size(const std::string &text, const std::string &where) {
  const std::string hint = " (a number of bytes with K, M or G, e.g. 64K)";
  if (text.empty() || text[0] < '0' || text[0] > '9')
    bad("not a size: '" + text + "'" + hint, where);
  errno = 0;
  char *end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  double unit = 1.0;
  switch (*end) {
    case '\0':
      break;
    case 'k':
    case 'K':
      unit = 1024.0;
      ++end;
      break;
    case 'm':
    case 'M':
      unit = 1048576.0;
      ++end;
      break;
    case 'g':
    case 'G':
      unit = 1073741824.0;
      ++end;
      break;
    default:
      bad("not a size: '" + text + "'" + hint, where);
  }
  if (unit > 1.0 && (*end == 'B' || *end == 'b')) ++end;
  if (*end != '\0' || errno != 0) bad("not a size: '" + text + "'" + hint, where);
  const double bytes = std::floor(value * unit);
  if (!(bytes < 9.0e18)) bad("size out of range: '" + text + "'", where);
  return static_cast<std::size_t>(bytes);
}

long parse_int(const std::string &text, long lo, long hi, const std::string &where) {
  errno = 0;
  char *end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0) bad("not an integer: '" + text + "'", where);
  if (value < lo || value > hi)
    bad("'" + text + "' is outside " + std::to_string(lo) + ".." + std::to_string(hi), where);
  return value;
}

std::vector<RedOp> parse_op(const std::string &text, const std::string &where) {
  if (text == "all") return all_ops();
  for (const OpInfo &entry : kOps)
    if (text == entry.name) return {entry.op};
  std::string names;
  for (const OpInfo &entry : kOps) names += std::string(entry.name) + ", ";
  std::string why = "unknown reduction operator '" + text + "' (choose " + names + "or all)";
  if (find_collective(text) != nullptr)  // the old nccl_bench -o all_gather
    why =
        "-o is the reduction operator, as in nccl-tests (sum, prod, max, min, avg or all); "
        "name the collective first: nccl_bench " +
        std::string(find_collective(text)->name) + " ...";
  bad(why, where);
}

std::vector<DType> parse_type(const std::string &text, const std::string &where) {
  if (text == "all") return all_types();
  for (const TypeInfo &entry : kTypes)
    if (text == entry.name) return {entry.type};
  for (const auto &entry : kTypeAliases)
    if (text == entry.alias) return {entry.type};
  bad("unknown data type '" + text + "' (choose float, double, half, bfloat16, int8, uint8, " +
          "int32, uint32, int64, uint64 or all)",
      where);
}

const Collective &parse_collective(const std::string &text, const std::string &where) {
  const Collective *found = find_collective(text);
  if (found == nullptr)
    bad("unknown collective '" + text + "' (choose " + collective_names() + ")", where);
  return *found;
}

// The names of --launcher (launch.h; the same words as launcher_name, kept here so that
// options.cpp links without launch.cpp).
LauncherChoice parse_launcher(const std::string &text, const std::string &where) {
  const struct {
    const char *name;
    LauncherChoice choice;
  } names[] = {{"auto", LauncherChoice::Auto},         {"none", LauncherChoice::None},
               {"torchrun", LauncherChoice::Torchrun}, {"slurm", LauncherChoice::Slurm},
               {"openmpi", LauncherChoice::OpenMpi},   {"pmi", LauncherChoice::Pmi}};
  for (const auto &entry : names)
    if (text == entry.name) return entry.choice;
  bad("unknown launcher '" + text + "' (choose auto, none, torchrun, slurm, openmpi or pmi)",
      where);
}

// Whether the name ends in .json, as nccl-tests decides (classifyOutputFile: the text after
// the last dot that follows the last slash, compared without case).
bool names_json(const std::string &path) {
  const std::size_t dot = path.rfind('.');
  const std::size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && slash > dot)) return false;
  return strcasecmp(path.c_str() + dot + 1, "json") == 0;
}

enum {
  OPT_NCCL_LOG = 256,
  OPT_INJECT_FAULT,
  OPT_LAUNCHER,
  OPT_ID_DIR,
  OPT_ID_TIMEOUT,
  OPT_PRINT_LAUNCH,
  OPT_COLLECTIVE,
  OPT_OLD_JSON,
  OPT_OLD_GRAPH,
};

// nccl-tests' short options (all take a value), then nccl_bench's own long ones.
const char kShort[] = "b:e:f:i:g:n:w:c:o:d:r:z:G:J:a:ht:m:N:p:y:T:C:S:R:x:D:V:M:u:I:K:";
const option kLong[] = {
    {"minbytes", required_argument, nullptr, 'b'},
    {"maxbytes", required_argument, nullptr, 'e'},
    {"stepfactor", required_argument, nullptr, 'f'},
    {"stepbytes", required_argument, nullptr, 'i'},
    {"ngpus", required_argument, nullptr, 'g'},
    {"iters", required_argument, nullptr, 'n'},
    {"warmup_iters", required_argument, nullptr, 'w'},
    {"check", required_argument, nullptr, 'c'},
    {"op", required_argument, nullptr, 'o'},
    {"datatype", required_argument, nullptr, 'd'},
    {"root", required_argument, nullptr, 'r'},
    {"blocking", required_argument, nullptr, 'z'},
    {"cudagraph", required_argument, nullptr, 'G'},
    {"output_file", required_argument, nullptr, 'J'},
    {"average", required_argument, nullptr, 'a'},
    {"help", no_argument, nullptr, 'h'},
    {"nthreads", required_argument, nullptr, 't'},
    {"agg_iters", required_argument, nullptr, 'm'},
    {"run_cycles", required_argument, nullptr, 'N'},
    {"parallel_init", required_argument, nullptr, 'p'},
    {"stream_null", required_argument, nullptr, 'y'},
    {"timeout", required_argument, nullptr, 'T'},
    {"report_cputime", required_argument, nullptr, 'C'},
    {"report_timestamps", required_argument, nullptr, 'S'},
    {"local_register", required_argument, nullptr, 'R'},
    {"cta_policy", required_argument, nullptr, 'x'},
    {"device_implementation", required_argument, nullptr, 'D'},
    {"device_cta_count", required_argument, nullptr, 'V'},
    {"memory", required_argument, nullptr, 'M'},
    {"unalign", required_argument, nullptr, 'u'},
    {"per_iter_timing", required_argument, nullptr, 'I'},
    {"per_iter_skip", required_argument, nullptr, 'K'},
    {"collective", required_argument, nullptr, OPT_COLLECTIVE},
    {"nccl-log", required_argument, nullptr, OPT_NCCL_LOG},
    {"inject-fault", no_argument, nullptr, OPT_INJECT_FAULT},
    {"launcher", required_argument, nullptr, OPT_LAUNCHER},
    {"id-dir", required_argument, nullptr, OPT_ID_DIR},
    {"id-timeout", required_argument, nullptr, OPT_ID_TIMEOUT},
    {"print-launch", no_argument, nullptr, OPT_PRINT_LAUNCH},
    {"json", optional_argument, nullptr, OPT_OLD_JSON},
    {"cuda-graph", optional_argument, nullptr, OPT_OLD_GRAPH},
    {nullptr, 0, nullptr, 0},
};

void refuse_not_implemented(int val, const std::string &spelled) {
  for (const auto &entry : kNotImplemented)
    if (entry.val == val)
      bad(std::string("nccl-tests' -") + static_cast<char>(val) + " (--" + entry.name +
              ") is not implemented in nccl_bench (see --help)",
          spelled);
}

}  // namespace

const TypeInfo &type_info(DType type) {
  for (const TypeInfo &entry : kTypes)
    if (entry.type == type) return entry;
  return kTypes[7];
}

const OpInfo &op_info(RedOp op) {
  for (const OpInfo &entry : kOps)
    if (entry.op == op) return entry;
  return kOps[0];
}

const std::vector<DType> &all_types() {
  static const std::vector<DType> every = [] {
    std::vector<DType> v;
    for (const TypeInfo &entry : kTypes) v.push_back(entry.type);
    return v;
  }();
  return every;
}

const std::vector<RedOp> &all_ops() {
  static const std::vector<RedOp> every = [] {
    std::vector<RedOp> v;
    for (const OpInfo &entry : kOps) v.push_back(entry.op);
    return v;
  }();
  return every;
}

bool average_is_exact(DType type, int nranks) {
  const bool floating = type == DType::Half || type == DType::Float || type == DType::Double ||
                        type == DType::Bfloat16;
  return !floating || (nranks > 0 && (nranks & (nranks - 1)) == 0);
}

Options parse_options(int argc, char **argv) {
  Options opt;
  bool min_given = false, max_given = false, factor_given = false, step_given = false;
  std::string collective_from;  // where the collective was named
  cli::Reader reader(argc, argv, kShort, kLong);
  cli::Item it;
  while (reader.next(&it)) {
    switch (it.kind) {
      case cli::Kind::Option:
        break;
      case cli::Kind::Stray:
        if (!collective_from.empty())
          bad("unexpected word '" + it.text + "': the collective is already " +
                  opt.collective->name + " (" + collective_from + ")",
              "arguments");
        opt.collective = &parse_collective(it.text, "first word");
        collective_from = "first word";
        continue;
      case cli::Kind::Unknown:
        bad("unknown option '" + it.text + "' (see --help)", "arguments");
      case cli::Kind::ValueNotAllowed:
        bad("option takes no value", it.text);
      case cli::Kind::ValueMissing:
        if (it.val == 'G') bad("missing value: -G takes the number of graph launches", it.spelled);
        bad("missing value", it.spelled);
    }
    const std::string value = it.value ? it.value : "";
    const std::string &name = it.spelled;  // where, in messages: -n or --iters, as given
    refuse_not_implemented(it.val, name);
    switch (it.val) {
      case 'h':
        opt.help = true;
        break;
      case OPT_INJECT_FAULT:
        opt.inject_fault = true;
        break;
      case OPT_PRINT_LAUNCH:
        opt.print_launch = true;
        break;
      case OPT_LAUNCHER:
        opt.launcher = parse_launcher(value, name);
        break;
      case OPT_ID_DIR:
        if (value.empty()) bad("empty directory name", name);
        opt.id_dir = value;
        break;
      case OPT_ID_TIMEOUT:
        opt.id_timeout = static_cast<double>(parse_int(value, 1, 86400, name));
        break;
      case OPT_OLD_JSON:
        bad("--json is now -J FILE (nccl-tests' --output_file)", name);
      case OPT_OLD_GRAPH:
        bad("--cuda-graph is now -G N: N launches of the captured graph, as nccl-tests", name);
      case OPT_COLLECTIVE:
        if (!collective_from.empty())
          bad(std::string("the collective is already ") + opt.collective->name + " (" +
                  collective_from + ")",
              name);
        opt.collective = &parse_collective(value, name);
        collective_from = name;
        break;
      case 'o':
        opt.ops = parse_op(value, name);
        break;
      case 'd':
        opt.types = parse_type(value, name);
        break;
      case 'b':
        opt.min_bytes = parse_size(value, name);
        min_given = true;
        break;
      case 'e':
        opt.max_bytes = parse_size(value, name);
        max_given = true;
        break;
      case 'f':
        opt.step_factor = static_cast<std::size_t>(parse_int(value, 1, 1 << 20, name));
        factor_given = true;
        break;
      case 'i':
        opt.step_bytes = parse_size(value, name);
        if (opt.step_bytes == 0) bad("the step must be at least 1 byte", name);
        step_given = true;
        break;
      case 'w':
        opt.warmup = static_cast<int>(parse_int(value, 0, 1000000, name));
        break;
      case 'n':
        opt.iters = static_cast<int>(parse_int(value, 1, 1000000, name));
        break;
      case 'c':
        opt.check = static_cast<int>(parse_int(value, 0, 1000, name));
        break;
      case 'g':
        opt.ngpus = static_cast<int>(parse_int(value, 1, 4096, name));
        break;
      case 'r':
        opt.root = static_cast<int>(parse_int(value, kEveryRoot, 4095, name));
        break;
      case 'z':
        opt.blocking = static_cast<int>(parse_int(value, 0, 3, name));
        break;
      case 'a':
        opt.average = static_cast<int>(parse_int(value, 0, 3, name));
        break;
      case 'G':
        if (value.empty() || value[0] < '0' || value[0] > '9')
          bad("not an integer: '" + value + "': -G takes the number of graph launches", name);
        opt.graph_launches = static_cast<int>(parse_int(value, 0, 1000000, name));
        break;
      case 'J':
        if (value.empty()) bad("empty file name", name);
        if (!names_json(value))
          bad("'" + value + "' does not end in .json; -J writes JSON only, as nccl-tests " +
                  "(which writes nothing for another name)",
              name);
        opt.json_path = value;
        break;
      case OPT_NCCL_LOG:
        if (value.empty()) bad("empty file name", name);
        if (access(value.c_str(), F_OK) == 0)
          bad("'" + value + "' already exists; results are never overwritten, name a new file",
              name);
        opt.nccl_log = value;
        break;
    }
  }
  if (!opt.json_path.empty() && opt.json_path == opt.nccl_log)
    bad("-J and --nccl-log name the same file", "--nccl-log");
  // nccl-tests adds -i when the factor is 1 or less; -i alone means steps of -i here too.
  if (step_given && !factor_given) opt.step_factor = 1;
  if (min_given && !max_given && opt.max_bytes < opt.min_bytes) opt.max_bytes = opt.min_bytes;
  if (opt.min_bytes == 0) bad("the smallest size must be at least 1 byte", "-b");
  if (opt.max_bytes < opt.min_bytes) bad("the largest size is below the smallest", "-e");
  if (opt.inject_fault && opt.check == 0)
    bad("--inject-fault needs the data check; -c 0 turns it off", "--inject-fault");
  if (opt.blocking != 0 && opt.graph_launches > 0)
    bad("-z " + std::to_string(opt.blocking) +
            " waits inside the iterations, which a CUDA graph (-G) cannot hold; drop one",
        "-z");
  if (requested_sizes(opt).size() > 100000)
    bad("-b, -e and -i give more than 100000 sizes; take a larger -i or a factor -f", "-i");
  return opt;
}

std::vector<std::size_t> requested_sizes(const Options &opt) {
  std::vector<std::size_t> sizes;
  for (std::size_t s = opt.min_bytes; s <= opt.max_bytes && sizes.size() <= 100000;) {
    sizes.push_back(s);
    const std::size_t next = opt.linear_steps() ? s + opt.step_bytes : s * opt.step_factor;
    if (opt.linear_steps() ? next < s : s > opt.max_bytes / opt.step_factor) break;
    s = next;
  }
  return sizes;
}

void print_usage() {
  std::printf(
      "usage: nccl_bench [COLLECTIVE] [options]\n"
      "\n"
      "Measures one NCCL collective across the GPUs of this machine, driven by one process\n"
      "(ncclCommInitAll + group calls) or by one process per GPU under a launcher (see the\n"
      "end), checks every result, and prints nccl-tests' table (out-of-place and in-place\n"
      "time, algbw, busbw and wrong elements per size). Every option that nccl-tests also\n"
      "has is spelled as there and means what it means there:\n"
      "  all_reduce_perf -b 8 -e 128M -f 2 -g 2\n"
      "  nccl_bench all_reduce -b 8 -e 128M -f 2 -g 2     (the same run)\n"
      "\n"
      "COLLECTIVE  all_reduce (default), all_gather, reduce_scatter, broadcast or sendrecv\n"
      "            (nccl-tests' program names, all_gather_perf, work too), or --collective NAME\n"
      "\n"
      "options as in nccl-tests (with nccl_bench's defaults):\n"
      "  -b, --minbytes SIZE     smallest size (default 8); K, M, G = 2^10, 2^20, 2^30\n"
      "  -e, --maxbytes SIZE     largest size (default 128M)\n"
      "  -f, --stepfactor N      multiply the size by N from one row to the next (default 2);\n"
      "                          1: add -i instead\n"
      "  -i, --stepbytes SIZE    add SIZE from one row to the next (with -f 1 or without -f;\n"
      "                          default 1M)\n"
      "  -n, --iters N           timed iterations per size (default 20)\n"
      "  -w, --warmup_iters N    untimed iterations per size before the timed ones (default 5)\n"
      "  -c, --check N           checked runs per size, each on fresh data (default 1);\n"
      "                          0: none, #wrong says N/A\n"
      "  -o, --op OP             reduction operator of all_reduce and reduce_scatter: sum\n"
      "                          (default), prod, max, min, avg, or all (each in turn)\n"
      "  -d, --datatype TYPE     float (default), double, half, bfloat16, int8, uint8, int32,\n"
      "                          uint32, int64, uint64, or all (each in turn)\n"
      "  -r, --root N            root rank of broadcast (default 0); -1: every rank in turn\n"
      "  -g, --ngpus N           GPUs this process drives, the first N visible (default: all;\n"
      "                          at least 2 in one process; 1 under a launcher)\n"
      "  -z, --blocking N        0 (default): iterations back to back; 1: wait for each, then\n"
      "                          a barrier; 2: wait, no barrier; 3: wait and barrier, the\n"
      "                          barrier left out of the time\n"
      "  -G, --cudagraph N       capture the -n iterations in one CUDA graph per GPU and time\n"
      "                          N launches of it: no host launch cost (default 0: no graph)\n"
      "  -a, --average N         time over the processes: 0 rank 0's, 1 their mean (default),\n"
      "                          2 the shortest, 3 the longest; in one process, the slowest\n"
      "                          GPU's (as one timer around all of them)\n"
      "  -J, --output_file FILE  also write the results as JSON in nccl-tests' layout; FILE\n"
      "                          ends in .json; if it exists, FILE.0, FILE.1, ... (never\n"
      "                          overwritten)\n"
      "  -h, --help              this text\n"
      "nccl-tests' -t -m -N -p -y -T -C -S -R -x -D -V -M -u -I -K are not implemented.\n"
      "\n"
      "nccl_bench's own options:\n"
      "      --collective NAME   the collective, instead of the first word\n"
      "      --nccl-log FILE     keep NCCL's INFO log (read for the transport summary) in FILE\n"
      "                          (FILE must not exist)\n"
      "      --inject-fault      test only: flip one bit of one output element of rank 0 after\n"
      "                          the first checked operation and before its check, which must\n"
      "                          then fail (exit 1, naming the element)\n"
      "      --launcher NAME     auto (default), none, torchrun, slurm, openmpi or pmi: see below\n"
      "      --id-dir DIR        one process per GPU: where rank 0 leaves the ncclUniqueId for\n"
      "                          the others (default /tmp; a shared directory across nodes)\n"
      "      --id-timeout S      how long the other ranks wait for it (default 120 s)\n"
      "      --print-launch      print the rank, size, local rank, device and id file the\n"
      "                          launcher's variables give, then exit (no GPU is touched)\n"
      "\n"
      "SIZE is the total bytes of the operation, as nccl-tests counts it: the buffer of\n"
      "all_reduce, broadcast and sendrecv, the gathered output of all_gather, the input of\n"
      "reduce_scatter (whose per-rank block is rounded down to 16-byte units, as nccl-tests\n"
      "does); a size that rounds to 0 elements is left out. count is the count NCCL is called\n"
      "with (per rank for all_gather and reduce_scatter).\n"
      "busbw = algbw x 2(n-1)/n (all_reduce), x (n-1)/n (all_gather, reduce_scatter),\n"
      "x 1 (broadcast, sendrecv), as nccl-tests' doc/PERFORMANCE.md. GB = 10^9 bytes.\n"
      "Time: CUDA events around the timed iterations on every GPU (nccl-tests: a host timer).\n"
      "NCCL_* environment variables are passed to NCCL untouched. If neither NCCL_DEBUG\n"
      "nor NCCL_DEBUG_FILE is set, NCCL's INFO log goes to a file and the transports it\n"
      "reports are summarised at the end of the table.\n"
      "Exit status: 0 all results correct, 1 wrong results or a CUDA/NCCL failure,\n"
      "2 bad arguments or fewer than 2 GPUs.\n"
      "\n"
      "One process per GPU, as nccl-tests measures with `mpirun -np N all_reduce_perf -g 1`,\n"
      "started by a launcher (no MPI needed):\n"
      "  torchrun --standalone --nproc_per_node 8 --no_python ./nccl_bench -b 8 -e 128M\n"
      "  srun -N 1 -n 8 --gpus-per-node 8 --kill-on-bad-exit=1 ./nccl_bench -b 8 -e 128M\n"
      "  mpirun -np 8 ./nccl_bench -b 8 -e 128M        (Open MPI; MPICH's mpiexec too)\n"
      "Each process reads its rank, the number of ranks and its local rank from the\n"
      "launcher's variables (first complete set of: torchrun RANK/WORLD_SIZE/LOCAL_RANK,\n"
      "Open MPI OMPI_COMM_WORLD_*, MPICH PMI_RANK/PMI_SIZE/MPI_LOCALRANKID, srun\n"
      "SLURM_PROCID/SLURM_STEP_NUM_TASKS/SLURM_LOCALID) and uses the GPU of its local rank\n"
      "among the visible ones. --launcher auto does so only for 2 or more ranks; --launcher\n"
      "NAME reads that launcher's variables only (1 rank allowed); --launcher none never.\n"
      "Rank 0 writes the ncclUniqueId to a file in --id-dir (unless NCCL_COMM_ID is set),\n"
      "the others read it. Times are combined over the ranks as -a says, #wrong is the sum\n"
      "over the ranks; rank 0 alone prints the table and writes -J.\n"
      "-g more than 1 is refused in this mode.\n");
}
