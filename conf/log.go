package conf

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rs/zerolog"
)

// LogEnv is the environment variable that overrides the log block:
// GOBTL_LOG=debug sets every component's level, GOBTL_LOG=pml=debug,btl.sm=info
// sets those components', and GOBTL_LOG=info,pml=debug does both.
const LogEnv = "GOBTL_LOG"

// Loggers hands out one zerolog logger per component, each at the level
// the configuration gives it. A component name is dotted ("btl.sm.rail0");
// its level is that of the longest configured prefix ("btl.sm", then "btl"),
// else the default level.
type Loggers struct {
	root   zerolog.Logger
	level  zerolog.Level
	levels map[string]zerolog.Level
}

// Loggers builds the job's loggers, writing JSON lines to stderr, with
// GOBTL_LOG from the environment applied over the log block.
func (l Log) Loggers() (*Loggers, error) {
	return l.NewLoggers(os.Stderr, os.Getenv(LogEnv))
}

// NewLoggers builds loggers writing to w, with env (GOBTL_LOG's syntax,
// "" for none) applied over the log block.
func (l Log) NewLoggers(w io.Writer, env string) (*Loggers, error) {
	ls := &Loggers{
		root:   zerolog.New(w).With().Timestamp().Logger(),
		level:  zerolog.WarnLevel,
		levels: map[string]zerolog.Level{},
	}
	if l.Level != "" {
		lvl, err := parseLevel(l.Level)
		if err != nil {
			return nil, fmt.Errorf("conf: log level: %w", err)
		}
		ls.level = lvl
	}
	for _, name := range sortedKeys(l.Components) {
		lvl, err := parseLevel(l.Components[name])
		if err != nil {
			return nil, fmt.Errorf("conf: log level of %q: %w", name, err)
		}
		ls.levels[name] = lvl
	}
	if err := ls.applyEnv(env); err != nil {
		return nil, fmt.Errorf("conf: %s=%q: %w", LogEnv, env, err)
	}
	return ls, nil
}

func (ls *Loggers) applyEnv(env string) error {
	for _, item := range strings.Split(env, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, level, ok := strings.Cut(item, "=")
		if !ok {
			lvl, err := parseLevel(item)
			if err != nil {
				return err
			}
			ls.level = lvl
			continue
		}
		name = strings.TrimSpace(name)
		if name == "" {
			return fmt.Errorf("%q names no component", item)
		}
		lvl, err := parseLevel(strings.TrimSpace(level))
		if err != nil {
			return fmt.Errorf("component %q: %w", name, err)
		}
		ls.levels[name] = lvl
	}
	return nil
}

func parseLevel(s string) (zerolog.Level, error) {
	if s == "off" || s == "disabled" {
		return zerolog.Disabled, nil
	}
	if err := checkLevel(s); err != nil {
		return zerolog.NoLevel, err
	}
	return zerolog.ParseLevel(s)
}

// Level returns the level of component.
func (ls *Loggers) Level(component string) zerolog.Level {
	for name := component; ; {
		if lvl, ok := ls.levels[name]; ok {
			return lvl
		}
		i := strings.LastIndexByte(name, '.')
		if i < 0 {
			return ls.level
		}
		name = name[:i]
	}
}

// WithJob returns the loggers with every line carrying the job's id and
// this process's rank, so that the lines of a job's ranks, interleaved on
// one terminal or gathered into one file, say whose they are.
func (ls *Loggers) WithJob(job string, rank int) *Loggers {
	c := *ls
	c.root = ls.root.With().Str("job", job).Int("rank", rank).Logger()
	return &c
}

// For returns the logger of component, tagged with its name.
func (ls *Loggers) For(component string) zerolog.Logger {
	return ls.root.Level(ls.Level(component)).With().Str("component", component).Logger()
}
