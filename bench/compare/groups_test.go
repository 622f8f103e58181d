package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testOptions are the flags' defaults, with the plugin group's plugin in
// a directory of the test's own.
func testOptions(t *testing.T) *options {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "extoll_dynamic"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	return &options{gobtl: "bin/gobtl", osu: "bin/osu-ompi", mpirun: "mpirun.openmpi",
		smStack: "sm.hcl", softrcStack: "ib.hcl", pluginKind: "flow_control", pluginName: "extoll_dynamic",
		pluginBTL: `btl "extoll" "x" {}`, pluginDir: dir, pluginBWWarmup: 20, extra: "--oversubscribe", tmp: t.TempDir()}
}

// commandOf is the command line of a runner of g for a bench, joined.
func commandOf(g *group, runner int, bench string) string {
	return strings.Join(g.runners()[runner].cmd(bench, g.sizes(bench)), " ")
}

func TestP2PIsTheSmSoftrcAndPluginGroups(t *testing.T) {
	gs, err := groupsOf("p2p", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range gs {
		names = append(names, g.name)
	}
	if !slices.Equal(names, []string{"sm", "softrc", "plugin"}) {
		t.Fatalf("groups %v", names)
	}
}

func TestTheSmGroupSweepsSizesOnTwoRanksOnly(t *testing.T) {
	o := testOptions(t)
	gs, err := groupsOf("sm", o)
	if err != nil {
		t.Fatal(err)
	}
	g := gs[0]
	if want := "bin/gobtl run -np 2 -c sm.hcl -- bin/gobtl bench latency --json --sizes 8,64,512,4096,32768,65536,262144,1048576,4194304"; commandOf(g, 0, "latency") != want {
		t.Errorf("subject: %s\nwant     %s", commandOf(g, 0, "latency"), want)
	}
	if want := "mpirun.openmpi --oversubscribe -np 2 --mca pml ob1 --mca btl self,vader --mca btl_vader_single_copy_mechanism none bin/osu-ompi msgrate --sizes 8"; commandOf(g, 2, "msgrate") != want {
		t.Errorf("second reference: %s\nwant                %s", commandOf(g, 2, "msgrate"), want)
	}
	if g.plot != "sm" || len(g.refs) != 2 {
		t.Errorf("plot %q, %d references", g.plot, len(g.refs))
	}
	o.np, o.iters = 4, 7
	gs, err = groupsOf("sm", o)
	if err != nil {
		t.Fatal(err)
	}
	if want := "bin/gobtl run -np 4 -c sm.hcl -- bin/gobtl bench bw --json --sizes 65536,1048576,4194304 --iters 7"; commandOf(gs[0], 0, "bw") != want {
		t.Errorf("on 4 ranks: %s\nwant        %s", commandOf(gs[0], 0, "bw"), want)
	}
}

func TestTheSoftrcGroupRunsAgainstTCPOverLoopback(t *testing.T) {
	gs, err := groupsOf("softrc", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	g := gs[0]
	if want := "mpirun.openmpi --oversubscribe -np 2 --mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo bin/osu-ompi bw --sizes 8,64,512,4096,32768,65536,262144,1048576,4194304"; commandOf(g, 1, "bw") != want {
		t.Errorf("reference: %s\nwant       %s", commandOf(g, 1, "bw"), want)
	}
	if g.name != "softrc" || g.plot != "softrc" || g.subject.name != "gobtl ib/softrc" {
		t.Errorf("group %+v", g)
	}
}

func TestThePluginGroupRunsOnePolicyBothWaysAndWarmsBandwidthUp(t *testing.T) {
	o := testOptions(t)
	gs, err := groupsOf("plugin", o)
	if err != nil {
		t.Fatal(err)
	}
	g := gs[0]
	if !g.paired || g.subject.name != "extoll_dynamic plugin" || g.refs[0].name != "extoll_dynamic built in" {
		t.Errorf("group %+v", g)
	}
	plugin, builtin := filepath.Join(o.tmp, "plugin.hcl"), filepath.Join(o.tmp, "builtin.hcl")
	if want := "bin/gobtl run -np 2 -c " + plugin + " -- bin/gobtl bench bw --json --sizes 1048576 --warmup 20"; commandOf(g, 0, "bw") != want {
		t.Errorf("plugin bw: %s\nwant       %s", commandOf(g, 0, "bw"), want)
	}
	if want := "bin/gobtl run -np 2 -c " + builtin + " -- bin/gobtl bench msgrate --json --sizes 8"; commandOf(g, 1, "msgrate") != want {
		t.Errorf("built-in msgrate: %s\nwant             %s", commandOf(g, 1, "msgrate"), want)
	}
	for file, want := range map[string]string{
		plugin:  "btl \"self\" \"self\" {}\nbtl \"extoll\" \"x\" {}\npolicy \"flow_control\" {\n  plugin = \"extoll_dynamic\"\n  plugin_dir = \"" + o.pluginDir + "\"\n}\n",
		builtin: "btl \"self\" \"self\" {}\nbtl \"extoll\" \"x\" {}\npolicy \"flow_control\" {\n  builtin = \"extoll_dynamic\"\n}\n",
	} {
		if b, err := os.ReadFile(file); err != nil || string(b) != want {
			t.Errorf("%s: %v\n%s\nwant\n%s", file, err, b, want)
		}
	}
	o.pluginBWWarmup = 0
	if gs, err = groupsOf("plugin", o); err != nil {
		t.Fatal(err)
	}
	if c := commandOf(gs[0], 0, "bw"); strings.Contains(c, "--warmup") {
		t.Errorf("no warm-up asked, got %s", c)
	}
}

func TestThePluginGroupWantsItsPluginBuilt(t *testing.T) {
	o := testOptions(t)
	o.pluginDir = t.TempDir()
	if _, err := groupsOf("plugin", o); err == nil || !strings.Contains(err.Error(), "make plugins builds it") {
		t.Fatalf("got %v", err)
	}
}

func TestTheCollGroupRunsOnFourRanksByDefault(t *testing.T) {
	gs, err := groupsOf("coll", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	g := gs[0]
	if want := "bin/gobtl run -np 4 -- bin/gobtl bench allreduce --json --sizes 8,1048576"; commandOf(g, 0, "allreduce") != want {
		t.Errorf("subject: %s\nwant     %s", commandOf(g, 0, "allreduce"), want)
	}
	if got := g.benches(); !slices.Equal(got, []string{"allreduce", "bcast", "allgather", "barrier"}) {
		t.Errorf("benches %v", got)
	}
}

func TestAnUnknownSetIsAnError(t *testing.T) {
	if _, err := groupsOf("ring", testOptions(t)); err == nil || !strings.Contains(err.Error(), `no set "ring"`) {
		t.Fatalf("got %v", err)
	}
}

// echoRunner is a runner whose runs print a report with one row of the
// size asked, its field set to v.
func echoRunner(name string, v string) runner {
	return runner{name: name, cmd: func(bench string, s []int) []string {
		return []string{"echo", `{"bench":"` + bench + `","rows":[{"size":` + joinSizes(s) + `,"lat_us":` + v + `}]}`}
	}}
}

func TestMeasureKeepsEveryRepetitionOfEveryRunner(t *testing.T) {
	g := &group{name: "g", subject: echoRunner("gobtl", "3"), refs: []runner{echoRunner("ref", "4.5")},
		metrics: []metric{{"latency", "lat_us", 8, true, 1, "latency 8 B (us)"}}}
	vals := values{}
	load := measure([]*group{g}, vals, 3, 0)
	if len(load) != 6 {
		t.Errorf("%d load samples, want one a run (6)", len(load))
	}
	for r, want := range map[string][]float64{"gobtl": {3, 3, 3}, "ref": {4.5, 4.5, 4.5}} {
		if got := vals[key{"g", r, "latency", 8, "lat_us"}]; !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", r, got, want)
		}
	}
	if len(vals) != 4 { // lat_us and size, of each runner
		t.Errorf("values %v", vals)
	}
}

// The ofi group prints each repetition's ratio: its 1 MiB figures move
// by more between minutes than the target allows, for both sides.
func TestTheOfiGroupPairsItsRunsByRepetition(t *testing.T) {
	gs, err := groupsOf("ofi", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if g := gs[0]; g.name != "ofi" || !g.paired {
		t.Errorf("group %q: paired %v, want the ofi group paired", g.name, g.paired)
	}
}
