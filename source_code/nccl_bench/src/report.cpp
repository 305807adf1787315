#include "report.h"

#include <cmath>
#include <ctime>

#include "json_writer.h"

namespace {

// A number in `width` characters: two decimals if they fit, else one, else none, else
// in exponent form; N/A where there is no number (NaN, infinity).
std::string cell(double v, int width) {
  char text[64];
  if (!std::isfinite(v)) {
    std::snprintf(text, sizeof text, "%*s", width, "N/A");
    return text;
  }
  for (int decimals = 2; decimals >= 0; --decimals) {
    std::snprintf(text, sizeof text, "%*.*f", width, decimals, v);
    if (static_cast<int>(std::string(text).size()) <= width) return text;
  }
  std::snprintf(text, sizeof text, "%*.*e", width, width >= 7 ? 1 : 0, v);
  return text;
}

// One timed group of a row: time (7), algbw (6), busbw (6), #wrong (6), as nccl-tests.
void print_measurement(const Measurement &m) {
  std::printf("  %s  %s  %s", cell(m.time_us, 7).c_str(), cell(m.algbw, 6).c_str(),
              cell(m.busbw, 6).c_str());
  if (m.checked)
    std::printf("  %6llu", m.wrong);
  else
    std::printf("  %6s", "N/A");
}

const char *average_name(int average) {
  switch (average) {
    case 0:
      return "rank 0's";
    case 2:
      return "the shortest";
    case 3:
      return "the longest";
    default:
      return "the mean";
  }
}

// nccl-tests writes numbers with "%lf" and its booleans as the strings "true" and "false";
// this file does the same so that one reader takes both. A number that is not finite is
// null (JSON has no word for it; nccl-tests writes the string "nan").
std::string num(double v) {
  return json::number(v, "%lf");
}
std::string flag(bool b) {
  return json::quote(b ? "true" : "false");
}
std::string integer(long long v) {
  return std::to_string(v);
}

std::string json_measurement(const Measurement &m) {
  if (!m.valid) return "null";
  return "{\"time\": " + num(m.time_us) + ", \"alg_bw\": " + num(m.algbw) +
         ", \"bus_bw\": " + num(m.busbw) +
         ", \"nwrong\": " + (m.checked ? num(static_cast<double>(m.wrong)) : std::string("null")) +
         "}";
}

std::string string_list(const std::vector<std::string> &items) {
  std::string s = "[";
  for (std::size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + json::quote(items[i]);
  return s + "]";
}

}  // namespace

std::string now_text() {
  char text[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  return text;
}

void print_header(const RunInfo &info) {
  // "# Collective:", "nGpus ... iters:", "NCCL version", "# Rank ..." and the table are the
  // words gputopo's nccl-tests parser reads.
  if (!info.json_path.empty()) std::printf("# Writing JSON output to %s\n", info.json_path.c_str());
  if (info.per_rank)
    std::printf(
        "# nccl_bench (gputopo course), one process per GPU: %d rank%s started by %s "
        "(ncclCommInitRank)\n",
        info.nranks, info.nranks == 1 ? "" : "s", info.launcher.c_str());
  else
    std::printf(
        "# nccl_bench (gputopo course), one process driving %d GPUs "
        "(ncclCommInitAll + group calls)\n",
        info.nranks);
  std::printf("# Collective: %s\n", info.collective.c_str());
  // nGpus is per process, as nccl-tests prints it (1 under mpirun -g 1).
  std::printf(
      "# nThread 1 nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
      "iters: %d agg iters: 1 validation: %d graph: %d\n",
      info.per_rank ? 1 : info.nranks, info.min_bytes, info.max_bytes, info.step,
      info.linear_steps ? "bytes" : "factor", info.warmup, info.iters, info.check,
      info.graph_launches);
  std::printf("# time: CUDA events around the %d timed iterations on each GPU, divided by %d;",
              info.iters, info.iters);
  if (info.per_rank)
    std::printf(" over the ranks %s (-a %d)\n", average_name(info.average), info.average);
  else
    std::printf(" the slowest GPU's\n");
  if (info.per_rank)
    std::printf(
        "# #wrong: summed over the ranks (ncclAllReduce with ncclSum); every rank "
        "checks its own output\n");
  if (info.graph_launches > 0)
    std::printf(
        "# CUDA graph (-G %d): the %d iterations are captured in one graph per GPU, "
        "launched %d times; the host's launch cost is not in the times\n",
        info.graph_launches, info.iters, info.graph_launches);
  if (info.blocking == 1 || info.blocking == 2)
    std::printf("# Blocking (-z %d): the host waits for each iteration%s before the next\n",
                info.blocking, info.blocking == 1 ? ", then a barrier," : "");
  if (info.blocking == 3)
    std::printf(
        "# Blocking (-z 3): the host waits for each iteration, then a barrier; the "
        "time is the iterations' own, without the barrier\n");
  if (info.check == 0) std::printf("# Data check off (-c 0): #wrong is N/A\n");
  std::printf(
      "# NCCL version %s (library in use; built against nccl.h %s); CUDA driver %s, "
      "runtime %s\n",
      info.nccl_version.c_str(), info.nccl_header.c_str(), info.cuda_driver.c_str(),
      info.cuda_runtime.c_str());
  std::printf("# busbw = algbw x %.4g (factor for %s on %d ranks); GB = 10^9 bytes\n", info.factor,
              info.collective.c_str(), info.nranks);
  std::printf("#\n# Using devices\n");
  for (const DeviceInfo &d : info.devices)
    std::printf("#  Rank %2d Group  0 Pid %6ld on %10s device %2d [%s] %s\n", d.rank,
                d.pid >= 0 ? d.pid : info.pid, (d.host.empty() ? info.host : d.host).c_str(),
                d.device, d.pci_bus_id.c_str(), d.name.c_str());
  std::printf("#\n# NCCL environment:");
  int shown = 0;
  for (const std::string &e : info.environment)
    if (e.compare(0, 5, "NCCL_") == 0 && ++shown) std::printf(" %s", e.c_str());
  if (shown == 0) std::printf(" (no NCCL_* variable set)");
  std::printf("\n# Transports: %s\n", info.transport_note.empty()
                                          ? "from NCCL's INFO log, listed after the table "
                                            "(connections are made when first needed)"
                                          : info.transport_note.c_str());
  std::printf("#\n");
  // Column headers with the widths of print_row, so they line up.
  std::printf("# %10s  %12s  %8s  %6s  %6s  %-33s%s\n", "", "", "", "", "",
              "          out-of-place", info.in_place ? "              in-place" : "");
  const int groups = info.in_place ? 2 : 1;
  std::printf("# %10s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
  for (int i = 0; i < groups; ++i)
    std::printf("  %7s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
  std::printf("\n# %10s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
  for (int i = 0; i < groups; ++i)
    std::printf("  %7s  %6s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "");
  std::printf("\n");
  std::fflush(stdout);
}

void print_row(const RunInfo &info, const Row &row) {
  std::printf("%12zu  %12zu  %8s  %6s  %6d", row.bytes, row.count, row.type.c_str(),
              row.redop.c_str(), row.root);
  print_measurement(row.out_of_place);
  if (info.in_place) print_measurement(row.in_place);
  std::printf("\n");
  std::fflush(stdout);
}

double average_busbw(const std::vector<Row> &rows) {
  double sum = 0.0;
  int n = 0;
  for (const Row &r : rows)
    for (const Measurement *m : {&r.out_of_place, &r.in_place})
      if (m->valid && std::isfinite(m->busbw)) {  // no cell, or no number: left out
        sum += m->busbw;
        ++n;
      }
  return n > 0 ? sum / n : 0.0;
}

double print_footer(const RunInfo &info, const std::vector<Row> &rows, unsigned long long wrong) {
  const double avg = average_busbw(rows);
  if (info.transport_note.empty()) {
    std::printf(info.per_rank ? "# Transports NCCL reported to rank 0 (its own connections, "
                                "from its INFO log):"
                              : "# Transports NCCL reported (connections, from its INFO log):");
    if (info.transports.empty()) std::printf(" none reported");
    for (const auto &t : info.transports) std::printf(" %s: %d;", t.first.c_str(), t.second);
    std::printf("\n");
    for (const std::string &line : info.nccl_env_lines) std::printf("#   NCCL: %s\n", line.c_str());
  }
  if (info.check == 0)
    std::printf("# Wrong elements: not checked (-c 0)\n");
  else
    std::printf("# Wrong elements (all rows, both placements): %llu %s\n", wrong,
                wrong == 0 ? "OK" : "FAILED");
  std::printf("# Avg bus bandwidth    : %.4f\n", avg);
  std::printf("#\n");
  std::fflush(stdout);
  return avg;
}

std::string json_document(const RunInfo &info, const std::vector<Row> &rows, double avg_busbw,
                          unsigned long long wrong, const std::string &end_time) {
  int failed_cells = 0;  // nccl-tests' "out of bounds" count: checks that found a wrong element
  for (const Row &r : rows)
    for (const Measurement *m : {&r.out_of_place, &r.in_place})
      if (m->valid && m->wrong != 0) ++failed_cells;

  std::string s = "{\n";
  s += "  \"version\": 3,\n";
  s += "  \"start_time\": " + json::quote(info.start_time) + ",\n";
  s += "  \"args\": " + string_list(info.args) + ",\n";
  s += "  \"env\": " + string_list(info.environment) + ",\n";
  s += "  \"nccl_version\": " + integer(info.nccl_version_code) + ",\n";
  s += "  \"config\": {\"nthreads\": 1, \"ngpus\": " + integer(info.per_rank ? 1 : info.nranks) +
       ", \"minimum_bytes\": " + integer(static_cast<long long>(info.min_bytes)) +
       ", \"maximum_bytes\": " + integer(static_cast<long long>(info.max_bytes)) + ", " +
       (info.linear_steps ? "\"step_bytes\": " : "\"step_factor\": ") +
       integer(static_cast<long long>(info.step)) + ", \"warmup_iters\": " + integer(info.warmup) +
       ", \"iterations\": " + integer(info.iters) +
       ", \"aggregated_iterations\": 1, \"validation\": " + integer(info.check) +
       ", \"graph\": " + integer(info.graph_launches) +
       ", \"blocking_collectives\": " + flag(info.blocking != 0) +
       ", \"per_iter_timing\": " + flag(false) + ", \"per_iter_skip\": 0" +
       ", \"parallel_init\": " + flag(false) + ",\n    \"devices\": [";
  for (std::size_t i = 0; i < info.devices.size(); ++i) {
    const DeviceInfo &d = info.devices[i];
    s += std::string(i ? ",\n      " : "\n      ") + "{\"rank\": " + integer(d.rank) +
         ", \"group\": 0, \"pid\": " + integer(d.pid >= 0 ? d.pid : info.pid) +
         ", \"hostname\": " + json::quote(d.host.empty() ? info.host : d.host) +
         ", \"device\": " + integer(d.device) + ", \"device_hex\": " + json::quote(d.pci_bus_id) +
         ", \"device_info\": " + json::quote(d.name) + "}";
  }
  s += "]},\n  \"results\": [";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row &r = rows[i];
    char root[16];
    std::snprintf(root, sizeof root, "%6d", r.root);  // a string, as nccl-tests writes it
    s += std::string(i ? ",\n    " : "\n    ") +
         "{\"size\": " + integer(static_cast<long long>(r.bytes)) +
         ", \"count\": " + integer(static_cast<long long>(r.count)) +
         ", \"type\": " + json::quote(r.type) + ", \"redop\": " + json::quote(r.redop) +
         ", \"root\": " + json::quote(root) +
         ", \"out_of_place\": " + json_measurement(r.out_of_place) +
         ", \"in_place\": " + json_measurement(r.in_place) +
         ", \"actual_iterations\": " + integer(info.iters) + ", \"experiment_name\": \"\"}";
  }
  s += "],\n";
  s += "  \"out_of_bounds\": {\"count\": " + integer(failed_cells) +
       ", \"okay\": " + flag(failed_cells == 0) + "},\n";
  s += "  \"average_bus_bandwidth\": {\"bandwidth\": " + num(avg_busbw) +
       ", \"okay\": \"unchecked\"},\n";
  s += "  \"errors\": [],\n";
  // What nccl-tests' layout has no place for.
  s += "  \"nccl_bench\": {\"collective\": " + json::quote(info.collective) +
       ", \"nranks\": " + integer(info.nranks) +
       ", \"busbw_factor\": " + json::number(info.factor, "%.6g") +
       ", \"one_process_per_gpu\": " + json::boolean(info.per_rank) +
       ", \"launcher\": " + (info.per_rank ? json::quote(info.launcher) : "null") +
       ", \"time_over_ranks\": " + json::quote(info.per_rank ? average_name(info.average) : "") +
       ", \"time_over_gpus\": \"the slowest\", \"timer\": \"CUDA events\"" +
       ",\n    \"nccl_version\": " + json::quote(info.nccl_version) +
       ", \"nccl_header_version\": " + json::quote(info.nccl_header) +
       ", \"cuda_driver\": " + json::quote(info.cuda_driver) +
       ", \"cuda_runtime\": " + json::quote(info.cuda_runtime) + ",\n    \"wrong_elements\": " +
       (info.check ? integer(static_cast<long long>(wrong)) : "null") + ", \"host_issue_us\": [";
  for (std::size_t i = 0; i < rows.size(); ++i)
    s += std::string(i ? ", " : "") + "[" + num(rows[i].out_of_place.host_us) + ", " +
         (rows[i].in_place.valid ? num(rows[i].in_place.host_us) : "null") + "]";
  s += "],\n    \"transports\": ";
  if (info.transport_note.empty()) {
    s += "{";
    for (std::size_t i = 0; i < info.transports.size(); ++i)
      s += std::string(i ? ", " : "") + json::quote(info.transports[i].first) + ": " +
           integer(info.transports[i].second);
    s += "}, \"transport_note\": null},\n";
  } else {
    s += "null, \"transport_note\": " + json::quote(info.transport_note) + "},\n";
  }
  s += "  \"end_time\": " + json::quote(end_time) + "\n}\n";
  return s;
}
