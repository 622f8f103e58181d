variable "kib" {
  default = 4
}
variable "hosts" {
  default = ["a", "b"]
}
job {
  protocol         = "rdma_write"
  eager_limit      = "${var.kib}KiB"
  rndv_eager_limit = 0
  exclusive        = false
  max_reads        = 2
  stall_timeout    = "1m"
  progress {
    spin      = 1
    yield     = 2
    sleep     = "1us"
    max_sleep = "1ms"
  }
  log {
    level      = "debug"
    components = { pml = "trace" }
  }
}
btl "testnet" "rail0" {
  device      = "d"
  mode        = "event"
  ports       = 2
  weight      = 0.5
  verbose     = true
  eager_limit = 8192
  max_send    = "1MiB"
  bandwidth   = "1.5GB/s"
  latency     = "700ns"
  hosts       = var.hosts
  labels      = { x = "y" }
  queue {
    size = "2KiB"
  }
  tuning {
    retry {
      count = 7
    }
  }
}
btl "self" "self" {}
policy "flow_control" {
  builtin = "testfc"
  buffers = 8
  bucket {}
}
policy "recvbuf" {
  plugin     = "plugfc"
  on_failure = "abort"
  window     = 4
}
