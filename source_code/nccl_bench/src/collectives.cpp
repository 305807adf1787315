#include "collectives.h"

namespace {

// all_gather and reduce_scatter move one block per rank; like nccl-tests (getCollByteCount
// in src/all_gather.cu, src/reduce_scatter.cu, v2.19.6) the block is rounded down to a
// whole number of 16-byte units, so that every rank's block starts 16-byte aligned.
std::size_t aligned_block(std::size_t bytes, std::size_t element_bytes, int nranks) {
  const std::size_t per_rank = bytes / element_bytes / static_cast<std::size_t>(nranks);
  const std::size_t unit = element_bytes < 16 ? 16 / element_bytes : 1;
  return per_rank / unit * unit;
}

// all_reduce, broadcast and sendrecv: every rank's buffer is the whole size.
Counts whole(std::size_t bytes, std::size_t element_bytes, int) {
  Counts k;
  k.count = k.send = k.recv = bytes / element_bytes;
  k.bytes = k.count * element_bytes;
  return k;
}

Counts gather(std::size_t bytes, std::size_t element_bytes, int nranks) {
  Counts k;
  k.count = k.send = k.send_offset = aligned_block(bytes, element_bytes, nranks);
  k.recv = k.count * static_cast<std::size_t>(nranks);
  k.bytes = k.recv * element_bytes;
  return k;
}

Counts scatter(std::size_t bytes, std::size_t element_bytes, int nranks) {
  Counts k;
  k.count = k.recv = k.recv_offset = aligned_block(bytes, element_bytes, nranks);
  k.send = k.count * static_cast<std::size_t>(nranks);
  k.bytes = k.send * element_bytes;
  return k;
}

// The factors of doc/PERFORMANCE.md: the bytes each rank's link carries for one byte of
// the operation's size.
double twice_n_minus_1_over_n(int n) {
  return 2.0 * (n - 1) / n;
}
double n_minus_1_over_n(int n) {
  return static_cast<double>(n - 1) / n;
}
double one(int) {
  return 1.0;
}

Expectation reduce_all(const Counts &k, int, int, int) {
  Expectation e;
  e.count = k.recv;
  e.reduced = true;
  return e;
}

Expectation reduce_my_block(const Counts &k, int rank, int, int) {
  Expectation e = reduce_all(k, rank, 0, 0);
  e.first = static_cast<std::size_t>(rank) * k.recv;
  return e;
}

Expectation blocks_of_every_rank(const Counts &k, int, int, int) {
  Expectation e;
  e.count = k.recv;
  e.source = -1;
  e.block = k.send;
  return e;
}

Expectation from_root(const Counts &k, int, int, int root) {
  Expectation e;
  e.count = k.recv;
  e.source = root;
  return e;
}

Expectation from_previous_rank(const Counts &k, int rank, int nranks, int) {
  Expectation e;
  e.count = k.recv;
  e.source = (rank + nranks - 1) % nranks;
  return e;
}

ncclResult_t run_all_reduce(const Call &c) {
  return ncclAllReduce(c.send, c.recv, c.counts->count, c.type, c.op, c.comm, c.stream);
}

ncclResult_t run_all_gather(const Call &c) {
  return ncclAllGather(c.send, c.recv, c.counts->count, c.type, c.comm, c.stream);
}

ncclResult_t run_reduce_scatter(const Call &c) {
  return ncclReduceScatter(c.send, c.recv, c.counts->count, c.type, c.op, c.comm, c.stream);
}

ncclResult_t run_broadcast(const Call &c) {
  return ncclBroadcast(c.send, c.recv, c.counts->count, c.type, c.root, c.comm, c.stream);
}

// A ring: every rank sends to the next and receives from the previous.
ncclResult_t run_sendrecv(const Call &c) {
  const int next = (c.rank + 1) % c.nranks;
  const int prev = (c.rank + c.nranks - 1) % c.nranks;
  ncclResult_t sent = ncclSend(c.send, c.counts->count, c.type, next, c.comm, c.stream);
  if (sent != ncclSuccess) return sent;
  return ncclRecv(c.recv, c.counts->count, c.type, prev, c.comm, c.stream);
}

}  // namespace

// name, reduces, rooted, in_place, counts, busbw factor, expectation, run
const Collective kCollectives[] = {
    {"all_reduce", true, false, true, whole, twice_n_minus_1_over_n, reduce_all, run_all_reduce},
    {"all_gather", false, false, true, gather, n_minus_1_over_n, blocks_of_every_rank,
     run_all_gather},
    {"reduce_scatter", true, false, true, scatter, n_minus_1_over_n, reduce_my_block,
     run_reduce_scatter},
    {"broadcast", false, true, true, whole, one, from_root, run_broadcast},
    {"sendrecv", false, false, false, whole, one, from_previous_rank, run_sendrecv},
};
const int kCollectiveCount = sizeof kCollectives / sizeof kCollectives[0];

const Collective *find_collective(const std::string &name) {
  std::string plain = name;
  for (char &c : plain)
    if (c == '-') c = '_';
  const std::string suffix = "_perf";
  if (plain.size() > suffix.size() &&
      plain.compare(plain.size() - suffix.size(), suffix.size(), suffix) == 0)
    plain.resize(plain.size() - suffix.size());
  for (const Collective &c : kCollectives)
    if (plain == c.name) return &c;
  return nullptr;
}

std::string collective_names() {
  std::string out;
  for (int i = 0; i < kCollectiveCount; ++i) {
    if (i > 0) out += i + 1 < kCollectiveCount ? ", " : " or ";
    out += kCollectives[i].name;
  }
  return out;
}

void *in_place_input(const Counts &k, void *recv, int rank, std::size_t element_bytes) {
  return static_cast<char *>(recv) + static_cast<std::size_t>(rank) * k.send_offset * element_bytes;
}

void *in_place_output(const Counts &k, void *recv, int rank, std::size_t element_bytes) {
  return static_cast<char *>(recv) + static_cast<std::size_t>(rank) * k.recv_offset * element_bytes;
}
