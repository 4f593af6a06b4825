package testbed

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
	"testing"
	"time"
)

// CA is a certificate authority made for one test; its files live in the
// test's temporary directory.
type CA struct {
	// File is the PEM file of the CA certificate (what a client trusts).
	File string
	// Pool holds the CA certificate.
	Pool *x509.CertPool

	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
}

// CertFiles are the PEM files of an issued certificate and its key.
type CertFiles struct {
	Cert, Key string
}

// NewCA creates a self-signed certificate authority valid for an hour.
func NewCA(tb testing.TB) *CA {
	tb.Helper()
	key := newKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(tb),
		Subject:               pkix.Name{CommonName: "pin test CA"},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("testbed: create CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatalf("testbed: parse CA: %v", err)
	}
	ca := &CA{cert: cert, key: key, dir: tb.TempDir(), Pool: x509.NewCertPool()}
	ca.Pool.AddCert(cert)
	ca.File = writePEM(tb, ca.dir, "ca.pem", "CERTIFICATE", der)
	return ca
}

// Issue signs a certificate for name (also its DNS name; 127.0.0.1 is added
// as an IP address) usable by servers and clients, and writes it and its key.
func (ca *CA) Issue(tb testing.TB, name string) (tls.Certificate, CertFiles) {
	tb.Helper()
	key := newKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber: serial(tb),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatalf("testbed: issue %s: %v", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatalf("testbed: marshal key: %v", err)
	}
	files := CertFiles{
		Cert: writePEM(tb, ca.dir, name+".pem", "CERTIFICATE", der),
		Key:  writePEM(tb, ca.dir, name+"-key.pem", "PRIVATE KEY", keyDER),
	}
	pair, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		tb.Fatalf("testbed: load %s: %v", name, err)
	}
	return pair, files
}

// ServerTLS is the TLS configuration of a broker named "localhost" signed by
// ca; with clientCAs set it also demands a client certificate signed by one
// of them (mTLS).
func (ca *CA) ServerTLS(tb testing.TB, clientCAs *x509.CertPool) *tls.Config {
	tb.Helper()
	pair, _ := ca.Issue(tb, "localhost")
	c := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if clientCAs != nil {
		c.ClientAuth = tls.RequireAndVerifyClientCert
		c.ClientCAs = clientCAs
	}
	return c
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("testbed: generate key: %v", err)
	}
	return key
}

func serial(tb testing.TB) *big.Int {
	tb.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		tb.Fatalf("testbed: serial: %v", err)
	}
	return n
}

func writePEM(tb testing.TB, dir, name, blockType string, der []byte) string {
	tb.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600); err != nil {
		tb.Fatalf("testbed: write %s: %v", path, err)
	}
	return path
}
