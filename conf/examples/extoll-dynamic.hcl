# EXTOLL with the dynamic credit flow control of seed 003 §6: every rank
# keeps only credit_slots slots per sender for sure (the static region);
# the rest of the data region goes, at run time, to the senders that use
# it. Receivers watch how fast each sender spends its credits, keep them in
# high/medium/low/null activity lists, steal quota from the oldest idle
# sender for a busy one (Equation 6) and ask idle senders to return credits
# they no longer need (compulsory credit return). With few active senders a
# much smaller mailbox does as well as the static scheme's (§6.8, §7).
#
#   gobtl run -np 8 -c conf/examples/extoll-dynamic.hcl -- gobtl bench alltoall

job {
  protocol = "rdma_read"
}

btl "self" "self" {}

btl "extoll" "extoll0" {
  # A quarter of the static scheme's 58; the dynamic region adapts.
  slots_per_peer = 16
  piggyback      = true
  eager_limit    = "2KiB"
  # listen / if_include: see extoll-static.hcl (unset: loopback on one node,
  # the first up, non-loopback interface when the job spans nodes).
}

policy "flow_control" {
  builtin      = "extoll_dynamic"
  credit_slots = 2
  # Cap on one sender's quota; 0 is none (§7.4.1 tried 62).
  max_quota = 0
}
