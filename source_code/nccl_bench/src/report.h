// The printed table (nccl-tests' columns and widths, so that gputopo's `nccl-tests` parser
// reads both programs alike) and the -J file (nccl-tests' JSON layout, version 3 of
// src/util.cu at v2.19.6, with nccl_bench's own facts under the key "nccl_bench").
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

struct Measurement {
  bool valid = false;    // false: not measured (in-place sendrecv): no cell, no average
  bool checked = true;   // false: -c 0, #wrong is N/A
  double time_us = 0.0;  // average time of one iteration
  double algbw = 0.0;    // GB/s = size / time
  double busbw = 0.0;    // GB/s = algbw x factor
  unsigned long long wrong = 0;
  double host_us = 0.0;  // host time to issue one iteration (JSON only)
};

struct Row {
  std::size_t bytes = 0;
  std::size_t count = 0;
  std::string type;   // the type column: float
  std::string redop;  // the redop column: sum, or none
  int root = -1;      // the root column: -1 unless rooted
  Measurement out_of_place;
  Measurement in_place;
};

struct DeviceInfo {
  int rank;
  int device;
  std::string name;
  std::string pci_bus_id;  // 0000:18:00, as nccl-tests prints it
  long pid = -1;           // per-rank mode: the rank's process (-1: RunInfo's pid)
  std::string host;        // per-rank mode: the rank's host (empty: RunInfo's host)
};

struct RunInfo {
  std::string collective;
  bool in_place = true;   // false: the table has one timed group (sendrecv)
  bool per_rank = false;  // one process per GPU, started by `launcher` (launch.h)
  std::string launcher;
  std::string host;
  long pid = 0;
  int nranks = 0;
  double factor = 1.0;
  // The options, as the header and the JSON's config echo them.
  std::size_t min_bytes = 0, max_bytes = 0;  // the first and last row's sizes
  bool linear_steps = false;
  std::size_t step = 0;  // the factor, or the bytes added (linear_steps)
  int warmup = 0, iters = 0, check = 1, graph_launches = 0, blocking = 0, average = 1;
  std::string start_time;         // "2026-12-04 10:00:00", local time, as nccl-tests writes it
  std::vector<std::string> args;  // the command line
  std::string nccl_version;       // of the library in use
  int nccl_version_code = 0;
  std::string nccl_header;  // the nccl.h built against
  std::string cuda_driver;
  std::string cuda_runtime;
  std::vector<DeviceInfo> devices;
  std::vector<std::string> environment;  // NCCL_* and CUDA_* as given by the user
  std::vector<std::pair<std::string, int>> transports;
  std::vector<std::string> nccl_env_lines;
  std::string transport_note;  // why there is no summary, if so
  std::string json_path;       // the -J file this run writes ("": none)
};

void print_header(const RunInfo &info);
void print_row(const RunInfo &info, const Row &row);
// The mean busbw of every measured cell with a number, both placements (as nccl-tests'
// "Avg bus bandwidth"); a cell that was not measured (in-place sendrecv) is left out.
double average_busbw(const std::vector<Row> &rows);
// Prints the trailer; returns average_busbw(rows).
double print_footer(const RunInfo &info, const std::vector<Row> &rows, unsigned long long wrong);
// The -J document.
std::string json_document(const RunInfo &info, const std::vector<Row> &rows, double avg_busbw,
                          unsigned long long wrong, const std::string &end_time);
// Local time as nccl-tests writes it ("%Y-%m-%d %H:%M:%S").
std::string now_text();
