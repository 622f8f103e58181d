# Two rails between goroutine ranks (gobtl.RunLocal): small messages go
# round robin, RDMA data of 64 KiB and more is striped by weights that
# follow the stripes' delivery times (seed 001 §4.5).
job {
  protocol = "rdma_read"
}

btl "inproc" "rail0" {}
btl "inproc" "rail1" { jitter = "20us" }

policy "sched" {
  builtin          = "adaptive_striping"
  small            = "round_robin"
  stripe_threshold = "64KiB"
  min_stripe       = "16KiB"
  alpha            = 0.5
}
