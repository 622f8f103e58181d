// Package arch checks the shape of the code base rather than its behaviour:
// which package may import which (the layers of ARCHITECTURE.md §1, as a
// table a new edge must fit), and how long a function may be. Each rule
// keeps a list of the places that break it today; the lists can only
// shrink — a test fails when an entry no longer breaks the rule, so that
// whoever mends a place also deletes its entry, and no new place can join.
package arch

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/gobtl/gobtl"

var update = flag.Bool("update", false, "rewrite the import table in ARCHITECTURE.md from the rules")

// rule says what the packages matching From may import of gobtl's own.
// Patterns: "x" is the package x; "x/..." is x and everything below it;
// "$own/..." is the package's own subtree as From names it ("btl/*/..."
// matched by btl/ib/verbs has btl/ib/... as its own).
type rule struct {
	From  string
	May   []string
	Layer string
	Why   string
}

// rules are tried in order; the first whose From matches a package
// governs it. A package no rule matches is an error: a new directory
// takes a place in the table before it is written.
var rules = []rule{
	{"core", nil, "contracts", "the contracts import nothing of ours"},
	{"core/policy", []string{"core"}, "contracts", "the policy driver sits on the contracts alone"},
	{"sim/...", nil, "framework", "the virtual-time scheduler and link: a leaf every simulated device may use"},
	{"pml/...", []string{"core", "core/policy", "$own/..."}, "framework", "the protocol engine never imports a transport"},
	{"btl/btltest", []string{"core", "boot", "internal/msgtest"}, "framework", "the BTL suite opens its ranks over boot.Group"},
	{"btl/netif", []string{"core"}, "framework", "network interfaces, shared by the network BTLs"},
	{"btl/*/...", []string{"core", "core/policy", "btl/netif", "internal/jobfile", "internal/topo", "sim", "$own/..."}, "framework",
		"a transport imports its own devices, never pml, a policy, boot or launch"},
	{"policies/*/internal/...", []string{"core"}, "framework", "helpers shared by one kind of policy"},
	{"policies/*/...", []string{"core", "$own/..."}, "framework", "policies are pure logic over the contracts"},
	{"plugins/sdk", []string{"core", "plugins/internal/...", "plugins/policypb"}, "framework", "what a plugin links"},
	{"plugins/internal/...", []string{"core", "plugins/internal/...", "plugins/policypb", "plugins/sdk"}, "framework", "the plugin protocol and test plugins"},
	{"plugins/policypb", nil, "framework", "generated protocol buffers"},
	{"plugins/conformance/...", []string{"core", "plugins", "plugins/conformance/..."}, "framework", "the plugin suite"},
	{"plugins/*", []string{"core", "plugins/sdk", "policies/..."}, "programs", "each serves a built-in policy as a plugin"},
	{"plugins", []string{"core", "plugins/internal/...", "plugins/policypb", "internal/owner", "internal/suggest"}, "framework", "the plugin host"},
	{"conf", []string{"core", "internal/suggest"}, "framework", "stack files over the contracts"},
	{"boot/...", []string{"core", "$own/..."}, "framework", "bootstraps: gobtl run's, PMIx, PMI-2"},
	{"launch", []string{"core", "boot", "internal/jobfile", "internal/owner", "internal/topo"}, "framework", "gobtl run's launcher serves boot's protocol and places the ranks"},
	{"coll/...", []string{"core", "pml", "internal/jobfile", "$own/..."}, "framework", "collectives over the PML's point-to-point"},
	{"internal/plot", []string{"core"}, "programs", "the figures of the experiments and bench/compare"},
	{"internal/mptest", []string{"launch"}, "tests", "the multi-process harness starts its jobs with gobtl run's launcher"},
	{"internal/layers", []string{"coll", "pml"}, "embedding API", "a *gobtl.Comm's PML and collective layer, for the framework's programs and tests"},
	{"internal/*", nil, "framework", "leaf helpers (internal/jobfile: the files a job makes, exclusive and checked)"},
	{"", []string{"boot", "boot/pmix", "btl/...", "coll/...", "conf", "core", "core/policy", "internal/layers", "internal/topo", "plugins", "pml", "policies/..."}, "embedding API",
		"Init wires conf to policies, BTLs and the PML"},
	{"bench/...", []string{"", "bench/...", "boot", "coll", "conf", "core", "pml", "internal/..."}, "programs", "gobtl bench"},
	{"experiment/...", []string{"", "bench/...", "boot", "btl/...", "coll", "conf", "core", "experiment/...", "internal/...", "pml", "plugins", "policies/...", "sim"}, "programs", "the papers' experiments and the simulator's job runner"},
	{"examples/...", []string{""}, "programs", "programs import the embedding API"},
	{"cmd/...", []string{"", "bench/...", "boot", "btl/...", "conf", "core", "experiment/...", "launch", "plugins", "plugins/conformance", "sim", "internal/..."}, "programs", "the command wires flags to everything"},
	{"test/...", nil, "tests", "test/ holds _test.go files only"},
}

// debt lists the edges that break the rules today. It can only shrink:
// an entry whose edge is gone fails the test until it is deleted. It is
// empty: a new edge takes a row of rules, with its reason, or goes.
var debt = []string{}

// rel is p relative to the module ("" for the root package).
func rel(p string) string {
	if p == module {
		return ""
	}
	return strings.TrimPrefix(p, module+"/")
}

// match reports whether package p matches pattern pat, and the subtree
// "$own" stands for when pat ends in "/...".
func match(pat, p string) (bool, string) {
	if pat == "" {
		return p == "", ""
	}
	base, tree := strings.CutSuffix(pat, "/...")
	pe, be := strings.Split(p, "/"), strings.Split(base, "/")
	if len(pe) < len(be) || (!tree && len(pe) != len(be)) {
		return false, ""
	}
	for i := range be {
		if ok, _ := path.Match(be[i], pe[i]); !ok {
			return false, ""
		}
	}
	return true, strings.Join(pe[:len(be)], "/")
}

func ruleFor(p string) (*rule, string) {
	for i := range rules {
		if ok, own := match(rules[i].From, p); ok {
			return &rules[i], own
		}
	}
	return nil, ""
}

// allowed reports whether p (governed by r, whose own subtree is own) may
// import q.
func allowed(r *rule, own, q string) bool {
	for _, m := range r.May {
		m = strings.Replace(m, "$own", own, 1)
		if ok, _ := match(m, q); ok {
			return true
		}
	}
	return false
}

// graph is the module's import graph of non-test code: package -> the
// module's packages it imports, relative names, all build tags that the
// repository uses on.
func graph(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-tags", "pmix rdmacore ofi", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	g := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		p := rel(f[0])
		g[p] = []string{}
		for _, q := range f[1:] {
			if q == module || strings.HasPrefix(q, module+"/") {
				g[p] = append(g[p], rel(q))
			}
		}
	}
	return g
}

func name(p string) string {
	if p == "" {
		return "(root)"
	}
	return p
}

func TestEveryImportFollowsTheLayerTable(t *testing.T) {
	g := graph(t)
	broken := map[string]bool{}
	var pkgs []string
	for p := range g {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		r, own := ruleFor(p)
		if r == nil {
			t.Errorf("%s: no rule in test/arch's table governs it: give it a place (and a line in ARCHITECTURE.md)", name(p))
			continue
		}
		for _, q := range g[p] {
			if allowed(r, own, q) {
				continue
			}
			e := name(p) + " -> " + name(q)
			broken[e] = true
			if !slices.Contains(debt, e) {
				t.Errorf("new import %s breaks the rule for %q (%s): it may import %v", e, r.From, r.Why, r.May)
			}
		}
	}
	for _, e := range debt {
		if !broken[e] {
			t.Errorf("debt entry %q no longer breaks a rule: delete it from test/arch's debt list", e)
		}
	}
}

// TestTheRulesCatchABrokenLayer breaks the table on purpose: edges the
// layers forbid must be refused by the rule that governs the importer.
func TestTheRulesCatchABrokenLayer(t *testing.T) {
	for _, e := range [][2]string{
		{"pml", "btl/sm"},
		{"btl/ib", "pml"},
		{"btl/ib", "btl/sm"},
		{"btl/ib/softrc", "policies/flowcontrol/ib_static"},
		{"policies/sched", "pml"},
		{"policies/recvbuf/bsrq", "policies/sched"},
		{"core", "pml"},
		{"sim", "btl/ib/simrc"},
		{"coll", "btl/sm"},
		{"launch", "pml"},
		{"", "experiment"},
		{"conf", "plugins"},
		{"sim", "experiment/simjob"},
		{"bench/compare", "experiment"},
		{"btl/btltest", "internal/mptest"},
		{"internal/msgtest", "launch"},
	} {
		r, own := ruleFor(e[0])
		if r == nil {
			t.Errorf("no rule for %s", name(e[0]))
			continue
		}
		if allowed(r, own, e[1]) {
			t.Errorf("%s -> %s is allowed by %q", name(e[0]), name(e[1]), r.From)
		}
	}
	for _, e := range [][2]string{
		{"btl/ib", "btl/ib/verbs"},
		{"btl/ib/simrc", "sim"},
		{"policies/recvbuf/bsrq", "policies/recvbuf"},
		{"pml", "pml/internal/list"},
	} {
		r, own := ruleFor(e[0])
		if r == nil || !allowed(r, own, e[1]) {
			t.Errorf("%s -> %s is refused", name(e[0]), name(e[1]))
		}
	}
}

// table renders the rules as the Markdown table ARCHITECTURE.md carries.
func table() string {
	var b strings.Builder
	b.WriteString("| layer | packages | may import | why |\n|---|---|---|---|\n")
	for _, r := range rules {
		from := "`" + r.From + "`"
		if r.From == "" {
			from = "root (`gobtl`)"
		}
		var may []string
		for _, m := range r.May {
			if m == "" {
				m = "root"
			}
			may = append(may, "`"+m+"`")
		}
		if len(may) == 0 {
			may = []string{"nothing of ours"}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.Layer, from, strings.Join(may, ", "), r.Why)
	}
	return b.String()
}

const (
	beginMark = "<!-- import-table: generated by go test ./test/arch -update; do not edit -->\n"
	endMark   = "<!-- end import-table -->\n"
)

func TestArchitectureShowsTheImportTable(t *testing.T) {
	const doc = "../../ARCHITECTURE.md"
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, beginMark), strings.Index(s, endMark)
	if i < 0 || j < i {
		t.Fatalf("ARCHITECTURE.md has no import table between %q and %q", beginMark, endMark)
	}
	want := s[:i+len(beginMark)] + table() + s[j:]
	if want == s {
		return
	}
	if *update {
		if err := os.WriteFile(doc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("ARCHITECTURE.md's import table differs from test/arch's rules: run go test ./test/arch -update")
}
