// Host-only harness for tests/test_cuda_outputs.py: links nccl_bench's options.cpp and
// report.cpp (no CUDA or NCCL call, no GPU), parses the command line as the real program does
// and writes rows whose numbers include NaN and infinities through the real table and JSON
// writers.
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "check.h"
#include "options.h"
#include "report.h"

std::string where_text(const char* file, int line) { return std::string(file) + ":" + std::to_string(line); }

int main(int argc, char** argv) {
    try {
        Options opt = parse_options(argc, argv);
        std::printf("# inject_fault=%d\n", opt.inject_fault ? 1 : 0);
        const double nan = std::numeric_limits<double>::quiet_NaN();
        const double inf = std::numeric_limits<double>::infinity();
        RunInfo info;
        info.op = "all_reduce";
        info.type = "float";
        info.redop = "sum";
        info.nranks = 2;
        info.factor = 1.0;
        info.transport_note = "harness";
        std::vector<Row> rows(2);
        rows[0].bytes = 8;
        rows[0].count = 2;
        rows[0].out_of_place = {true, 0.0, inf, inf, 0, nan};
        rows[0].in_place = {true, 1.5, 2.5, 3.5, 0, 0.25};
        rows[1].bytes = 16;
        rows[1].count = 4;
        rows[1].out_of_place = {true, nan, nan, -inf, 0, 1.0};
        rows[1].in_place = {true, 2.0, 3.0, 4.0, 0, 0.5};
        print_header(info);
        for (const Row& row : rows) print_row(info, row);
        double avg = print_footer(info, rows, 0);
        if (!opt.json_path.empty()) write_json(opt.json_path, info, rows, nan + avg, 0);
        return 0;
    } catch (const UsageError& e) {
        std::fprintf(stderr, "nccl_bench: error: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "nccl_bench: error: %s\n", e.what());
        return 1;
    }
}
