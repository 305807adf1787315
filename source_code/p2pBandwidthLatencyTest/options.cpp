// options.cpp - the command line of the P2P test.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include <unistd.h>

#include "cli.h"
#include "p2p.h"

void p2p_die(int code, const std::string &what) {
  std::fprintf(stderr, "%s: error: %s\n", P2P_PROG, what.c_str());
  std::exit(code);
}

// clang-format off (the help text keeps its own layout)
void print_help(FILE *out) {
  std::fprintf(
      out, "Usage: " P2P_PROG
           " [options]\n"
           "Measures copies between every ordered pair of GPUs (and inside each GPU, the\n"
           "diagonal): bandwidth one way and both ways, and latency, with peer access first\n"
           "disabled and then enabled. Every copy is checked against a known pattern.\n"
           "\n"
           "Options:\n"
           "  --help            print this help and exit\n"
           "  --p2p_read        one-way and latency tests: the receiving GPU pulls the data\n"
           "                    (P2P reads) instead of the sending GPU pushing it (P2P writes)\n"
           "  --sm_copy         copy with a kernel (16-byte loads/stores) instead of the copy\n"
           "                    engine (cudaMemcpyPeerAsync) where peer access is enabled\n"
           "  --numElems=N      4-byte elements per bandwidth copy (default 268435456 = 1 GiB,\n"
           "                    lowered on GPUs too small for (iters + 1) such buffers)\n"
           "  --devices=LIST    comma-separated CUDA device ordinals to test, e.g. 0,3\n"
           "                    (default: all visible GPUs)\n"
           "  --iters=N         copies queued in one timed batch, each into its own\n"
           "                    destination buffer (default 4)\n"
           "  --reps=N          timed batches per cell; the median is reported (default 5)\n"
           "  --warmup=N        untimed batches per cell before the timed ones (default 1)\n"
           "  --lat_iters=N     one-element copies queued in one latency batch (default 100)\n"
           "  --ce_streams=N    copy engine: split each copy over N streams (default 1)\n"
           "  --sm_blocks=N     --sm_copy: blocks per copy kernel (default 0 = as many as fit)\n"
           "  --sm_threads=N    --sm_copy: threads per block, a multiple of 32 (default 512)\n"
           "  --timeout_s=S     give up waiting on the start flag after S seconds (default 10)\n"
           "  --json FILE       also write every matrix, all samples and metadata as JSON\n"
           "                    (--json=FILE works too); FILE must not exist yet\n"
           "  --inject-fault    test only: flip one bit of one copied element after the first\n"
           "                    copy batch and before its data check, which must then fail\n"
           "                    (exit 1, naming the element)\n"
           "\n"
           "GB/s means 10^9 bytes per second. Exit status: 0 success; 1 a data mismatch or a\n"
           "CUDA failure; 2 bad arguments or no GPU to measure.\n");
}
// clang-format on

namespace {

long long parse_int(const std::string &name, const std::string &value, long long lo, long long hi,
                    int argi) {
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || errno != 0 || *end != '\0' || v < lo || v > hi)
    p2p_die(EXIT_USAGE, "--" + name + " needs an integer from " + std::to_string(lo) + " to " +
                            std::to_string(hi) + ", got '" + value + "' (argument " +
                            std::to_string(argi) + ")");
  return v;
}

}  // namespace

namespace {

// The options' vals, in this order: flags, then options with a value (see the check below).
enum {
  OPT_HELP = 256,
  OPT_H,
  OPT_P2P_READ,
  OPT_SM_COPY,
  OPT_INJECT_FAULT,
  OPT_NUM_ELEMS,
  OPT_ITERS,
  OPT_REPS,
  OPT_WARMUP,
  OPT_LAT_ITERS,
  OPT_CE_STREAMS,
  OPT_SM_BLOCKS,
  OPT_SM_THREADS,
  OPT_TIMEOUT_S,
  OPT_JSON,
  OPT_DEVICES
};

// Numbers take their value only as --name=N (optional_argument: a bare --name is an error
// of its own); --json FILE and --json=FILE both work; --help ignores a value.
const option kOptions[] = {
    {"help", optional_argument, nullptr, OPT_HELP},
    {"h", optional_argument, nullptr, OPT_H},
    {"p2p_read", no_argument, nullptr, OPT_P2P_READ},
    {"sm_copy", no_argument, nullptr, OPT_SM_COPY},
    {"inject-fault", no_argument, nullptr, OPT_INJECT_FAULT},
    {"numElems", optional_argument, nullptr, OPT_NUM_ELEMS},
    {"iters", optional_argument, nullptr, OPT_ITERS},
    {"reps", optional_argument, nullptr, OPT_REPS},
    {"warmup", optional_argument, nullptr, OPT_WARMUP},
    {"lat_iters", optional_argument, nullptr, OPT_LAT_ITERS},
    {"ce_streams", optional_argument, nullptr, OPT_CE_STREAMS},
    {"sm_blocks", optional_argument, nullptr, OPT_SM_BLOCKS},
    {"sm_threads", optional_argument, nullptr, OPT_SM_THREADS},
    {"timeout_s", optional_argument, nullptr, OPT_TIMEOUT_S},
    {"json", required_argument, nullptr, OPT_JSON},
    {"devices", optional_argument, nullptr, OPT_DEVICES},
    {nullptr, 0, nullptr, 0},
};

std::string at(int index) {
  return "(argument " + std::to_string(index);
}

}  // namespace

Options parse_options(int argc, char **argv) {
  Options o;
  for (int i = 0; i < argc; ++i) {
    if (i) o.command_line += ' ';
    o.command_line += argv[i];
  }
  cli::Reader reader(argc, argv, "", kOptions);
  cli::Item it;
  while (reader.next(&it)) {
    const int i = it.index;
    const std::string &arg = it.text, &flag = it.spelled;
    switch (it.kind) {
      case cli::Kind::Option:
        break;
      case cli::Kind::Stray:
        p2p_die(EXIT_USAGE, "unexpected argument '" + arg + "', options start with -- " + at(i) +
                                "; try --help)");
      case cli::Kind::Unknown:
        if (arg.compare(0, 2, "--") != 0)
          p2p_die(EXIT_USAGE, "unexpected argument '" + arg + "', options start with -- " + at(i) +
                                  "; try --help)");
        p2p_die(EXIT_USAGE, "unknown option '" + arg + "' " + at(i) + "; try --help)");
      case cli::Kind::ValueNotAllowed:
        p2p_die(EXIT_USAGE, flag + " takes no value " + at(i) + ")");
      case cli::Kind::ValueMissing:  // only --json needs a value that may be the next word
        p2p_die(EXIT_USAGE, "--json needs a file name " + at(i) + ")");
    }
    const std::string name = flag.substr(2);
    const std::string value = it.value ? it.value : "";
    if (it.val >= OPT_NUM_ELEMS && it.val != OPT_JSON && !it.value)  // a bare --iters
      p2p_die(EXIT_USAGE, flag + " needs a value, as in " + flag + "=N " + at(i) + ")");
    switch (it.val) {
      case OPT_HELP:
      case OPT_H:
        print_help(stdout);
        std::exit(0);
      case OPT_P2P_READ:
        o.p2p_read = true;
        break;
      case OPT_SM_COPY:
        o.sm_copy = true;
        break;
      case OPT_INJECT_FAULT:
        o.inject_fault = true;
        break;
      case OPT_NUM_ELEMS:
        o.num_elems = (size_t)parse_int(name, value, 1, 1ll << 34, i);
        o.num_elems_given = true;
        break;
      case OPT_ITERS:
        o.iters = (int)parse_int(name, value, 1, 1000, i);
        break;
      case OPT_REPS:
        o.reps = (int)parse_int(name, value, 1, 1000, i);
        break;
      case OPT_WARMUP:
        o.warmup = (int)parse_int(name, value, 0, 1000, i);
        break;
      case OPT_LAT_ITERS:
        o.lat_iters = (int)parse_int(name, value, 1, 1000, i);
        break;
      case OPT_CE_STREAMS:
        o.ce_streams = (int)parse_int(name, value, 1, 16, i);
        break;
      case OPT_SM_BLOCKS:
        o.sm_blocks = (int)parse_int(name, value, 0, 1 << 20, i);
        break;
      case OPT_SM_THREADS:
        o.sm_threads = (int)parse_int(name, value, 32, 1024, i);
        if (o.sm_threads % 32)
          p2p_die(EXIT_USAGE,
                  "--sm_threads must be a multiple of 32, got '" + value + "' " + at(i) + ")");
        break;
      case OPT_TIMEOUT_S: {
        char *end = nullptr;
        o.timeout_s = std::strtod(value.c_str(), &end);
        if (value.empty() || *end != '\0' || !(o.timeout_s > 0) || o.timeout_s > 3600)
          p2p_die(EXIT_USAGE, "--timeout_s needs seconds between 0 and 3600, got '" + value + "' " +
                                  at(i) + ")");
        break;
      }
      case OPT_JSON: {
        const int vi = it.value_index;  // the word after --json when it came apart
        if (value.empty()) p2p_die(EXIT_USAGE, "--json needs a file name " + at(vi) + ")");
        if (access(value.c_str(), F_OK) == 0)
          p2p_die(EXIT_USAGE, "--json file " + value +
                                  " already exists; results are never "
                                  "overwritten, name a new file " +
                                  at(vi) + ")");
        o.json_path = value;
        break;
      }
      case OPT_DEVICES: {
        std::set<int> seen;
        o.devices.clear();  // a repeated --devices replaces the list, like every other option
        size_t pos = 0;
        while (true) {
          size_t comma = value.find(',', pos);
          std::string item =
              value.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
          int d = (int)parse_int(name, item, 0, 1023, i);
          if (!seen.insert(d).second)
            p2p_die(EXIT_USAGE, "--devices lists device " + item + " twice " + at(i) + ")");
          o.devices.push_back(d);
          if (comma == std::string::npos) break;
          pos = comma + 1;
        }
        break;
      }
    }
  }
  if ((size_t)o.lat_iters > o.num_elems)
    p2p_die(EXIT_USAGE, "--lat_iters (" + std::to_string(o.lat_iters) +
                            ") must not exceed --numElems (" + std::to_string(o.num_elems) + ")");
  return o;
}
