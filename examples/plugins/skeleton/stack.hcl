# Two InfiniBand rails of different speed (softrc, on one host), scheduled
# by the skeleton plugin. From the top of gobtl:
#
#   make build plugins
#   bin/gobtl config check examples/plugins/skeleton/stack.hcl
#   bin/gobtl run -np 2 -c examples/plugins/skeleton/stack.hcl -- bin/gobtl bench bw

job {
  protocol = "rdma_read"
}

btl "self" "self" {}
btl "ib" "x4" {
  device = "hca0"
  rate   = "1GB/s"
}
btl "ib" "x1" {
  device = "hca1"
  rate   = "250MB/s"
}

policy "sched" {
  plugin     = "skeleton"  # found beside gobtl (bin/plugins), under its install prefix, in plugin_dir or $GOBTL_PLUGIN_PATH
  on_failure = "fallback"  # if it dies, a built-in scheduler takes over; "abort" ends the job
  alpha      = 0.5
}
