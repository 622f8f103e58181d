# One host, shared memory: the stack `gobtl run` jobs use on a single
# machine. Messages to this rank go through btl "self"; every other local
# rank through btl "sm" (higher exclusivity than any network BTL, so a
# network is not used for a local peer).
#
#   gobtl run -np 4 -c conf/examples/sm.hcl -- ./prog

job {
  # Above the eager limit the PML reads the sender's buffer by CMA
  # (process_vm_readv, helped by the sender's process_vm_writev) where
  # sm's mechanism table (below) says CMA is the better mechanism for the
  # size and the queue to the peer, and otherwise pipelines through sm's
  # fragments: copy-in by the sender, copy-out by the receiver, both at
  # once.
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

  # A large CMA read goes from both ends: the receiver reads chunks from
  # the back while the sender, as long as it polls (it does while it
  # waits for the receiver's FIN), writes chunks from the front with
  # process_vm_writev. Every byte moves once, by both cores while both
  # run, by the receiver alone while the sender is off its CPU. false:
  # the receiver reads alone.
  single_copy_helper = true

  # The mechanism table, by increasing max (the last block without one):
  # for rendezvous messages up to max bytes, CMA while at most
  # single_copy_depth other rendezvous sends to the same peer are in
  # flight (0: only a message alone; -1: never), else the copy pipeline
  # with fragments of `fragment` bytes (at most max_send_size; 0: all of
  # it) and at most `depth` fragments to the peer in flight (0: no bound).
  # These are sm's defaults, measured on a 2-core AMD EPYC (Zen 3) KVM
  # guest whose host moves its two vCPUs, for tens of seconds at a time,
  # between cores that share a last-level cache and cores that do not.
  # The pipeline's second copy reads what the other core just wrote: a
  # message alone of 1 MiB took 42-60 us in the first state and 150-250
  # us in the second; by CMA from both ends 62-92 us in either. So a
  # message alone goes by CMA from 16 KiB up. With osu bw's window of
  # messages in flight, where both processes copy at once anyway, the
  # pipeline's best windows carried 17-25 GB/s and CMA from both ends
  # 12-16: a message queued behind another goes by the pipeline. Up to 16
  # KiB a fragment or two cost less than CMA's system call. Leave the
  # blocks out to get the defaults; single_copy_min/single_copy_max
  # instead give the older window by size alone.
  mechanism {
    max               = "16KiB"
    single_copy_depth = -1
  }
  mechanism {
    single_copy_depth = 0
  }

  # How often a rank checks that the peers it talks to are alive.
  liveness_interval = "100ms"
}
