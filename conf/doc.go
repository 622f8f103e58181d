// Package conf loads gobtl stack files: HCL v2 configurations that say
// which transports a job uses, with which parameters, under which
// policies.
//
// A configuration is one or more files (like Terraform's: every block from
// every file, duplicates across files reported) holding
//
//	job { protocol = "rdma_read", eager_limit = "12KiB", progress { ... }, log { ... } }
//	btl "<component>" "<instance>" { ...the component's own parameters... }
//	policy "<kind>" { builtin = "<name>" | plugin = "<name>", ...the policy's parameters... }
//	variable "<name>" { default = ..., description = "..." }
//
// The configuration is owned by the components, as in UCX's config tables
// or Nomad's plugin ConfigSchema: each registered core.Component declares
// its parameters as a []core.Param, and a block is decoded against the
// schema its component declares, so an unknown key, a wrong type or a bad
// unit is reported at its own line. The job block's schema (JobParams) and
// the framework attributes of policy blocks (PolicyParams) are declared
// the same way, so `gobtl info` prints them like any component.
//
// Values with units go through core's parsers: sizes ("12KiB" is 12288,
// "12KB" is 12000, a plain number is bytes), rates ("1GB/s") and
// durations ("500us"). Variables are referenced as var.<name> anywhere in
// an expression and overridden by Options.Vars (the CLI's --var) or by the
// environment (GOBTL_VAR_<name>).
//
// Every problem is an hcl.Diagnostic with a position, rendered by
// FormatDiagnostic as `file:line:col: summary; detail`, with a "Did you
// mean ...?" wherever a near name exists. Bad input never panics: the
// loader is fuzzed (FuzzLoad). A file is bounded before HCL parses it
// (bounds.go: MaxFileSize, MaxNesting, MaxTemplatePieces), since every
// rank parses the stack and HCL's parser recurses per level of nesting;
// a diagnostic quotes at most a line's worth of a value.
//
// Logging levels come from the job's log block and GOBTL_LOG; Log.Loggers
// builds the per-component zerolog loggers.
package conf
