// Host-only harness for tests/test_host_copy_bench.py: runs the host half of
// source_code/host_copy_bench's data check (pattern.h) on a buffer of argv[1] bytes that
// stands for one copy's destination, after one of these (argv[2]):
//   right      the copy brought the pattern
//   flip K     ... and then one bit of byte K changed
//   none       no copy happened: the destination still holds the poison
//   half       the copy stopped after its first half
//   seed       the copy came from a buffer of another row (another seed)
// and prints "<bytes wrong> <first wrong byte>" (first is 0 when none is wrong).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "pattern.h"

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  const size_t n = std::strtoull(argv[1], nullptr, 10);
  const std::string how = argv[2];
  const uint32_t seed = 0x51ED2701u;
  std::vector<unsigned char> expected(n), dst(n);
  hcb::fill_host(expected.data(), n, seed);
  hcb::fill_host(dst.data(), n, seed, true);  // the poison, as before every batch
  if (how == "right" || how == "flip") {
    std::memcpy(dst.data(), expected.data(), n);
    if (how == "flip") dst[std::strtoull(argv[3], nullptr, 10)] ^= 1;
  } else if (how == "half") {
    std::memcpy(dst.data(), expected.data(), n / 2);
  } else if (how == "seed") {
    hcb::fill_host(dst.data(), n, seed + 1);
  } else if (how != "none") {
    return 2;
  }
  const hcb::Mismatch m = hcb::compare_host(dst.data(), expected.data(), n);
  std::printf("%llu %zu\n", m.count, m.first);
  return 0;
}
