# libfabric: the ofi BTL over a provider's reliable-datagram endpoints —
# verbs (InfiniBand, RoCE), efa (AWS), cxi (Slingshot), psm3/opx
# (Omni-Path), or in user space on any host tcp (under ofi_rxm), sockets
# and shm. gobtl info ofi lists the providers and domains found here.
# Built with the ofi build tag (make does: GOTAGS=pmix,ofi).
#
#   gobtl run -np 2 -c conf/examples/ofi.hcl -- gobtl bench latency

job {
  # rdma_write needs writes whose completion means delivery: the module
  # asks the provider for FI_DELIVERY_COMPLETE (tcp, sockets, shm take it).
  protocol = "rdma_read"
}

btl "self" "self" {}

# Shared memory for the ranks of one node (sm outranks ofi there).
btl "sm" "local" {}

btl "ofi" "net" {
  provider = "tcp"

  # One module per domain (a NIC), each a rail: one domain, or several.
  # Unset: loopback on one node, the first other domain when the job
  # spans nodes.
  # domain     = "eth0"
  # if_include = ["eth0", "eth1"]

  eager_limit = "12KiB"

  # Receive classes in Open MPI's syntax (one tag per queue): a per-peer
  # class for small frames under credits, shared classes by size.
  # receive_queues = "P,128,256,192,128:S,2048,256,240,32:S,16384,128,120,16:S,65536,32,30,8"
}
