// Host-only harness for tests/test_nccl_bench_launch.py: links nccl_bench's launch.cpp (no CUDA,
// no NCCL; g++ builds it) and runs one of its parts from the command line:
//   detect CHOICE DIR            what the environment's launcher variables give (--print-launch's
//   lines) device LOCAL_RANK VISIBLE    the CUDA device that local rank gets write PATH RANKS BYTE
//   rank 0: the id file for RANKS ranks, an id of 128 bytes all BYTE (hex) read PATH RANKS TIMEOUT
//   another rank: wait for it, print the id's first and last byte serve PATH RANKS BYTE write, then
//   remove the file when stdin closes (IdFileRemover)
// Errors: "error: <line>" on stderr, exit 2 (UsageError) or 1 (RuntimeFailure).
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

#include "errors.h"
#include "launch.h"

namespace {

LauncherChoice choice_of(const std::string &name) {
  for (LauncherChoice c : {LauncherChoice::Auto, LauncherChoice::None, LauncherChoice::Torchrun,
                           LauncherChoice::OpenMpi, LauncherChoice::Pmi, LauncherChoice::Slurm}) {
    if (name == launcher_name(c)) return c;
  }
  throw UsageError("no launcher " + name);
}

int run(int argc, char **argv) {
  const std::time_t started = std::time(nullptr);
  const std::string what = argc > 1 ? argv[1] : "";
  unsigned char id[128];
  if (what == "detect" && argc == 4) {
    const Launch launch = detect_launch(choice_of(argv[2]));
    for (const std::string &line :
         launch_report(launch, id_file_path(launch, argv[3]), kDefaultIdTimeout))
      std::printf("%s\n", line.c_str());
    return 0;
  }
  if (what == "device" && argc == 4) {
    Launch launch;
    launch.local_rank = std::atoi(argv[2]);
    std::printf("%d\n", device_for(launch, std::atoi(argv[3])));
    return 0;
  }
  if ((what == "write" || what == "serve") && argc == 5) {
    const unsigned value = static_cast<unsigned>(std::strtoul(argv[4], nullptr, 16));
    for (unsigned char &b : id) b = static_cast<unsigned char>(value);
    write_id_file(argv[2], id, sizeof id, std::atoi(argv[3]));
    if (what == "serve") {
      IdFileRemover remover(argv[2]);
      std::printf("written\n");
      std::fflush(stdout);
      while (std::fgetc(stdin) != EOF) {
      }
    }
    return 0;
  }
  if (what == "read" && argc == 5) {
    read_id_file(argv[2], id, sizeof id, std::atoi(argv[3]), std::atof(argv[4]), started);
    std::printf("%02x %02x\n", id[0], id[sizeof id - 1]);
    return 0;
  }
  std::fprintf(stderr, "usage: see the comment at the top of nccl_launch_harness.cpp\n");
  return 3;
}

}  // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const UsageError &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const RuntimeFailure &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
