// Host-only harness for tests/test_cuda_common.py: prints what source_code/cuda_common/
// json_writer.h makes of awkward strings and numbers, one per line, and creates the file
// named by argv[1] twice (the second time must be refused).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "json_writer.h"

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const char *strings[] = {"plain",
                           "say \"hi\"",
                           "C:\\dir",
                           "two\nlines",
                           "a\tb",
                           "bell\x07",
                           "\x1f"
                           "end",
                           "GPU \xc3\xa9"};
  for (const char *s : strings) std::printf("%s\n", json::quote(s).c_str());
  std::printf("%s %s %s\n", json::number(nan, "%.4f").c_str(), json::number(inf, "%.6g").c_str(),
              json::number(-inf, "%.4f").c_str());
  std::printf("%s %s %s\n", json::number(1.5, "%.4f").c_str(),
              json::number(1234567.0, "%.6g").c_str(), json::number(0.000125, "%.6g").c_str());
  std::printf("%s %s\n", json::boolean(true).c_str(), json::boolean(false).c_str());
  json::WriteError first = json::create_new_file(argv[1], "{\"n\": 1}\n");
  json::WriteError second = json::create_new_file(argv[1], "{\"n\": 2}\n");
  const int why = errno;
  std::printf("first %d second %d %s\n", static_cast<int>(first), static_cast<int>(second),
              second == json::WriteError::NotCreated && why == EEXIST ? "EEXIST" : "other");
  return 0;
}
