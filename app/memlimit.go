package app

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

// The Go runtime's soft memory limit from the container's memory limit (--auto-gomemlimit). By default Go
// lets the heap grow to twice the live heap before it collects, so a burst (the start's full listing, many
// changes back to back) can take the process past a container limit that the live heap is far below. With
// a soft limit the collector runs more often as the process nears it instead.

// v1Unlimited is where cgroup v1 values mean "no limit": the kernel reports an unset memory.limit_in_bytes
// as the largest page count times the page size, just under 1<<63.
const v1Unlimited = 1 << 62

func bindMemoryLimitFlags(fs *flag.FlagSet, c *Config) {
	fs.BoolVar(&c.AutoGoMemLimit, "auto-gomemlimit", c.AutoGoMemLimit, "At start, set the Go runtime's soft memory limit (GOMEMLIMIT) to --auto-gomemlimit-ratio "+
		"of the memory limit of the container's cgroup (v1 or v2), so that the controller's garbage collector works harder near the limit instead of the container "+
		"being OOM-killed. Nothing changes when the GOMEMLIMIT environment variable is set or the container has no memory limit. "+
		"NGINX runs in the same container and counts against the same limit, which Go does not know about (docs/benchmarks.md#controller-memory).")
	fs.Float64Var(&c.AutoGoMemLimitRatio, "auto-gomemlimit-ratio", c.AutoGoMemLimitRatio, "Share of the container's memory limit that --auto-gomemlimit gives the Go runtime: "+
		"greater than 0, at most 1. The default leaves half to NGINX, which shares the container; a container of the controller alone can take 0.9.")
}

func (c *Config) validateMemoryLimit() []error {
	if !(c.AutoGoMemLimitRatio > 0 && c.AutoGoMemLimitRatio <= 1) { // also refuses NaN
		return []error{fmt.Errorf("--auto-gomemlimit-ratio must be greater than 0 and at most 1, got %v", c.AutoGoMemLimitRatio)}
	}
	return nil
}

// memoryLimitHost is what applyGoMemoryLimit reads and changes. Tests replace it, so they never change the
// test process's own memory limit.
type memoryLimitHost struct {
	// lookupEnv reads an environment variable (os.LookupEnv).
	lookupEnv func(string) (string, bool)
	// cgroupLimit returns the memory limit of the process's cgroup in bytes, and whether there is one.
	cgroupLimit func() (int64, bool, error)
	// setLimit sets the Go runtime's soft memory limit (debug.SetMemoryLimit).
	setLimit func(int64) int64
}

// processMemoryLimitHost is the running process: its environment, its cgroup, its runtime.
func processMemoryLimitHost() memoryLimitHost {
	return memoryLimitHost{lookupEnv: os.LookupEnv, cgroupLimit: readCgroupMemoryLimit, setLimit: debug.SetMemoryLimit}
}

// applyGoMemoryLimit sets the Go memory limit from the container's memory limit when --auto-gomemlimit asks
// for it and GOMEMLIMIT does not already say what the operator wants. Nothing here fails the start: a limit
// that cannot be read is a Warning, and Go keeps its default.
func applyGoMemoryLimit(cfg Config, log *zap.Logger, host memoryLimitHost) {
	// The runtime treats an empty GOMEMLIMIT as unset; "off" and every other value are the operator's choice.
	if v, ok := host.lookupEnv("GOMEMLIMIT"); ok && v != "" {
		log.Info("the GOMEMLIMIT environment variable sets the Go memory limit; --auto-gomemlimit does not apply", zap.String("GOMEMLIMIT", v))
		return
	}
	if !cfg.AutoGoMemLimit {
		return
	}
	limit, ok, err := host.cgroupLimit()
	if err != nil {
		log.Warn("cannot read the container's memory limit; the Go memory limit stays unset", zap.Error(err))
		return
	}
	if !ok {
		log.Debug("the container has no memory limit; the Go memory limit stays unset")
		return
	}
	goLimit := int64(cfg.AutoGoMemLimitRatio * float64(limit))
	host.setLimit(goLimit)
	log.Info("Go memory limit set from the container's memory limit", zap.Int64("container-memory-limit", limit),
		zap.Int64("go-memory-limit", goLimit), zap.Float64("ratio", cfg.AutoGoMemLimitRatio))
}

// readCgroupMemoryLimit returns the memory limit of the cgroup this process is in, from /proc/self/cgroup and
// the cgroup file systems under /sys/fs/cgroup. Outside Linux there is no limit.
func readCgroupMemoryLimit() (int64, bool, error) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return cgroupMemoryLimit(os.DirFS("/sys/fs/cgroup"), string(self))
}

// cgroupMemoryLimit returns the memory limit in bytes of the cgroup that procSelfCgroup (the content of
// /proc/self/cgroup) names, and whether there is one. cgroupFS is the cgroup mount root, /sys/fs/cgroup: the
// unified (v2) hierarchy itself, or the directory holding the v1 "memory" hierarchy.
//
// The limit that applies is the smallest one of the cgroup and its ancestors, so the files are read from
// the cgroup up to the mount's root. A cgroup path that is not in the mount (a container that sees its own
// cgroup as the mount's root but not in a cgroup namespace of its own) falls back to the root's file. With
// the memory controller on a v1 hierarchy (v1 or hybrid), that one holds the limit, whatever the v2 line says.
func cgroupMemoryLimit(cgroupFS fs.FS, procSelfCgroup string) (int64, bool, error) {
	var v1, v2 string
	var hasV1, hasV2 bool
	for line := range strings.Lines(procSelfCgroup) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		// hierarchy-ID:controller-list:cgroup-path; the path may itself hold colons.
		fields := strings.SplitN(line, ":", 3)
		if len(fields) != 3 || !strings.HasPrefix(fields[2], "/") {
			return 0, false, fmt.Errorf("/proc/self/cgroup: unexpected line %q", line)
		}
		if _, err := strconv.Atoi(fields[0]); err != nil {
			return 0, false, fmt.Errorf("/proc/self/cgroup: unexpected line %q", line)
		}
		switch {
		case fields[0] == "0" && fields[1] == "":
			v2, hasV2 = fields[2], true
		case slices.Contains(strings.Split(fields[1], ","), "memory"):
			v1, hasV1 = fields[2], true
		}
	}
	switch {
	case hasV1:
		return smallestCgroupLimit(cgroupFS, "memory", v1, "memory.limit_in_bytes", parseV1MemoryLimit)
	case hasV2:
		return smallestCgroupLimit(cgroupFS, ".", v2, "memory.max", parseV2MemoryLimit)
	}
	return 0, false, nil
}

// smallestCgroupLimit reads file in the cgroup's directory and each ancestor's up to mount, and returns the
// smallest limit found. A directory without the file (the root cgroup has no memory.max) sets no limit.
func smallestCgroupLimit(cgroupFS fs.FS, mount, cgroup, file string, parse func(string) (int64, bool, error)) (int64, bool, error) {
	// Clean with a leading slash keeps "/.." (a cgroup outside the namespace's root) at the root.
	dir := path.Join(mount, strings.TrimPrefix(path.Clean("/"+cgroup), "/"))
	if _, err := fs.Stat(cgroupFS, dir); errors.Is(err, fs.ErrNotExist) {
		dir = mount
	} else if err != nil {
		return 0, false, err
	}
	var limit int64
	found := false
	for {
		name := path.Join(dir, file)
		b, err := fs.ReadFile(cgroupFS, name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return 0, false, err
		default:
			v, ok, err := parse(strings.TrimSpace(string(b)))
			if err != nil {
				return 0, false, fmt.Errorf("%s: %w", name, err)
			}
			if ok && (!found || v < limit) {
				limit, found = v, true
			}
		}
		if dir == mount {
			return limit, found, nil
		}
		dir = path.Dir(dir)
	}
}

// parseV2MemoryLimit reads cgroup v2's memory.max: a number of bytes, or "max" for none.
func parseV2MemoryLimit(s string) (int64, bool, error) {
	if s == "max" {
		return 0, false, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, false, fmt.Errorf("want a number of bytes or max, got %q", s)
	}
	return v, true, nil
}

// parseV1MemoryLimit reads cgroup v1's memory.limit_in_bytes, where no limit reads as a number near 1<<63.
func parseV1MemoryLimit(s string) (int64, bool, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("want a number of bytes, got %q", s)
	}
	if v >= v1Unlimited {
		return 0, false, nil
	}
	return int64(v), true, nil
}
