package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// certs implements lemo certs: a CA and certificates for a TLS daemon and
// its clients (docs/quickstart-remote.md).
func certs(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("certs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "certs", "folder of the CA and the certificates")
	hosts := fs.String("hosts", "127.0.0.1", "comma-separated IP addresses and names the certificates are valid for")
	name := fs.String("name", "", "make only this one certificate (a further client), signed by the folder's CA")
	days := fs.Int("days", 365, "validity in days")
	asJSON := fs.Bool("json", false, "print what was made as JSON")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: lemo certs [--dir certs] [--hosts 127.0.0.1,host.example] [--name NAME] [--json]

Make a CA (ca.pem, ca.key; kept when the folder has one) and, signed by it,
server.pem/server.key and client.pem/client.key, valid for --hosts, or with
--name only NAME.pem/NAME.key. Each certificate serves both ends: the
daemon dials its replies back to each client. Keys are written mode 0600;
existing certificates are never overwritten.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	if fs.NArg() > 0 {
		return usageError("certs takes no arguments, got %q", fs.Args())
	}
	if *days < 1 {
		return usageError("--days %d: want at least 1", *days)
	}
	var ips []net.IP
	var dns []string
	for _, h := range strings.Split(*hosts, ",") {
		switch h = strings.TrimSpace(h); {
		case h == "":
		case net.ParseIP(h) != nil:
			ips = append(ips, net.ParseIP(h))
		default:
			dns = append(dns, h)
		}
	}
	if len(ips)+len(dns) == 0 {
		return usageError("--hosts: want at least one IP address or name")
	}
	names := []string{"server", "client"}
	if *name != "" {
		if strings.ContainsAny(*name, `/\`) || *name == "ca" {
			return usageError("--name %q: want a plain file name other than ca", *name)
		}
		names = []string{*name}
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(*dir, n+".pem")); err == nil {
			return fmt.Errorf("%s already exists: remove it first, or give --name another name", filepath.Join(*dir, n+".pem"))
		}
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	validity := time.Duration(*days) * 24 * time.Hour
	ca, caKey, made, err := loadOrMakeCA(*dir, validity)
	if err != nil {
		return err
	}
	out := certsMade{Dir: *dir, Made: []madeCert{}}
	if made {
		out.Made = append(out.Made, madeCert{Name: "ca", Cert: filepath.Join(*dir, "ca.pem"), Key: filepath.Join(*dir, "ca.key")})
		if !*asJSON {
			fmt.Fprintf(stdout, "made the CA %s\n", filepath.Join(*dir, "ca.pem"))
		}
	}
	var valid []string
	for _, ip := range ips {
		valid = append(valid, ip.String())
	}
	valid = append(valid, dns...)
	for _, n := range names {
		if err := makeCert(*dir, n, ca, caKey, ips, dns, validity); err != nil {
			return err
		}
		out.Made = append(out.Made, madeCert{Name: n, Cert: filepath.Join(*dir, n+".pem"), Key: filepath.Join(*dir, n+".key"), Hosts: valid})
		if !*asJSON {
			fmt.Fprintf(stdout, "made %s and %s for %s\n", filepath.Join(*dir, n+".pem"), filepath.Join(*dir, n+".key"), *hosts)
		}
	}
	if *asJSON {
		b, _ := json.Marshal(out)
		fmt.Fprintln(stdout, string(b))
	}
	return nil
}

// certsMade is what lemo certs --json prints (docs/json.md).
type certsMade struct {
	Dir  string     `json:"dir"`
	Made []madeCert `json:"made"`
}

// madeCert is one certificate lemo certs made: the CA ("ca") has no hosts.
type madeCert struct {
	Name  string   `json:"name"`
	Cert  string   `json:"cert"`
	Key   string   `json:"key"`
	Hosts []string `json:"hosts,omitempty"`
}

func loadOrMakeCA(dir string, validity time.Duration) (*x509.Certificate, any, bool, error) {
	certPEM, cerr := os.ReadFile(filepath.Join(dir, "ca.pem"))
	keyPEM, kerr := os.ReadFile(filepath.Join(dir, "ca.key"))
	if cerr == nil && kerr == nil {
		cb, _ := pem.Decode(certPEM)
		kb, _ := pem.Decode(keyPEM)
		if cb == nil || kb == nil {
			return nil, nil, false, fmt.Errorf("%s: ca.pem or ca.key holds no PEM block", dir)
		}
		ca, err := x509.ParseCertificate(cb.Bytes)
		if err != nil {
			return nil, nil, false, fmt.Errorf("ca.pem: %w", err)
		}
		key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
		if err != nil {
			if key, err = x509.ParseECPrivateKey(kb.Bytes); err != nil {
				return nil, nil, false, fmt.Errorf("ca.key: want a PKCS #8 or EC private key: %w", err)
			}
		}
		return ca, key, false, nil
	}
	if !errors.Is(cerr, os.ErrNotExist) || !errors.Is(kerr, os.ErrNotExist) {
		return nil, nil, false, fmt.Errorf("%s has only one of ca.pem and ca.key", dir)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, false, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "lemo-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(validity),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, false, err
	}
	if err := writePEM(dir, "ca", der, key); err != nil {
		return nil, nil, false, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, true, err
}

func makeCert(dir, name string, ca *x509.Certificate, caKey any, ips []net.IP, dns []string, validity time.Duration) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "lemo-" + name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(validity), IPAddresses: ips, DNSNames: dns,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("sign %s: %w", name, err)
	}
	return writePEM(dir, name, der, key)
}

func writePEM(dir, name string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}
