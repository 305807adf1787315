#include "launch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "errors.h"

namespace {

struct VariableSet {
  LauncherChoice choice;
  const char *name;
  const char *rank;
  const char *size;
  const char *local_rank;
  const char *local_size;  // nullptr: the launcher has none
};

// In the order of precedence described in launch.h.
const VariableSet kSets[] = {
    {LauncherChoice::Torchrun, "torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {LauncherChoice::OpenMpi, "openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {LauncherChoice::Pmi, "pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {LauncherChoice::Slurm, "slurm", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID",
     nullptr},
};

constexpr int kMaxRanks = 1 << 20;

const char *value_of(const char *name) {
  return name ? std::getenv(name) : nullptr;
}

bool complete(const VariableSet &set) {
  return value_of(set.rank) && value_of(set.size) && value_of(set.local_rank);
}

std::string where_of(const VariableSet &set) {
  return std::string(set.name) + "'s variables";
}

// A whole number in [lo, hi], decimal digits only.
int read_number(const char *name, int lo, int hi, const VariableSet &set) {
  const char *text = value_of(name);
  const std::string shown = std::string(name) + "='" + (text ? text : "") + "'";
  if (text == nullptr || *text == '\0')
    throw UsageError(shown + " is empty (" + where_of(set) + ")");
  for (const char *p = text; *p; ++p) {
    if (*p < '0' || *p > '9')
      throw UsageError(shown + " is not a whole number (" + where_of(set) + ")");
  }
  errno = 0;
  const long value = std::strtol(text, nullptr, 10);
  if (errno != 0 || value < lo || value > hi) {
    throw UsageError(shown + " is outside " + std::to_string(lo) + ".." + std::to_string(hi) +
                     " (" + where_of(set) + ")");
  }
  return static_cast<int>(value);
}

// Letters, digits, '.', '_' and '-' only, so the key is safe in a file name.
std::string file_safe(const std::string &text) {
  std::string out;
  for (char c : text) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    out += keep ? c : '_';
  }
  return out.substr(0, 120);
}

// A name that every rank of one run shares and that a later run does not reuse.
void set_job_key(Launch &launch, LauncherChoice choice) {
  std::string key, from;
  auto add = [&](const char *variable) {
    const char *v = value_of(variable);
    if (v == nullptr || *v == '\0') return;
    key += std::string(key.empty() ? "" : "-") + v;
    from += std::string(from.empty() ? "" : " ") + variable;
  };
  switch (choice) {
    case LauncherChoice::Torchrun:
      add("TORCHELASTIC_RUN_ID");  // --rdzv-id; a fresh uuid with --standalone
      add("MASTER_PORT");
      break;
    case LauncherChoice::Slurm:
      add("SLURM_JOB_ID");
      add("SLURM_STEP_ID");
      break;
    case LauncherChoice::OpenMpi:
      // Open MPI 5 starts its processes through PMIx, whose namespace names the job;
      // Open MPI 4 passes its job id in an MCA variable.
      for (const char *v :
           {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid"}) {
        if (key.empty()) add(v);
      }
      break;
    default:
      break;
  }
  if (key.empty()) {
    // The ranks on one node share their parent (the launcher's local agent); on several
    // nodes name the file with --id-dir on a shared directory only where a job id exists.
    key = "ppid" + std::to_string(static_cast<long>(getppid()));
    from = "the parent process id (ranks on one node only)";
  }
  launch.job_key = std::string(launcher_name(choice)) + "-" + file_safe(key);
  launch.job_key_from = from;
}

Launch from_set(const VariableSet &set) {
  Launch launch;
  launch.launcher = set.name;
  launch.size = read_number(set.size, 1, kMaxRanks, set);
  launch.rank = read_number(set.rank, 0, kMaxRanks - 1, set);
  launch.local_rank = read_number(set.local_rank, 0, kMaxRanks - 1, set);
  launch.variables = std::string(set.rank) + "=" + value_of(set.rank) + " " + set.size + "=" +
                     value_of(set.size) + " " + set.local_rank + "=" + value_of(set.local_rank);
  if (value_of(set.local_size)) {
    launch.local_size = read_number(set.local_size, 1, kMaxRanks, set);
    launch.variables += std::string(" ") + set.local_size + "=" + value_of(set.local_size);
  }
  if (launch.rank >= launch.size) {
    throw UsageError(std::string(set.rank) + "=" + std::to_string(launch.rank) + " is not below " +
                     set.size + "=" + std::to_string(launch.size) + " (" + where_of(set) + ")");
  }
  if (launch.local_size > 0 && launch.local_rank >= launch.local_size) {
    throw UsageError(std::string(set.local_rank) + "=" + std::to_string(launch.local_rank) +
                     " is not below " + set.local_size + "=" + std::to_string(launch.local_size) +
                     " (" + where_of(set) + ")");
  }
  if (launch.local_rank >= launch.size) {
    throw UsageError(std::string(set.local_rank) + "=" + std::to_string(launch.local_rank) +
                     " is not below " + set.size + "=" + std::to_string(launch.size) + " (" +
                     where_of(set) + ")");
  }
  set_job_key(launch, set.choice);
  return launch;
}

std::string hex(const unsigned char *bytes, std::size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    out += digits[bytes[i] >> 4];
    out += digits[bytes[i] & 15];
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

const char kIdHeader[] = "nccl_bench ncclUniqueId v1";

enum class FileState { Missing, Foreign, Stale, Ready };

// Reads the file once: Ready fills id; *ranks and *written say what it was written for.
FileState look(const std::string &path, unsigned char *id, std::size_t bytes, int *ranks,
               long *written) {
  std::FILE *f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return FileState::Missing;
  char header[256] = {0};
  std::string digits;
  bool ok = std::fgets(header, sizeof header, f) != nullptr;
  if (ok) {
    char line[1024] = {0};
    ok = std::fgets(line, sizeof line, f) != nullptr;
    digits = line;
  }
  std::fclose(f);
  if (!ok) return FileState::Foreign;
  while (!digits.empty() && (digits.back() == '\n' || digits.back() == '\r')) digits.pop_back();
  if (std::strncmp(header, kIdHeader, sizeof kIdHeader - 1) != 0) return FileState::Foreign;
  if (std::sscanf(header + sizeof kIdHeader - 1, " ranks=%d written=%ld", ranks, written) != 2)
    return FileState::Foreign;
  if (digits.size() != 2 * bytes) return FileState::Foreign;
  for (std::size_t i = 0; i < bytes; ++i) {
    const int hi = hex_digit(digits[2 * i]), lo = hex_digit(digits[2 * i + 1]);
    if (hi < 0 || lo < 0) return FileState::Foreign;
    id[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return FileState::Ready;
}

}  // namespace

const char *launcher_name(LauncherChoice choice) {
  switch (choice) {
    case LauncherChoice::Auto:
      return "auto";
    case LauncherChoice::None:
      return "none";
    default:
      break;
  }
  for (const VariableSet &set : kSets) {
    if (set.choice == choice) return set.name;
  }
  return "?";
}

Launch detect_launch(LauncherChoice choice) {
  if (choice == LauncherChoice::None) {
    Launch single;
    single.launcher = "none";
    single.note = "--launcher none: one process drives the GPUs";
    return single;
  }
  if (choice != LauncherChoice::Auto) {
    for (const VariableSet &set : kSets) {
      if (set.choice != choice) continue;
      for (const char *name : {set.rank, set.size, set.local_rank}) {
        if (value_of(name) == nullptr)
          throw UsageError(std::string(name) + " is not set (--launcher " + set.name + ")");
      }
      Launch launch = from_set(set);
      launch.per_rank = true;
      return launch;
    }
  }
  for (const VariableSet &set : kSets) {
    if (!complete(set)) continue;
    Launch launch = from_set(set);
    if (launch.size >= 2) {
      launch.per_rank = true;
      return launch;
    }
    Launch single;
    single.launcher = "none";
    single.note = std::string(set.name) + " says 1 rank (" + launch.variables +
                  "): one process drives the GPUs; --launcher " + set.name + " runs it as 1 rank";
    return single;
  }
  Launch single;
  single.launcher = "none";
  single.note = "no launcher's variables: one process drives the GPUs";
  return single;
}

int device_for(const Launch &launch, int visible) {
  if (launch.local_rank < visible) return launch.local_rank;
  if (visible == 1) return 0;
  throw UsageError("local rank " + std::to_string(launch.local_rank) +
                   " needs a GPU of its own, but " + std::to_string(visible) +
                   " GPU(s) are visible to this process; start at most " + std::to_string(visible) +
                   " ranks per node (CUDA_VISIBLE_DEVICES)");
}

std::string id_file_path(const Launch &launch, const std::string &dir) {
  std::string folder = dir.empty() ? "/tmp" : dir;
  while (folder.size() > 1 && folder.back() == '/') folder.pop_back();
  return folder + "/nccl_bench-" + std::to_string(static_cast<long>(getuid())) + "-" +
         launch.job_key + ".id";
}

void write_id_file(const std::string &path, const unsigned char *id, std::size_t bytes, int size) {
  const std::string temporary = path + ".tmp." + std::to_string(static_cast<long>(getpid()));
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0)
    throw RuntimeFailure("cannot create '" + temporary + "': " + std::strerror(errno) +
                         " (--id-dir)");
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::strcpy(host, "localhost");
  const std::string text = std::string(kIdHeader) + " ranks=" + std::to_string(size) +
                           " written=" + std::to_string(static_cast<long>(std::time(nullptr))) +
                           " pid=" + std::to_string(static_cast<long>(getpid())) + " host=" + host +
                           "\n" + hex(id, bytes) + "\n";
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  const bool synced = done == text.size() && fsync(fd) == 0;  // whole on a shared filesystem too
  const int saved = errno;
  close(fd);
  if (!synced) {
    unlink(temporary.c_str());
    throw RuntimeFailure("cannot write '" + temporary + "': " + std::strerror(saved) +
                         " (--id-dir)");
  }
  if (rename(temporary.c_str(), path.c_str()) != 0) {
    const int why = errno;
    unlink(temporary.c_str());
    throw RuntimeFailure("cannot rename '" + temporary + "' to '" + path +
                         "': " + std::strerror(why) + " (--id-dir)");
  }
}

void read_id_file(const std::string &path, unsigned char *id, std::size_t bytes, int size,
                  double timeout_s, std::time_t started) {
  const auto begin = std::chrono::steady_clock::now();
  FileState state = FileState::Missing;
  int ranks = 0;
  long written = 0;
  for (;;) {
    state = look(path, id, bytes, &ranks, &written);
    const bool stale =
        state == FileState::Ready && written < static_cast<long>(started) - kStaleSlack;
    if (state == FileState::Ready && !stale) {
      if (ranks != size) {
        throw RuntimeFailure("'" + path + "' was written for " + std::to_string(ranks) +
                             " ranks, this run has " + std::to_string(size) +
                             ": two runs share the name; give one another --id-dir");
      }
      return;
    }
    if (stale) state = FileState::Stale;
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    if (waited >= timeout_s) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string what;
  switch (state) {
    case FileState::Missing:
      what = "does not exist";
      break;
    case FileState::Foreign:
      what = "is not an id file of nccl_bench";
      break;
    default:
      what = "is an older run's (written " + std::to_string(static_cast<long>(started) - written) +
             " s before this rank started); remove it";
      break;
  }
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", timeout_s);
  throw RuntimeFailure(
      "no ncclUniqueId from rank 0 within " + std::string(seconds) + " s: '" + path + "' " + what +
      " (rank 0 writes it; every rank needs the same --id-dir, a shared one across "
      "nodes, or set NCCL_COMM_ID; --id-timeout)");
}

void IdFileRemover::remove_now() {
  if (!path_.empty()) unlink(path_.c_str());
  path_.clear();
}

std::vector<std::string> launch_report(const Launch &launch, const std::string &id_path,
                                       double timeout_s) {
  std::vector<std::string> lines;
  lines.push_back(std::string("mode=") + (launch.per_rank ? "per-rank" : "single"));
  lines.push_back("launcher=" + launch.launcher);
  if (!launch.per_rank) {
    lines.push_back("note=" + launch.note);
    return lines;
  }
  lines.push_back("variables=" + launch.variables);
  lines.push_back("rank=" + std::to_string(launch.rank));
  lines.push_back("size=" + std::to_string(launch.size));
  lines.push_back("local_rank=" + std::to_string(launch.local_rank));
  lines.push_back("local_size=" +
                  (launch.local_size > 0 ? std::to_string(launch.local_size) : "unknown"));
  const char *visible = std::getenv("CUDA_VISIBLE_DEVICES");
  lines.push_back("device=" + std::to_string(launch.local_rank) +
                  " (the local rank, among the GPUs this process sees; 0 if it sees one; "
                  "CUDA_VISIBLE_DEVICES=" +
                  (visible ? std::string(visible) : std::string("unset")) + ")");
  const char *comm_id = std::getenv("NCCL_COMM_ID");
  if (comm_id != nullptr) {
    lines.push_back(std::string("id=NCCL_COMM_ID=") + comm_id + " (every rank asks NCCL; no file)");
  } else {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", timeout_s);
    lines.push_back("id=file " + id_path + " (rank 0 writes it, the others wait up to " + seconds +
                    " s)");
    lines.push_back("id_key_from=" + launch.job_key_from);
  }
  return lines;
}
