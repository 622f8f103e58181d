package conf_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gobtl/gobtl/conf"
)

func TestLogLevelsComeFromTheLogBlockAndGOBTL_LOG(t *testing.T) {
	block := conf.Log{Level: "warn", Components: map[string]string{"pml": "debug", "btl": "error", "btl.sm": "info"}}
	tests := []struct {
		name string
		log  conf.Log
		env  string
		want map[string]zerolog.Level
	}{
		{
			name: "the defaults are quiet",
			log:  conf.DefaultJob().Log,
			want: map[string]zerolog.Level{"pml": zerolog.WarnLevel, "btl.sm": zerolog.WarnLevel},
		},
		{
			name: "a component takes the level of its longest configured prefix",
			log:  block,
			want: map[string]zerolog.Level{
				"pml": zerolog.DebugLevel, "pml.match": zerolog.DebugLevel, "btl.ib": zerolog.ErrorLevel,
				"btl.sm": zerolog.InfoLevel, "btl.sm.rail0": zerolog.InfoLevel, "btl.smx": zerolog.ErrorLevel, "plugins": zerolog.WarnLevel,
			},
		},
		{
			name: "a bare level in GOBTL_LOG sets the default and keeps the block's components",
			log:  block,
			env:  "trace",
			want: map[string]zerolog.Level{"plugins": zerolog.TraceLevel, "pml": zerolog.DebugLevel},
		},
		{
			name: "component levels in GOBTL_LOG override the block's",
			log:  block,
			env:  "info, pml=error,btl.sm=off",
			want: map[string]zerolog.Level{"plugins": zerolog.InfoLevel, "pml": zerolog.ErrorLevel, "btl.sm": zerolog.Disabled, "btl.ib": zerolog.ErrorLevel},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls, err := tt.log.NewLoggers(&bytes.Buffer{}, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			for comp, want := range tt.want {
				if got := ls.Level(comp); got != want {
					t.Errorf("Level(%q) = %v, want %v", comp, got, want)
				}
			}
		})
	}
}

func TestLoggersFilterAndTagByComponent(t *testing.T) {
	var buf bytes.Buffer
	ls, err := conf.Log{Level: "warn", Components: map[string]string{"pml": "debug"}}.NewLoggers(&buf, "")
	if err != nil {
		t.Fatal(err)
	}
	pml, sm := ls.For("pml"), ls.For("btl.sm")
	pml.Debug().Msg("matched")
	sm.Info().Msg("hidden")
	sm.Warn().Msg("shown")
	out := buf.String()
	if !strings.Contains(out, `"component":"pml"`) || !strings.Contains(out, "matched") || !strings.Contains(out, "shown") || strings.Contains(out, "hidden") {
		t.Fatalf("log output:\n%s", out)
	}
}

// Every line says whose it is, once: the job, the rank and the
// component, each a single field.
func TestEveryLineCarriesTheJobAndTheRankOnce(t *testing.T) {
	var buf bytes.Buffer
	ls, err := conf.Log{Level: "info"}.NewLoggers(&buf, "")
	if err != nil {
		t.Fatal(err)
	}
	ls = ls.WithJob("j42", 3)
	sm, pml := ls.For("btl.sm.local"), ls.For("pml")
	sm.Info().Msg("one")
	pml.Warn().Int("peer", 1).Msg("two")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	for _, l := range lines {
		for _, field := range []string{`"job":"j42"`, `"rank":3`, `"component":`} {
			if strings.Count(l, field) != 1 {
				t.Errorf("%s appears %d times in %s", field, strings.Count(l, field), l)
			}
		}
	}
}

func TestABadGOBTL_LOGIsAnError(t *testing.T) {
	for _, env := range []string{"verbose", "pml=loud", "=debug"} {
		if _, err := conf.DefaultJob().Log.NewLoggers(&bytes.Buffer{}, env); err == nil {
			t.Errorf("GOBTL_LOG=%q accepted", env)
		}
	}
	_, err := conf.DefaultJob().Log.NewLoggers(&bytes.Buffer{}, "pml=debgu")
	if err == nil || !strings.Contains(err.Error(), `Did you mean "debug"?`) {
		t.Errorf("typo in GOBTL_LOG: %v", err)
	}
}
