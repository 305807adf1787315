// nccl_bench: measures one NCCL collective over a range of sizes, as nccl-tests does, driven
// by one process for every chosen GPU, or, started by a launcher (torchrun, srun, mpirun:
// launch.h), by one process per GPU, where rank 0 prints the table.
//
// This file: the set-up of either launch mode, and the one sweep over the rows that both
// modes share. The options: options.cpp; the rows: plan.cpp; one measurement: bench.cpp;
// what each collective moves: collectives.cpp; the table and the JSON: report.cpp.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "bench.h"
#include "check.h"
#include "json_writer.h"
#include "launch.h"
#include "options.h"
#include "plan.h"
#include "report.h"
#include "transports.h"

std::string where_text(const char *file, int line) {
  const char *base = std::strrchr(file, '/');
  return std::string(base ? base + 1 : file) + ":" + std::to_string(line);
}

namespace {

std::string version_text(int code) {
  // NCCL >= 2.9 encodes MAJOR*10000 + MINOR*100 + PATCH, older ones *1000 + *100.
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? (code % 10000) / 100 : (code % 1000) / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

std::string cuda_version_text(int code) {
  return std::to_string(code / 1000) + "." + std::to_string((code % 1000) / 10);
}

void versions(RunInfo *info) {
  int code = 0;
  NCCL_CHECK(ncclGetVersion(&code));
  info->nccl_version_code = code;
  info->nccl_version = version_text(code);
  info->nccl_header = version_text(NCCL_VERSION_CODE);
  int driver = 0, runtime = 0;
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  info->cuda_driver = cuda_version_text(driver);
  info->cuda_runtime = cuda_version_text(runtime);
}

// The -J file: created (empty) before the table, under the next free name as nccl-tests
// does; removed again if the run fails before it is written.
class JsonFile {
 public:
  explicit JsonFile(const std::string &asked) {
    if (asked.empty()) return;
    path_ = json::create_first_free(asked);
    if (path_.empty())
      throw RuntimeFailure("cannot create '" + asked + "': " + std::strerror(errno) + " (-J)");
  }
  ~JsonFile() {
    if (!path_.empty() && !written_) unlink(path_.c_str());
  }
  JsonFile(const JsonFile &) = delete;
  JsonFile &operator=(const JsonFile &) = delete;
  const std::string &path() const { return path_; }
  void write(const std::string &text) {
    if (path_.empty()) return;
    if (json::fill_created_file(path_, text) != json::WriteError::None)
      throw RuntimeFailure("cannot write '" + path_ + "' (-J)");
    written_ = true;
  }

 private:
  std::string path_;
  bool written_ = false;
};

// When this process started: an id file written long before is an older run's (launch.h).
const std::time_t g_started = std::time(nullptr);
// "rank 1 of 4: " in per-rank mode, so that each process's error line says whose it is.
std::string g_rank_prefix;

int visible_gpus(const char *none_found) {
  int visible = 0;
  const cudaError_t status = cudaGetDeviceCount(&visible);
  if (status != cudaSuccess || visible == 0)
    throw UsageError(
        std::string(none_found) +
        (status != cudaSuccess ? std::string(": ") + cudaGetErrorString(status) : std::string()) +
        " (cudaGetDeviceCount)");
  return visible;
}

// The number of GPUs of a single-process run, checked.
int single_process_gpus(const Options &opt) {
  const int visible = visible_gpus("needs at least 2 GPUs, found none");
  const int ngpus = opt.ngpus < 0 ? visible : opt.ngpus;
  if (ngpus > visible)
    throw UsageError("asked for " + std::to_string(ngpus) + " GPUs, " + std::to_string(visible) +
                     " visible (-g)");
  if (ngpus < 2)
    throw UsageError("needs at least 2 GPUs, found " + std::to_string(ngpus) +
                     "; bus bandwidth is meaningless on one GPU (" +
                     (opt.ngpus < 0 ? std::string("visible devices") : std::string("-g")) + ")");
  return ngpus;
}

int run(int argc, char **argv) {
  const Options opt = parse_options(argc, argv);
  if (opt.help) {
    print_usage();
    return 0;
  }
  const Launch launch = detect_launch(opt.launcher);
  if (launch.per_rank) {
    g_rank_prefix =
        "rank " + std::to_string(launch.rank) + " of " + std::to_string(launch.size) + ": ";
    if (opt.ngpus > 1)
      throw UsageError("-g " + std::to_string(opt.ngpus) +
                       " asks one process for several GPUs, but " + launch.launcher + " started " +
                       std::to_string(launch.size) +
                       " rank(s) of one GPU each; leave -g out or give -g 1 (-g)");
    plan_runs(opt, launch.size);  // a range too small for the ranks: say so before any GPU
  }
  const std::string id_path = id_file_path(launch, opt.id_dir);
  if (opt.print_launch) {
    for (const std::string &line : launch_report(launch, id_path, opt.id_timeout))
      std::printf("%s\n", line.c_str());
    return 0;
  }

  // The two launch modes differ only here: which GPUs, how many ranks, how NCCL starts.
  int nranks = 0;
  int device = 0;
  if (launch.per_rank) {
    device = device_for(launch, visible_gpus("needs a GPU for this rank, found none"));
    // Before any NCCL call, so that nothing of this rank opens a context on another GPU.
    CUDA_CHECK(cudaSetDevice(device));
    nranks = launch.size;
  } else {
    nranks = single_process_gpus(opt);
  }
  const bool printer = !launch.per_rank || launch.rank == 0;
  const Plan plan = plan_runs(opt, nranks);
  RunInfo info = run_info(opt, plan, nranks, argc, argv);
  info.per_rank = launch.per_rank;
  info.launcher = launch.launcher;
  // Only rank 0 keeps --nccl-log; the others read their own NCCL log from a temporary file.
  NcclLog log(printer ? opt.nccl_log : std::string());
  info.transport_note = log.reason();
  versions(&info);

  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  std::string written;  // the id file rank 0 wrote, removed once every rank has joined
  if (launch.per_rank) {
    if (std::getenv("NCCL_COMM_ID") != nullptr) {
      // Every rank builds the same id from NCCL_COMM_ID and rank 0 starts the bootstrap root
      // there (src/bootstrap.cc bootstrapGetUniqueId, src/init.cc, NCCL v2.28.3-1): no file.
      NCCL_CHECK(ncclGetUniqueId(&id));
    } else if (printer) {
      NCCL_CHECK(ncclGetUniqueId(&id));
      write_id_file(id_path, reinterpret_cast<const unsigned char *>(&id), sizeof id, launch.size);
      written = id_path;
    } else {
      read_id_file(id_path, reinterpret_cast<unsigned char *>(&id), sizeof id, launch.size,
                   opt.id_timeout, g_started);
    }
  }
  IdFileRemover remover(written);  // also on the way out of a failure
  JsonFile json(printer ? opt.json_path : std::string());
  info.json_path = json.path();

  Bench bench = launch.per_rank ? Bench(opt, device, launch.rank, launch.size) : Bench(opt, nranks);
  std::vector<Row> rows;
  unsigned long long wrong = 0;
  try {
    bench.init(plan.send_bytes, plan.recv_bytes, launch.per_rank ? &id : nullptr);
    remover.remove_now();  // ncclCommInitRank returned: every rank has read the id
    info.devices = bench.describe(info.host, info.pid);
    if (printer) print_header(info);
    for (const Sweep &sweep : plan.sweeps) {
      const Variant &v = sweep.variant;
      for (const Counts &k : sweep.rows) {
        Row row = row_for(opt, v, k);
        row.out_of_place = bench.measure(v, k, false);
        if (opt.collective->in_place) row.in_place = bench.measure(v, k, true);
        wrong += row.out_of_place.wrong + row.in_place.wrong;  // summed over the ranks
        if (printer) print_row(info, row);
        rows.push_back(row);
      }
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
    const double avg = print_footer(info, rows, wrong);
    json.write(json_document(info, rows, avg, wrong, now_text()));
  }
  if (wrong != 0) {
    std::fprintf(stderr, "nccl_bench: error: %s%llu wrong elements%s (see the #wrong columns)\n",
                 g_rank_prefix.c_str(), wrong, launch.per_rank ? " over all ranks" : "");
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const UsageError &e) {
    std::fflush(stdout);
    std::fprintf(stderr, "nccl_bench: error: %s%s\n", g_rank_prefix.c_str(), e.what());
    return 2;
  } catch (const std::exception &e) {
    std::fflush(stdout);
    std::fprintf(stderr, "nccl_bench: error: %s%s\n", g_rank_prefix.c_str(), e.what());
    return 1;
  }
}
