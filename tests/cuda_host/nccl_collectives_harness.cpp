// Host-only harness for tests/test_nccl_bench_collectives.py: links nccl_bench's
// collectives.cpp (its table of collectives; NCCL is linked but never called, no GPU) and
// prints what one collective's entry gives for one row:
//   nccl_collectives_harness NAME BYTES ELEMENT_BYTES NRANKS RANK ROOT
// One "key=value" per line; "unknown" (exit 3) when find_collective does not know NAME.
#include <cstdio>
#include <cstdlib>

#include "collectives.h"

int main(int argc, char **argv) {
  if (argc != 7) return 2;
  const Collective *c = find_collective(argv[1]);
  if (c == nullptr) {
    std::printf("unknown\n");
    return 3;
  }
  const Counts k = c->counts(std::strtoull(argv[2], nullptr, 10),
                             std::strtoull(argv[3], nullptr, 10), std::atoi(argv[4]));
  const int nranks = std::atoi(argv[4]);
  const Expectation e = c->expect(k, std::atoi(argv[5]), nranks, std::atoi(argv[6]));
  std::printf("name=%s\nreduces=%d\nrooted=%d\nin_place=%d\n", c->name, c->reduces, c->rooted,
              c->in_place);
  std::printf("bytes=%zu\ncount=%zu\nsend=%zu\nrecv=%zu\nsend_offset=%zu\nrecv_offset=%zu\n",
              k.bytes, k.count, k.send, k.recv, k.send_offset, k.recv_offset);
  std::printf("factor=%.17g\n", c->busbw_factor(nranks));
  std::printf("check_count=%zu\nreduced=%d\nsource=%d\nfirst=%zu\nblock=%zu\n", e.count, e.reduced,
              e.source, e.first, e.block);
  return 0;
}
