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
// create_new_file() never replaces a file: results of an earlier run are kept;
// create_first_free() takes the next free name instead (FILE, FILE.0, FILE.1, ...), as
// nccl-tests' -J does, and fill_created_file() writes into the file it created.
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

inline std::string boolean(bool b) {
  return b ? "true" : "false";
}

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

// Creates an empty file at `path`, or, where that exists, at the first of path.0, path.1, ...
// that does not (O_EXCL each time: never an existing file). Returns the name created, or ""
// when none could be (errno says why).
inline std::string create_first_free(const std::string &path, int tries = 1000) {
  std::string name = path;
  for (int i = 0; i <= tries; ++i) {
    const int fd = open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) {
      close(fd);
      return name;
    }
    if (errno != EEXIST) return "";
    name = path + "." + std::to_string(i);
  }
  errno = EEXIST;
  return "";
}

// Writes `text` into a file that create_first_free() made (and that is still empty).
inline WriteError fill_created_file(const std::string &path, const std::string &text) {
  std::FILE *f = std::fopen(path.c_str(), "r+");
  if (f == nullptr) return WriteError::NotCreated;
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fclose(f) == 0 && ok;
  return ok ? WriteError::None : WriteError::NotWritten;
}

}  // namespace json
