# Two or more ranks on one host over the EXTOLL BTL (its software device),
# with aimd as the flow-control policy. From the top of gobtl:
#
#   make build plugins
#   bin/gobtl config check examples/plugins/aimd/stack.hcl
#   bin/gobtl run -np 2 -c examples/plugins/aimd/stack.hcl -- bin/gobtl bench msgrate --sizes 1KiB

btl "self" "self" {}
btl "extoll" "nic0" {}

policy "flow_control" {
  plugin     = "aimd"      # found beside gobtl (bin/plugins), under its install prefix, in plugin_dir or $GOBTL_PLUGIN_PATH
  on_failure = "fallback"  # if it dies, extoll_static takes over; "abort" stops the job
  step       = 4
  max        = 32
}
