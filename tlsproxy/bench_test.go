package tlsproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Benchmarks compare the proxy with a direct connection to the same backend on loopback, in one run, so
// that the machine's state is the same for both. docs/benchmarks-passthrough.md has the commands and
// numbers.

// benchSetup is a backend and a proxy routing benchHost to it.
type benchSetup struct {
	backend string // the backend's address
	proxy   *Proxy
	proxyL  net.Listener
	hello   []byte // the ClientHello clients send first; set by newBenchSetup
	served  chan error
}

const benchHost = "bench.example.com"

// newBenchSetup starts a backend in this process that hands each connection to serve, and a proxy in
// front of it.
func newBenchSetup(b *testing.B, serve func(net.Conn), opts Options) *benchSetup {
	b.Helper()
	bl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = bl.Close() }) // runs after the proxy's Shutdown below
	go func() {
		for {
			c, err := bl.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	s := startBenchProxy(b, bl.Addr().(*net.TCPAddr).AddrPort(), opts)
	s.hello = captureClientHello(b, &tls.Config{ServerName: benchHost})
	return s
}

// startBenchProxy starts a proxy on loopback that routes benchHost to backend.
func startBenchProxy(b *testing.B, backend netip.AddrPort, opts Options) *benchSetup {
	b.Helper()
	if opts.NginxAddress == "" {
		opts.NginxAddress = "127.0.0.1:1" // nothing routes there in the benchmarks
	}
	p := New(opts)
	p.SetTable(NewTable([]Route{{Host: benchHost, Backend: "bench", Endpoints: []netip.AddrPort{backend}}}))
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := &benchSetup{backend: backend.String(), proxy: p, proxyL: pl, served: make(chan error, 1)}
	go func() { s.served <- p.Serve(pl) }()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
		<-s.served
	})
	return s
}

// addr returns where a client connects: the proxy, or the backend directly.
func (s *benchSetup) addr(viaProxy bool) string {
	if viaProxy {
		return s.proxyL.Addr().String()
	}
	return s.backend
}

// readHello reads the ClientHello every benchmark client sends first, direct or not.
func readHello(c net.Conn, n int) error {
	_, err := io.ReadFull(c, make([]byte, n))
	return err
}

// cpuTime returns the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process's CPU time per MB moved since start: client, backend and (through the
// proxy) the proxy together, so the difference between direct and proxy is the proxy's own cost. Unlike
// MB/s it hardly depends on what else the machine runs.
func reportCPU(b *testing.B, start time.Duration, bytes int64) {
	b.ReportMetric(float64(cpuTime()-start)/float64(time.Microsecond)/(float64(bytes)/1e6), "cpu-µs/MB")
}

// BenchmarkThroughput: one long connection streaming client -> backend, through the proxy and directly.
func BenchmarkThroughput(b *testing.B) {
	const chunk = 256 << 10
	var helloLen int
	received := make(chan int64, 1)
	s := newBenchSetup(b, func(c net.Conn) {
		defer c.Close()
		if readHello(c, helloLen) != nil {
			return
		}
		buf := make([]byte, chunk)
		var n int64
		for {
			k, err := c.Read(buf)
			n += int64(k)
			if err != nil {
				break
			}
		}
		received <- n
	}, Options{})
	helloLen = len(s.hello)
	for _, via := range []string{"direct", "proxy"} {
		b.Run(via, func(b *testing.B) {
			c, err := net.Dial("tcp", s.addr(via == "proxy"))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(s.hello); err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, chunk)
			b.SetBytes(chunk)
			b.ResetTimer()
			cpu := cpuTime()
			for range b.N {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			if err := c.(*net.TCPConn).CloseWrite(); err != nil {
				b.Fatal(err)
			}
			if n := <-received; n != int64(b.N)*chunk {
				b.Fatalf("backend received %d bytes, want %d", n, int64(b.N)*chunk)
			}
			reportCPU(b, cpu, int64(b.N)*chunk)
		})
	}
}

// BenchmarkThroughputTLS: the workload passthrough exists for. One long TLS 1.3 connection streams
// client -> backend, which terminates TLS; through the proxy (which only sees ciphertext) and directly.
func BenchmarkThroughputTLS(b *testing.B) {
	const chunk = 256 << 10
	cert := selfSigned(b, benchHost)
	received := make(chan int64, 1)
	s := newBenchSetup(b, func(c net.Conn) {
		defer c.Close()
		tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}})
		buf := make([]byte, chunk)
		var n int64
		for {
			k, err := tc.Read(buf)
			n += int64(k)
			if err != nil {
				break
			}
		}
		received <- n
	}, Options{})
	for _, via := range []string{"direct", "proxy"} {
		b.Run(via, func(b *testing.B) {
			raw, err := net.Dial("tcp", s.addr(via == "proxy"))
			if err != nil {
				b.Fatal(err)
			}
			c := tls.Client(raw, &tls.Config{ServerName: benchHost, InsecureSkipVerify: true}) //nolint:gosec // benchmark
			defer c.Close()
			if err := c.Handshake(); err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, chunk)
			b.SetBytes(chunk)
			b.ResetTimer()
			cpu := cpuTime()
			for range b.N {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			if err := c.CloseWrite(); err != nil {
				b.Fatal(err)
			}
			if err := raw.(*net.TCPConn).CloseWrite(); err != nil {
				b.Fatal(err)
			}
			if n := <-received; n != int64(b.N)*chunk {
				b.Fatalf("backend received %d bytes, want %d", n, int64(b.N)*chunk)
			}
			reportCPU(b, cpu, int64(b.N)*chunk)
		})
	}
}

// shortConnection dials addr, sends the ClientHello and reads the backend's one-byte answer up to EOF; it
// returns the time from dial to the answer.
func shortConnection(addr string, hello []byte) (time.Duration, error) {
	start := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if _, err := c.Write(hello); err != nil {
		return 0, err
	}
	var one [1]byte
	if _, err := io.ReadFull(c, one[:]); err != nil {
		return 0, err
	}
	took := time.Since(start)
	_, _ = io.Copy(io.Discard, c) // the backend closes first, so TIME_WAIT stays on its side
	return took, nil
}

// answerOnce is the short-connection backend: read the ClientHello, answer one byte, close.
func answerOnce(helloLen *int) func(net.Conn) {
	return func(c net.Conn) {
		defer c.Close()
		if readHello(c, *helloLen) == nil {
			_, _ = c.Write([]byte{'!'})
		}
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkConnectionSetup: one connection at a time, alternating direct and proxied, each sending a
// ClientHello and waiting for the backend's first byte. It reports the p50 and p99 of both and the p50
// the proxy adds. ns/op covers one direct plus one proxied connection.
func BenchmarkConnectionSetup(b *testing.B) {
	var helloLen int
	s := newBenchSetup(b, answerOnce(&helloLen), Options{})
	helloLen = len(s.hello)
	direct := make([]time.Duration, 0, b.N)
	proxied := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		d, err := shortConnection(s.addr(false), s.hello)
		if err != nil {
			b.Fatal(err)
		}
		p, err := shortConnection(s.addr(true), s.hello)
		if err != nil {
			b.Fatal(err)
		}
		direct, proxied = append(direct, d), append(proxied, p)
	}
	b.StopTimer()
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(percentile(direct, 0.5)), "direct-p50-µs")
	b.ReportMetric(us(percentile(proxied, 0.5)), "proxy-p50-µs")
	b.ReportMetric(us(percentile(direct, 0.99)), "direct-p99-µs")
	b.ReportMetric(us(percentile(proxied, 0.99)), "proxy-p99-µs")
	b.ReportMetric(us(percentile(proxied, 0.5)-percentile(direct, 0.5)), "added-p50-µs")
}

// BenchmarkShortConnections: connections per second with 8 clients at once, through the proxy and
// directly.
func BenchmarkShortConnections(b *testing.B) {
	var helloLen int
	s := newBenchSetup(b, answerOnce(&helloLen), Options{})
	helloLen = len(s.hello)
	for _, via := range []string{"direct", "proxy"} {
		b.Run(via, func(b *testing.B) {
			addr := s.addr(via == "proxy")
			b.SetParallelism(4)
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := shortConnection(addr, s.hello); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "conns/s")
		})
	}
}

// raiseFileLimit lifts RLIMIT_NOFILE to want (the hard limit too, which needs privileges) and returns the
// soft limit in effect.
func raiseFileLimit(want uint64) uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	if lim.Cur >= want {
		return lim.Cur
	}
	if lim.Max < want {
		raised := syscall.Rlimit{Cur: want, Max: want}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			return want
		}
	}
	lim.Cur = min(want, lim.Max)
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	return lim.Cur
}

// memSnapshot is what the process and the kernel hold.
type memSnapshot struct {
	goBytes     uint64 // heap in use plus goroutine stacks, after a GC
	stackBytes  uint64
	fds         int
	kernelSlabs uint64 // unreclaimable kernel slab memory, machine-wide
}

func snapshot() memSnapshot {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := memSnapshot{goBytes: ms.HeapInuse + ms.StackInuse, stackBytes: ms.StackInuse}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		s.fds = len(ents)
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "SUnreclaim:"); ok {
				kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				s.kernelSlabs = kb << 10
			}
		}
		_ = f.Close()
	}
	return s
}

// since returns what s holds beyond before (zero where it holds less).
func (s memSnapshot) since(before memSnapshot) memSnapshot {
	return memSnapshot{
		goBytes:     s.goBytes - min(before.goBytes, s.goBytes),
		stackBytes:  s.stackBytes - min(before.stackBytes, s.stackBytes),
		fds:         s.fds - before.fds,
		kernelSlabs: s.kernelSlabs - min(before.kernelSlabs, s.kernelSlabs),
	}
}

// idleConns is the number of idle connections BenchmarkIdleConnections aims at; spareFDs are the
// descriptors a process keeps free beyond those open when it starts measuring: the proxy's process uses
// up to about a dozen for splice pipes that Go pools while connections are being opened.
const idleConns, spareFDs = 10000, 32

// BenchmarkIdleConnections opens idleConns connections that sent their ClientHello, got one byte back and
// then stay silent, directly from client to backend and through the proxy, and reports what each idle
// proxied connection costs beyond the direct one: Go memory (heap and stacks) and file descriptors of the
// proxy's process, and (approximate, machine-wide) kernel slab memory. Client and backend are idle peers
// in processes of their own (idlepeer_test.go), so this process holds only the proxy's two sockets per
// connection (an idle connection holds no splice pipe). Run it with -benchtime=1x; each iteration opens
// and closes all connections twice.
func BenchmarkIdleConnections(b *testing.B) {
	client, backend, backendAddr := startIdlePeers(b)
	s := startBenchProxy(b, backendAddr, Options{IdleTimeout: 10 * time.Minute})
	// Where RLIMIT_NOFILE cannot be raised far enough, fewer connections are measured: the costs per
	// connection do not depend on their number.
	open := snapshot().fds
	limit := raiseFileLimit(uint64(2*idleConns + open + spareFDs))
	n := idleConns
	if fit := (int(limit) - open - spareFDs) / 2; fit < n {
		n = fit
		b.Logf("RLIMIT_NOFILE is %d and cannot be raised: measuring %d connections instead of %d (%d descriptors open, %d spare)", limit, n, idleConns, open, spareFDs)
	}

	peersGo := func() uint64 { return client.number(b, "mem") + backend.number(b, "mem") }
	// measure opens n connections to addr and returns what this process and (Go memory) the peers hold
	// for them.
	measure := func(addr string) (memSnapshot, uint64) {
		before, peersBefore := snapshot(), peersGo()
		client.number(b, fmt.Sprintf("open %s %d", addr, n))
		if held := backend.number(b, "held"); held != uint64(n) {
			b.Fatalf("backend peer holds %d connections, want %d", held, n)
		}
		after, peersAfter := snapshot(), peersGo()
		client.number(b, "close")
		backend.number(b, "close")
		for deadline := time.Now().Add(idlePeerTimeout); s.proxy.Active() > 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("%d proxied connections still open %s after both ends closed theirs", s.proxy.Active(), idlePeerTimeout)
			}
		}
		return after.since(before), peersAfter - min(peersBefore, peersAfter)
	}
	var direct, proxied memSnapshot
	var directPeersGo uint64
	for range b.N {
		direct, directPeersGo = measure(s.addr(false))
		proxied, _ = measure(s.addr(true))
	}
	per := func(v uint64) float64 { return float64(v) / float64(n) }
	b.ReportMetric(float64(n), "conns")
	b.ReportMetric(per(proxied.goBytes)-per(direct.goBytes), "proxy-go-B/conn")
	b.ReportMetric(per(proxied.stackBytes)-per(direct.stackBytes), "proxy-stack-B/conn")
	b.ReportMetric(float64(proxied.fds-direct.fds)/float64(n), "proxy-fds/conn")
	b.ReportMetric(per(proxied.kernelSlabs)-per(direct.kernelSlabs), "proxy-kernel-B/conn")
	b.ReportMetric(per(directPeersGo), "direct-go-B/conn")
}

// TestBenchmarkHelpers keeps the benchmark's building blocks honest in every test run: a short connection
// through the proxy gets its answer, and percentile picks the right sample.
func TestBenchmarkHelpers(t *testing.T) {
	if got := percentile([]time.Duration{5, 1, 4, 2, 3}, 0.5); got != 3 {
		t.Errorf("p50 of 1..5 = %v, want 3", got)
	}
	b := newRecorder(t, "backend")
	tp := startProxy(t, Options{}, Route{Host: benchHost, Backend: "b", Endpoints: []netip.AddrPort{b.addr}})
	hello := captureClientHello(t, &tls.Config{ServerName: benchHost})
	helloLen := len(hello)
	go func() {
		if c, err := b.next(); err == nil {
			answerOnce(&helloLen)(c)
		}
	}()
	if _, err := shortConnection(tp.addr, hello); err != nil {
		t.Fatal(err)
	}
}
