// One process per GPU, started by a launcher (torchrun, srun, mpirun), without MPI.
//
// Host-only: no CUDA, no NCCL (tests/cuda_host/nccl_launch_harness.cpp builds it with g++).
//
// Which launcher started this process, read from the variables each launcher documents for
// the processes it starts. The first complete set in this order wins:
//   1. torchrun       RANK, WORLD_SIZE, LOCAL_RANK (LOCAL_WORLD_SIZE if set)
//                     https://docs.pytorch.org/docs/stable/elastic/run.html ("Environment
//                     Variables")
//   2. Open MPI       OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
//                     (OMPI_COMM_WORLD_LOCAL_SIZE if set)
//                     https://docs.open-mpi.org/en/v5.0.x/tuning-apps/environment-var.html
//   3. MPICH / Intel MPI (Hydra)   PMI_RANK, PMI_SIZE, MPI_LOCALRANKID (MPI_LOCALNRANKS if set)
//   4. Slurm's srun   SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID
//                     srun(1), OUTPUT ENVIRONMENT VARIABLES
// Why this order: a launcher started by another inherits the outer one's variables. torchrun
// and mpirun are often started by srun or inside an sbatch script, so their own variables
// describe the process and the Slurm ones describe the outer task. Slurm's size is
// SLURM_STEP_NUM_TASKS ("number of processes in the job step"), not SLURM_NTASKS: an sbatch
// script is one process but has SLURM_NTASKS of the whole job and SLURM_PROCID=0 too
// (sbatch(1), OUTPUT ENVIRONMENT VARIABLES), and srun --preserve-env keeps the job's
// SLURM_NTASKS; only srun's job steps get SLURM_STEP_NUM_TASKS.
// A set with a variable missing is ignored (RANK alone is a common name); a complete set
// with a value that is no number, or a rank outside the size, is a usage error.
//
// --launcher auto (the default) uses the first complete set only when it says 2 or more
// ranks: a shell inside `srun --pty` or a notebook kernel started by srun is a 1-task step,
// and the program there keeps driving every visible GPU from one process as before.
// --launcher NAME reads only that launcher's variables (all must be set; 1 rank allowed,
// so the per-rank mode can be checked on one GPU); --launcher none never reads them.
#pragma once

#include <cstddef>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

enum class LauncherChoice { Auto, None, Torchrun, OpenMpi, Pmi, Slurm };

struct Launch {
  bool per_rank = false;  // one process per GPU; false: one process drives every GPU
  std::string launcher;   // "torchrun", "openmpi", "pmi", "slurm", or "none"
  std::string variables;  // the variables read, "RANK=1 WORLD_SIZE=2 LOCAL_RANK=1"
  std::string note;       // why the single-process mode was chosen (auto), else empty
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = -1;       // -1: the launcher does not say
  std::string job_key;       // the same on every rank of one run (for the id file's name)
  std::string job_key_from;  // which variables gave it
};

// Reads the environment (std::getenv) as described above; throws UsageError.
Launch detect_launch(LauncherChoice choice);

// "torchrun" etc. for a choice; "auto" and "none" too.
const char *launcher_name(LauncherChoice choice);

// The CUDA device (a number among the visible ones) of a rank in per-rank mode: its local
// rank, or 0 when the process sees exactly one GPU (a launcher that gives each task its own
// GPU, e.g. srun --gpus-per-task=1, sets CUDA_VISIBLE_DEVICES per task). Anything else is a
// UsageError naming both numbers: two ranks on one GPU are refused by NCCL anyway
// ("Duplicate GPU detected", src/init.cc, v2.28.3-1).
int device_for(const Launch &launch, int visible);

// ---- the ncclUniqueId, handed from rank 0 to the others through a file, without MPI

constexpr double kDefaultIdTimeout = 120.0;  // seconds the other ranks wait for rank 0's file
constexpr long kStaleSlack = 120;            // a file written this long before we started is old

// <dir>/nccl_bench-<uid>-<job key>.id; dir "" means /tmp.
std::string id_file_path(const Launch &launch, const std::string &dir);

// Rank 0: writes the id to <path>.tmp.<pid> and renames it to <path> (readers see a whole
// file or none; an older file of the same name is replaced). Throws RuntimeFailure.
void write_id_file(const std::string &path, const unsigned char *id, std::size_t bytes, int size);

// The other ranks: waits up to timeout_s for a whole file written for `size` ranks no earlier
// than kStaleSlack seconds before `started` (this process's start), then reads the id.
// Throws RuntimeFailure with one line on timeout, or when the file is for another size.
void read_id_file(const std::string &path, unsigned char *id, std::size_t bytes, int size,
                  double timeout_s, std::time_t started);

// Removes the file when it goes out of scope (rank 0, once every rank has joined, or on error).
class IdFileRemover {
 public:
  explicit IdFileRemover(std::string path) : path_(std::move(path)) {}
  ~IdFileRemover() { remove_now(); }
  IdFileRemover(const IdFileRemover &) = delete;
  IdFileRemover &operator=(const IdFileRemover &) = delete;
  void remove_now();

 private:
  std::string path_;
};

// The lines of --print-launch (key=value, one per line).
std::vector<std::string> launch_report(const Launch &launch, const std::string &id_path,
                                       double timeout_s);
