package nginx

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// NGINX writes sizes as a number of bytes with an optional unit (k, m, g; any case) and times as a
// sequence of numbers with units (ms, s, m, h, d, w, M, y; "1h 30m"). Annotations are parsed here into
// numbers, range-checked by the caller, and written back into nginx.conf or the route push as plain
// numbers, so no annotation text reaches NGINX.

// errUnit is the error of a value that is not a size or a time in NGINX's syntax.
var errUnit = errors.New("not in NGINX's units")

// parseNginxSize parses a size: "1024", "8k", "1m", "1g" (units of 1024; any case). It returns the
// number of bytes, or an error for anything else, a negative value or an overflow.
func parseNginxSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errUnit
	}
	mult := int64(1)
	switch s[len(s)-1] {
	case 'k', 'K':
		mult = 1 << 10
	case 'm', 'M':
		mult = 1 << 20
	case 'g', 'G':
		mult = 1 << 30
	}
	if mult != 1 {
		s = s[:len(s)-1]
	}
	n, err := parseDigits(s)
	if err != nil || n > math.MaxInt64/mult {
		return 0, errUnit
	}
	return n * mult, nil
}

// parseDigits parses a non-empty run of ASCII digits (no sign, no spaces).
func parseDigits(s string) (int64, error) {
	if s == "" || len(s) > 18 {
		return 0, errUnit
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errUnit
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// nginxTimeUnits are the units of NGINX's time syntax, longest first where one is a prefix of another.
var nginxTimeUnits = []struct {
	name string
	d    time.Duration
}{
	{"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour},
	{"d", 24 * time.Hour}, {"w", 7 * 24 * time.Hour}, {"M", 30 * 24 * time.Hour}, {"y", 365 * 24 * time.Hour},
}

// parseNginxTime parses a time as ingress-nginx's timeout annotations take it, a plain number of
// seconds ("60"), or in NGINX's syntax ("500ms", "2m", "1h 30m"; each unit once at most, largest first
// is not required). The result is at most maxNginxTime.
func parseNginxTime(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := parseDigits(s); err == nil {
		if n > int64(maxNginxTime/time.Second) {
			return 0, errUnit
		}
		return time.Duration(n) * time.Second, nil
	}
	if s == "" {
		return 0, errUnit
	}
	var total time.Duration
	for s != "" {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		n, err := parseDigits(s[:i])
		if err != nil {
			return 0, errUnit
		}
		s = s[i:]
		var unit time.Duration
		for _, u := range nginxTimeUnits {
			if strings.HasPrefix(s, u.name) {
				unit = u.d
				s = s[len(u.name):]
				break
			}
		}
		if unit == 0 || n > int64(maxNginxTime/unit) {
			return 0, errUnit
		}
		total += time.Duration(n) * unit
		if total > maxNginxTime {
			return 0, errUnit
		}
		s = strings.TrimLeft(s, " ")
	}
	return total, nil
}

// maxNginxTime bounds the times that annotations set: a year, far above any useful timeout and far
// below what NGINX's timers hold.
const maxNginxTime = 365 * 24 * time.Hour
