package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s holds no PEM", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// lemo certs makes a CA and, signed by it, a server and a client
// certificate that serve both ends for the hosts; --name adds a client
// with the same CA; nothing is overwritten.
func TestCerts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	var out, errOut bytes.Buffer
	if err := certs([]string{"--dir", dir, "--hosts", "127.0.0.1,lemo.example"}, &out, &errOut); err != nil {
		t.Fatalf("certs: %v\n%s", err, errOut.String())
	}
	pool := x509.NewCertPool()
	pool.AddCert(readCert(t, filepath.Join(dir, "ca.pem")))
	check := func(name string) {
		c := readCert(t, filepath.Join(dir, name+".pem"))
		for _, host := range []string{"127.0.0.1", "lemo.example"} {
			for _, use := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
				if _, err := c.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{use}}); err != nil {
					t.Errorf("%s for %s (%v): %v", name, host, use, err)
				}
			}
		}
		if fi, err := os.Stat(filepath.Join(dir, name+".key")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s.key: %v, mode %v; want 0600", name, err, fi.Mode().Perm())
		}
	}
	check("server")
	check("client")
	if err := certs([]string{"--dir", dir}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("a second run = %v, want a refusal to overwrite", err)
	}
	if err := certs([]string{"--dir", dir, "--name", "laptop", "--hosts", "127.0.0.1,lemo.example"}, &out, &errOut); err != nil {
		t.Fatalf("certs --name laptop: %v", err)
	}
	check("laptop")
	if err := certs([]string{"--dir", dir, "--hosts", ""}, &out, &errOut); err == nil {
		t.Fatal("no hosts accepted")
	}
}
