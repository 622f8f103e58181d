# A stack for more ranks than cores (a laptop, a shared CI runner): waiting
# ranks give the core away early instead of spinning, and a hung job fails
# instead of running forever. Variables let a launcher tune it without
# editing the file:
#
#   gobtl config show --var spin=0 conf/examples/oversubscribed.hcl
#   GOBTL_VAR_stall_timeout=5m gobtl run -np 8 -- ./prog

variable "spin" {
  description = "busy polls before a waiting rank yields"
  default     = 100
}

variable "stall_timeout" {
  description = "how long a request may make no progress before it fails"
  default     = "60s"
}

job {
  # Send-based rendezvous: no registration cost, fine for small jobs.
  protocol      = "pipeline"
  eager_limit   = "4KiB"
  stall_timeout = var.stall_timeout

  progress {
    spin      = var.spin
    yield     = 10
    sleep     = "20us"
    max_sleep = "2ms"
  }

  log {
    level      = "warn"
    components = { pml = "info" }
  }
}

btl "self" "self" {}
btl "sm" "local" {}
