package zktest

import (
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestWithTLS: the TLS port answers a four-letter word over TLS with the
// client certificate, and refuses a client without one; the plain port
// stays usable.
func TestWithTLS(t *testing.T) {
	t.Parallel() // its own servers; after the tests that set the environment
	c := Start(t, WithTLS())
	f, ok := c.TLSFiles()
	if !ok || f.CA == "" || f.ClientCert == "" || f.ClientKey == "" {
		t.Fatalf("TLSFiles = %+v, %v", f, ok)
	}
	if len(c.SecureAddrs()) != 1 || len(c.SecureServers()) != 1 {
		t.Fatalf("SecureAddrs %v, SecureServers %v: want one each", c.SecureAddrs(), c.SecureServers())
	}
	if got, err := ruokTLS(c.SecureAddrs()[0], c.ClientTLS(t)); err != nil || got != "imok" {
		t.Fatalf("ruok over TLS with the client certificate: %q, %v", got, err)
	}
	noCert := c.ClientTLS(t)
	noCert.Certificates = nil
	got, err := ruokTLS(c.SecureAddrs()[0], noCert)
	if err == nil {
		t.Fatalf("ruok over TLS without a client certificate: %q, want an error", got)
	}
	if _, ok := Start(t).TLSFiles(); ok {
		t.Fatal("TLSFiles of a cluster started without WithTLS: ok")
	}
}

// ruokTLS sends ruok over TLS to addr and returns the answer.
func ruokTLS(addr string, cfg *tls.Config) (string, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "ruok"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return strings.TrimSpace(string(b)), err
}
