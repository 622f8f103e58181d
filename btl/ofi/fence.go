//go:build ofi && cgo

package ofi

import "fmt"

// Fences. What keeps another job's processes from this module's
// endpoints is, first, the job-key proof every session opens with
// (auth.go): it holds on every provider. A fabric may fence jobs as
// well, below libfabric, by the authorization key of a domain
// (domain_attr.auth_key): on Slingshot (cxi) a key is a CXI service and
// a VNI, and the switch carries a VNI's packets only between endpoints
// of that VNI. gobtl sets no key of its own — a VNI is granted to a job
// by the fabric manager through the launcher (Slurm's switch/
// hpe_slingshot plugin exports SLINGSHOT_VNIS and SLINGSHOT_SVC_IDS),
// and the cxi provider takes its default key from exactly those
// variables when the application passes none. So under such a launcher
// the job is fenced in the fabric as well; without the variables cxi
// opens the node's default service, which every job on the node shares:
// the module says so in a warning (the proof still drops what other jobs
// send). Other providers with a key size (gobtl info ofi lists it) run
// with the provider's default key.

// fence says how the fabric fences this module's endpoints, for the log,
// and whether that is a job's own fence (false: what fences the job is
// the job-key proof alone, which is worth a warning only where the
// fabric could have done more).
func fence(provider string, authKeySize int, getenv func(string) string) (how string, warn bool) {
	core := coreProvider(provider)
	switch {
	case core == "cxi":
		if v := getenv("SLINGSHOT_VNIS"); v != "" {
			return fmt.Sprintf("cxi VNI %s from the launcher (SLINGSHOT_VNIS) and the job-key proof", v), false
		}
		return "cxi's default service, shared by every job on the node (SLINGSHOT_VNIS unset: " +
			"no VNI granted by the launcher); only the job-key proof keeps other jobs out", true
	case authKeySize > 0:
		return fmt.Sprintf("%s's default authorization key and the job-key proof", core), false
	}
	return "the job-key proof (no authorization key in this provider)", false
}
