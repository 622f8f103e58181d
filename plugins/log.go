package plugins

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/rs/zerolog"
)

// zlog is an hclog.Logger that writes through zerolog. go-plugin hands it
// both its own messages and every line of the plugin's stderr (decoded
// from hclog's JSON, with the plugin's level and fields), so a plugin's
// log reads like the rest of the job's, tagged plugin=<name>.
type zlog struct {
	z     zerolog.Logger
	name  string
	args  []any
	level hclog.Level
}

func newZlog(z zerolog.Logger, plugin string) *zlog {
	return &zlog{z: z.With().Str("plugin", plugin).Logger(), level: levelToHclog(z.GetLevel())}
}

func levelToHclog(l zerolog.Level) hclog.Level {
	switch {
	case l <= zerolog.TraceLevel:
		return hclog.Trace
	case l == zerolog.DebugLevel:
		return hclog.Debug
	case l == zerolog.InfoLevel:
		return hclog.Info
	case l == zerolog.WarnLevel:
		return hclog.Warn
	case l == zerolog.Disabled:
		return hclog.Off
	}
	return hclog.Error
}

func (l *zlog) event(level hclog.Level) *zerolog.Event {
	switch level {
	case hclog.Trace:
		return l.z.Trace()
	case hclog.Debug:
		return l.z.Debug()
	case hclog.Info, hclog.NoLevel:
		return l.z.Info()
	case hclog.Warn:
		return l.z.Warn()
	case hclog.Off:
		return nil
	}
	return l.z.Error()
}

// Log writes msg with args as key/value fields. go-plugin adds a
// "timestamp" field to relayed lines; zerolog has its own, so it is
// dropped. go-plugin's own messages (on the unnamed logger; relayed lines
// come through a logger named after the executable) are debug: the host
// reports what matters — a plugin that failed — itself, with the policy
// block it belongs to.
func (l *zlog) Log(level hclog.Level, msg string, args ...any) {
	if l.name == "" {
		level = min(level, hclog.Debug)
	}
	if level < l.level {
		return
	}
	e := l.event(level)
	if e == nil {
		return
	}
	if l.name != "" {
		e = e.Str("logger", l.name)
	}
	all := append(append([]any(nil), l.args...), args...)
	for i := 0; i+1 < len(all); i += 2 {
		k := fmt.Sprint(all[i])
		if k == "timestamp" {
			continue
		}
		e = e.Interface(k, all[i+1])
	}
	if len(all)%2 == 1 {
		e = e.Interface("extra", all[len(all)-1])
	}
	e.Msg(msg)
}

func (l *zlog) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l *zlog) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l *zlog) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l *zlog) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l *zlog) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }
func (l *zlog) IsTrace() bool                 { return l.level <= hclog.Trace }
func (l *zlog) IsDebug() bool                 { return l.level <= hclog.Debug }
func (l *zlog) IsInfo() bool                  { return l.level <= hclog.Info }
func (l *zlog) IsWarn() bool                  { return l.level <= hclog.Warn }
func (l *zlog) IsError() bool                 { return l.level <= hclog.Error }
func (l *zlog) ImpliedArgs() []any            { return l.args }
func (l *zlog) Name() string                  { return l.name }
func (l *zlog) SetLevel(level hclog.Level)    { l.level = level }
func (l *zlog) GetLevel() hclog.Level         { return l.level }

func (l *zlog) With(args ...any) hclog.Logger {
	c := *l
	c.args = append(append([]any(nil), l.args...), args...)
	return &c
}

func (l *zlog) Named(name string) hclog.Logger {
	c := *l
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (l *zlog) ResetNamed(name string) hclog.Logger {
	c := *l
	c.name = name
	return &c
}

func (l *zlog) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(l.StandardWriter(opts), "", 0)
}

func (l *zlog) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		l.Info(strings.TrimRight(string(p), "\n"))
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// lineLog logs each line written to it: what a plugin prints on its
// stdout or stderr after the handshake (go-plugin streams both to the
// host), tagged with the stream.
type lineLog struct {
	log    zerolog.Logger
	stream string
	mu     sync.Mutex
	buf    []byte
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.log.Info().Str("stream", l.stream).Msg(string(bytes.TrimRight(l.buf[:i], "\r")))
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 4096 { // a line that never ends
		l.log.Info().Str("stream", l.stream).Msg(string(l.buf))
		l.buf = l.buf[:0]
	}
	return len(p), nil
}
