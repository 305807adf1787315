// Which transports NCCL used, learnt from NCCL's own INFO log.
//
// NCCL reports every connection it makes between two ranks as a log line
// "Channel XX : a[a] -> b[b] via <transport>", for example P2P/CUMEM/read
// (NVLink or PCIe peer-to-peer), SHM/direct/direct (through host shared
// memory) or NET/Socket/0 (through the network stack). If the user has set
// neither NCCL_DEBUG nor NCCL_DEBUG_FILE, we ask NCCL for its INFO log in a
// file (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,ENV,P2P,SHM,NET unless set,
// NCCL_DEBUG_FILE=<file>) and count those lines after the run. NCCL makes
// connections when an algorithm first needs them, so the summary is only
// complete after the whole sweep; it is printed at the end of the table.
// Otherwise we leave the user's settings alone and say so.
#pragma once

#include <string>
#include <utility>
#include <vector>

class NcclLog {
 public:
  // Call before the first NCCL call. keep_path: where to keep the log
  // (empty: a temporary file, removed afterwards).
  explicit NcclLog(const std::string &keep_path);
  ~NcclLog();
  NcclLog(const NcclLog &) = delete;
  NcclLog &operator=(const NcclLog &) = delete;

  bool capturing() const { return capturing_; }
  // Why the log is not read (empty when capturing).
  const std::string &reason() const { return reason_; }
  const std::string &path() const { return path_; }

  // "P2P/CUMEM/read" -> number of connection lines, in order of first appearance.
  std::vector<std::pair<std::string, int>> transports() const;
  // NCCL's own "X set by environment to Y" lines.
  std::vector<std::string> environment_lines() const;

 private:
  bool capturing_ = false;
  bool temporary_ = false;
  std::string path_;
  std::string reason_;
};

// NCCL_* and CUDA_* variables of the environment as the user gave them, "NAME=value".
std::vector<std::string> nccl_environment();
