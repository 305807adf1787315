// pattern.h - the bytes every copy must carry, and the host half of the data check.
//
// Byte i of a buffer filled with `seed` is byte (i % 4) of the 32-bit word mix(i / 4, seed),
// little-endian: a cheap integer mix, so that a buffer that was not copied, copied from the
// wrong place or copied only in part does not match. Destinations are "poisoned" with the
// inverse of that pattern first, so a copy that never happened cannot pass.
// Plain C++ (g++ compiles it for tests/cuda_host/host_copy_check_harness.cpp); nvcc also
// compiles mix() and pattern_byte() for the device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define HCB_HD __host__ __device__
#else
#define HCB_HD
#endif

namespace hcb {

HCB_HD inline uint32_t mix(uint64_t word, uint32_t seed) {
  uint32_t x = (uint32_t)word * 2654435761u + seed;
  x ^= (uint32_t)(word >> 32) * 0x9E3779B9u;
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

HCB_HD inline uint8_t pattern_byte(uint64_t i, uint32_t seed) {
  return (uint8_t)(mix(i >> 2, seed) >> (8 * (unsigned)(i & 3)));
}

// Writes the pattern (invert = false) or its inverse (the poison) into buf[0, n).
inline void fill_host(unsigned char *buf, size_t n, uint32_t seed, bool invert = false) {
  const uint32_t flip = invert ? 0xFFFFFFFFu : 0u;
  const size_t words = n / 4;
  for (size_t w = 0; w < words; ++w) {
    const uint32_t v = mix(w, seed) ^ flip;
    std::memcpy(buf + 4 * w, &v, 4);  // little-endian, as on the GPU
  }
  for (size_t i = 4 * words; i < n; ++i) buf[i] = (unsigned char)(pattern_byte(i, seed) ^ flip);
}

// What a check found: how many bytes differ, and the first of them (valid when count > 0).
struct Mismatch {
  unsigned long long count = 0;
  size_t first = 0;
};

// Compares got[0, n) with expected[0, n) byte by byte; memcmp first, so a right buffer
// costs one pass at memory speed.
inline Mismatch compare_host(const unsigned char *got, const unsigned char *expected, size_t n) {
  Mismatch m;
  if (std::memcmp(got, expected, n) == 0) return m;
  for (size_t i = 0; i < n; ++i)
    if (got[i] != expected[i]) {
      if (m.count == 0) m.first = i;
      ++m.count;
    }
  return m;
}

}  // namespace hcb
