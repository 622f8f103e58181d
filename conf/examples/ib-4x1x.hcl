# Multirail InfiniBand with rails of different speed (seed 001 §6.3): a
# 4x rail (1GB/s) and a 1x rail (250MB/s). Adaptive striping starts from
# equal weights and moves them toward the rails' path bandwidths from the
# delivery time of every stripe (Eqs. 1-4), without being told the rates.
#
#   gobtl run -np 2 -c conf/examples/ib-4x1x.hcl -- gobtl bench bw
#
# To compare: builtin = "even_striping", or builtin = "weighted_striping"
# with weights = [4, 1] (the a priori 4:1 of the link speeds).

job {
  protocol = "rdma_read"
  progress {
    spin      = 50
    yield     = 10
    sleep     = "10us"
    max_sleep = "200us"
  }
}

btl "self" "self" {}

btl "ib" "x4" {
  device = "hca0"
  port   = 1
  rate   = "1GB/s"
}

btl "ib" "x1" {
  device = "hca1"
  port   = 1
  rate   = "250MB/s"
}

policy "sched" {
  builtin          = "adaptive_striping"
  small            = "round_robin"
  stripe_threshold = "64KiB"
  min_stripe       = "16KiB"
  alpha            = 0.5 # share of each new measurement (Eq. 4)
  total_weight     = 100 # W_total, kept fixed
}
