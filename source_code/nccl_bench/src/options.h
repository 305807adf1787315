// Command-line options of nccl_bench and the tables of operations and types.
#pragma once

#include <cstddef>
#include <string>

#include <nccl.h>

#include "launch.h"

enum class Op { AllReduce, AllGather, ReduceScatter, Broadcast, SendRecv };

enum class DType { Int8, Uint8, Int32, Uint32, Int64, Uint64, Half, Float, Double, Bfloat16 };

struct TypeInfo {
    DType type;
    const char* name;        // as printed in the table
    ncclDataType_t nccl;
    std::size_t bytes;
    double exact_limit;      // every integer in [0, exact_limit] is exact in this type
};

const char* op_name(Op op);
const TypeInfo& type_info(DType type);

struct Options {
    Op op = Op::AllReduce;
    DType type = DType::Float;
    std::size_t min_bytes = 8;
    std::size_t max_bytes = std::size_t(128) << 20;
    std::size_t factor = 2;
    int warmup = 5;
    int iters = 20;
    int ngpus = -1;           // -1: every visible GPU
    int root = 0;             // broadcast root
    std::string json_path;    // empty: no JSON; must not exist (never overwritten)
    std::string nccl_log;     // keep NCCL's INFO log here (empty: temporary file); must not exist
    bool inject_fault = false; // test only: corrupt one output element before the first check
    bool cuda_graph = false;  // time a CUDA graph of the iterations (no launch overhead)
    LauncherChoice launcher = LauncherChoice::Auto;  // one process per GPU: launch.h
    std::string id_dir;       // where rank 0 leaves the ncclUniqueId (empty: /tmp)
    double id_timeout = kDefaultIdTimeout;  // seconds the other ranks wait for it
    bool print_launch = false;  // say what the launcher's variables give, touch no GPU, exit
    bool help = false;
};

// Throws UsageError with a one-line message for anything it cannot accept.
Options parse_options(int argc, char** argv);

void print_usage();
