// Host-only harness for tests/test_cuda_outputs.py: links nccl_bench's options.cpp,
// collectives.cpp and report.cpp (no CUDA or NCCL call, no GPU), parses the command line as
// the real program does and writes made-up rows through the real table and JSON writers:
//   - any collective but sendrecv: two rows whose numbers include NaN and infinities;
//   - sendrecv (no in-place cells): two rows of busbw 10 and 20 GB/s, the in-place cells
//     left unmeasured, for the average of the footer.
// -J FILE: the JSON goes to the first free name of FILE, FILE.0, ... as in the program.
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "errors.h"
#include "json_writer.h"
#include "options.h"
#include "report.h"

std::string where_text(const char *file, int line) {
  return std::string(file) + ":" + std::to_string(line);
}

int main(int argc, char **argv) {
  try {
    const Options opt = parse_options(argc, argv);
    std::printf("# inject_fault=%d\n", opt.inject_fault ? 1 : 0);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    RunInfo info;
    info.collective = opt.collective->name;
    info.in_place = opt.collective->in_place;
    info.nranks = 2;
    info.factor = opt.collective->busbw_factor(2);
    info.check = opt.check;
    info.iters = opt.iters;
    info.transport_note = "harness";
    info.args.assign(argv, argv + argc);
    info.devices = {DeviceInfo{0, 0, "GPU A", "0000:18:00", -1, ""}};
    std::vector<Row> rows(2);
    for (Row &r : rows) {
      r.type = "float";
      r.redop = opt.collective->reduces ? "sum" : "none";
    }
    rows[0].bytes = 8;
    rows[0].count = 2;
    rows[1].bytes = 16;
    rows[1].count = 4;
    const bool checked = opt.check > 0;
    if (opt.collective->in_place) {
      rows[0].out_of_place = {true, checked, 0.0, inf, inf, 0, nan};
      rows[0].in_place = {true, checked, 1.5, 2.5, 3.5, 0, 0.25};
      rows[1].out_of_place = {true, checked, nan, nan, -inf, 0, 1.0};
      rows[1].in_place = {true, checked, 2.0, 3.0, 4.0, 0, 0.5};
    } else {
      rows[0].out_of_place = {true, checked, 1.0, 10.0, 10.0, 0, 0.5};
      rows[1].out_of_place = {true, checked, 1.0, 20.0, 20.0, 0, 0.5};
    }
    std::string json_path;
    if (!opt.json_path.empty()) {
      json_path = json::create_first_free(opt.json_path);
      if (json_path.empty()) throw RuntimeFailure("cannot create " + opt.json_path);
    }
    info.json_path = json_path;
    print_header(info);
    for (const Row &row : rows) print_row(info, row);
    const double avg = print_footer(info, rows, 0);
    if (!json_path.empty() &&
        json::fill_created_file(json_path, json_document(info, rows, avg, 0, "end")) !=
            json::WriteError::None)
      throw RuntimeFailure("cannot write " + json_path);
    return 0;
  } catch (const UsageError &e) {
    std::fprintf(stderr, "nccl_bench: error: %s\n", e.what());
    return 2;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "nccl_bench: error: %s\n", e.what());
    return 1;
  }
}
