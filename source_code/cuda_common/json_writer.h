// json_writer.h - the pieces of JSON that both CUDA programs of the course write
// (p2pBandwidthLatencyTest --json, nccl_bench --json), and the one way they create the file.
//
// Each program lays out its own document; this header only makes its strings, numbers and
// booleans valid JSON, so that Python's json module (and any strict reader) loads them:
//   quote("a\"b")               -> "a\"b" with the quote, the backslash, \n and \t escaped and
//                                  other control characters as \u00XX
//   number(v, "%.4f")           -> v printed with that printf format; null for NaN and the
//                                  infinities, which JSON has no word for
//   boolean(true)               -> true
// create_new_file() never replaces a file: results of an earlier run are kept.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <string>

namespace json {

inline std::string quote(const std::string &text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

inline std::string number(double v, const char *format) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

inline std::string boolean(bool b) { return b ? "true" : "false"; }

// What create_new_file() could not do.
enum class WriteError { None, NotCreated, NotWritten };

// Creates `path` (O_EXCL: if the file exists, even one that appeared while the program
// measured, it is left alone and this fails) and writes `text` into it. On NotCreated,
// errno says why.
inline WriteError create_new_file(const std::string &path, const std::string &text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  std::FILE *f = fd < 0 ? nullptr : fdopen(fd, "w");
  if (f == nullptr) {
    const int why = errno;
    if (fd >= 0) close(fd);
    errno = why;
    return WriteError::NotCreated;
  }
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fclose(f) == 0 && ok;
  return ok ? WriteError::None : WriteError::NotWritten;
}

}  // namespace json
