# The stack of a simulated job (gobtl sim): InfiniBand over the simulated
# verbs provider, in virtual time, with seed 000's dynamic flow control on
# per-peer 2 KiB buffers. Any ib stack simulates once its ib blocks name
# provider = "sim".
#
#   gobtl sim -np 1024 -c conf/examples/sim.hcl -- lu

btl "self" "self" {}

btl "ib" "rail0" {
  provider    = "sim"
  eager_limit = "2016B"
}

policy "recvbuf" {
  builtin        = "perpeer"
  receive_queues = "P,2048,100,1,5"
}

policy "flow_control" {
  builtin           = "ib_dynamic"
  initial           = 2
  max               = 128
  credit_threshold  = 5
  rndv_on_no_credit = true
}
