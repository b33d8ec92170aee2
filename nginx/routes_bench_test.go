package nginx

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkRouteChange measures the route lane inside the data plane with real NGINX holding n hosts
// (one Ingress each, two Prefix paths to its own Service): an iteration changes one host's routes (a
// new Exact path) and waits until a request for the new path is served, without a reload. Reported
// besides ns/op: the p99 of those iterations, the full push of all n hosts, and the memory of NGINX
// (RSS of the master and its workers, summed) after every host was requested once.
//
// With regex=true every host is a regex host (a rewrite-target path "/api/(.*)" besides its two paths)
// and the new path of an iteration is a regex path.
//
//	go test -run '^$' -bench RouteChange -benchtime 200x ./nginx/
func BenchmarkRouteChange(b *testing.B) {
	requireNginx(b)
	for _, regex := range []bool{false, true} {
		for _, n := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("hosts=%d/regex=%v", n, regex), func(b *testing.B) { benchRouteChange(b, n, regex) })
		}
	}
}

func benchRouteChange(b *testing.B, n int, regex bool) {
	paths := nginxDir(b)
	cfg := testRenderConfig(b, paths)
	cfg.HTTPSPort = 0
	rt := benchRuntime(b, cfg)
	m, _ := Merge(benchTranslations(n), nil)
	rewrite := &RouteOptions{RewriteTarget: "/$1"}
	if regex {
		for i := range m.Servers[1:] {
			s := &m.Servers[1+i]
			re, err := CompilePathRegex("/api/(.*)")
			if err != nil {
				b.Fatal(err)
			}
			s.Locations = append(slices.Clone(s.Locations), Location{Path: "/api/(.*)", PathType: PathPrefix,
				Upstream: s.Locations[0].Upstream, Options: rewrite, Regex: re})
		}
	}
	conf, hash, err := Render(m, cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := rt.Apply(ctx, conf, hash); err != nil {
		b.Fatal(err)
	}
	backend := httpServer(b, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	eps := make(map[UpstreamName][]Endpoint, len(m.Upstreams))
	for _, u := range m.Upstreams {
		eps[u.Name] = []Endpoint{backend}
	}
	if err := rt.Client().ReplaceEndpoints(ctx, eps); err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	if err := rt.Client().ReplaceRoutes(ctx, routeTable(&m)); err != nil {
		b.Fatal(err)
	}
	fullPush := time.Since(began)

	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 5 * time.Second}
	get := func(host, path string) int {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", cfg.HTTPPort, path), nil)
		req.Host = host
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range m.Servers[1:] {
		if code := get(string(m.Servers[1+i].Host), "/api"); code != http.StatusOK {
			b.Fatalf("host %s: status %d", m.Servers[1+i].Host, code)
		}
	}
	rss := nginxRSS(b, rt.Process().PID())

	var took []time.Duration
	i := 0
	for b.Loop() {
		i++
		s := m.Servers[1+i%(len(m.Servers)-1)]
		path := "/changed-" + strconv.Itoa(i)
		l := Location{Path: path, PathType: PathExact, Upstream: s.Locations[0].Upstream}
		if regex {
			l.Path, l.Options = path+"(/.*)?", rewrite
			if l.Regex, err = CompilePathRegex(l.Path); err != nil {
				b.Fatal(err)
			}
		}
		s.Locations = append(slices.Clone(s.Locations), l)
		began := time.Now()
		if err := rt.Client().PushRoutes(ctx, RouteUpdate{Hosts: map[Hostname][]byte{s.Host: AppendRouteHostJSON(nil, &s)}}); err != nil {
			b.Fatal(err)
		}
		deadline := began.Add(5 * time.Second)
		for get(string(s.Host), path) != http.StatusOK {
			if time.Now().After(deadline) {
				b.Fatalf("host %s path %s not served after 5 s", s.Host, path)
			}
		}
		took = append(took, time.Since(began))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(fullPush.Milliseconds()), "full-push-ms")
	b.ReportMetric(float64(rss)/(1<<20), "nginx-MB")
	if strings.Contains(rt.Process().RecentOutput(), "reconfiguring") {
		b.Error("NGINX reloaded")
	}
}

// nginxRSS sums the resident memory of the NGINX master pid and its children.
func nginxRSS(b *testing.B, master int) int64 {
	b.Helper()
	total := rssOf(b, master)
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range dirs {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so fields start after the last ')'.
		fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(master) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			total += rssOf(b, pid)
		}
	}
	return total
}

func rssOf(b *testing.B, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
