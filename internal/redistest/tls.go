package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TLS is a certificate authority made for one test and the certificates it
// signed, as PEM files in t.TempDir(). A server started with Options.TLS
// serves only TLS, with the server certificate, on the port Addr returns.
type TLS struct {
	CAFile         string // the CA's certificate
	CertFile       string // the server's certificate, for 127.0.0.1 and localhost
	KeyFile        string // its key
	ClientCertFile string // a client certificate signed by the CA
	ClientKeyFile  string // its key

	// RequireClientCert makes the server refuse clients without a
	// certificate signed by the CA (--tls-auth-clients yes).
	RequireClientCert bool

	roots  *x509.CertPool
	client tls.Certificate
}

// NewTLS makes a CA, a server certificate and a client certificate.
func NewTLS(t testing.TB, requireClientCert bool) *TLS {
	t.Helper()
	dir := t.TempDir()
	x := &TLS{RequireClientCert: requireClientCert, roots: x509.NewCertPool()}
	ca := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "redistest CA"},
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caKey, caDER := issue(t, ca, nil, nil)
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatalf("redistest: parse the CA certificate: %v", err)
	}
	x.roots.AddCert(caCert)
	x.CAFile = writePEM(t, dir, "ca.crt", "CERTIFICATE", caDER)

	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	key, der := issue(t, server, caCert, caKey)
	x.CertFile, x.KeyFile = writeKeyPair(t, dir, "server", key, der)

	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "redistest client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	key, der = issue(t, client, caCert, caKey)
	x.ClientCertFile, x.ClientKeyFile = writeKeyPair(t, dir, "client", key, der)
	if x.client, err = tls.LoadX509KeyPair(x.ClientCertFile, x.ClientKeyFile); err != nil {
		t.Fatalf("redistest: load the client certificate: %v", err)
	}
	return x
}

// Config returns a client configuration that trusts the CA and, with
// clientCert, presents the client certificate.
func (x *TLS) Config(clientCert bool) *tls.Config {
	c := &tls.Config{RootCAs: x.roots, MinVersion: tls.VersionTLS12}
	if clientCert {
		c.Certificates = []tls.Certificate{x.client}
	}
	return c
}

// args are the redis-server arguments that serve TLS on port.
func (x *TLS) args(port int) []string {
	auth := "no"
	if x.RequireClientCert {
		auth = "yes"
	}
	return []string{"--port", "0", "--tls-port", strconv.Itoa(port), "--tls-cert-file", x.CertFile, "--tls-key-file", x.KeyFile,
		"--tls-ca-cert-file", x.CAFile, "--tls-auth-clients", auth}
}

// issue makes a key and signs tmpl for it with parentKey, or with the new
// key itself when parent is nil (the CA).
func issue(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("redistest: generate a key: %v", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("redistest: serial number: %v", err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatalf("redistest: create the certificate %q: %v", tmpl.Subject.CommonName, err)
	}
	return key, der
}

// writeKeyPair writes a certificate and its key as name.crt and name.key.
func writeKeyPair(t testing.TB, dir, name string, key *ecdsa.PrivateKey, der []byte) (certFile, keyFile string) {
	t.Helper()
	k, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("redistest: marshal a key: %v", err)
	}
	return writePEM(t, dir, name+".crt", "CERTIFICATE", der), writePEM(t, dir, name+".key", "PRIVATE KEY", k)
}

func writePEM(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatalf("redistest: write %s: %v", path, err)
	}
	return path
}
