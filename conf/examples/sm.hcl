# One host, shared memory: the stack `gobtl run` jobs use on a single
# machine. Messages to this rank go through btl "self"; every other local
# rank through btl "sm" (higher exclusivity than any network BTL, so a
# network is not used for a local peer).
#
#   gobtl run -np 4 -c conf/examples/sm.hcl -- ./prog

job {
  # Above the eager limit the PML reads the sender's buffer by CMA
  # (process_vm_readv) where sm's mechanism table (below) says CMA is the
  # better mechanism for the size and the queue to the peer, and otherwise
  # pipelines through sm's fragments: copy-in by the sender, copy-out by
  # the receiver, both at once.
  protocol = "rdma_read"

  # No more ranks than cores: a waiting rank polls for a long time before
  # it gives its core away (about 10 ms at ~50 ns a poll), as MPI ranks
  # do. A shorter spin lets a rank that was descheduled for a moment cost
  # its partner a sleep, and in Go a sleep shorter than a millisecond
  # lasts about one. For more ranks than cores, see oversubscribed.hcl.
  progress {
    spin      = 200000
    yield     = 50
    sleep     = "10us"
    max_sleep = "500us"
  }

  log {
    level = "warn"
  }
}

btl "self" "self" {}

btl "sm" "sm" {
  # Segment files, one per rank: /dev/shm/gobtl-<job>-sm.sm-<rank>.
  dir = "/dev/shm"

  # Per-sender fast boxes (small frames inline) and the FIFO's fragments
  # (everything else). A segment holds one fast box per rank of the job.
  fastbox_size  = "64KiB"
  fastbox_max   = "4KiB"
  eager_limit   = "4KiB"
  max_send_size = "64KiB"
  fragments     = 32

  # CMA where the host allows it (ptrace scope, seccomp). "none" switches
  # CMA off; "cma" fails at start if it cannot work.
  single_copy = "auto"

  # The mechanism table, by increasing max (the last block without one):
  # for rendezvous messages up to max bytes, CMA while at most
  # single_copy_depth other rendezvous sends to the same peer are in
  # flight (0: only a message alone; -1: never), else the copy pipeline
  # with fragments of `fragment` bytes (at most max_send_size; 0: all of
  # it) and at most `depth` fragments to the peer in flight (0: no bound).
  # These are sm's defaults, measured on a 2-core AMD EPYC (Zen 4) VM:
  # CMA moves ~11 GB/s at any size, so one message alone of 32-256 KiB
  # is faster by CMA (no copy-in), but a window of messages (osu bw) and
  # anything from 1 MiB is faster by the pipeline, where both processes
  # copy at once. Leave the blocks out to get the defaults;
  # single_copy_min/single_copy_max instead give the older window by size
  # alone.
  mechanism {
    max               = "16KiB"
    single_copy_depth = -1
  }
  mechanism {
    max               = "256KiB"
    single_copy_depth = 0
  }
  mechanism {
    single_copy_depth = -1
  }

  # How often a rank checks that the peers it talks to are alive.
  liveness_interval = "100ms"
}
