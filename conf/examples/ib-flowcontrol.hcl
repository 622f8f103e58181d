# InfiniBand with the user-level dynamic flow control of seed 000 §4.3 on
# per-peer 2 KiB eager buffers, the paper's layout: each peer starts with
# two buffers and a receiver adds one for every message from a peer that
# had to wait for credits, up to 128.
#
#   gobtl run -np 8 -c conf/examples/ib-flowcontrol.hcl -- gobtl bench bw
#
# The other schemes: builtin = "ib_static" (pre_post buffers, fixed) and
# builtin = "ib_hardware" (no credits: the receiver's RNR NAK and infinite
# retry hold the sender back, seed 000 §4.1). Their names before they said
# which transport they serve — static, dynamic, hardware — still load, with
# a warning.

btl "self" "self" {}

btl "ib" "rail0" {
  provider    = "softrc"
  eager_limit = "2016B" # a 2 KiB buffer less the 32-byte header
}

# One per-peer queue of 2 KiB buffers, the layout the paper's flow control
# counts (its count is the flow-control policy's). Larger messages go by
# rendezvous over RDMA (job protocol rdma_read, the default), whose control
# frames fit the buffers. The count, 100, is what the static scheme
# posts with pre_post = 0; the dynamic scheme starts from initial.
policy "recvbuf" {
  builtin        = "perpeer"
  receive_queues = "P,2048,100,1,5"
}

policy "flow_control" {
  builtin           = "ib_dynamic"
  initial           = 2
  max               = 128
  growth            = "linear" # or "exponential"
  step              = 1
  credit_threshold  = 5        # explicit credits past 5 owed (seed 000 §6.3.1)
  rndv_on_no_credit = true     # small messages by rendezvous while out of credits
  shrink_after      = "50ms"   # beyond the paper: halve a quiet peer's buffers
}
