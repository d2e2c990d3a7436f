package certtest

import (
	"crypto/tls"
	"net"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A TLS server with the generated server certificate accepts a client with
// ClientConfig, and verifies the client's certificate.
func TestHandshake(t *testing.T) {
	f, err := Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srvCert, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{srvCert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: cfg.RootCAs})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err.Error()
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		if err := tc.Handshake(); err != nil {
			done <- err.Error()
			return
		}
		done <- tc.ConnectionState().PeerCertificates[0].Subject.CommonName
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got := <-done; got != ClientName {
		t.Fatalf("server saw %q, want %q", got, ClientName)
	}
	if _, _, err := net.SplitHostPort(ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
}

// TestGenerateConcurrently: tests generate certificates at once (the
// Kubernetes harness's shared and own clusters did, and raced on the
// serial number); every certificate gets a serial of its own.
func TestGenerateConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	dirs := make([]string, 4)
	for i := range dirs {
		dirs[i] = t.TempDir()
		wg.Go(func() {
			if _, err := Generate(dirs[i]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}
