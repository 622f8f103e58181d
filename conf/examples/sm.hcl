# One host, shared memory: the stack `gobtl run` jobs use on a single
# machine. Messages to this rank go through btl "self"; every other local
# rank through btl "sm" (higher exclusivity than any network BTL, so a
# network is not used for a local peer).
#
#   gobtl run -np 4 -c conf/examples/sm.hcl -- ./prog

job {
  # Above the eager limit the PML reads the sender's buffer by CMA
  # (process_vm_readv) where sm says CMA is the better mechanism for the
  # size (single_copy_min/max below), and otherwise pipelines through
  # sm's fragments: copy-in by the sender, copy-out by the receiver, both
  # at once.
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
  max_send_size = "32KiB"
  fragments     = 64

  # CMA where the host allows it (ptrace scope, seccomp), used for the
  # sizes where it beat the copy pipeline on a 2-core AMD EPYC (Zen 4) VM:
  # latency 32 KiB-256 KiB. Bandwidth with many messages in flight was
  # better with the pipeline at every size, and so were 1 MiB and 4 MiB.
  # "none" switches CMA off; "cma" fails at start if it cannot work.
  single_copy     = "auto"
  single_copy_min = "32KiB"
  single_copy_max = "256KiB"

  # How often a rank checks that the peers it talks to are alive.
  liveness_interval = "100ms"
}
