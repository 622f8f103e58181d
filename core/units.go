package core

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// sizeUnits maps a unit suffix (lower case) to its multiplier. SI units
// with "B" are powers of 1000, IEC units with "iB" powers of 1024, and the
// bare letters k, m, g, t are powers of 1024 as in UCX's memunits.
var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40,
}

// ParseSize parses a byte count: "4096", "12KiB", "1.5MB", "64k".
func ParseSize(s string) (int64, error) {
	f, err := parseUnit(s, "size")
	if err != nil {
		return 0, err
	}
	if f != math.Trunc(f) {
		return 0, fmt.Errorf("size %q is not a whole number of bytes", s)
	}
	return int64(f), nil
}

// ParseRate parses a rate in bytes per second: "1GB/s", "250MB/s",
// "12.5GiB/s". MB is 10^6 bytes, as in the papers.
func ParseRate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	base, ok := strings.CutSuffix(t, "/s")
	if !ok {
		return 0, fmt.Errorf("rate %q: want a size per second, like \"1GB/s\"", s)
	}
	return parseUnit(base, "rate")
}

func parseUnit(s, what string) (float64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("%s %q: want a number with an optional unit (B, KB, KiB, MB, MiB, GB, GiB)", what, s)
	}
	n, err := strconv.ParseFloat(t[:i], 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %v", what, s, err)
	}
	unit := strings.ToLower(strings.TrimSpace(t[i:]))
	m, ok := sizeUnits[unit]
	if !ok {
		return 0, fmt.Errorf("%s %q: unknown unit %q (want B, KB, KiB, MB, MiB, GB, GiB, TB, TiB)", what, s, t[i:])
	}
	v := n * m
	if v > math.MaxInt64 {
		return 0, fmt.Errorf("%s %q is too large", what, s)
	}
	return v, nil
}

// ParseDuration parses a duration: "500us", "1.5ms", "2s".
func ParseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("duration %q: want a number with a unit (ns, us, ms, s, m)", s)
	}
	return d, nil
}

// FormatSize renders n in the largest IEC unit that divides it exactly.
func FormatSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for i < len(units)-1 && n != 0 && n%1024 == 0 {
		n /= 1024
		i++
	}
	return fmt.Sprintf("%d%s", n, units[i])
}

// FormatRate renders a rate in bytes per second with SI units.
func FormatRate(r float64) string {
	switch {
	case r >= 1e9:
		return strconv.FormatFloat(r/1e9, 'g', 4, 64) + "GB/s"
	case r >= 1e6:
		return strconv.FormatFloat(r/1e6, 'g', 4, 64) + "MB/s"
	case r >= 1e3:
		return strconv.FormatFloat(r/1e3, 'g', 4, 64) + "KB/s"
	}
	return strconv.FormatFloat(r, 'g', 4, 64) + "B/s"
}
