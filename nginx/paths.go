package nginx

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

//go:embed lua
var luaFiles embed.FS

// Paths is the layout of NGINX's working directory (--nginx-dir). Everything NGINX writes lives under
// it: configuration, PID file, temp paths; Lua files are written there at start.
type Paths struct {
	// Prefix is the absolute working directory, passed to nginx as -p.
	Prefix string
}

// NewPaths returns the layout under prefix, made absolute.
func NewPaths(prefix string) (Paths, error) {
	abs, err := filepath.Abs(prefix)
	if err != nil {
		return Paths{}, fmt.Errorf("nginx directory %q: %w", prefix, err)
	}
	return Paths{Prefix: abs}, nil
}

// ConfFile is the live nginx.conf.
func (p Paths) ConfFile() string { return filepath.Join(p.Prefix, "nginx.conf") }

// LuaDir holds the embedded Lua modules, as LuaDir/ingress_reactor/*.lua.
func (p Paths) LuaDir() string { return filepath.Join(p.Prefix, "lua") }

// PIDFile is where the NGINX master writes its PID.
func (p Paths) PIDFile() string { return filepath.Join(p.Prefix, "nginx.pid") }

// TempDir holds client_body_temp_path, proxy_temp_path and the other temp paths.
func (p Paths) TempDir() string { return filepath.Join(p.Prefix, "tmp") }

// LogDir holds log files when logs do not go to stderr.
func (p Paths) LogDir() string { return filepath.Join(p.Prefix, "logs") }

// Prepare creates the directories and writes the embedded Lua modules, replacing older copies. The
// directories are 0755 and the Lua files 0644: the master (which may run as root) loads the Lua modules
// in init_by_lua, and workers, which run as another user when the master is root, create and read
// files in the temp paths. Prepare fails when the process is root and a directory above Prefix is not
// traversable by other users: workers could not write request bodies or large responses to the temp
// paths (NGINX answers 500), which no configuration test would reveal.
func (p Paths) Prepare() error {
	if !filepath.IsAbs(p.Prefix) {
		return fmt.Errorf("nginx directory %q must be an absolute path", p.Prefix)
	}
	for _, d := range []string{p.Prefix, p.LuaDir(), p.TempDir(), p.LogDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create nginx directory: %w", err)
		}
	}
	if os.Geteuid() == 0 {
		if err := workersCanReach(p.TempDir()); err != nil {
			return err
		}
	}
	return fs.WalkDir(luaFiles, "lua", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel("lua", path)
		if err != nil {
			return err
		}
		dst := filepath.Join(p.LuaDir(), rel)
		if d.IsDir() {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return fmt.Errorf("create Lua directory: %w", err)
			}
			return nil
		}
		data, err := luaFiles.ReadFile(path)
		if err != nil {
			return err
		}
		if err := writeFileAtomic(dst, data, 0o644); err != nil {
			return fmt.Errorf("write Lua module: %w", err)
		}
		return nil
	})
}

// workersCanReach checks that every directory from / down to dir lets other users through, as NGINX
// workers run as "nobody" (or the configured user) when the master is root.
func workersCanReach(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("check nginx directory: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("nginx workers (not root) cannot reach %s: %s has mode %04o; make it traversable by others (chmod o+x) or use an nginx directory elsewhere",
				dir, d, fi.Mode().Perm())
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// writeFileAtomic writes data to a temp file next to name and renames it into place, so NGINX never
// reads a half-written file.
func writeFileAtomic(name string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if tmp != "" {
			_ = os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Chmod(mode); err != nil {
		_ = f.Close()
		return fmt.Errorf("chmod %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, name); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	tmp = ""
	return nil
}

// DebianModuleDirs are where Debian's nginx packages put dynamic modules.
var DebianModuleDirs = []string{"/usr/lib/nginx/modules", "/usr/share/nginx/modules"}

// DetectModules returns the load_module paths for the Lua module (and its dependency, the NDK), plus
// the stream module when withStream is set, from the first of dirs that has the Lua module. With no
// dirs, DebianModuleDirs are searched. NGINX builds with the modules compiled in (OpenResty) need no
// load_module lines: leave RenderConfig.Modules empty instead of calling this.
func DetectModules(withStream bool, dirs ...string) ([]string, error) {
	if len(dirs) == 0 {
		dirs = DebianModuleDirs
	}
	for _, dir := range dirs {
		lua := filepath.Join(dir, "ngx_http_lua_module.so")
		if _, err := os.Stat(lua); err != nil {
			continue
		}
		mods := []string{}
		ndk := filepath.Join(dir, "ndk_http_module.so")
		if _, err := os.Stat(ndk); err == nil {
			mods = append(mods, ndk)
		}
		mods = append(mods, lua)
		if withStream {
			stream := filepath.Join(dir, "ngx_stream_module.so")
			if _, err := os.Stat(stream); err != nil {
				return nil, fmt.Errorf("nginx stream module not found in %s: %w", dir, err)
			}
			mods = append(mods, stream)
		}
		return mods, nil
	}
	return nil, fmt.Errorf("nginx Lua module (ngx_http_lua_module.so) not found in %v; install libnginx-mod-http-lua or set the modules directory", dirs)
}
