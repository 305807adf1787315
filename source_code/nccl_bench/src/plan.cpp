#include "plan.h"

#include <unistd.h>

#include <algorithm>
#include <string>

#include "errors.h"
#include "transports.h"

Plan plan_runs(const Options &opt, int nranks) {
  const Collective &coll = *opt.collective;
  const std::vector<RedOp> ops = coll.reduces ? opt.ops : std::vector<RedOp>{RedOp::Sum};
  std::vector<int> roots{-1};
  if (coll.rooted) {
    if (opt.root >= nranks)
      throw UsageError("root " + std::to_string(opt.root) + " is not a rank of " +
                       std::to_string(nranks) + " (-r)");
    roots.clear();
    for (int r = 0; r < nranks; ++r)
      if (opt.root == kEveryRoot || opt.root == r) roots.push_back(r);
  }
  Plan plan;
  for (DType type : opt.types) {
    const std::size_t elt = type_info(type).bytes;
    for (RedOp op : ops) {
      if (op == RedOp::Avg && opt.check > 0 && !average_is_exact(type, nranks))
        throw UsageError(std::string("-o avg on ") + type_info(type).name + " is checked bit " +
                         "for bit only on a power-of-two number of ranks (NCCL multiplies " +
                         "each input by 1/" + std::to_string(nranks) +
                         "); run it on 2, 4 or 8 GPUs, or unchecked with -c 0 (-o)");
      for (int root : roots) {
        Sweep sweep{Variant{type, op, root}, {}};
        for (std::size_t s : requested_sizes(opt)) {
          const Counts k = coll.counts(s, elt, nranks);
          if (k.count == 0) continue;  // nothing per rank (nccl-tests prints such rows)
          if (!sweep.rows.empty() && sweep.rows.back().bytes == k.bytes) continue;
          sweep.rows.push_back(k);
          plan.send_bytes = std::max(plan.send_bytes, k.send * elt);
          plan.recv_bytes = std::max(plan.recv_bytes, std::max(k.send, k.recv) * elt);
          plan.first_bytes = plan.first_bytes ? std::min(plan.first_bytes, k.bytes) : k.bytes;
          plan.last_bytes = std::max(plan.last_bytes, k.bytes);
        }
        if (!sweep.rows.empty()) plan.sweeps.push_back(sweep);
      }
    }
  }
  if (plan.sweeps.empty())
    throw UsageError("no size in the range holds one element per rank (-b/-e)");
  return plan;
}

RunInfo run_info(const Options &opt, const Plan &plan, int nranks, int argc, char **argv) {
  RunInfo info;
  info.collective = opt.collective->name;
  info.in_place = opt.collective->in_place;
  info.pid = static_cast<long>(getpid());
  char host[256] = {0};
  info.host = gethostname(host, sizeof host - 1) == 0 && host[0] ? host : "localhost";
  info.nranks = nranks;
  info.factor = opt.collective->busbw_factor(nranks);
  info.min_bytes = plan.first_bytes;
  info.max_bytes = plan.last_bytes;
  info.linear_steps = opt.linear_steps();
  info.step = opt.linear_steps() ? opt.step_bytes : opt.step_factor;
  info.warmup = opt.warmup;
  info.iters = opt.iters;
  info.check = opt.check;
  info.graph_launches = opt.graph_launches;
  info.blocking = opt.blocking;
  info.average = opt.average;
  info.start_time = now_text();
  info.args.assign(argv, argv + argc);
  info.environment = nccl_environment();  // before NcclLog adds its own settings
  return info;
}

Row row_for(const Options &opt, const Variant &v, const Counts &k) {
  Row row;
  row.bytes = k.bytes;
  row.count = k.count;
  row.type = type_info(v.type).name;
  row.redop = opt.collective->reduces ? op_info(v.op).name : "none";
  row.root = v.root;
  return row;
}
