#include "options.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <unistd.h>

#include "check.h"
#include "cli.h"

namespace {

struct OpName {
    Op op;
    const char* name;
};

const OpName kOps[] = {
    {Op::AllReduce, "all_reduce"},         {Op::AllGather, "all_gather"},
    {Op::ReduceScatter, "reduce_scatter"}, {Op::Broadcast, "broadcast"},
    {Op::SendRecv, "sendrecv"},
};

// Integers up to 2^24 are exact in float, 2^53 in double, 2^11 in half and
// 2^8 in bfloat16; the integer types are exact up to their maximum (one less
// for the unsigned ones, whose maximum is the poison value of patterns.cu).
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

struct Alias {
    const char* alias;
    DType type;
};

const Alias kTypeAliases[] = {
    {"float32", DType::Float}, {"fp32", DType::Float},   {"float16", DType::Half},
    {"fp16", DType::Half},     {"float64", DType::Double}, {"fp64", DType::Double},
    {"bf16", DType::Bfloat16}, {"int", DType::Int32},    {"char", DType::Int8},
};

[[noreturn]] void bad(const std::string& what, const std::string& where) {
    throw UsageError(what + " (" + where + ")");
}

// Results are never overwritten: an output file that already exists is refused.
void refuse_existing(const std::string& path, const std::string& option) {
    if (access(path.c_str(), F_OK) == 0)
        bad("'" + path + "' already exists; results are never overwritten, name a new file", option);
}

// "8", "64K", "1M", "2G" (binary multiples, case-insensitive, optional B).
std::size_t parse_size(const std::string& text, const std::string& where) {
    if (text.empty() || text[0] < '0' || text[0] > '9') bad("not a size: '" + text + "'", where);
    errno = 0;
    char* end = nullptr;
    unsigned long long value = std::strtoull(text.c_str(), &end, 10);
    if (errno != 0) bad("size out of range: '" + text + "'", where);
    unsigned shift = 0;
    switch (*end) {
        case '\0': break;
        case 'k': case 'K': shift = 10; ++end; break;
        case 'm': case 'M': shift = 20; ++end; break;
        case 'g': case 'G': shift = 30; ++end; break;
        default: bad("not a size: '" + text + "' (use a number with K, M or G)", where);
    }
    if (*end == 'B' || *end == 'b') ++end;
    if (*end != '\0') bad("not a size: '" + text + "' (use a number with K, M or G)", where);
    if (shift != 0 && value > (std::numeric_limits<unsigned long long>::max() >> shift)) {
        bad("size out of range: '" + text + "'", where);
    }
    return static_cast<std::size_t>(value << shift);
}

long parse_int(const std::string& text, long lo, long hi, const std::string& where) {
    errno = 0;
    char* end = nullptr;
    long value = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno != 0) bad("not an integer: '" + text + "'", where);
    if (value < lo || value > hi) {
        bad("'" + text + "' is outside " + std::to_string(lo) + ".." + std::to_string(hi), where);
    }
    return value;
}

Op parse_op(const std::string& text, const std::string& where) {
    for (const OpName& entry : kOps) {
        if (text == entry.name) return entry.op;
    }
    // Accept the nccl-tests binary names too (all_reduce_perf) and dashes.
    std::string plain = text;
    for (char& c : plain) {
        if (c == '-') c = '_';
    }
    const std::string suffix = "_perf";
    if (plain.size() > suffix.size() &&
        plain.compare(plain.size() - suffix.size(), suffix.size(), suffix) == 0) {
        plain.resize(plain.size() - suffix.size());
    }
    for (const OpName& entry : kOps) {
        if (plain == entry.name) return entry.op;
    }
    bad("unknown operation '" + text +
            "' (choose all_reduce, all_gather, reduce_scatter, broadcast or sendrecv)",
        where);
}

DType parse_type(const std::string& text, const std::string& where) {
    for (const TypeInfo& entry : kTypes) {
        if (text == entry.name) return entry.type;
    }
    for (const Alias& entry : kTypeAliases) {
        if (text == entry.alias) return entry.type;
    }
    bad("unknown data type '" + text +
            "' (choose float, double, half, bfloat16, int8, uint8, int32, uint32, int64 or uint64)",
        where);
}

// The names of --launcher (launch.h; the same words as launcher_name, kept here so that
// options.cpp links without launch.cpp).
LauncherChoice parse_launcher(const std::string& text, const std::string& where) {
    const struct {
        const char* name;
        LauncherChoice choice;
    } names[] = {{"auto", LauncherChoice::Auto},         {"none", LauncherChoice::None},
                 {"torchrun", LauncherChoice::Torchrun}, {"slurm", LauncherChoice::Slurm},
                 {"openmpi", LauncherChoice::OpenMpi},   {"pmi", LauncherChoice::Pmi}};
    for (const auto& entry : names) {
        if (text == entry.name) return entry.choice;
    }
    bad("unknown launcher '" + text + "' (choose auto, none, torchrun, slurm, openmpi or pmi)", where);
}

}  // namespace

const char* op_name(Op op) {
    for (const OpName& entry : kOps) {
        if (entry.op == op) return entry.name;
    }
    return "?";
}

const TypeInfo& type_info(DType type) {
    for (const TypeInfo& entry : kTypes) {
        if (entry.type == type) return entry;
    }
    return kTypes[7];
}

void print_usage() {
    std::printf(
        "usage: nccl_bench [options]\n"
        "\n"
        "Measures one NCCL collective across the GPUs of this machine, driven by one\n"
        "process (ncclCommInitAll + group calls), or by one process per GPU under a\n"
        "launcher (see the end), and prints an nccl-tests-style table\n"
        "(out-of-place and in-place time, algbw, busbw and wrong elements per size).\n"
        "\n"
        "options:\n"
        "  -o, --op NAME          all_reduce (default), all_gather, reduce_scatter,\n"
        "                         broadcast or sendrecv\n"
        "  -b, --minbytes SIZE    smallest size (default 8); suffixes K, M, G = 2^10, 2^20, 2^30\n"
        "  -e, --maxbytes SIZE    largest size (default 128M)\n"
        "  -f, --stepfactor N     multiply the size by N from one row to the next (default 2)\n"
        "  -w, --warmup_iters N   untimed iterations per size before timing (default 5)\n"
        "  -n, --iters N          timed iterations per size, one batch between CUDA events (default 20)\n"
        "  -d, --datatype TYPE    float (default), double, half, bfloat16, int8, uint8,\n"
        "                         int32, uint32, int64, uint64\n"
        "  -g, --ngpus N          use the first N visible GPUs (default: all; at least 2)\n"
        "  -r, --root N           root rank of broadcast (default 0)\n"
        "  -G, --cuda-graph       capture the timed iterations in one CUDA graph per GPU, launch it\n"
        "                         once untimed (the warm-up), then time one launch: GPU time\n"
        "                         without the host's launch cost\n"
        "      --json FILE        also write the table and metadata as JSON (FILE must not exist)\n"
        "      --nccl-log FILE    keep NCCL's INFO log (read for the transport summary) in FILE\n"
        "                         (FILE must not exist)\n"
        "      --inject-fault     test only: flip one bit of one output element of rank 0 after\n"
        "                         the first checked operation and before its check, which must\n"
        "                         then fail (exit 1, naming the element)\n"
        "      --launcher NAME    auto (default), none, torchrun, slurm, openmpi or pmi: see below\n"
        "      --id-dir DIR       one process per GPU: where rank 0 leaves the ncclUniqueId for the\n"
        "                         others (default /tmp; a shared directory across nodes)\n"
        "      --id-timeout S     how long the other ranks wait for it (default 120 s)\n"
        "      --print-launch     print the rank, size, local rank, device and id file the\n"
        "                         launcher's variables give, then exit (no GPU is touched)\n"
        "  -h, --help             this text\n"
        "\n"
        "SIZE is the total bytes of the operation: the buffer of all_reduce, broadcast and\n"
        "sendrecv, the gathered output of all_gather, the input of reduce_scatter.\n"
        "busbw = algbw x 2(n-1)/n (all_reduce), x (n-1)/n (all_gather, reduce_scatter),\n"
        "x 1 (broadcast, sendrecv). GB = 10^9 bytes.\n"
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
        "the others read it. Times are the slowest rank's (an NCCL all-reduce with max),\n"
        "#wrong the sum over the ranks; rank 0 alone prints the table and writes --json.\n"
        "-g more than 1 is refused in this mode.\n");
}

namespace {

enum { OPT_JSON = 256, OPT_NCCL_LOG, OPT_INJECT_FAULT, OPT_LAUNCHER, OPT_ID_DIR, OPT_ID_TIMEOUT, OPT_PRINT_LAUNCH };

// Every option but the flags takes a value as -b8, -b 8, --minbytes=8 or --minbytes 8.
const char kShort[] = "o:b:e:f:w:n:d:g:r:Gh";
const option kLong[] = {
    {"op", required_argument, nullptr, 'o'},
    {"minbytes", required_argument, nullptr, 'b'},
    {"maxbytes", required_argument, nullptr, 'e'},
    {"stepfactor", required_argument, nullptr, 'f'},
    {"warmup_iters", required_argument, nullptr, 'w'},
    {"iters", required_argument, nullptr, 'n'},
    {"datatype", required_argument, nullptr, 'd'},
    {"ngpus", required_argument, nullptr, 'g'},
    {"root", required_argument, nullptr, 'r'},
    {"cuda-graph", no_argument, nullptr, 'G'},
    {"help", no_argument, nullptr, 'h'},
    {"json", required_argument, nullptr, OPT_JSON},
    {"nccl-log", required_argument, nullptr, OPT_NCCL_LOG},
    {"inject-fault", no_argument, nullptr, OPT_INJECT_FAULT},
    {"launcher", required_argument, nullptr, OPT_LAUNCHER},
    {"id-dir", required_argument, nullptr, OPT_ID_DIR},
    {"id-timeout", required_argument, nullptr, OPT_ID_TIMEOUT},
    {"print-launch", no_argument, nullptr, OPT_PRINT_LAUNCH},
    {nullptr, 0, nullptr, 0},
};

}  // namespace

Options parse_options(int argc, char** argv) {
    Options opt;
    bool min_given = false;
    bool max_given = false;
    cli::Reader reader(argc, argv, kShort, kLong);
    cli::Item it;
    while (reader.next(&it)) {
        switch (it.kind) {
            case cli::Kind::Option:
                break;
            case cli::Kind::Stray:
            case cli::Kind::Unknown:
                bad("unknown option '" + it.text + "' (see --help)", "arguments");
            case cli::Kind::ValueNotAllowed:
                bad("option takes no value", it.text);
            case cli::Kind::ValueMissing:
                bad("missing value", it.spelled);
        }
        const std::string value = it.value ? it.value : "";
        const std::string& name = it.spelled;  // where, in messages: -n or --iters, as given
        switch (it.val) {
            case 'h': opt.help = true; break;
            case 'G': opt.cuda_graph = true; break;
            case OPT_INJECT_FAULT: opt.inject_fault = true; break;
            case OPT_PRINT_LAUNCH: opt.print_launch = true; break;
            case OPT_LAUNCHER: opt.launcher = parse_launcher(value, name); break;
            case OPT_ID_DIR:
                if (value.empty()) bad("empty directory name", name);
                opt.id_dir = value;
                break;
            case OPT_ID_TIMEOUT: opt.id_timeout = static_cast<double>(parse_int(value, 1, 86400, name)); break;
            case 'o': opt.op = parse_op(value, name); break;
            case 'b':
                opt.min_bytes = parse_size(value, name);
                min_given = true;
                break;
            case 'e':
                opt.max_bytes = parse_size(value, name);
                max_given = true;
                break;
            case 'f': opt.factor = static_cast<std::size_t>(parse_int(value, 2, 1 << 20, name)); break;
            case 'w': opt.warmup = static_cast<int>(parse_int(value, 0, 1000000, name)); break;
            case 'n': opt.iters = static_cast<int>(parse_int(value, 1, 1000000, name)); break;
            case 'd': opt.type = parse_type(value, name); break;
            case 'g': opt.ngpus = static_cast<int>(parse_int(value, 1, 4096, name)); break;
            case 'r': opt.root = static_cast<int>(parse_int(value, 0, 4095, name)); break;
            case OPT_JSON:
                if (value.empty()) bad("empty file name", name);
                refuse_existing(value, name);
                opt.json_path = value;
                break;
            case OPT_NCCL_LOG:
                if (value.empty()) bad("empty file name", name);
                refuse_existing(value, name);
                opt.nccl_log = value;
                break;
        }
    }
    if (!opt.json_path.empty() && opt.json_path == opt.nccl_log)
        bad("--json and --nccl-log name the same file", "--nccl-log");
    if (min_given && !max_given && opt.max_bytes < opt.min_bytes) opt.max_bytes = opt.min_bytes;
    if (opt.min_bytes == 0) bad("the smallest size must be at least 1 byte", "-b");
    if (opt.max_bytes < opt.min_bytes) bad("the largest size is below the smallest", "-e");
    return opt;
}
