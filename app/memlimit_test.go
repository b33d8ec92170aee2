package app

import (
	"errors"
	"runtime/debug"
	"strings"
	"testing"
	"testing/fstest"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// cgroupFiles builds a /sys/fs/cgroup tree from file path -> content.
func cgroupFiles(files map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for name, content := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(content + "\n")}
	}
	return fsys
}

// hybridSelf is /proc/self/cgroup of a process on a hybrid host: v1 hierarchies plus an empty unified one.
const hybridSelf = `12:pids:/kubepods/pod1/ctr
4:memory:/kubepods/pod1/ctr
3:cpu,cpuacct:/kubepods/pod1/ctr
0::/kubepods/pod1/ctr
`

func TestCgroupMemoryLimit(t *testing.T) {
	tests := map[string]struct {
		self      string
		files     map[string]string
		wantLimit int64
		wantFound bool
		wantErr   string
	}{
		"v2, own cgroup namespace": {
			self:  "0::/\n",
			files: map[string]string{"memory.max": "536870912"}, wantLimit: 512 << 20, wantFound: true,
		},
		"v2, limit at the leaf": {
			self:      "0::/kubepods.slice/pod1.slice/cri-ctr.scope\n",
			files:     map[string]string{"kubepods.slice/pod1.slice/cri-ctr.scope/memory.max": "268435456", "kubepods.slice/pod1.slice/memory.max": "max", "kubepods.slice/memory.max": "max"},
			wantLimit: 256 << 20, wantFound: true,
		},
		"v2, limit at a parent (the pod's)": {
			self: "0::/kubepods.slice/pod1.slice/cri-ctr.scope\n",
			files: map[string]string{"kubepods.slice/pod1.slice/cri-ctr.scope/memory.max": "max", "kubepods.slice/pod1.slice/memory.max": "1073741824",
				"kubepods.slice/memory.max": "8589934592"},
			wantLimit: 1 << 30, wantFound: true,
		},
		"v2, the smallest of leaf and parents": {
			self:      "0::/a/b\n",
			files:     map[string]string{"a/b/memory.max": "3000", "a/memory.max": "2000", "memory.max": "4000"},
			wantLimit: 2000, wantFound: true,
		},
		"v2, max everywhere": {
			self:  "0::/a/b\n",
			files: map[string]string{"a/b/memory.max": "max", "a/memory.max": "max"},
		},
		"v2, the root cgroup has no memory.max": {
			self:  "0::/\n",
			files: map[string]string{"cgroup.controllers": "cpu memory"},
		},
		"v2, path outside the mount falls back to the root": {
			self:      "0::/system.slice/docker-abc.scope\n",
			files:     map[string]string{"memory.max": "100000000"},
			wantLimit: 100000000, wantFound: true,
		},
		"v2, a cgroup outside the namespace's root": {
			self:      "0::/../../x\n",
			files:     map[string]string{"memory.max": "4096"},
			wantLimit: 4096, wantFound: true,
		},
		"v2, garbage in memory.max": {
			self:    "0::/\n",
			files:   map[string]string{"memory.max": "lots"},
			wantErr: `memory.max: want a number of bytes or max, got "lots"`,
		},
		"v1, limit": {
			self:      "4:memory:/docker/abc\n1:cpu:/docker/abc\n",
			files:     map[string]string{"memory/docker/abc/memory.limit_in_bytes": "209715200", "memory/memory.limit_in_bytes": "9223372036854771712"},
			wantLimit: 200 << 20, wantFound: true,
		},
		"v1, limit at a parent": {
			self:      "4:memory:/kubepods/burstable/pod1/ctr\n",
			files:     map[string]string{"memory/kubepods/burstable/pod1/ctr/memory.limit_in_bytes": "9223372036854771712", "memory/kubepods/burstable/pod1/memory.limit_in_bytes": "314572800"},
			wantLimit: 300 << 20, wantFound: true,
		},
		"v1, unlimited": {
			self:  "4:memory:/docker/abc\n",
			files: map[string]string{"memory/docker/abc/memory.limit_in_bytes": "9223372036854771712", "memory/memory.limit_in_bytes": "9223372036854771712"},
		},
		"v1, path missing in the mount": {
			self:      "4:memory:/docker/abc\n",
			files:     map[string]string{"memory/memory.limit_in_bytes": "134217728"},
			wantLimit: 128 << 20, wantFound: true,
		},
		"v1, path missing in the mount: a child cgroup of the same name is no ancestor": {
			self:      "4:memory:/docker/abc\n",
			files:     map[string]string{"memory/docker/memory.limit_in_bytes": "4096", "memory/memory.limit_in_bytes": "134217728"},
			wantLimit: 128 << 20, wantFound: true,
		},
		"v1, no memory mount": {
			self:  "4:memory:/docker/abc\n",
			files: map[string]string{"cpu/cpu.shares": "1024"},
		},
		"hybrid: the v1 memory hierarchy holds the limit": {
			self: hybridSelf,
			files: map[string]string{"memory/kubepods/pod1/ctr/memory.limit_in_bytes": "67108864",
				"unified/kubepods/pod1/ctr/cgroup.procs": "1", "memory.max": "1024"},
			wantLimit: 64 << 20, wantFound: true,
		},
		"no memory controller": {
			self:  "3:cpu,cpuacct:/x\n1:name=systemd:/x\n",
			files: map[string]string{"memory.max": "1024", "memory/memory.limit_in_bytes": "1024"},
		},
		"empty": {},
		"garbage": {
			self:    "this is not a cgroup file\n",
			wantErr: `unexpected line "this is not a cgroup file"`,
		},
		"garbage hierarchy id": {
			self:    "x:memory:/a\n",
			wantErr: `unexpected line "x:memory:/a"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			limit, found, err := cgroupMemoryLimit(cgroupFiles(tc.files), tc.self)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if limit != tc.wantLimit || found != tc.wantFound {
				t.Errorf("limit %d found %v, want %d %v", limit, found, tc.wantLimit, tc.wantFound)
			}
		})
	}
}

// TestApplyGoMemoryLimit: what the controller does at start with each combination of GOMEMLIMIT,
// --auto-gomemlimit and the container's limit, and what it logs.
func TestApplyGoMemoryLimit(t *testing.T) {
	const limit = 1 << 30
	tests := map[string]struct {
		args    []string
		env     map[string]string
		cgroup  func() (int64, bool, error)
		wantSet int64 // 0: the runtime is left alone
		wantLog string
		level   zapcore.Level
	}{
		"limit": {
			cgroup: func() (int64, bool, error) { return limit, true, nil }, wantSet: 1 << 29,
			wantLog: "Go memory limit set from the container's memory limit", level: zapcore.InfoLevel,
		},
		"ratio": {
			args:   []string{"--auto-gomemlimit-ratio=0.5"},
			cgroup: func() (int64, bool, error) { return limit, true, nil }, wantSet: limit / 2,
			wantLog: "Go memory limit set from the container's memory limit", level: zapcore.InfoLevel,
		},
		"ratio 1": {
			args:   []string{"--auto-gomemlimit-ratio=1"},
			cgroup: func() (int64, bool, error) { return limit, true, nil }, wantSet: limit,
			wantLog: "Go memory limit set from the container's memory limit", level: zapcore.InfoLevel,
		},
		"GOMEMLIMIT set": {
			env:     map[string]string{"GOMEMLIMIT": "700MiB"},
			cgroup:  func() (int64, bool, error) { return limit, true, nil },
			wantLog: "the GOMEMLIMIT environment variable sets the Go memory limit", level: zapcore.InfoLevel,
		},
		"GOMEMLIMIT off is the operator's choice too": {
			env:     map[string]string{"GOMEMLIMIT": "off"},
			cgroup:  func() (int64, bool, error) { return limit, true, nil },
			wantLog: "the GOMEMLIMIT environment variable", level: zapcore.InfoLevel,
		},
		"empty GOMEMLIMIT is unset": {
			env:    map[string]string{"GOMEMLIMIT": ""},
			cgroup: func() (int64, bool, error) { return limit, true, nil }, wantSet: 1 << 29,
			wantLog: "Go memory limit set from the container's memory limit", level: zapcore.InfoLevel,
		},
		"disabled": {
			args:   []string{"--auto-gomemlimit=false"},
			cgroup: func() (int64, bool, error) { return limit, true, nil },
		},
		"no limit": {
			cgroup:  func() (int64, bool, error) { return 0, false, nil },
			wantLog: "the container has no memory limit", level: zapcore.DebugLevel,
		},
		"unreadable limit": {
			cgroup:  func() (int64, bool, error) { return 0, false, errors.New("permission denied") },
			wantLog: "cannot read the container's memory limit", level: zapcore.WarnLevel,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := parseFlags(t, tc.args...)
			requireValidateError(t, cfg, "")
			core, logs := observer.New(zapcore.DebugLevel)
			var set []int64
			applyGoMemoryLimit(cfg, zap.New(core), memoryLimitHost{
				lookupEnv:   func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok },
				cgroupLimit: tc.cgroup,
				setLimit:    func(v int64) int64 { set = append(set, v); return 0 },
			})
			switch {
			case tc.wantSet == 0 && len(set) > 0:
				t.Errorf("runtime limit set to %v, want it left alone", set)
			case tc.wantSet != 0 && (len(set) != 1 || set[0] != tc.wantSet):
				t.Errorf("runtime limit set to %v, want [%d]", set, tc.wantSet)
			}
			entries := logs.All()
			if tc.wantLog == "" {
				if len(entries) != 0 {
					t.Errorf("logged %v, want nothing", entries)
				}
				return
			}
			if len(entries) != 1 || !strings.Contains(entries[0].Message, tc.wantLog) || entries[0].Level != tc.level {
				t.Fatalf("logged %v, want one %s line containing %q", entries, tc.level, tc.wantLog)
			}
			fields := entries[0].ContextMap()
			if tc.wantSet != 0 && (fields["container-memory-limit"] != int64(limit) || fields["go-memory-limit"] != tc.wantSet) {
				t.Errorf("log fields %v, want both limits", fields)
			}
			if v, ok := tc.env["GOMEMLIMIT"]; ok && v != "" && fields["GOMEMLIMIT"] != v {
				t.Errorf("log fields %v, want GOMEMLIMIT=%s", fields, v)
			}
		})
	}
}

func TestAutoGoMemLimitRatioValidation(t *testing.T) {
	for _, ratio := range []string{"0", "-0.5", "1.01", "NaN"} {
		cfg := parseFlags(t, "--auto-gomemlimit-ratio="+ratio)
		requireValidateError(t, cfg, "--auto-gomemlimit-ratio must be greater than 0 and at most 1")
	}
	for _, ratio := range []string{"0.01", "0.9", "1"} {
		requireValidateError(t, parseFlags(t, "--auto-gomemlimit-ratio="+ratio), "")
	}
}

// TestRegistryExposesGoMemoryLimit: operators see the limit the runtime works with as go_gc_gomemlimit_bytes.
func TestRegistryExposesGoMemoryLimit(t *testing.T) {
	reg, _ := NewRegistry()
	want := debug.SetMemoryLimit(-1) // reads the limit without changing it
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "go_gc_gomemlimit_bytes" {
			if got := mf.GetMetric()[0].GetGauge().GetValue(); got != float64(want) {
				t.Errorf("go_gc_gomemlimit_bytes = %v, want %d", got, want)
			}
			return
		}
	}
	t.Errorf("go_gc_gomemlimit_bytes is not served; metrics: %d families", len(mfs))
}
