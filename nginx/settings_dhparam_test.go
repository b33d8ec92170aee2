package nginx

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// testDHParam and testDHParam5 are RFC 3526's 2048-bit MODP prime with the generators 2 and 5
// (testdata/dhparam-2048-g*.pem, which the modules and integration tests read too).
var (
	testDHParam  = mustReadTestdata("testdata/dhparam-2048-g2.pem")
	testDHParam5 = mustReadTestdata("testdata/dhparam-2048-g5.pem")
)

func mustReadTestdata(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// dhLookup serves the Secret ingress/dh with data.
func dhLookup(data map[string]string) SettingsRefLookup {
	return func(ref string) (map[string]string, error) {
		if ref != SecretRefPrefix+"ingress/dh" || data == nil {
			return nil, errors.New("secret " + strings.TrimPrefix(ref, SecretRefPrefix) + " does not exist or cannot be read")
		}
		return data, nil
	}
}

// TestDHParamSetting: ssl-dh-param -> the parameters of the Secret it names, encoded anew, or a problem
// that keeps the last good ones.
func TestDHParamSetting(t *testing.T) {
	smallPrime, _ := asn1.Marshal(dhParams{P: big.NewInt(0).Lsh(big.NewInt(1), 511).Add(big.NewInt(0).Lsh(big.NewInt(1), 511), big.NewInt(1)), G: big.NewInt(2)})
	p, _ := pem.Decode([]byte(testDHParam))
	var parsed dhParams
	if _, err := asn1.Unmarshal(p.Bytes, &parsed); err != nil {
		t.Fatal(err)
	}
	badGenerator, _ := asn1.Marshal(dhParams{P: parsed.P, G: big.NewInt(1)})
	generatorPMinus1, _ := asn1.Marshal(dhParams{P: parsed.P, G: new(big.Int).Sub(parsed.P, big.NewInt(1))})
	// 2^2047+1: odd, 2048 bits, and divisible by 3.
	composite, _ := asn1.Marshal(dhParams{P: new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), 2047), big.NewInt(1)), G: big.NewInt(2)})
	pemOf := func(typ string, der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	tests := map[string]struct {
		value       string
		secret      map[string]string
		lastGood    string
		want        string
		wantProblem string
	}{
		"unset":                         {},
		"valid":                         {value: "ingress/dh", secret: map[string]string{DHParamKey: testDHParam}, want: testDHParam},
		"valid, spaces and CRLF around": {value: " ingress/dh ", secret: map[string]string{DHParamKey: "\r\n" + strings.ReplaceAll(testDHParam, "\n", "\r\n")}, want: testDHParam},
		"no namespace": {value: "dh", secret: map[string]string{DHParamKey: testDHParam},
			wantProblem: `ssl-dh-param: invalid value "dh": want namespace/name of a Secret`},
		"missing Secret": {value: "ingress/other",
			wantProblem: `ssl-dh-param: invalid value "ingress/other": secret ingress/other does not exist or cannot be read`},
		"no dhparam.pem": {value: "ingress/dh", secret: map[string]string{"tls.crt": testDHParam},
			wantProblem: `ssl-dh-param: invalid value "ingress/dh": secret ingress/dh has no dhparam.pem`},
		"another PEM block": {value: "ingress/dh", secret: map[string]string{DHParamKey: pemOf("RSA PRIVATE KEY", []byte{1, 2, 3})},
			wantProblem: "want exactly one PEM block of type DH PARAMETERS"},
		"two blocks": {value: "ingress/dh", secret: map[string]string{DHParamKey: testDHParam + testDHParam5},
			wantProblem: "want exactly one PEM block of type DH PARAMETERS"},
		"not PKCS #3": {value: "ingress/dh", secret: map[string]string{DHParamKey: pemOf("DH PARAMETERS", []byte{0x30, 0x03, 0x02, 0x01, 0x05})},
			wantProblem: "is not PKCS #3 parameters"},
		"512-bit prime": {value: "ingress/dh", secret: map[string]string{DHParamKey: pemOf("DH PARAMETERS", smallPrime)},
			wantProblem: "want an odd prime of 1024 to 8192 bits"},
		"generator 1": {value: "ingress/dh", secret: map[string]string{DHParamKey: pemOf("DH PARAMETERS", badGenerator)},
			wantProblem: "want an odd prime of 1024 to 8192 bits and a generator between 2 and it"},
		"generator p-1": {value: "ingress/dh", secret: map[string]string{DHParamKey: pemOf("DH PARAMETERS", generatorPMinus1)},
			wantProblem: "want an odd prime of 1024 to 8192 bits and a generator between 2 and it"},
		"odd composite": {value: "ingress/dh", secret: map[string]string{DHParamKey: pemOf("DH PARAMETERS", composite)},
			wantProblem: "want an odd prime of 1024 to 8192 bits"},
		"invalid, the last good kept": {value: "ingress/dh", secret: map[string]string{DHParamKey: "junk"}, lastGood: "ingress/dh\n" + testDHParam5,
			want: testDHParam5, wantProblem: "ssl-dh-param: invalid value \"ingress/dh\": secret ingress/dh: dhparam.pem: want exactly one PEM block"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			data, last := map[string]string{}, map[string]string{}
			if tc.value != "" {
				data["ssl-dh-param"] = tc.value
			}
			if tc.lastGood != "" {
				last["ssl-dh-param"] = tc.lastGood
			}
			s, good, problems := ParseSettingsRefs(data, last, dhLookup(tc.secret))
			if s.SSLDHParam != tc.want {
				t.Errorf("parameters %q, want %q", s.SSLDHParam, tc.want)
			}
			if len(problems) > 0 && tc.wantProblem != "" && !strings.Contains(problems[0].String(), tc.wantProblem) || (len(problems) > 0) != (tc.wantProblem != "") {
				t.Errorf("problems %v, want %q", problems, tc.wantProblem)
			}
			if tc.want != "" && !strings.HasSuffix(good["ssl-dh-param"], tc.want) {
				t.Errorf("good value %q, want it to end with the parameters", good["ssl-dh-param"])
			}
		})
	}
}

// TestDHParamNginx: through real NGINX, the parameters' file is written 0600 in a 0700 directory and
// named by ssl_dhparam, and a TLS 1.2 client that offers only a DHE cipher gets a 2048-bit DH key
// exchange; without ssl-dh-param that handshake fails.
func TestDHParamNginx(t *testing.T) {
	requireNginx(t)
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not found: it is the client that offers DHE ciphers (Go's crypto/tls has none)")
	}
	paths := nginxDir(t)
	cfg := testRenderConfig(t, paths)
	cfg.DefaultCertificate, cfg.DefaultCertificateKey = rsaSelfSigned(t, paths.Prefix)
	rt := testRuntime(t, cfg, nil)
	handshake := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, openssl, "s_client", "-connect", fmt.Sprintf("127.0.0.1:%d", cfg.HTTPSPort), "-tls1_2",
			"-cipher", "DHE-RSA-AES128-GCM-SHA256", "-servername", "dh.example")
		cmd.Stdin = strings.NewReader("")
		out, _ := cmd.CombinedOutput()
		return string(out)
	}

	applyModel(t, rt, Model{}, cfg)
	if out := handshake(); strings.Contains(out, "Server Temp Key: DH") {
		t.Fatalf("a DHE handshake without ssl-dh-param:\n%s", out)
	}

	s, _, problems := ParseSettingsRefs(map[string]string{"ssl-dh-param": "ingress/dh"}, nil, dhLookup(map[string]string{DHParamKey: testDHParam}))
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	cfg.Settings = s
	if err := WriteDHParamFile(paths, s); err != nil {
		t.Fatal(err)
	}
	file := s.DHParamFile(paths)
	for path, mode := range map[string]os.FileMode{file: 0o600, filepath.Dir(file): 0o700 | os.ModeDir} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != mode {
			t.Errorf("%s: %v, %v; want mode %v", path, fi.Mode(), err, mode)
		}
	}
	if conf, _, err := Render(Model{}, cfg); err != nil || !strings.Contains(string(conf), fmt.Sprintf("ssl_dhparam %q;", file)) {
		t.Errorf("nginx.conf lacks ssl_dhparam %q (%v)", file, err)
	}
	applyModel(t, rt, Model{}, cfg)
	if out := handshake(); !strings.Contains(out, "Server Temp Key: DH, 2048 bits") {
		t.Errorf("no 2048-bit DHE handshake with ssl-dh-param:\n%s", out)
	}
}

// rsaSelfSigned writes an RSA certificate and key (DHE-RSA ciphers need an RSA certificate) into dir.
func rsaSelfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dh.example"}, DNSNames: []string{"dh.example"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "rsa.crt"), filepath.Join(dir, "rsa.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestWriteDHParamFileRemovesOld: each change of the parameters writes a new file; the files of the
// configurations kept are left, every other one is removed, and without parameters nothing is written.
func TestWriteDHParamFileRemovesOld(t *testing.T) {
	paths := Paths{Prefix: t.TempDir()}
	if err := WriteDHParamFile(paths, Settings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(paths.Prefix, DHParamDir)); !os.IsNotExist(err) {
		t.Errorf("without ssl-dh-param the directory exists: %v", err)
	}
	// Three contents, so three files: each write keeps the file written just before it.
	var files []string
	for _, pemText := range []string{testDHParam, testDHParam5, testDHParam5 + "\n"} {
		s := Settings{SSLDHParam: pemText}
		keep := files[:min(len(files), 1)]
		if err := WriteDHParamFile(paths, s, keep...); err != nil {
			t.Fatal(err)
		}
		files = append([]string{s.DHParamFile(paths)}, keep...)
	}
	entries, err := os.ReadDir(filepath.Join(paths.Prefix, DHParamDir))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, filepath.Join(paths.Prefix, DHParamDir, e.Name()))
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(files))
	if !slices.Equal(got, want) {
		t.Errorf("files %q, want %q (the last one and the one it kept)", got, want)
	}
	if len(want) != 2 {
		t.Errorf("want two files kept, have %q", want)
	}
}
