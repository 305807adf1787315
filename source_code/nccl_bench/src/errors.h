// The two kinds of failure of nccl_bench (see check.h for the exit codes). Kept apart from
// check.h, which needs CUDA and NCCL, so that host-only parts (launch.cpp) and their test
// harnesses build with a plain C++ compiler.
#pragma once

#include <stdexcept>
#include <string>

struct UsageError : std::runtime_error {
  explicit UsageError(const std::string &what) : std::runtime_error(what) {}
};

struct RuntimeFailure : std::runtime_error {
  explicit RuntimeFailure(const std::string &what) : std::runtime_error(what) {}
};
