package tests

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lemo/client"
)

// testCA issues certificates for 127.0.0.1 valid for server and client
// authentication (every node both serves and dials).
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{cert: cert, key: key, dir: t.TempDir()}
	ca.write(t, "ca.pem", "CERTIFICATE", der)
	return ca
}

func (ca *testCA) write(t *testing.T, name, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(ca.dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// issue returns the cert and key files of a new leaf.
func (ca *testCA) issue(t *testing.T, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return ca.write(t, name+".pem", "CERTIFICATE", der), ca.write(t, name+"-key.pem", "EC PRIVATE KEY", kb)
}

// With TLS and client certificates, a client with a certificate of the
// client CA works both ways (the daemon dials back over TLS too); one
// without a certificate, or with one of another CA, is refused.
func TestMutualTLS(t *testing.T) {
	ca := newTestCA(t, "lemo test CA")
	serverCert, serverKey := ca.issue(t, "daemon")
	clientCert, clientKey := ca.issue(t, "client")
	caFile := filepath.Join(ca.dir, "ca.pem")
	cfg := writeConfig(t, "tls:\n  cert: "+serverCert+"\n  key: "+serverKey+"\n  client_ca: "+caFile+"\n")
	data := filepath.Join(t.TempDir(), "data")
	startDaemon(t, data, "--listen", "127.0.0.1:0", "--config", cfg)

	tlsArgs := []string{"--tls-cert", clientCert, "--tls-key", clientKey, "--tls-ca", caFile}
	out, code := cli(t, data, append([]string{"run", "--model", "fake/echo", "over tls"}, tlsArgs...)...)
	if code != 0 || !strings.Contains(out, "echo: over tls") {
		t.Fatalf("run over mutual TLS: exit %d\n%s", code, out)
	}
	if out, code := cli(t, data, append([]string{"tasks"}, tlsArgs...)...); code != 0 || !strings.Contains(out, "over tls") {
		t.Fatalf("tasks over mutual TLS: exit %d\n%s", code, out)
	}
	if out, code := cli(t, data, "tasks"); code == 0 || !strings.Contains(out, "requires TLS") {
		t.Fatalf("without TLS: exit %d\n%s", code, out)
	}
	other := newTestCA(t, "another CA")
	otherCert, otherKey := other.issue(t, "intruder")
	if out, code := cli(t, data, "tasks", "--tls-cert", otherCert, "--tls-key", otherKey, "--tls-ca", caFile); code == 0 {
		t.Fatalf("a certificate of another CA was accepted:\n%s", out)
	}
	l, err := client.FindLocal(data)
	if err != nil || !l.TLS {
		t.Fatalf("daemon.json: %+v, %v; want tls set", l, err)
	}
	// Straight to the address, so the daemon (not the CLI) refuses.
	if out, code := cli(t, data, "tasks", "--addr", l.Address, "--tls-ca", caFile); code == 0 {
		t.Fatalf("a client without a certificate was accepted:\n%s", out)
	}
}
