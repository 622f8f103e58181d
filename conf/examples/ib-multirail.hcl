# Multirail InfiniBand (seed 001): two equal rails, one HCA each, between
# processes. Each btl "ib" block opens one port as a module, and every
# module that reaches a peer is one subchannel of that peer's virtual
# channel (§4.2): small and control messages are multiplexed round robin,
# RDMA data of stripe_threshold and more is cut into even stripes, one per
# rail, read in parallel (rdma_read) and reported once by the completion
# filter.
#
#   gobtl run -np 2 -c conf/examples/ib-multirail.hcl -- gobtl bench bw
#
# softrc rails are rate-limited TCP connections over loopback; a 4x SDR
# link moved about 1GB/s. The same stack on real HCAs: provider =
# "rdmacore", the device names ibv_devices shows, no rate.

job {
  protocol = "rdma_read"
  # Two processes on two cores: a waiting rank yields soon, so that the
  # other rank's device goroutines get a core.
  progress {
    spin      = 50
    yield     = 10
    sleep     = "10us"
    max_sleep = "200us"
  }
}

btl "self" "self" {}

# Multiple HCAs (§3.1): one device per rail.
btl "ib" "hca0" {
  device = "hca0"
  port   = 1
  rate   = "1GB/s"
}

btl "ib" "hca1" {
  device = "hca1"
  port   = 1
  rate   = "1GB/s"
}

# The other ways to build subchannels, alone or mixed with the above:
#
# Multiple ports of one HCA (§3.2) — a second block on the same device:
#   btl "ib" "hca0p2" {
#     device = "hca0"
#     port   = 2
#     rate   = "1GB/s"
#   }
#
# Several connections over one port, the LMC case (§3.3) — paths RC
# connections per peer, each its own subchannel, all sharing the port's
# link:
#   btl "ib" "lmc" {
#     device = "hca0"
#     port   = 1
#     paths  = 2
#   }

policy "sched" {
  builtin          = "even_striping"
  small            = "round_robin"
  stripe_threshold = "64KiB" # RDMA data at least this long is striped
  min_stripe       = "16KiB" # no stripe shorter than this
}
