#include "collectives.h"

#include "check.h"

Shape shape_for(Op op, std::size_t bytes, int nranks, std::size_t element_bytes) {
    Shape s{};
    const std::size_t n = static_cast<std::size_t>(nranks);
    switch (op) {
        case Op::AllReduce:
        case Op::Broadcast:
        case Op::SendRecv:
            s.send_count = s.recv_count = s.block = bytes / element_bytes;
            s.elements = s.send_count;
            break;
        case Op::AllGather:
            s.block = bytes / (element_bytes * n);
            s.send_count = s.block;
            s.recv_count = s.block * n;
            s.elements = s.recv_count;
            break;
        case Op::ReduceScatter:
            s.block = bytes / (element_bytes * n);
            s.send_count = s.block * n;
            s.recv_count = s.block;
            s.elements = s.send_count;
            break;
    }
    s.bytes = s.elements * element_bytes;
    return s;
}

double busbw_factor(Op op, int nranks) {
    const double n = static_cast<double>(nranks);
    switch (op) {
        case Op::AllReduce: return 2.0 * (n - 1.0) / n;
        case Op::AllGather:
        case Op::ReduceScatter: return (n - 1.0) / n;
        case Op::Broadcast:
        case Op::SendRecv: return 1.0;
    }
    return 1.0;
}

bool op_reduces(Op op) { return op == Op::AllReduce || op == Op::ReduceScatter; }

bool has_in_place(Op op) { return op != Op::SendRecv; }

RankBuffers buffers_for(Op op, bool in_place, void* send_buffer, void* recv_buffer,
                        const Shape& shape, int rank, std::size_t element_bytes) {
    if (!in_place) return RankBuffers{send_buffer, recv_buffer};
    char* base = static_cast<char*>(recv_buffer);
    const std::size_t my_block = static_cast<std::size_t>(rank) * shape.block * element_bytes;
    switch (op) {
        case Op::AllGather:  // this rank's input is its own slot of the output
            return RankBuffers{base + my_block, base};
        case Op::ReduceScatter:  // this rank's output is its own slot of the input
            return RankBuffers{base, base + my_block};
        default:
            return RankBuffers{base, base};
    }
}

void enqueue(Op op, const RankBuffers& b, const Shape& shape, ncclDataType_t type, int rank,
             int nranks, int root, ncclComm_t comm, cudaStream_t stream) {
    switch (op) {
        case Op::AllReduce:
            NCCL_CHECK(ncclAllReduce(b.send, b.recv, shape.send_count, type, ncclSum, comm, stream));
            break;
        case Op::AllGather:
            NCCL_CHECK(ncclAllGather(b.send, b.recv, shape.block, type, comm, stream));
            break;
        case Op::ReduceScatter:
            NCCL_CHECK(ncclReduceScatter(b.send, b.recv, shape.block, type, ncclSum, comm, stream));
            break;
        case Op::Broadcast:
            NCCL_CHECK(ncclBroadcast(b.send, b.recv, shape.send_count, type, root, comm, stream));
            break;
        case Op::SendRecv: {
            // A ring: every rank sends to the next and receives from the previous.
            const int next = (rank + 1) % nranks;
            const int prev = (rank + nranks - 1) % nranks;
            NCCL_CHECK(ncclSend(b.send, shape.send_count, type, next, comm, stream));
            NCCL_CHECK(ncclRecv(b.recv, shape.recv_count, type, prev, comm, stream));
            break;
        }
    }
}
