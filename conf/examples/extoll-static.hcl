# EXTOLL with the static credit flow control of seed 003 §5: each rank's
# VELO mailbox is split into a data region, divided equally among all
# ranks (each one's credit quota), and a credit region of credit_slots per
# rank. Credits go back every quota div (credit_slots+1) + 1 freed slots
# (Equation 1), piggybacked on data packets when they have room.
#
# On this machine the EXTOLL card is the software device: mailboxes in
# /dev/shm for ranks on the host, TCP between hosts.
#
#   gobtl run -np 4 -c conf/examples/extoll-static.hcl -- gobtl bench latency

job {
  # Rendezvous by RMA get, as MPI over EXTOLL does above 2 KiB (§3).
  protocol = "rdma_read"
}

btl "self" "self" {}

btl "extoll" "extoll0" {
  # §5.3: 58 slots per process and 2 credit slots give a low overhead.
  slots_per_peer = 58
  piggyback      = true
  eager_limit    = "2KiB"
  # Ranks on other hosts: publish an address they can reach. Unset, it is
  # loopback on one node and the first up, non-loopback interface when the
  # job spans nodes; pick one by interface or subnet (btl_tcp_if_include):
  # if_include = "eth0,10.0.0.0/24"
}

policy "flow_control" {
  builtin      = "extoll_static"
  credit_slots = 2
}
