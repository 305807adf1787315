// The printed table (the layout of NVIDIA's nccl-tests, so gputopo's
// `nccl-tests` parser reads both) and the JSON file with the same rows.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

struct Measurement {
    bool valid = false;      // false: not applicable (in-place sendrecv)
    double time_us = 0.0;    // average time of one iteration
    double algbw = 0.0;      // GB/s = size / time
    double busbw = 0.0;      // GB/s = algbw x factor
    unsigned long long wrong = 0;
    double host_us = 0.0;    // host time to issue one iteration (JSON only)
};

struct Row {
    std::size_t bytes = 0;
    std::size_t count = 0;
    Measurement out_of_place;
    Measurement in_place;
};

struct DeviceInfo {
    int rank;
    int device;
    std::string name;
    std::string pci_bus_id;
    long pid = -1;           // per-rank mode: the rank's process (-1: RunInfo's pid)
    std::string host;        // per-rank mode: the rank's host (empty: RunInfo's host)
};

struct RunInfo {
    std::string op;
    bool in_place = true;
    bool cuda_graph = false; // timed iterations launched as one CUDA graph    // false: the table has one timed group (sendrecv)
    bool per_rank = false;   // one process per GPU, started by `launcher` (launch.h)
    std::string launcher;
    std::string host;
    long pid = 0;
    std::string type;
    std::string redop;
    int root = -1;           // -1 unless broadcast
    int nranks = 0;
    double factor = 1.0;
    int warmup = 0;
    int iters = 0;
    std::string nccl_version;      // of the library in use
    std::string nccl_header;       // the nccl.h built against
    std::string cuda_driver;
    std::string cuda_runtime;
    std::vector<DeviceInfo> devices;
    std::vector<std::string> environment;  // NCCL_* as given by the user
    std::vector<std::pair<std::string, int>> transports;
    std::vector<std::string> nccl_env_lines;
    std::string transport_note;    // why there is no summary, if so
    std::size_t min_bytes = 0, max_bytes = 0, step = 0;
};

void print_header(const RunInfo& info);
void print_row(const RunInfo& info, const Row& row);
// Prints the trailer; returns the average busbw.
double print_footer(const RunInfo& info, const std::vector<Row>& rows, unsigned long long wrong);
// Throws RuntimeFailure if the file cannot be written.
void write_json(const std::string& path, const RunInfo& info, const std::vector<Row>& rows,
                double avg_busbw, unsigned long long wrong);
