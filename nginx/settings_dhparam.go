package nginx

import (
	"crypto/sha256"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The ConfigMap's ssl-dh-param (issue #18): a Secret's dhparam.pem, checked to be Diffie-Hellman
// parameters and written anew from the parsed numbers into a 0600 file that nginx.conf names
// (ssl_dhparam). modules/settings follows the Secret, so a change applies like a ConfigMap change.

// SecretRefPrefix marks a SettingsRefLookup reference to a Secret ("secret:namespace/name"); the lookup
// returns the Secret's data as strings.
const SecretRefPrefix = "secret:"

// DHParamKey is the key of the ssl-dh-param Secret that holds the parameters, as in ingress-nginx.
const DHParamKey = "dhparam.pem"

// DHParamDir is the directory under the NGINX prefix with the DH parameter files (0700, files 0600).
const DHParamDir = "dhparam"

// dhParams is the ASN.1 form of PKCS #3 DH parameters (the "DH PARAMETERS" PEM block).
type dhParams struct {
	P, G    *big.Int
	PrivLen int `asn1:"optional"`
}

func init() {
	registerSettings(settingKey{Name: "ssl-dh-param", Values: "`namespace/name` of a Secret whose `" + DHParamKey + "` is a PEM `DH PARAMETERS` block (a prime of 1024 to 8192 bits)",
		Doc: "Diffie-Hellman parameters for the DHE ciphers of ssl-ciphers (ssl_dhparam). The Secret is watched: a change of it applies like " +
			"a change of the ConfigMap (one reload). Empty: no DHE key exchange (NGINX's default).",
		Difference: "The parameters are parsed and written anew from their numbers into a 0600 file; a Secret that is missing, lacks " +
			DHParamKey + " or holds anything else is a Warning on the ConfigMap and the last good parameters stay applied (ingress-nginx " +
			"logged it and dropped ssl_dhparam). The controller lists and watches that one Secret: with the chart's `rbac.scope` it " +
			"must be in the watched namespace.",
		resolve: resolveDHParam,
		set: func(s *Settings, v string) error {
			if v == "" {
				s.SSLDHParam = ""
				return nil
			}
			_, p, ok := strings.Cut(v, "\n")
			if !ok {
				return fmt.Errorf("want namespace/name of a Secret")
			}
			canonical, err := parseDHParam([]byte(p))
			if err != nil {
				return err
			}
			s.SSLDHParam = canonical
			return nil
		}})
}

// resolveDHParam reads the named Secret's dhparam.pem and returns "namespace/name\n<PEM>", the form set
// parses (and lastGood keeps).
func resolveDHParam(ref string, lookup SettingsRefLookup) (string, error) {
	if ref == "" {
		return "", nil
	}
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || validateLabel(ns) != nil || validateObjectName(name) != nil {
		return "", fmt.Errorf("want namespace/name of a Secret")
	}
	if lookup == nil {
		return "", errNoLookup
	}
	data, err := lookup(SecretRefPrefix + ref)
	if err != nil {
		return "", err
	}
	raw, ok := data[DHParamKey]
	if !ok {
		return "", fmt.Errorf("secret %s has no %s", ref, DHParamKey)
	}
	canonical, err := parseDHParam([]byte(raw))
	if err != nil {
		return "", fmt.Errorf("secret %s: %s: %w", ref, DHParamKey, err)
	}
	return ref + "\n" + canonical, nil
}

// parseDHParam checks that data is one PEM "DH PARAMETERS" block of sound numbers and returns it encoded
// anew from them.
func parseDHParam(data []byte) (string, error) {
	block, rest := pem.Decode(data)
	if block == nil || block.Type != "DH PARAMETERS" || len(strings.TrimSpace(string(rest))) > 0 || len(block.Headers) > 0 {
		return "", errors.New("want exactly one PEM block of type DH PARAMETERS (openssl dhparam 2048)")
	}
	var p dhParams
	if rest, err := asn1.Unmarshal(block.Bytes, &p); err != nil || len(rest) > 0 {
		return "", errors.New("the DH PARAMETERS block is not PKCS #3 parameters")
	}
	// The generator must be below p-1, whose subgroup has two elements; p must be prime (Baillie-PSW,
	// which no composite is known to pass), as the doc says.
	if p.P == nil || p.G == nil || p.P.BitLen() < 1024 || p.P.BitLen() > 8192 || p.P.Bit(0) == 0 ||
		p.G.Cmp(big.NewInt(2)) < 0 || p.G.Cmp(new(big.Int).Sub(p.P, big.NewInt(1))) >= 0 || p.PrivLen < 0 || p.PrivLen > p.P.BitLen() ||
		!p.P.ProbablyPrime(0) {
		return "", errors.New("want an odd prime of 1024 to 8192 bits and a generator between 2 and it")
	}
	der, err := asn1.Marshal(p)
	if err != nil {
		return "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "DH PARAMETERS", Bytes: der})), nil
}

// DHParamFile is the file of the parameters s carries ("" without ssl-dh-param): its name holds a hash of
// its content, so that a configuration NGINX may still load keeps its own.
func (s Settings) DHParamFile(paths Paths) string {
	if s.SSLDHParam == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(s.SSLDHParam))
	return filepath.Join(paths.Prefix, DHParamDir, hex.EncodeToString(sum[:16])+".pem")
}

// WriteDHParamFile writes the file of s's parameters (DHParamFile) when s has some, atomically, 0600 in a
// 0700 directory; an existing file is not written again. It removes the directory's other files but keep
// (those of the configurations published before, which NGINX may not have loaded yet), so that each
// change of the Secret does not leave one more file behind.
func WriteDHParamFile(paths Paths, s Settings, keep ...string) error {
	file := s.DHParamFile(paths)
	dir := filepath.Join(paths.Prefix, DHParamDir)
	if file != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("DH parameters directory: %w", err)
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("DH parameters directory: %w", err)
		}
		if err := writeFileOnce(dir, file, []byte(s.SSLDHParam)); err != nil {
			return fmt.Errorf("write DH parameters: %w", err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("DH parameters directory: %w", err)
	}
	for _, e := range entries {
		if p := filepath.Join(dir, e.Name()); p != file && !slices.Contains(keep, p) && e.Type().IsRegular() {
			_ = os.Remove(p) // best effort: a leftover file costs little
		}
	}
	return nil
}
