// Package mp holds the multi-process tests of the shared-memory stack:
// real ranks started by the real `gobtl run`, exchanging messages through
// btl/sm and the PML.
//
// The test binary doubles as the rank program (TestMain runs a role when
// the environment names one), so one `go test` builds everything but the
// gobtl command, which TestMain builds once.
package mp
