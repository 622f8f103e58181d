# The default stack, with every job setting spelled out at its default.
# It is the one place the default transports are written down (gobtl
# embeds this file): a job that names no stack file, or a stack file
# without btl blocks, runs these, as an MCA parameter changes only what
# it names; `gobtl config show` with no file prints it.

job {
  # Rendezvous protocol above the eager limit: rdma_read, rdma_write,
  # rdma_read_async or pipeline (send-based copy-in/copy-out; BTLs without
  # put/get use it whatever is chosen here).
  protocol = "rdma_read"

  # eager_limit, rndv_eager_limit and max_reads are unset by default: each
  # BTL's own values apply. Set them to cap every BTL's.
  # eager_limit      = "12KiB"
  # rndv_eager_limit = "4KiB"
  # max_reads        = 4

  # A peer reachable by several BTLs uses only the highest-exclusivity ones
  # (shared memory rather than the network for a local peer).
  exclusive = true

  # Fail a request that makes no progress for this long; "0" never does.
  stall_timeout = "0"

  # A waiting rank polls every module `spin` times, then yields `yield`
  # times, then sleeps from `sleep` doubling up to `max_sleep`. With no
  # stack file, or one that leaves `spin` out, ranks that outnumber their
  # node's CPUs do not spin: they yield at every poll that finds nothing;
  # a `spin` written here is kept as it is.
  progress {
    spin      = 2000
    yield     = 50
    sleep     = "10us"
    max_sleep = "500us"
  }

  # Quiet by default; GOBTL_LOG overrides (GOBTL_LOG=debug,
  # GOBTL_LOG=pml=debug,btl.sm=info).
  log {
    level      = "warn"
    components = {}
  }
}

# Messages to this rank.
btl "self" "self" {}

# The ranks of this rank's node.
btl "sm" "local" {}

# The ranks of other nodes: InfiniBand, on softrc (TCP) where there is no
# HCA; where libfabric has a provider with hardware behind it (verbs, efa,
# cxi, psm3, opx), btl "ofi" "net" on it takes this block's place
# (`gobtl config show` says which this host runs, and why). Only a job
# that spans nodes opens it: on one node it would cost every rank a
# device, a listener and registered buffers for no peer. Ranks that are
# goroutines of one process (gobtl.RunLocal) use the in-process fabric
# instead of sm and ib.
btl "ib" "net" {}
