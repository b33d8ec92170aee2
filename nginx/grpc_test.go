package nginx

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// rawCodec carries gRPC messages as plain bytes, so the test service needs no generated code: what
// NGINX proxies is the same HTTP/2 framing, headers and trailers as for any protobuf service.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*(v.(*[]byte)))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*(v.(*[]byte)) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "raw" }

// echoService is a gRPC service with each kind of call: Unary answers "echo:<msg>" (and fails with
// NotFound for "missing"), Count streams n answers for "n", Chat answers every message as it comes.
var echoService = grpc.ServiceDesc{
	ServiceName: "test.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Unary",
		Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in []byte
			if err := dec(&in); err != nil {
				return nil, err
			}
			if string(in) == "missing" {
				return nil, status.Error(codes.NotFound, "no such thing")
			}
			_ = grpc.SetTrailer(ctx, metadata.Pairs("echo-trailer", "kept"))
			out := []byte("echo:" + string(in))
			return &out, nil
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Count",
		ServerStreams: true,
		Handler: func(_ any, stream grpc.ServerStream) error {
			var in []byte
			if err := stream.RecvMsg(&in); err != nil {
				return err
			}
			n, err := strconv.Atoi(string(in))
			if err != nil {
				return status.Error(codes.InvalidArgument, "not a number")
			}
			for i := 1; i <= n; i++ {
				out := []byte(strconv.Itoa(i))
				if err := stream.SendMsg(&out); err != nil {
					return err
				}
			}
			return nil
		},
	}, {
		StreamName:    "Chat",
		ServerStreams: true,
		ClientStreams: true,
		Handler: func(_ any, stream grpc.ServerStream) error {
			for {
				var in []byte
				if err := stream.RecvMsg(&in); errors.Is(err, io.EOF) {
					return nil
				} else if err != nil {
					return err
				}
				out := []byte("re:" + string(in))
				if err := stream.SendMsg(&out); err != nil {
					return err
				}
			}
		},
	}},
}

// grpcBackend serves echoService on a loopback port, over TLS when creds are set, and returns its
// endpoint.
func grpcBackend(t *testing.T, creds credentials.TransportCredentials) Endpoint {
	t.Helper()
	opts := []grpc.ServerOption{grpc.ForceServerCodecV2(rawCodec{})}
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	srv := grpc.NewServer(opts...)
	srv.RegisterService(&echoService, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return Endpoint{Address: "127.0.0.1", Port: int32(l.Addr().(*net.TCPAddr).Port)}
}

// TestGRPCThroughNginx runs a real gRPC client against NGINX's HTTPS port and real gRPC backends
// behind GRPC (h2c) and GRPCS profiles: unary calls, a server stream and a bidirectional stream that
// answers each message before the next is sent, with grpc-status and trailers passing through. H2C
// sends plain HTTP/2 requests to an h2c backend, and AUTO_HTTP follows the client's scheme.
func TestGRPCThroughNginx(t *testing.T) {
	requireNginx(t)
	cfg := testRenderConfig(t, nginxDir(t))
	// One worker: idle upstream connections are kept per worker, so every request meets the same pools.
	cfg.WorkerProcesses = "1"
	rt := testRuntime(t, cfg, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	tlsBackend := httptest.NewUnstartedServer(nil)
	tlsBackend.StartTLS() // only for its certificate
	backendTLS := credentials.NewTLS(&tls.Config{Certificates: tlsBackend.TLS.Certificates})
	tlsBackend.Close()

	answer := func(w http.ResponseWriter, r *http.Request) {
		// Read the (empty) body first: NGINX's grpc module may send END_STREAM in a DATA frame after the
		// HEADERS, and a Go HTTP/2 server whose handler has already answered resets that stream with
		// STREAM_CLOSED, which NGINX can see before the response and turn into a 502.
		_, _ = io.Copy(io.Discard, r.Body)
		tlsOn := "plain"
		if r.TLS != nil {
			tlsOn = "tls"
		}
		_, _ = io.WriteString(w, r.Proto+" "+tlsOn+" "+r.URL.Path)
	}
	h2c := httptest.NewUnstartedServer(http.HandlerFunc(answer))
	var protocols http.Protocols // HTTP/1.1 and HTTP/2 without TLS on one port
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	h2c.Config.Protocols = &protocols
	h2c.Start()
	t.Cleanup(h2c.Close)
	httpsSrv := httptest.NewTLSServer(http.HandlerFunc(answer))
	t.Cleanup(httpsSrv.Close)
	endpoint := func(s *httptest.Server) Endpoint {
		return Endpoint{Address: "127.0.0.1", Port: int32(s.Listener.Addr().(*net.TCPAddr).Port)}
	}

	m, _ := buildModel(t, []any{
		service("default", "grpc", port(50051, "grpc")), service("default", "grpcs", port(50052, "grpcs")),
		service("default", "h2c", port(8080, "h2c")), service("default", "auto", port(8443, "https")),
		service("default", "h1", port(8080, "http")),
		ingress("default", "grpc", annotate(AnnotationBackendProtocol, "GRPC"), rule("grpc.example.com", prefix("/", "grpc", 50051))),
		ingress("default", "grpcs", annotate(AnnotationBackendProtocol, "GRPCS"), rule("grpcs.example.com", prefix("/", "grpcs", 50052))),
		ingress("default", "h2c", annotate(AnnotationBackendProtocol, "H2C"), rule("h2c.example.com", prefix("/", "h2c", 8080))),
		ingress("default", "auto", annotate(AnnotationBackendProtocol, "AUTO_HTTP"), rule("auto.example.com", prefix("/", "auto", 8443))),
		ingress("default", "h1", rule("h1.example.com", prefix("/", "h1", 8080))),
	}, nil)
	if len(m.Profiles) != 4 {
		t.Fatalf("profiles %+v, want four (GRPC, GRPCS, H2C, AUTO_HTTP)", m.Profiles)
	}
	applyModel(t, rt, m, cfg)
	if err := rt.Client().PushEndpoints(ctx, map[UpstreamName][]Endpoint{
		up("default", "grpc", 50051).Name:  {grpcBackend(t, nil)},
		up("default", "grpcs", 50052).Name: {grpcBackend(t, backendTLS)},
		up("default", "h2c", 8080).Name:    {endpoint(h2c)},
		up("default", "h1", 8080).Name:     {endpoint(h2c)}, // the same backend, over HTTP/1.1
		up("default", "auto", 8443).Name:   {endpoint(httpsSrv)},
	}); err != nil {
		t.Fatal(err)
	}

	nginxAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.HTTPSPort))
	for _, host := range []string{"grpc.example.com", "grpcs.example.com"} {
		t.Run(host, func(t *testing.T) {
			conn, err := grpc.NewClient("passthrough:///"+nginxAddr,
				grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{ServerName: host, InsecureSkipVerify: true})),
				grpc.WithAuthority(host), grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{})))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			checkGRPCCalls(ctx, t, conn)
		})
	}

	// Plain HTTP/2 to NGINX's HTTP port is not offered (NGINX 1.22 speaks h2c or HTTP/1.1 on a port,
	// not both), so a gRPC client without TLS is refused rather than served wrongly.
	conn, err := grpc.NewClient("passthrough:///"+net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.HTTPPort)),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("grpc.example.com"),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	in := []byte("x")
	var out []byte
	if err := conn.Invoke(ctx, "/test.Echo/Unary", &in, &out); status.Code(err) != codes.Unavailable {
		t.Errorf("gRPC without TLS on the HTTP port: %v, want Unavailable", err)
	}

	client := &http.Client{Transport: &http.Transport{
		// A connection per request: a POST on a client connection NGINX is closing would fail on the
		// client's side, not NGINX's.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true,
		// Every connection goes to NGINX: port 443 of a URL to its HTTPS port, port 80 to its HTTP port.
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			port := cfg.HTTPPort
			if strings.HasSuffix(addr, ":443") {
				port = cfg.HTTPSPort
			}
			return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		},
	}}
	do := func(method, url string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	get := func(url string) (int, string) { t.Helper(); return do(http.MethodGet, url) }
	// One backend address, two protocols: each keeps its own idle connections to it (NGINX's one worker
	// would otherwise hand one protocol's to the other). POST, which NGINX does not retry on another
	// connection, shows a connection of the wrong protocol.
	for i := range 3 {
		if code, body := do(http.MethodPost, "http://h2c.example.com/x"); code != http.StatusOK || body != "HTTP/2.0 plain /x" {
			t.Errorf("H2C, round %d: %d %q, want 200 %q", i, code, body, "HTTP/2.0 plain /x")
		}
		if code, body := do(http.MethodPost, "http://h1.example.com/x"); code != http.StatusOK || body != "HTTP/1.1 plain /x" {
			t.Errorf("HTTP to the H2C backend's address, round %d: %d %q, want 200 %q", i, code, body, "HTTP/1.1 plain /x")
		}
	}
	// Over plain HTTP the TLS backend gets plain HTTP, which Go's TLS server answers with 400; over HTTPS,
	// TLS, also after a plain request (each scheme has its own pool of idle connections).
	for range 2 {
		if code, body := get("https://auto.example.com/x"); code != http.StatusOK || body != "HTTP/1.1 tls /x" {
			t.Errorf("AUTO_HTTP over HTTPS: %d %q, want 200 %q", code, body, "HTTP/1.1 tls /x")
		}
		if code, body := get("http://auto.example.com/x"); code != http.StatusBadRequest {
			t.Errorf("AUTO_HTTP over HTTP to a TLS backend: %d %q, want the backend's 400 for plain HTTP", code, body)
		}
	}
}

// checkGRPCCalls makes each kind of gRPC call through conn and checks the answers, statuses and
// trailers.
func checkGRPCCalls(ctx context.Context, t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	in := []byte("hello")
	var out []byte
	var trailer metadata.MD
	if err := conn.Invoke(ctx, "/test.Echo/Unary", &in, &out, grpc.Trailer(&trailer)); err != nil || string(out) != "echo:hello" {
		t.Fatalf("unary: %q, %v; want echo:hello", out, err)
	}
	if got := trailer.Get("echo-trailer"); len(got) != 1 || got[0] != "kept" {
		t.Errorf("unary trailer echo-trailer = %q, want kept", got)
	}
	missing := []byte("missing")
	err := conn.Invoke(ctx, "/test.Echo/Unary", &missing, &out)
	if st, _ := status.FromError(err); st.Code() != codes.NotFound || st.Message() != "no such thing" {
		t.Errorf("unary error: %v, want NotFound \"no such thing\" (grpc-status and grpc-message passed through)", err)
	}

	stream, err := conn.NewStream(ctx, &echoService.Streams[0], "/test.Echo/Count")
	if err != nil {
		t.Fatal(err)
	}
	n := []byte("50")
	if err := stream.SendMsg(&n); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for i := 1; ; i++ {
		var msg []byte
		err := stream.RecvMsg(&msg)
		if errors.Is(err, io.EOF) {
			if i != 51 {
				t.Errorf("server stream ended after %d messages, want 50", i-1)
			}
			break
		}
		if err != nil {
			t.Fatalf("server stream message %d: %v", i, err)
		}
		if string(msg) != strconv.Itoa(i) {
			t.Fatalf("server stream message %d = %q", i, msg)
		}
	}

	chat, err := conn.NewStream(ctx, &echoService.Streams[1], "/test.Echo/Chat")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		msg := fmt.Appendf(nil, "m%d", i)
		if err := chat.SendMsg(&msg); err != nil {
			t.Fatal(err)
		}
		// The answer arrives while the request stream is still open: NGINX does not buffer either way.
		var reply []byte
		if err := chat.RecvMsg(&reply); err != nil || string(reply) != "re:"+string(msg) {
			t.Fatalf("bidi message %d: %q, %v", i, reply, err)
		}
	}
	if err := chat.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var rest []byte
	if err := chat.RecvMsg(&rest); !errors.Is(err, io.EOF) {
		t.Errorf("bidi end: %q, %v; want io.EOF (status OK)", rest, err)
	}
}
