#include "report.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>

#include "check.h"
#include "json_writer.h"

namespace {

std::string human_bytes(std::size_t bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int unit = 0;
    std::size_t value = bytes;
    while (unit < 4 && value >= 1024 && value % 1024 == 0) {
        value /= 1024;
        ++unit;
    }
    return std::to_string(value) + " " + units[unit];
}

// A table cell: the number, or N/A where there is none (NaN, infinity), as nccl-tests does.
void print_cell(const char* format, int width, double v) {
    if (std::isfinite(v))
        std::printf(format, v);
    else
        std::printf(" %*s", width, "N/A");
}

void print_measurement(const Measurement& m) {
    std::printf(" ");
    print_cell(" %9.2f", 9, m.time_us);
    print_cell(" %7.2f", 7, m.algbw);
    print_cell(" %7.2f", 7, m.busbw);
    std::printf(" %6llu", m.wrong);
}

// Times and bandwidths with six significant digits.
std::string json_number(double v) { return json::number(v, "%.6g"); }

std::string json_measurement(const Measurement& m) {
    if (!m.valid) return "null";
    return "{\"time_us\": " + json_number(m.time_us) + ", \"algbw_gbs\": " + json_number(m.algbw) +
           ", \"busbw_gbs\": " + json_number(m.busbw) + ", \"wrong\": " + std::to_string(m.wrong) +
           ", \"host_issue_us\": " + json_number(m.host_us) + "}";
}

}  // namespace

void print_header(const RunInfo& info) {
    // The "# Collective:", "NCCL version", "nGpus ... iters:" and "# Rank ..."
    // lines use the words gputopo's nccl-tests parser reads as metadata.
    if (info.per_rank) {
        // nGpus is per process, as nccl-tests prints it under mpirun with -g 1; the ranks are
        // the "Rank" lines below.
        std::printf("# nccl_bench (gputopo course), one process per GPU: %d rank%s started by %s "
                    "(ncclCommInitRank)\n", info.nranks, info.nranks == 1 ? "" : "s", info.launcher.c_str());
    } else {
        std::printf("# nccl_bench (gputopo course), one process driving %d GPUs (ncclCommInitAll + group calls)\n",
                    info.nranks);
    }
    std::printf("# Collective: %s\n", info.op.c_str());
    std::printf("# nGpus %d  minBytes %zu  maxBytes %zu  step: x%zu  datatype: %s  warmup iters: %d  iters: %d  validation: 1\n",
                info.per_rank ? 1 : info.nranks, info.min_bytes, info.max_bytes, info.step, info.type.c_str(),
                info.warmup, info.iters);
    std::printf("# sizes %s to %s; time: CUDA events around %d back-to-back iterations, divided by %d (%s)\n",
                human_bytes(info.min_bytes).c_str(), human_bytes(info.max_bytes).c_str(), info.iters,
                info.iters, info.per_rank ? "slowest rank: ncclAllReduce with ncclMax over the ranks' times"
                                          : "slowest GPU");
    if (info.per_rank) {
        std::printf("# #wrong: summed over the ranks (ncclAllReduce with ncclSum); every rank checks its own output\n");
    }
    if (info.cuda_graph) {
        std::printf("# CUDA graph mode: the %d iterations are captured in one graph per GPU and launched at once,\n"
                    "# so the host's launch cost is not in the times (nccl-tests' default launches each iteration)\n",
                    info.iters);
    }
    std::printf("# NCCL version %s (library in use; built against nccl.h %s); CUDA driver %s, runtime %s\n",
                info.nccl_version.c_str(), info.nccl_header.c_str(), info.cuda_driver.c_str(),
                info.cuda_runtime.c_str());
    std::printf("# busbw = algbw x %.4g (factor for %s on %d ranks); GB = 10^9 bytes\n", info.factor,
                info.op.c_str(), info.nranks);
    if (info.root >= 0) std::printf("# root rank: %d\n", info.root);
    std::printf("#\n# Using devices\n");
    for (const DeviceInfo& d : info.devices) {
        std::printf("#   Rank %2d Pid %6ld on %s device %2d [%s] %s\n", d.rank, d.pid >= 0 ? d.pid : info.pid,
                    (d.host.empty() ? info.host : d.host).c_str(), d.device, d.pci_bus_id.c_str(), d.name.c_str());
    }
    std::printf("#\n# NCCL environment:");
    if (info.environment.empty()) std::printf(" (no NCCL_* variable set)");
    for (const std::string& e : info.environment) std::printf(" %s", e.c_str());
    std::printf("\n# Transports: %s\n",
                info.transport_note.empty()
                    ? "from NCCL's INFO log, listed after the table (connections are made when first needed)"
                    : info.transport_note.c_str());
    std::printf("#\n");
    // Column headers built with the widths of print_row, so they line up.
    const int groups = info.in_place ? 2 : 1;
    std::printf("#%11s  %12s  %8s  %6s  %-34s%s\n", "", "", "", "", "          out-of-place",
                info.in_place ? "           in-place" : "");
    std::printf("#%11s  %12s  %8s  %6s", "size", "count", "type", "redop");
    for (int i = 0; i < groups; ++i) std::printf("  %9s %7s %7s %6s", "time", "algbw", "busbw", "#wrong");
    std::printf("\n#%11s  %12s  %8s  %6s", "(B)", "(elements)", "", "");
    for (int i = 0; i < groups; ++i) {
        std::printf("  %9s %7s %7s", "(us)", "(GB/s)", "(GB/s)");
        if (i + 1 < groups) std::printf(" %6s", "");
    }
    std::printf("\n");
    std::fflush(stdout);
}

void print_row(const RunInfo& info, const Row& row) {
    std::printf("%12zu  %12zu  %8s  %6s", row.bytes, row.count, info.type.c_str(), info.redop.c_str());
    print_measurement(row.out_of_place);
    if (info.in_place) print_measurement(row.in_place);
    std::printf("\n");
    std::fflush(stdout);
}

double print_footer(const RunInfo& info, const std::vector<Row>& rows, unsigned long long wrong) {
    double sum = 0.0;
    int n = 0;
    for (const Row& r : rows) {
        for (const Measurement* m : {&r.out_of_place, &r.in_place}) {
            if (m->valid && std::isfinite(m->busbw)) {  // a cell without a number is left out
                sum += m->busbw;
                ++n;
            }
        }
    }
    const double avg = n > 0 ? sum / n : 0.0;
    if (info.transport_note.empty()) {
        std::printf(info.per_rank ? "# Transports NCCL reported to rank 0 (its own connections, from its INFO log):"
                                  : "# Transports NCCL reported (connections, from its INFO log):");
        if (info.transports.empty()) std::printf(" none reported");
        for (const auto& t : info.transports) std::printf(" %s: %d;", t.first.c_str(), t.second);
        std::printf("\n");
        for (const std::string& line : info.nccl_env_lines) std::printf("#   NCCL: %s\n", line.c_str());
    }
    std::printf("# Wrong elements (all rows, both placements): %llu %s\n", wrong, wrong == 0 ? "OK" : "FAILED");
    std::printf("# Avg bus bandwidth    : %.4f\n", avg);
    std::printf("#\n");
    std::fflush(stdout);
    return avg;
}

void write_json(const std::string& path, const RunInfo& info, const std::vector<Row>& rows,
                double avg_busbw, unsigned long long wrong) {
    char stamp[64];
    std::time_t now = std::time(nullptr);
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));

    std::string s = "{\n";
    s += "  \"tool\": \"nccl_bench\",\n";
    s += "  \"date\": " + json::quote(stamp) + ",\n";
    s += "  \"op\": " + json::quote(info.op) + ",\n";
    s += "  \"datatype\": " + json::quote(info.type) + ",\n";
    s += "  \"redop\": " + json::quote(info.redop) + ",\n";
    s += "  \"root\": " + std::to_string(info.root) + ",\n";
    s += "  \"cuda_graph\": " + json::boolean(info.cuda_graph) + ",\n";
    s += "  \"in_place_measured\": " + json::boolean(info.in_place) + ",\n";
    s += "  \"nranks\": " + std::to_string(info.nranks) + ",\n";
    if (info.per_rank) {  // absent for one process, whose JSON stays as it was
        s += "  \"one_process_per_gpu\": true,\n";
        s += "  \"launcher\": " + json::quote(info.launcher) + ",\n";
        s += "  \"time_over_ranks\": \"max\",\n";
    }
    s += "  \"busbw_factor\": " + json_number(info.factor) + ",\n";
    s += "  \"warmup_iters\": " + std::to_string(info.warmup) + ",\n";
    s += "  \"iters\": " + std::to_string(info.iters) + ",\n";
    s += "  \"nccl_version\": " + json::quote(info.nccl_version) + ",\n";
    s += "  \"nccl_header_version\": " + json::quote(info.nccl_header) + ",\n";
    s += "  \"cuda_driver\": " + json::quote(info.cuda_driver) + ",\n";
    s += "  \"cuda_runtime\": " + json::quote(info.cuda_runtime) + ",\n";
    s += "  \"devices\": [";
    for (std::size_t i = 0; i < info.devices.size(); ++i) {
        const DeviceInfo& d = info.devices[i];
        s += std::string(i ? ", " : "") + "{\"rank\": " + std::to_string(d.rank) +
             ", \"device\": " + std::to_string(d.device) + ", \"name\": " + json::quote(d.name) +
             ", \"pci_bus_id\": " + json::quote(d.pci_bus_id);
        if (info.per_rank) s += ", \"host\": " + json::quote(d.host) + ", \"pid\": " + std::to_string(d.pid);
        s += "}";
    }
    s += "],\n  \"environment\": {";
    for (std::size_t i = 0; i < info.environment.size(); ++i) {
        const std::string& e = info.environment[i];
        std::size_t eq = e.find('=');
        s += std::string(i ? ", " : "") + json::quote(e.substr(0, eq)) + ": " +
             json::quote(eq == std::string::npos ? "" : e.substr(eq + 1));
    }
    s += "},\n  \"transports\": ";
    if (info.transport_note.empty()) {
        s += "{";
        for (std::size_t i = 0; i < info.transports.size(); ++i) {
            s += std::string(i ? ", " : "") + json::quote(info.transports[i].first) + ": " +
                 std::to_string(info.transports[i].second);
        }
        s += "},\n  \"transport_note\": null,\n";
    } else {
        s += "null,\n  \"transport_note\": " + json::quote(info.transport_note) + ",\n";
    }
    s += "  \"rows\": [\n";
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        s += "    {\"size\": " + std::to_string(r.bytes) + ", \"count\": " + std::to_string(r.count) +
             ", \"type\": " + json::quote(info.type) + ", \"redop\": " + json::quote(info.redop) +
             ", \"out_of_place\": " + json_measurement(r.out_of_place) +
             ", \"in_place\": " + json_measurement(r.in_place) + "}";
        s += i + 1 < rows.size() ? ",\n" : "\n";
    }
    s += "  ],\n";
    s += "  \"avg_busbw_gbs\": " + json_number(avg_busbw) + ",\n";
    s += "  \"wrong_total\": " + std::to_string(wrong) + "\n}\n";
    // A file that appeared while we measured is refused too, never replaced.
    switch (json::create_new_file(path, s)) {
        case json::WriteError::None:
            return;
        case json::WriteError::NotCreated:
            throw RuntimeFailure("cannot create '" + path + "': " + std::strerror(errno) + " (--json)");
        case json::WriteError::NotWritten:
            break;
    }
    throw RuntimeFailure("cannot write '" + path + "' (--json)");
}
