# The stack of a simulated EXTOLL job (gobtl sim): the extoll BTL on the
# simulated card, in virtual time, with seed 003's dynamic credit flow
# control. Any extoll stack simulates once its extoll blocks say
# transport = "sim"; node_size ranks then share one card (one port).
#
#   gobtl sim -np 256 -c conf/examples/sim-extoll.hcl -- lu

job {
  # Rendezvous by RMA get, as MPI over EXTOLL does above 2 KiB (§3).
  protocol = "rdma_read"
}

btl "self" "self" {}

btl "extoll" "extoll0" {
  transport      = "sim"
  node_size      = 4
  slots_per_peer = 16
  piggyback      = true
  eager_limit    = "2KiB"
}

policy "flow_control" {
  builtin      = "extoll_dynamic"
  credit_slots = 2
}
