# InfiniBand: the ib BTL over a software HCA (softrc: Reliable Connection
# semantics over TCP, so it runs without InfiniBand hardware, and between
# hosts). On real HCAs build with -tags rdmacore and set provider =
# "rdmacore" and the device name ibv_devices shows.
#
#   gobtl run -np 2 -c conf/examples/ib.hcl -- gobtl bench latency

job {
  # rdma_read lets a computing sender overlap (seed 004 §4.1);
  # rdma_read_async overlaps on the receiver too (§4.3).
  protocol = "rdma_read"
}

btl "self" "self" {}

btl "ib" "rail0" {
  provider = "softrc"
  device   = "softrc0"
  port     = 1

  # softrc only: where the port listens and what it publishes (an IP
  # address, an interface name such as "eth0", or a host name; unset:
  # loopback on one node, the first up, non-loopback interface when the job
  # spans nodes, or by interface or subnet: if_include = "eth0,10.0.0.0/24"),
  # and its link rate (a 4x SDR link moves "1GB/s", a 1x link "250MB/s";
  # unset is unlimited).
  # address = "eth0"
  # rate  = "1GB/s"

  eager_limit   = "12KiB"
  max_rd_atomic = 16      # reads outstanding per QP (seed 004 §4.2)
  rnr_retry     = 7       # 7: retry a receiver-not-ready peer forever
  min_rnr_timer = "10us"
  timeout       = 18      # ACK timeout 4.096us × 2^18 ≈ 1s, retry_count times
}

# A second rail on another port of the same HCA, for multirail:
# btl "ib" "rail1" {
#   port = 2
#   rate = "250MB/s"
# }

# Receive buffers: B-SRQ (seed 002 §3) — per-peer tiny buffers under
# credits plus a slab of 2^8..2^15-byte buckets, each a shared receive
# queue. Without this block the ib BTL uses Open MPI's receive_queues
# default layout (policy "srq"); Open MPI strings are accepted as
#   policy "recvbuf" { builtin = "srq", receive_queues = "P,128,256,192,128:S,2048,1024,1008,64" }
policy "recvbuf" {
  builtin    = "bsrq"
  tiny       = "128B"
  tiny_count = 32
  slab       = "4MiB"
}
