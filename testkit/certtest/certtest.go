// Package certtest makes the certificates the test harnesses serve TLS
// with: a fresh certificate authority, a server certificate for the
// loopback names and a client certificate, written as PEM files. Nothing
// here is meant for production use.
package certtest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// ClientName is the common name of the client certificate, the user a
// server that maps certificates to users sees.
const ClientName = "zkrecipes-test-client"

// CAName is the common name of every authority Generate makes: two
// generated authorities share it, so a client certificate of one looks,
// by name, issued by the other (what OpenSSL servers answer with
// decrypt_error; the connect-error tests use it).
const CAName = "zkrecipes test CA"

// Files names the PEM files Generate wrote. Keys are unencrypted PKCS#8,
// mode 0600 (PostgreSQL refuses a key others can read); RSA 2048, which
// every server here reads (ZooKeeper's PEM loader included).
type Files struct {
	Dir        string // the directory holding all of them
	CA         string // the authority's certificate
	ServerCert string // server certificate for 127.0.0.1, ::1 and localhost
	ServerKey  string
	ClientCert string // client certificate, common name ClientName
	ClientKey  string
}

// Generate writes a new authority, server and client certificate into dir
// (created if missing), valid from an hour ago for a day. It fails only on
// file system errors.
func Generate(dir string) (Files, error) {
	f := Files{Dir: dir,
		CA: filepath.Join(dir, "ca.pem"), ServerCert: filepath.Join(dir, "server.pem"),
		ServerKey: filepath.Join(dir, "server-key.pem"), ClientCert: filepath.Join(dir, "client.pem"),
		ClientKey: filepath.Join(dir, "client-key.pem")}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Files{}, err
	}
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return Files{}, err
	}
	caTmpl := template(CAName)
	caTmpl.IsCA, caTmpl.BasicConstraintsValid = true, true
	caTmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return Files{}, err
	}
	if err := writePEM(f.CA, "CERTIFICATE", caDER); err != nil {
		return Files{}, err
	}
	server := template("localhost")
	server.DNSNames = []string{"localhost"}
	server.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	server.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	if err := leaf(server, caTmpl, caKey, f.ServerCert, f.ServerKey); err != nil {
		return Files{}, err
	}
	client := template(ClientName)
	client.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return f, leaf(client, caTmpl, caKey, f.ClientCert, f.ClientKey)
}

// ClientConfig is a client configuration that trusts only the generated
// authority and presents the client certificate.
func (f Files) ClientConfig() (*tls.Config, error) {
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("certtest: no certificate in %s", f.CA)
	}
	cert, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// serial numbers the certificates of this process: each one's is unique.
// Generate may run in several tests at once, hence the atomic counter.
var serial atomic.Int64

func init() { serial.Store(time.Now().UnixNano()) }

func template(cn string) *x509.Certificate {
	return &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment}
}

func leaf(tmpl, ca *x509.Certificate, caKey *rsa.PrivateKey, certPath, keyPath string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(keyPath, "PRIVATE KEY", keyDER)
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}
