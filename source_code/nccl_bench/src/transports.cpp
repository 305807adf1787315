#include "transports.h"

#include <fcntl.h>

#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "check.h"

extern char **environ;

std::vector<std::string> nccl_environment() {
  std::vector<std::string> found;
  for (char **entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    if (std::strncmp(*entry, "NCCL_", 5) == 0 || std::strncmp(*entry, "CUDA_", 5) == 0)
      found.emplace_back(*entry);
  }
  return found;
}

NcclLog::NcclLog(const std::string &keep_path) {
  const char *debug = std::getenv("NCCL_DEBUG");
  const char *file = std::getenv("NCCL_DEBUG_FILE");
  if (debug != nullptr || file != nullptr) {
    reason_ = std::string("not summarised: ") + (debug ? "NCCL_DEBUG" : "NCCL_DEBUG_FILE") +
              " is set in the environment, so NCCL's log is left where you sent it";
    return;
  }
  if (!keep_path.empty()) {
    path_ = keep_path;
    // O_EXCL: created here, never an existing file (results are never overwritten).
    int probe = open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (probe < 0)
      throw UsageError("cannot create '" + keep_path + "': " + std::strerror(errno) +
                       " (--nccl-log)");
    close(probe);
  } else {
    const char *tmpdir = std::getenv("TMPDIR");
    std::string pattern = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/nccl_bench.XXXXXX";
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    int fd = mkstemp(name.data());
    if (fd < 0) {
      reason_ = "not summarised: could not create a temporary file for NCCL's log";
      return;
    }
    close(fd);
    path_ = name.data();
    temporary_ = true;
  }
  if (std::strchr(path_.c_str(), '%') != nullptr) {
    reason_ = "not summarised: the log file name contains '%'";
    return;
  }
  setenv("NCCL_DEBUG", "INFO", 0);
  setenv("NCCL_DEBUG_SUBSYS", "INIT,ENV,P2P,SHM,NET", 0);
  setenv("NCCL_DEBUG_FILE", path_.c_str(), 0);
  capturing_ = true;
}

NcclLog::~NcclLog() {
  if (temporary_ && !path_.empty()) std::remove(path_.c_str());
}

std::vector<std::pair<std::string, int>> NcclLog::transports() const {
  std::vector<std::pair<std::string, int>> counts;
  if (!capturing_) return counts;
  std::ifstream in(path_);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("Channel") == std::string::npos) continue;
    std::size_t at = line.find(" via ");
    if (at == std::string::npos) continue;
    // The rest of the line names the transport, e.g. "P2P/direct pointer/read".
    std::string name = line.substr(at + 5);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\r' || name.back() == '\t'))
      name.pop_back();
    if (name.empty()) continue;
    bool seen = false;
    for (auto &entry : counts) {
      if (entry.first == name) {
        ++entry.second;
        seen = true;
        break;
      }
    }
    if (!seen) counts.emplace_back(name, 1);
  }
  return counts;
}

std::vector<std::string> NcclLog::environment_lines() const {
  std::vector<std::string> lines;
  if (!capturing_) return lines;
  std::ifstream in(path_);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("set by environment to") == std::string::npos) continue;
    std::size_t at = line.find("NCCL INFO ");
    std::string text = at == std::string::npos ? line : line.substr(at + 10);
    bool seen = false;
    for (const auto &known : lines) seen = seen || known == text;
    if (!seen) lines.push_back(text);
  }
  return lines;
}
