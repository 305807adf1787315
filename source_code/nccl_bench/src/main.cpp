// nccl_bench: one process drives every chosen GPU through NCCL and measures
// one collective over a range of sizes; or, started by a launcher (torchrun, srun,
// mpirun: launch.h), one process per GPU does, and rank 0 prints the table.
//
// For each size and each placement (out-of-place, then in-place):
//   1. fill the inputs with the rank- and index-dependent pattern and the
//      outputs with poison (patterns.h);
//   2. run the operation once and count the wrong elements on the GPUs;
//   3. run the warm-up iterations;
//   4. record a CUDA event on every GPU's stream, issue the timed iterations
//      back to back (each one a ncclGroupStart/End over all GPUs), record a
//      second event, and take the slowest GPU's elapsed time / iterations.
// Checking happens outside the timed batch, so it costs no bandwidth.
// One process per GPU: each rank times its own GPU, and an ncclAllReduce with
// ncclMax of those times (outside the timed batch) gives every rank the slowest;
// the wrong elements are summed over the ranks the same way (ncclSum).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include "check.h"
#include "collectives.h"
#include "launch.h"
#include "options.h"
#include "patterns.h"
#include "report.h"
#include "transports.h"

std::string where_text(const char* file, int line) {
    const char* base = std::strrchr(file, '/');
    return std::string(base ? base + 1 : file) + ":" + std::to_string(line);
}

namespace {

std::string version_text(int code) {
    // NCCL >= 2.9 encodes MAJOR*10000 + MINOR*100 + PATCH, older ones *1000 + *100.
    int major, minor, patch;
    if (code >= 10000) {
        major = code / 10000;
        minor = (code % 10000) / 100;
        patch = code % 100;
    } else {
        major = code / 1000;
        minor = (code % 1000) / 100;
        patch = code % 100;
    }
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::string cuda_version_text(int code) {
    return std::to_string(code / 1000) + "." + std::to_string((code % 1000) / 10);
}

// Everything one GPU needs; freed in ~Bench.
struct Gpu {
    int device = 0;
    int rank = 0;
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;
    void* send = nullptr;
    void* recv = nullptr;
    unsigned long long* wrong = nullptr;
    void* across = nullptr;               // one process per GPU: values reduced over the ranks
    cudaGraph_t graph = nullptr;          // --cuda-graph: the captured iterations
    cudaGraphExec_t graph_exec = nullptr;
};

// What one device record holds when the ranks tell each other their GPUs (per-rank mode).
struct DeviceRecord {
    int rank;
    int device;
    long pid;
    char host[64];
    char name[96];
    char bus[32];
};

class Bench {
public:
    // One process driving GPUs 0..ngpus-1 as ranks 0..ngpus-1.
    Bench(const Options& opt, int ngpus)
        : opt_(opt), type_(type_info(opt.type)), gpus_(ngpus), nranks_(ngpus) {
        for (int r = 0; r < ngpus; ++r) {
            gpus_[r].device = r;
            gpus_[r].rank = r;
        }
    }

    // One process per GPU: this process is `rank` of `nranks` on CUDA device `device`.
    Bench(const Options& opt, int device, int rank, int nranks)
        : opt_(opt), type_(type_info(opt.type)), gpus_(1), nranks_(nranks), per_rank_(true) {
        gpus_[0].device = device;
        gpus_[0].rank = rank;
    }

    ~Bench() { release(); }

    // Frees everything; safe to call twice. Communicators are finalized in
    // one group (several communicators on one thread), then destroyed; after
    // a failure they are aborted instead. Graphs go first: NCCL (>= 2.26)
    // waits in ncclCommDestroy/Abort until every graph that uses the
    // communicator is destroyed.
    void release() {
        drop_graphs();
        bool any_comm = false;
        for (Gpu& g : gpus_) any_comm = any_comm || g.comm != nullptr;
        if (any_comm) {
            if (failed_) {
                for (Gpu& g : gpus_) {
                    if (g.comm) ncclCommAbort(g.comm);
                    g.comm = nullptr;
                }
            } else {
                ncclResult_t status = ncclSuccess;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
                status = ncclGroupStart();
                for (Gpu& g : gpus_) {
                    if (g.comm && status == ncclSuccess) status = ncclCommFinalize(g.comm);
                }
                ncclResult_t end = ncclGroupEnd();
                if (status == ncclSuccess) status = end;
#endif
                for (Gpu& g : gpus_) {
                    if (g.comm) {
                        ncclResult_t s = status == ncclSuccess ? ncclCommDestroy(g.comm) : ncclCommAbort(g.comm);
                        if (s != ncclSuccess && release_error_.empty()) {
                            release_error_ = std::string("ncclCommDestroy failed: ") + ncclGetErrorString(s);
                        }
                    }
                    g.comm = nullptr;
                }
                if (status != ncclSuccess && release_error_.empty()) {
                    release_error_ = std::string("ncclCommFinalize failed: ") + ncclGetErrorString(status);
                }
            }
        }
        for (Gpu& g : gpus_) {
            if (cudaSetDevice(g.device) != cudaSuccess) continue;
            remember(g.send ? cudaFree(g.send) : cudaSuccess, "cudaFree");
            remember(g.recv ? cudaFree(g.recv) : cudaSuccess, "cudaFree");
            remember(g.wrong ? cudaFree(g.wrong) : cudaSuccess, "cudaFree");
            remember(g.across ? cudaFree(g.across) : cudaSuccess, "cudaFree");
            g.across = nullptr;
            remember(g.start ? cudaEventDestroy(g.start) : cudaSuccess, "cudaEventDestroy");
            remember(g.stop ? cudaEventDestroy(g.stop) : cudaSuccess, "cudaEventDestroy");
            remember(g.stream ? cudaStreamDestroy(g.stream) : cudaSuccess, "cudaStreamDestroy");
            g.send = g.recv = nullptr;
            g.wrong = nullptr;
            g.start = g.stop = nullptr;
            g.stream = nullptr;
        }
    }

    void mark_failed() { failed_ = true; }
    const std::string& release_error() const { return release_error_; }

    std::vector<DeviceInfo> describe() const {
        std::vector<DeviceInfo> out;
        for (const Gpu& g : gpus_) {
            cudaDeviceProp prop;
            CUDA_CHECK(cudaGetDeviceProperties(&prop, g.device));
            char bus[32];
            std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", prop.pciDomainID, prop.pciBusID,
                          prop.pciDeviceID);
            out.push_back(DeviceInfo{g.rank, g.device, prop.name, bus, -1, std::string()});
        }
        return out;
    }

    // Per-rank mode: every rank's device line (its host and pid too), gathered with NCCL.
    std::vector<DeviceInfo> describe_all(const std::string& host, long pid) {
        const DeviceInfo mine = describe().front();
        DeviceRecord record{};
        record.rank = mine.rank;
        record.device = mine.device;
        record.pid = pid;
        std::snprintf(record.host, sizeof record.host, "%s", host.c_str());
        std::snprintf(record.name, sizeof record.name, "%s", mine.name.c_str());
        std::snprintf(record.bus, sizeof record.bus, "%s", mine.pci_bus_id.c_str());
        std::vector<DeviceRecord> all(static_cast<std::size_t>(nranks_));
        Gpu& g = gpus_[0];
        CUDA_CHECK(cudaSetDevice(g.device));
        void* buffer = nullptr;
        CUDA_CHECK(cudaMalloc(&buffer, sizeof(DeviceRecord) * all.size()));
        try {
            char* slot = static_cast<char*>(buffer) + sizeof(DeviceRecord) * static_cast<std::size_t>(g.rank);
            // All on this rank's stream, in order (the stream does not wait for the default one).
            CUDA_CHECK(cudaMemcpyAsync(slot, &record, sizeof record, cudaMemcpyHostToDevice, g.stream));
            NCCL_CHECK(ncclAllGather(slot, buffer, sizeof(DeviceRecord), ncclUint8, g.comm, g.stream));
            CUDA_CHECK(cudaMemcpyAsync(all.data(), buffer, sizeof(DeviceRecord) * all.size(), cudaMemcpyDeviceToHost,
                                       g.stream));
            CUDA_CHECK(cudaStreamSynchronize(g.stream));
        } catch (...) {
            cudaFree(buffer);
            throw;
        }
        CUDA_CHECK(cudaFree(buffer));
        std::vector<DeviceInfo> out;
        for (DeviceRecord& r : all) {
            r.host[sizeof r.host - 1] = r.name[sizeof r.name - 1] = r.bus[sizeof r.bus - 1] = '\0';
            out.push_back(DeviceInfo{r.rank, r.device, r.name, r.bus, r.pid, r.host});
        }
        return out;
    }

    // id: nullptr for one process (ncclCommInitAll), else the run's id (ncclCommInitRank).
    void init(std::size_t send_bytes, std::size_t recv_bytes, const ncclUniqueId* id = nullptr) {
        if (id == nullptr) {
            std::vector<ncclComm_t> comms(gpus_.size(), nullptr);
            std::vector<int> devices;
            for (const Gpu& g : gpus_) devices.push_back(g.device);
            NCCL_CHECK(ncclCommInitAll(comms.data(), static_cast<int>(gpus_.size()), devices.data()));
            for (std::size_t i = 0; i < gpus_.size(); ++i) gpus_[i].comm = comms[i];
        } else {
            Gpu& g = gpus_[0];
            CUDA_CHECK(cudaSetDevice(g.device));
            NCCL_CHECK(ncclCommInitRank(&g.comm, nranks_, *id, g.rank));
        }
        for (Gpu& g : gpus_) {
            CUDA_CHECK(cudaSetDevice(g.device));
            CUDA_CHECK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
            CUDA_CHECK(cudaEventCreate(&g.start));
            CUDA_CHECK(cudaEventCreate(&g.stop));
            CUDA_CHECK(cudaMalloc(&g.send, std::max<std::size_t>(send_bytes, 1)));
            CUDA_CHECK(cudaMalloc(&g.recv, std::max<std::size_t>(recv_bytes, 1)));
            CUDA_CHECK(cudaMalloc(&g.wrong, 2 * sizeof(unsigned long long)));  // count, first index
            if (per_rank_) CUDA_CHECK(cudaMalloc(&g.across, 4 * sizeof(double)));
        }
    }

    Measurement measure(const Shape& shape, bool in_place) {
        Measurement m;
        m.valid = true;
        m.wrong = check(shape, in_place);
        if (opt_.cuda_graph) {
            // One graph per GPU holding all timed iterations; one untimed
            // launch of it is the warm-up (it also uploads the graph).
            capture(shape, in_place);
            launch_graphs();
        } else {
            for (int i = 0; i < opt_.warmup; ++i) issue(shape, in_place);
        }
        synchronize();

        for (Gpu& g : gpus_) {
            CUDA_CHECK(cudaSetDevice(g.device));
            CUDA_CHECK(cudaEventRecord(g.start, g.stream));
        }
        const auto issue_start = std::chrono::steady_clock::now();
        if (opt_.cuda_graph) {
            launch_graphs();
        } else {
            for (int i = 0; i < opt_.iters; ++i) issue(shape, in_place);
        }
        const auto issue_end = std::chrono::steady_clock::now();
        for (Gpu& g : gpus_) {
            CUDA_CHECK(cudaSetDevice(g.device));
            CUDA_CHECK(cudaEventRecord(g.stop, g.stream));
        }
        // How long the host took to issue one iteration: if this is close to
        // time_us, the GPUs were waiting for the host (launch-bound).
        m.host_us = std::chrono::duration<double, std::micro>(issue_end - issue_start).count() / opt_.iters;
        float slowest_ms = 0.0f;
        for (Gpu& g : gpus_) {
            CUDA_CHECK(cudaEventSynchronize(g.stop));
            float ms = 0.0f;
            CUDA_CHECK(cudaEventElapsedTime(&ms, g.start, g.stop));
            slowest_ms = std::max(slowest_ms, ms);
        }
        m.time_us = 1000.0 * static_cast<double>(slowest_ms) / opt_.iters;
        if (per_rank_) across_ranks(&m);
        m.algbw = m.time_us > 0.0 ? static_cast<double>(shape.bytes) / (m.time_us * 1000.0) : 0.0;
        m.busbw = m.algbw * busbw_factor(opt_.op, nranks_);
        if (opt_.cuda_graph) drop_graphs();
        return m;
    }

private:
    // Per-rank mode: the slowest rank's time and host issue time (ncclMax) and the wrong
    // elements of all ranks (ncclSum), reduced by NCCL over every rank, outside the timing.
    void across_ranks(Measurement* m) {
        Gpu& g = gpus_[0];
        CUDA_CHECK(cudaSetDevice(g.device));
        double times[2] = {m->time_us, m->host_us};
        unsigned long long wrong = m->wrong;
        double* d_times = static_cast<double*>(g.across);
        unsigned long long* d_wrong = reinterpret_cast<unsigned long long*>(d_times + 2);
        CUDA_CHECK(cudaMemcpyAsync(d_times, times, sizeof times, cudaMemcpyHostToDevice, g.stream));
        CUDA_CHECK(cudaMemcpyAsync(d_wrong, &wrong, sizeof wrong, cudaMemcpyHostToDevice, g.stream));
        NCCL_CHECK(ncclGroupStart());
        ncclResult_t first = ncclAllReduce(d_times, d_times, 2, ncclFloat64, ncclMax, g.comm, g.stream);
        ncclResult_t second = ncclAllReduce(d_wrong, d_wrong, 1, ncclUint64, ncclSum, g.comm, g.stream);
        NCCL_CHECK(ncclGroupEnd());
        NCCL_CHECK(first);
        NCCL_CHECK(second);
        CUDA_CHECK(cudaMemcpyAsync(times, d_times, sizeof times, cudaMemcpyDeviceToHost, g.stream));
        CUDA_CHECK(cudaMemcpyAsync(&wrong, d_wrong, sizeof wrong, cudaMemcpyDeviceToHost, g.stream));
        CUDA_CHECK(cudaStreamSynchronize(g.stream));
        m->time_us = times[0];
        m->host_us = times[1];
        m->wrong = wrong;
    }

    // Records opt_.iters iterations into one CUDA graph per GPU. NCCL's
    // documentation allows capturing its calls; each GPU's stream is captured
    // separately (thread-local mode, so NCCL's own threads are unaffected).
    void capture(const Shape& shape, bool in_place) {
        drop_graphs();
        for (Gpu& g : gpus_) {
            CUDA_CHECK(cudaSetDevice(g.device));
            CUDA_CHECK(cudaStreamBeginCapture(g.stream, cudaStreamCaptureModeThreadLocal));
        }
        try {
            for (int i = 0; i < opt_.iters; ++i) issue(shape, in_place);
        } catch (...) {
            for (Gpu& g : gpus_) {  // leave no stream capturing
                cudaGraph_t partial = nullptr;
                if (cudaSetDevice(g.device) == cudaSuccess &&
                    cudaStreamEndCapture(g.stream, &partial) == cudaSuccess && partial) {
                    cudaGraphDestroy(partial);
                }
            }
            throw;
        }
        for (Gpu& g : gpus_) {
            CUDA_CHECK(cudaSetDevice(g.device));
            CUDA_CHECK(cudaStreamEndCapture(g.stream, &g.graph));
        }
        for (Gpu& g : gpus_) {
            CUDA_CHECK(cudaSetDevice(g.device));
            CUDA_CHECK(cudaGraphInstantiate(&g.graph_exec, g.graph, 0));
        }
    }

    void launch_graphs() {
        for (Gpu& g : gpus_) {
            CUDA_CHECK(cudaSetDevice(g.device));
            CUDA_CHECK(cudaGraphLaunch(g.graph_exec, g.stream));
        }
    }

    void drop_graphs() {
        for (Gpu& g : gpus_) {
            if (g.graph_exec == nullptr && g.graph == nullptr) continue;
            if (cudaSetDevice(g.device) == cudaSuccess) {
                remember(g.graph_exec ? cudaGraphExecDestroy(g.graph_exec) : cudaSuccess, "cudaGraphExecDestroy");
                remember(g.graph ? cudaGraphDestroy(g.graph) : cudaSuccess, "cudaGraphDestroy");
            }
            g.graph_exec = nullptr;
            g.graph = nullptr;
        }
    }

    void issue(const Shape& shape, bool in_place) {
        const int n = nranks_;
        NCCL_CHECK(ncclGroupStart());
        try {
            for (Gpu& g : gpus_) {
                RankBuffers b = buffers_for(opt_.op, in_place, g.send, g.recv, shape, g.rank, type_.bytes);
                enqueue(opt_.op, b, shape, type_.nccl, g.rank, n, opt_.root, g.comm, g.stream);
            }
        } catch (...) {
            ncclGroupEnd();  // close the group before the comms are aborted; the first error wins
            throw;
        }
        NCCL_CHECK(ncclGroupEnd());
    }

    void synchronize() {
        for (Gpu& g : gpus_) {
            CUDA_CHECK(cudaSetDevice(g.device));
            CUDA_CHECK(cudaStreamSynchronize(g.stream));
        }
    }

    // Fills inputs and poisons outputs, runs the operation once, and returns
    // the number of wrong elements over all ranks.
    unsigned long long check(const Shape& shape, bool in_place) {
        const int n = nranks_;
        const unsigned m = pattern_modulus(opt_.type, n);
        const std::size_t elt = type_.bytes;
        for (Gpu& g : gpus_) {
            CUDA_CHECK(cudaSetDevice(g.device));
            RankBuffers b = buffers_for(opt_.op, in_place, g.send, g.recv, shape, g.rank, elt);
            void* input = const_cast<void*>(b.send);
            if (!in_place) {
                launch_fill(opt_.type, input, shape.send_count, 0, g.rank, m, g.stream);
                launch_fill(opt_.type, b.recv, shape.recv_count, 0, -1, m, g.stream);
            } else {
                switch (opt_.op) {
                    case Op::AllGather:  // poison the whole output, then this rank's slot
                        launch_fill(opt_.type, g.recv, shape.recv_count, 0, -1, m, g.stream);
                        launch_fill(opt_.type, input, shape.block, 0, g.rank, m, g.stream);
                        break;
                    case Op::Broadcast:  // only the root's buffer holds data
                        launch_fill(opt_.type, g.recv, shape.recv_count, 0,
                                    g.rank == opt_.root ? g.rank : -1, m, g.stream);
                        break;
                    default:  // all_reduce, reduce_scatter: the input fills the buffer
                        launch_fill(opt_.type, input, shape.send_count, 0, g.rank, m, g.stream);
                        break;
                }
            }
            CUDA_CHECK(cudaMemsetAsync(g.wrong, 0, sizeof(unsigned long long), g.stream));
            CUDA_CHECK(cudaMemsetAsync(g.wrong + 1, 0xff, sizeof(unsigned long long), g.stream));
        }
        issue(shape, in_place);
        if (opt_.inject_fault && !fault_injected_ && gpus_[0].rank == 0) inject_fault(shape, in_place);
        unsigned long long total = 0;
        for (Gpu& g : gpus_) {
            CUDA_CHECK(cudaSetDevice(g.device));
            RankBuffers b = buffers_for(opt_.op, in_place, g.send, g.recv, shape, g.rank, elt);
            Expectation e{opt_.op, n, g.rank, opt_.root, shape.recv_count, shape.block, m};
            launch_verify(opt_.type, b.recv, e, g.wrong, g.stream);
            unsigned long long wrong[2] = {0, 0};
            CUDA_CHECK(cudaMemcpyAsync(wrong, g.wrong, sizeof wrong, cudaMemcpyDeviceToHost, g.stream));
            CUDA_CHECK(cudaStreamSynchronize(g.stream));
            if (wrong[0] != 0) {
                std::fprintf(stderr,
                             "nccl_bench: error: data check failed on rank %d (GPU %d), %s, %zu bytes, %s: "
                             "%llu of %zu output elements wrong; first at element %llu\n",
                             g.rank, g.device, op_name(opt_.op), shape.bytes,
                             in_place ? "in-place" : "out-of-place", wrong[0], shape.recv_count, wrong[1]);
            }
            total += wrong[0];
        }
        return total;
    }

    // Test only (--inject-fault): after the operation and before its check, flips the lowest
    // bit of one output element of rank 0, once per run, so the check can be seen to fail.
    void inject_fault(const Shape& shape, bool in_place) {
        fault_injected_ = true;
        Gpu& g = gpus_[0];
        CUDA_CHECK(cudaSetDevice(g.device));
        CUDA_CHECK(cudaStreamSynchronize(g.stream));
        RankBuffers b = buffers_for(opt_.op, in_place, g.send, g.recv, shape, g.rank, type_.bytes);
        if (shape.recv_count == 0) return;
        const std::size_t element = shape.recv_count / 2;
        unsigned char* where = static_cast<unsigned char*>(b.recv) + element * type_.bytes;
        unsigned char byte = 0;  // the lowest byte (little-endian): flipping it changes the value
        CUDA_CHECK(cudaMemcpy(&byte, where, 1, cudaMemcpyDeviceToHost));
        byte ^= 1;
        CUDA_CHECK(cudaMemcpy(where, &byte, 1, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaDeviceSynchronize());
        std::fprintf(stderr, "nccl_bench: --inject-fault: flipped one bit of element %zu of rank 0's output "
                     "(%zu bytes, %s)\n", element, shape.bytes, in_place ? "in-place" : "out-of-place");
    }

    Options opt_;
    TypeInfo type_;
    std::vector<Gpu> gpus_;
    int nranks_ = 0;          // ranks of the communicator: gpus_.size(), or the launcher's size
    bool per_rank_ = false;   // one process per GPU (gpus_ holds this rank's GPU only)
    bool failed_ = false;
    bool fault_injected_ = false;
    std::string release_error_;

    void remember(cudaError_t status, const char* what) {
        if (status != cudaSuccess && release_error_.empty()) {
            release_error_ = std::string(what) + " failed: " + cudaGetErrorString(status);
        }
    }
};

std::vector<std::size_t> size_list(const Options& opt) {
    std::vector<std::size_t> sizes;
    for (std::size_t s = opt.min_bytes; s <= opt.max_bytes;) {
        sizes.push_back(s);
        if (s > opt.max_bytes / opt.factor) break;
        s *= opt.factor;
    }
    return sizes;
}

// The rows of the sweep for `nranks` ranks, and the largest buffers they need.
struct Plan {
    std::vector<Shape> shapes;
    std::size_t send_bytes = 0;
    std::size_t recv_bytes = 0;
};

Plan plan_sizes(const Options& opt, int nranks) {
    const TypeInfo& type = type_info(opt.type);
    Plan plan;
    for (std::size_t s : size_list(opt)) {
        Shape shape = shape_for(opt.op, s, nranks, type.bytes);
        if (shape.elements == 0) continue;
        if (!plan.shapes.empty() && plan.shapes.back().bytes == shape.bytes) continue;
        plan.shapes.push_back(shape);
        plan.send_bytes = std::max(plan.send_bytes, shape.send_count * type.bytes);
        plan.recv_bytes = std::max(plan.recv_bytes, std::max(shape.send_count, shape.recv_count) * type.bytes);
    }
    if (plan.shapes.empty()) {
        throw UsageError("no size in the range holds one element per rank (-b/-e)");
    }
    return plan;
}

// What the header and the JSON say about the run, before any GPU is touched.
RunInfo run_info(const Options& opt, const Plan& plan, int nranks) {
    const TypeInfo& type = type_info(opt.type);
    RunInfo info;
    info.op = op_name(opt.op);
    info.in_place = has_in_place(opt.op);
    info.cuda_graph = opt.cuda_graph;
    info.pid = static_cast<long>(getpid());
    char host[256] = {0};
    info.host = gethostname(host, sizeof host - 1) == 0 && host[0] ? host : "localhost";
    info.type = type.name;
    info.redop = op_reduces(opt.op) ? "sum" : "none";
    info.root = opt.op == Op::Broadcast ? opt.root : -1;
    info.nranks = nranks;
    info.factor = busbw_factor(opt.op, nranks);
    info.warmup = opt.warmup;
    info.iters = opt.iters;
    info.min_bytes = plan.shapes.front().bytes;
    info.max_bytes = plan.shapes.back().bytes;
    info.step = opt.factor;
    info.environment = nccl_environment();  // before NcclLog adds its own settings
    return info;
}

void versions(RunInfo* info) {
    int code = 0;
    NCCL_CHECK(ncclGetVersion(&code));
    info->nccl_version = version_text(code);
    info->nccl_header = version_text(NCCL_VERSION_CODE);
    int driver = 0, runtime = 0;
    CUDA_CHECK(cudaDriverGetVersion(&driver));
    CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    info->cuda_driver = cuda_version_text(driver);
    info->cuda_runtime = cuda_version_text(runtime);
}

// When this process started: an id file written long before is an older run's (launch.h).
const std::time_t g_started = std::time(nullptr);
// "rank 1 of 4: " in per-rank mode, so that each process's error line says whose it is.
std::string g_rank_prefix;

// One process per GPU (launch.h): this process is one rank; rank 0 prints and writes JSON.
int run_per_rank(const Options& opt, const Launch& launch, const std::string& id_path) {
    const bool printer = launch.rank == 0;
    int visible = 0;
    cudaError_t status = cudaGetDeviceCount(&visible);
    if (status != cudaSuccess || visible == 0) {
        throw UsageError(std::string("needs a GPU for this rank, found none") +
                         (status != cudaSuccess ? std::string(": ") + cudaGetErrorString(status) : std::string()) +
                         " (cudaGetDeviceCount)");
    }
    const int device = device_for(launch, visible);
    // Before any NCCL call, so that nothing of this rank opens a context on another GPU.
    CUDA_CHECK(cudaSetDevice(device));
    const Plan plan = plan_sizes(opt, launch.size);
    RunInfo info = run_info(opt, plan, launch.size);
    info.per_rank = true;
    info.launcher = launch.launcher;
    // Only rank 0 keeps --nccl-log; the others read their own NCCL log from a temporary file.
    NcclLog log(printer ? opt.nccl_log : std::string());
    info.transport_note = log.reason();
    versions(&info);

    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    std::string written;  // the id file rank 0 wrote, removed once every rank has joined
    if (std::getenv("NCCL_COMM_ID") != nullptr) {
        // Every rank builds the same id from NCCL_COMM_ID and rank 0 starts the bootstrap root
        // there (src/bootstrap.cc bootstrapGetUniqueId, src/init.cc, NCCL v2.28.3-1): no file.
        NCCL_CHECK(ncclGetUniqueId(&id));
    } else if (printer) {
        NCCL_CHECK(ncclGetUniqueId(&id));
        write_id_file(id_path, reinterpret_cast<const unsigned char*>(&id), sizeof id, launch.size);
        written = id_path;
    } else {
        read_id_file(id_path, reinterpret_cast<unsigned char*>(&id), sizeof id, launch.size, opt.id_timeout,
                     g_started);
    }
    IdFileRemover remover(written);  // also on the way out of a failure

    Bench bench(opt, device, launch.rank, launch.size);
    std::vector<Row> rows;
    unsigned long long wrong = 0;
    try {
        bench.init(plan.send_bytes, plan.recv_bytes, &id);
        remover.remove_now();  // ncclCommInitRank returned: every rank has read the id
        info.devices = bench.describe_all(info.host, info.pid);
        if (printer) print_header(info);
        for (const Shape& shape : plan.shapes) {
            Row row;
            row.bytes = shape.bytes;
            row.count = shape.elements;
            row.out_of_place = bench.measure(shape, false);
            if (has_in_place(opt.op)) row.in_place = bench.measure(shape, true);
            wrong += row.out_of_place.wrong + row.in_place.wrong;  // already summed over the ranks
            if (printer) print_row(info, row);
            rows.push_back(row);
        }
    } catch (...) {
        bench.mark_failed();
        throw;
    }
    bench.release();
    if (!bench.release_error().empty()) throw RuntimeFailure(bench.release_error());

    if (printer) {
        info.transports = log.transports();
        info.nccl_env_lines = log.environment_lines();
        double avg = print_footer(info, rows, wrong);
        if (!opt.json_path.empty()) write_json(opt.json_path, info, rows, avg, wrong);
    }
    if (wrong != 0) {
        std::fprintf(stderr, "nccl_bench: error: %s%llu wrong elements over all ranks (see the #wrong columns)\n",
                     g_rank_prefix.c_str(), wrong);
        return 1;
    }
    return 0;
}

int run(int argc, char** argv) {
    Options opt = parse_options(argc, argv);
    if (opt.help) {
        print_usage();
        return 0;
    }
    const Launch launch = detect_launch(opt.launcher);
    if (launch.per_rank) {
        g_rank_prefix = "rank " + std::to_string(launch.rank) + " of " + std::to_string(launch.size) + ": ";
        if (opt.ngpus > 1) {
            throw UsageError("-g " + std::to_string(opt.ngpus) + " asks one process for several GPUs, but " +
                             launch.launcher + " started " + std::to_string(launch.size) +
                             " rank(s) of one GPU each; leave -g out or give -g 1 (-g)");
        }
        if (opt.op == Op::Broadcast && opt.root >= launch.size) {
            throw UsageError("root " + std::to_string(opt.root) + " is not a rank of " +
                             std::to_string(launch.size) + " (-r)");
        }
        plan_sizes(opt, launch.size);  // a range too small for the ranks: say so before any GPU
    }
    const std::string id_path = id_file_path(launch, opt.id_dir);
    if (opt.print_launch) {
        for (const std::string& line : launch_report(launch, id_path, opt.id_timeout))
            std::printf("%s\n", line.c_str());
        return 0;
    }
    if (launch.per_rank) return run_per_rank(opt, launch, id_path);

    int visible = 0;
    cudaError_t status = cudaGetDeviceCount(&visible);
    if (status != cudaSuccess) {
        throw UsageError(std::string("needs at least 2 GPUs, found none: ") + cudaGetErrorString(status) +
                         " (cudaGetDeviceCount)");
    }
    const int ngpus = opt.ngpus < 0 ? visible : opt.ngpus;
    if (ngpus > visible) {
        throw UsageError("asked for " + std::to_string(ngpus) + " GPUs, " + std::to_string(visible) +
                         " visible (-g)");
    }
    if (ngpus < 2) {
        throw UsageError("needs at least 2 GPUs, found " + std::to_string(ngpus) +
                         "; bus bandwidth is meaningless on one GPU (" +
                         (opt.ngpus < 0 ? std::string("visible devices") : std::string("-g")) + ")");
    }
    if (opt.op == Op::Broadcast && opt.root >= ngpus) {
        throw UsageError("root " + std::to_string(opt.root) + " is not a rank of " + std::to_string(ngpus) + " (-r)");
    }

    const Plan plan = plan_sizes(opt, ngpus);
    RunInfo info = run_info(opt, plan, ngpus);
    NcclLog log(opt.nccl_log);
    info.transport_note = log.reason();
    versions(&info);

    Bench bench(opt, ngpus);
    std::vector<Row> rows;
    unsigned long long wrong = 0;
    try {
        info.devices = bench.describe();
        bench.init(plan.send_bytes, plan.recv_bytes);
        print_header(info);
        for (const Shape& shape : plan.shapes) {
            Row row;
            row.bytes = shape.bytes;
            row.count = shape.elements;
            row.out_of_place = bench.measure(shape, false);
            if (has_in_place(opt.op)) row.in_place = bench.measure(shape, true);
            wrong += row.out_of_place.wrong + row.in_place.wrong;
            print_row(info, row);
            rows.push_back(row);
        }
    } catch (...) {
        bench.mark_failed();
        throw;
    }
    bench.release();
    if (!bench.release_error().empty()) throw RuntimeFailure(bench.release_error());

    info.transports = log.transports();
    info.nccl_env_lines = log.environment_lines();
    double avg = print_footer(info, rows, wrong);
    if (!opt.json_path.empty()) write_json(opt.json_path, info, rows, avg, wrong);
    if (wrong != 0) {
        std::fprintf(stderr, "nccl_bench: error: %llu wrong elements (see the #wrong columns)\n", wrong);
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const UsageError& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "nccl_bench: error: %s%s\n", g_rank_prefix.c_str(), e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "nccl_bench: error: %s%s\n", g_rank_prefix.c_str(), e.what());
        return 1;
    }
}
