// options.cpp - the command line of host_copy_bench. A flag that nccl-tests also has means
// what it means there (-b -e -f -n -w -T -J, read in nccl-tests 2.19.6 src/common.cu).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

#include "cli.h"
#include "host_copy.h"

void hcb_die(int code, const std::string &what) {
  std::fprintf(stderr, "%s: error: %s\n", HCB_PROG, what.c_str());
  std::exit(code);
}

void print_help(FILE *out) {
  std::fprintf(out,
      "Usage: " HCB_PROG " [options]\n"
      "Copies between host memory and one GPU, host to GPU (h2d) and GPU to host (d2h),\n"
      "from pinned (page-locked) and pageable host memory, and checks every copy's bytes.\n"
      "Two times per row:\n"
      "  per-copy time on the GPU  copies queued behind a gate kernel, released at once,\n"
      "                            CUDA events around them, divided by their number: what\n"
      "                            one copy costs the copy engine, without the host's cost\n"
      "                            of issuing it (N/A for pageable memory: the driver makes\n"
      "                            the host wait for those copies, so none can be queued)\n"
      "  latency of one copy       host clock around one cudaMemcpyAsync and the\n"
      "                            cudaStreamSynchronize that waits for it: start to arrival\n"
      "\n"
      "Options (the first seven as in nccl-tests):\n"
      "  -b, --minbytes SIZE     smallest copy; K, M, G = 2^10, 2^20, 2^30 (default 8)\n"
      "  -e, --maxbytes SIZE     largest copy (default 1G)\n"
      "  -f, --stepfactor N      multiply the size by N from one row to the next (default 2)\n"
      "  -n, --iters N           copies per gated batch, each into its own buffer; fewer\n"
      "                          where N of them would exceed 1 GiB (default 20)\n"
      "  -w, --warmup_iters N    untimed copies before each row (default 5)\n"
      "  -T, --timeout S         the gate gives up after S seconds (default 10)\n"
      "  -J, --output_file FILE  also write every row and sample as JSON; FILE must not\n"
      "                          exist (results are never overwritten)\n"
      "      --device N          CUDA device ordinal (default 0; with\n"
      "                          CUDA_DEVICE_ORDER=PCI_BUS_ID, as nvidia-smi numbers GPUs)\n"
      "      --memory KIND       pinned, pageable or both (default both)\n"
      "      --direction DIR     h2d, d2h or both (default both)\n"
      "      --batches N         gated batches per row, and rounds of one-copy timings;\n"
      "                          the median is printed (default 5)\n"
      "      --inject-fault      test only: flip one bit of one copied byte before the first\n"
      "                          check, which must then fail (exit 1, naming the byte)\n"
      "  -h, --help              print this help and exit\n"
      "\n"
      "Host memory comes from where the process runs: start it under numactl to choose the\n"
      "NUMA node (numactl --cpunodebind=N --membind=N " HCB_PROG "); it pins no thread itself.\n"
      "GB/s means 10^9 bytes per second. Exit status: 0 every copy right; 1 a wrong byte or a\n"
      "CUDA failure; 2 bad arguments or no GPU.\n");
}

namespace {

enum {
  OPT_MIN = 'b', OPT_MAX = 'e', OPT_STEP = 'f', OPT_ITERS = 'n', OPT_WARMUP = 'w',
  OPT_TIMEOUT = 'T', OPT_JSON = 'J', OPT_HELP = 'h',
  OPT_DEVICE = 256, OPT_MEMORY, OPT_DIRECTION, OPT_BATCHES, OPT_INJECT_FAULT
};

const option kOptions[] = {
    {"minbytes", required_argument, nullptr, OPT_MIN},
    {"maxbytes", required_argument, nullptr, OPT_MAX},
    {"stepfactor", required_argument, nullptr, OPT_STEP},
    {"iters", required_argument, nullptr, OPT_ITERS},
    {"warmup_iters", required_argument, nullptr, OPT_WARMUP},
    {"timeout", required_argument, nullptr, OPT_TIMEOUT},
    {"output_file", required_argument, nullptr, OPT_JSON},
    {"help", no_argument, nullptr, OPT_HELP},
    {"device", required_argument, nullptr, OPT_DEVICE},
    {"memory", required_argument, nullptr, OPT_MEMORY},
    {"direction", required_argument, nullptr, OPT_DIRECTION},
    {"batches", required_argument, nullptr, OPT_BATCHES},
    {"inject-fault", no_argument, nullptr, OPT_INJECT_FAULT},
    {nullptr, 0, nullptr, 0},
};

std::string at(int index) { return " (argument " + std::to_string(index) + ")"; }

long long parse_int(const std::string &flag, const std::string &value, long long lo,
                    long long hi, int argi) {
  errno = 0;
  char *end = nullptr;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || errno != 0 || *end != '\0' || v < lo || v > hi)
    hcb_die(EXIT_USAGE, flag + " needs an integer from " + std::to_string(lo) + " to " +
                            std::to_string(hi) + ", got '" + value + "'" + at(argi));
  return v;
}

// "8", "64K", "256M", "1G" (powers of 1024, as nccl-tests reads them); 1 byte to 16 GiB.
size_t parse_size(const std::string &flag, const std::string &value, int argi) {
  std::string digits = value;
  size_t unit = 1;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 'K': case 'k': unit = 1ull << 10; break;
      case 'M': case 'm': unit = 1ull << 20; break;
      case 'G': case 'g': unit = 1ull << 30; break;
      default: break;
    }
    if (unit != 1) digits.pop_back();
  }
  bool ok = !digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos &&
            digits.size() <= 11;
  const unsigned long long v = ok ? std::strtoull(digits.c_str(), nullptr, 10) * unit : 0;
  if (!ok || v < 1 || v > (16ull << 30))
    hcb_die(EXIT_USAGE, flag + " needs a size from 1 to 16G such as 8, 64K, 256M or 1G, got '" +
                            value + "'" + at(argi));
  return (size_t)v;
}

}  // namespace

int copies_for(const Options &opt, size_t bytes) {
  const size_t fit = BATCH_BYTES / bytes;
  const size_t n = fit < (size_t)opt.iters ? fit : (size_t)opt.iters;
  return n < 1 ? 1 : (int)n;
}

Options parse_options(int argc, char **argv) {
  Options o;
  for (int i = 0; i < argc; ++i) o.command_line += (i ? " " : "") + std::string(argv[i]);
  cli::Reader reader(argc, argv, "b:e:f:n:w:T:J:h", kOptions);
  cli::Item it;
  while (reader.next(&it)) {
    const int i = it.index;
    const std::string &flag = it.spelled;
    switch (it.kind) {
      case cli::Kind::Option:
        break;
      case cli::Kind::Stray:
        hcb_die(EXIT_USAGE, "unexpected argument '" + it.text + "'" + at(i) + "; try --help");
      case cli::Kind::Unknown:
        hcb_die(EXIT_USAGE, "unknown option '" + it.text + "'" + at(i) + "; try --help");
      case cli::Kind::ValueNotAllowed:
        hcb_die(EXIT_USAGE, flag + " takes no value" + at(i));
      case cli::Kind::ValueMissing:
        hcb_die(EXIT_USAGE, flag + " needs a value" + at(i));
    }
    const std::string value = it.value ? it.value : "";
    const int vi = it.value_index;
    switch (it.val) {
      case OPT_HELP:
        print_help(stdout);
        std::exit(0);
      case OPT_MIN: o.min_bytes = parse_size(flag, value, vi); break;
      case OPT_MAX: o.max_bytes = parse_size(flag, value, vi); break;
      case OPT_STEP: o.step_factor = (size_t)parse_int(flag, value, 2, 1024, vi); break;
      case OPT_ITERS: o.iters = (int)parse_int(flag, value, 1, 10000, vi); break;
      case OPT_WARMUP: o.warmup = (int)parse_int(flag, value, 0, 10000, vi); break;
      case OPT_BATCHES: o.batches = (int)parse_int(flag, value, 1, 1000, vi); break;
      case OPT_DEVICE: o.device = (int)parse_int(flag, value, 0, 1023, vi); break;
      case OPT_INJECT_FAULT: o.inject_fault = true; break;
      case OPT_TIMEOUT: {
        char *end = nullptr;
        o.timeout_s = std::strtod(value.c_str(), &end);
        if (value.empty() || *end != '\0' || !(o.timeout_s > 0) || o.timeout_s > 3600)
          hcb_die(EXIT_USAGE, flag + " needs seconds above 0 and up to 3600, got '" + value +
                                  "'" + at(vi));
        break;
      }
      case OPT_MEMORY:
        if (value != "pinned" && value != "pageable" && value != "both")
          hcb_die(EXIT_USAGE, flag + " needs pinned, pageable or both, got '" + value + "'" +
                                  at(vi));
        o.pinned = value != "pageable";
        o.pageable = value != "pinned";
        break;
      case OPT_DIRECTION:
        if (value != "h2d" && value != "d2h" && value != "both")
          hcb_die(EXIT_USAGE, flag + " needs h2d, d2h or both, got '" + value + "'" + at(vi));
        o.h2d = value != "d2h";
        o.d2h = value != "h2d";
        break;
      case OPT_JSON:
        if (value.empty()) hcb_die(EXIT_USAGE, flag + " needs a file name" + at(vi));
        if (access(value.c_str(), F_OK) == 0)
          hcb_die(EXIT_USAGE, "output file " + value + " already exists; results are never "
                                  "overwritten, name a new file" + at(vi));
        o.json_path = value;
        break;
      default:
        hcb_die(EXIT_USAGE, "unknown option '" + it.text + "'" + at(i) + "; try --help");
    }
  }
  if (o.min_bytes > o.max_bytes)
    hcb_die(EXIT_USAGE, "--minbytes (" + std::to_string(o.min_bytes) + ") is larger than "
                            "--maxbytes (" + std::to_string(o.max_bytes) + ")");
  return o;
}
