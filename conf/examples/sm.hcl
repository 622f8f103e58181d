# One host, shared memory: the stack `gobtl run` jobs use on a single
# machine. Messages to this rank go through btl "self"; every other local
# rank through btl "sm" (higher exclusivity than any network BTL, so a
# network is not used for a local peer).
#
#   gobtl run -np 4 -c conf/examples/sm.hcl -- ./prog

job {
  # Above the eager limit the PML pipelines through sm's fragments
  # (copy-in by the sender, copy-out by the receiver, both at once), or
  # reads the sender's buffer by CMA (process_vm_readv, helped by the
  # sender's process_vm_writev) where sm's mechanism table (below) says
  # CMA is the better mechanism for the size and the queue to the peer.
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
  # Segment files, one per rank: /dev/shm/gobtl-<job>-sm.sm-<rank>-<random>.
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
  # guest whose host moves its two vCPUs, within seconds, between cores
  # that share a last-level cache and cores that do not. The pipeline's
  # second copy reads what the other core just wrote: a message alone of
  # 1 MiB took 42-60 us in the first state and 150-250 us in the second;
  # by CMA from both ends 62-123 us in either. Over 1,209 alternating
  # ping-pong runs the pipeline's median was lower at every size (1 MiB
  # 50 us against 87; 64 KiB 12 against 18), and with osu bw's window of
  # messages in flight it carried 17-25 GB/s against CMA's 12-16; but
  # under load, or in a third state of the host, it fell to 2.4 GB/s
  # where CMA from both ends kept 13-14, and on a quiet 16-core Xeon it
  # was behind a single CMA copy from 1 MiB (issue 29). So the pipeline
  # carries messages up to 512 KiB and every larger one is read from both
  # ends (btl/sm/mechanism.go); on a node with more ranks than CPUs the
  # default becomes CMA, which needs only the receiver running.
  # Leave the blocks out to get the defaults; single_copy_min/
  # single_copy_max instead give the older window by size alone.
  #
  # choose_mechanism = true turns every block that allows CMA
  # (single_copy_depth 0 and up) into a choice the receiver makes while
  # the job runs: the sender offers CMA, and the receiver takes whichever
  # of CMA and the pipeline delivered that power-of-two size class faster
  # lately (an EWMA of bytes per microsecond, from the START to the last
  # byte), and the other now and then (after 8 messages and 1 ms, the
  # gap doubling to 16 ms while the choice holds) so that it notices when
  # the host's state changes. Without blocks it chooses
  # for a message alone above 64 KiB. A node with more ranks than CPUs
  # keeps its fixed default. false: the blocks alone decide. With the
  # block below (never CMA) it has nothing to choose: leave the block out.
  # Off by default: against the pipeline for every message, alternating
  # ping-pong pairs under load 15-22 (90 pairs) had it far ahead at 256
  # KiB and 1 MiB (medians of osu's per-run mean 560 us against 1528, 2355
  # against 6188), but 40 pairs as the machine went quiet, the shared-cache
  # state in 36, had it behind (256 KiB 25.1 us against 17.9, 1 MiB 71.7
  # against 53.4): there the receivers took CMA for a large share of the
  # messages although the pipeline delivered sooner end to end.
  choose_mechanism = false

  mechanism {
    max               = "512KiB"
    single_copy_depth = -1
  }
  mechanism {
    single_copy_depth = 65536
  }

  # How often a rank checks that the peers it talks to are alive.
  liveness_interval = "100ms"
}
