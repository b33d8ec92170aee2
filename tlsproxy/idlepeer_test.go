package tlsproxy

import (
	"bufio"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkIdleConnections puts the client and the backend of its idle connections into two processes of
// their own, idle peers, so that the proxy's process holds only the proxy's two descriptors per
// connection. A peer is this test binary run with -test.run=^TestIdlePeer$ and the environment below;
// the benchmark drives it with one command line on its stdin and reads one reply line from its stdout.
//
// Commands and replies ("idlepeer ok <result>" or "idlepeer error <message>"):
//
//	(start)          backend: ok <listening address>; client: ok ready
//	open ADDR N      client: dial ADDR N times, send the ClientHello on each and read the one-byte answer;
//	                 ok N once all N connections are open and answered
//	held             backend: ok <connections answered and held>
//	close            both: close every connection held; ok <how many>
//	mem              both: ok <Go heap in use plus stacks after a GC, in bytes>
//
// A peer closes everything and exits when its stdin ends, so it does not outlive the benchmark.
const (
	idlePeerEnv      = "TLSPROXY_IDLE_PEER"       // "backend" or "client"
	idlePeerHelloEnv = "TLSPROXY_IDLE_PEER_HELLO" // the ClientHello, hex-encoded
	idlePeerReply    = "idlepeer "                // prefixes reply lines; the test framework's own output has none
	// idlePeerTimeout bounds the wait for any one reply, opening all connections included; it only
	// limits how long a broken benchmark hangs.
	idlePeerTimeout = 60 * time.Second
)

// idlePeer is the state of a peer: the connections it holds and, for a backend, its listener.
type idlePeer struct {
	hello []byte
	l     net.Listener

	mu   sync.Mutex
	held []net.Conn
}

// runIdlePeer plays role ("backend" or "client") with the commands read from in until in ends.
func runIdlePeer(role string, hello []byte, in io.Reader, out io.Writer) error {
	p := &idlePeer{hello: hello}
	defer p.closeAll()
	reply := func(result string, err error) error {
		line := "ok " + result
		if err != nil {
			line = "error " + strings.ReplaceAll(err.Error(), "\n", " ")
		}
		_, werr := fmt.Fprintf(out, "%s%s\n", idlePeerReply, line)
		return werr
	}
	switch role {
	case "backend":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			_ = reply("", err)
			return err
		}
		p.l = l
		defer l.Close()
		go p.serve()
		if err := reply(l.Addr().String(), nil); err != nil {
			return err
		}
	case "client":
		if err := reply("ready", nil); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown idle peer role %q", role)
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if err := reply(p.do(role, strings.Fields(sc.Text()))); err != nil {
			return err
		}
	}
	return sc.Err()
}

// do runs one command.
func (p *idlePeer) do(role string, cmd []string) (string, error) {
	switch {
	case len(cmd) == 3 && cmd[0] == "open" && role == "client":
		n, err := strconv.Atoi(cmd[2])
		if err != nil {
			return "", err
		}
		opened, err := p.open(cmd[1], n)
		if err != nil {
			return "", fmt.Errorf("connection %d of %d to %s: %w", opened+1, n, cmd[1], err)
		}
		return strconv.Itoa(opened), nil
	case len(cmd) == 1 && cmd[0] == "held" && role == "backend":
		p.mu.Lock()
		defer p.mu.Unlock()
		return strconv.Itoa(len(p.held)), nil
	case len(cmd) == 1 && cmd[0] == "close":
		return strconv.Itoa(p.closeAll()), nil
	case len(cmd) == 1 && cmd[0] == "mem":
		return strconv.FormatUint(snapshot().goBytes, 10), nil
	}
	return "", fmt.Errorf("%s peer: unknown command %q", role, strings.Join(cmd, " "))
}

// serve is the backend: read each connection's ClientHello, hold the connection, answer one byte.
func (p *idlePeer) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		go func() {
			if readHello(c, len(p.hello)) != nil {
				_ = c.Close()
				return
			}
			p.hold(c)
			_, _ = c.Write([]byte{'!'})
		}()
	}
}

// open is the client: dial addr n times, one connection after the other, each sending the ClientHello
// and waiting for the answer; the connections stay open and silent. It returns how many it opened.
func (p *idlePeer) open(addr string, n int) (int, error) {
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, idlePeerTimeout)
		if err != nil {
			return i, err
		}
		p.hold(c)
		_ = c.SetDeadline(time.Now().Add(idlePeerTimeout))
		if _, err := c.Write(p.hello); err != nil {
			return i, err
		}
		var one [1]byte
		if _, err := io.ReadFull(c, one[:]); err != nil {
			return i, err
		}
		_ = c.SetDeadline(time.Time{})
	}
	return n, nil
}

func (p *idlePeer) hold(c net.Conn) {
	p.mu.Lock()
	p.held = append(p.held, c)
	p.mu.Unlock()
}

// closeAll closes the connections held and returns how many they were.
func (p *idlePeer) closeAll() int {
	p.mu.Lock()
	held := p.held
	p.held = nil
	p.mu.Unlock()
	for _, c := range held {
		_ = c.Close()
	}
	return len(held)
}

// peerControl sends commands to a peer and reads its replies.
type peerControl struct {
	name    string
	in      io.Writer
	replies chan string // reply lines without idlePeerReply; closed when the peer's output ends
}

func newPeerControl(name string, in io.Writer, out io.Reader) *peerControl {
	pc := &peerControl{name: name, in: in, replies: make(chan string, 1)}
	go func() {
		defer close(pc.replies)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), idlePeerReply); ok {
				pc.replies <- line
			}
		}
	}()
	return pc
}

// reply waits for the peer's next reply and returns its result.
func (pc *peerControl) reply() (string, error) {
	select {
	case line, ok := <-pc.replies:
		if !ok {
			return "", fmt.Errorf("%s peer exited (its stderr is above)", pc.name)
		}
		if result, ok := strings.CutPrefix(line, "ok "); ok {
			return result, nil
		}
		return "", fmt.Errorf("%s peer: %s", pc.name, strings.TrimPrefix(line, "error "))
	case <-time.After(idlePeerTimeout):
		return "", fmt.Errorf("%s peer did not answer within %s", pc.name, idlePeerTimeout)
	}
}

// do sends one command and returns the result of its reply.
func (pc *peerControl) do(cmd string) (string, error) {
	if _, err := io.WriteString(pc.in, cmd+"\n"); err != nil {
		return "", fmt.Errorf("%s peer: %s: %w", pc.name, cmd, err)
	}
	return pc.reply()
}

// number is do for the commands that answer with a number.
func (pc *peerControl) number(t testing.TB, cmd string) uint64 {
	t.Helper()
	result, err := pc.do(cmd)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseUint(result, 10, 64)
	if err != nil {
		t.Fatalf("%s peer: %s answered %q, want a number", pc.name, cmd, result)
	}
	return v
}

// startIdlePeer runs a peer in a process of its own and returns its control and its first reply. The
// process is killed (by its PID) when the test or benchmark ends.
func startIdlePeer(t testing.TB, role string, hello []byte) (*peerControl, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestIdlePeer$")
	cmd.Env = append(os.Environ(), idlePeerEnv+"="+role, idlePeerHelloEnv+"="+hex.EncodeToString(hello))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the %s peer: %v", role, err)
	}
	t.Cleanup(func() {
		_ = in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	pc := newPeerControl(role, in, out)
	first, err := pc.reply()
	if err != nil {
		t.Fatal(err)
	}
	return pc, first
}

// startIdlePeers starts a client and a backend peer that send and expect a ClientHello for benchHost, and
// returns their controls and the backend's address.
func startIdlePeers(t testing.TB) (client, backend *peerControl, backendAddr netip.AddrPort) {
	t.Helper()
	hello := captureClientHello(t, &tls.Config{ServerName: benchHost})
	backend, listening := startIdlePeer(t, "backend", hello)
	client, _ = startIdlePeer(t, "client", hello)
	backendAddr, err := netip.ParseAddrPort(listening)
	if err != nil {
		t.Fatalf("backend peer's address %q: %v", listening, err)
	}
	return client, backend, backendAddr
}

// TestIdlePeer is a peer process of BenchmarkIdleConnections when idlePeerEnv is set. Otherwise it checks
// the peers as the benchmark uses them, in processes of their own: the client holds connections through
// the proxy, the backend answers and holds them, and closing both sides ends the proxied connections.
func TestIdlePeer(t *testing.T) {
	if role := os.Getenv(idlePeerEnv); role != "" {
		hello, err := hex.DecodeString(os.Getenv(idlePeerHelloEnv))
		if err == nil && len(hello) == 0 {
			err = errors.New("no ClientHello")
		}
		if err == nil {
			raiseFileLimit(idleConns + spareFDs)
			err = runIdlePeer(role, hello, os.Stdin, os.Stdout)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s peer: %v\n", role, err) // the benchmark reads only replies from stdout
			t.Fatal(err)
		}
		return
	}
	const n = 3
	client, backend, addr := startIdlePeers(t)
	tp := startProxy(t, Options{}, Route{Host: benchHost, Backend: "b", Endpoints: []netip.AddrPort{addr}})
	if got := client.number(t, fmt.Sprintf("open %s %d", tp.addr, n)); got != n {
		t.Fatalf("client opened %d connections, want %d", got, n)
	}
	if got := backend.number(t, "held"); got != n {
		t.Errorf("backend holds %d connections, want %d", got, n)
	}
	if got := tp.Active(); got != n {
		t.Errorf("proxy has %d active connections, want %d", got, n)
	}
	if client.number(t, "mem") == 0 {
		t.Error("client peer reports no Go memory")
	}
	if _, err := client.do("open 127.0.0.1:1 1"); err == nil {
		t.Error("opening a connection to a closed port succeeded")
	}
	if got := client.number(t, "close"); got != n {
		t.Errorf("client closed %d connections, want %d", got, n)
	}
	if got := backend.number(t, "close"); got != n {
		t.Errorf("backend closed %d connections, want %d", got, n)
	}
	waitFor(t, "the proxied connections to end", func() bool { return tp.Active() == 0 })
}
