package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCheck: only a configuration that skips verification without checking
// anything itself is refused.
func TestCheck(t *testing.T) {
	verify := func(tls.ConnectionState) error { return nil }
	peer := func([][]byte, [][]*x509.Certificate) error { return nil }
	for name, c := range map[string]*tls.Config{"nil": nil, "empty": {}, "own VerifyConnection": {InsecureSkipVerify: true, VerifyConnection: verify},
		"own VerifyPeerCertificate": {InsecureSkipVerify: true, VerifyPeerCertificate: peer}} {
		if err := Check(c); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := Check(&tls.Config{InsecureSkipVerify: true}); !errors.Is(err, ErrNoVerification) {
		t.Errorf("InsecureSkipVerify alone: %v", err)
	}
	for name, c := range map[string]*tls.Config{"MaxVersion 1.1": {MaxVersion: tls.VersionTLS11},
		"MaxVersion 1.0": {MaxVersion: tls.VersionTLS10}, "MaxVersion below MinVersion": {MinVersion: tls.VersionTLS13, MaxVersion: tls.VersionTLS12}} {
		if err := Check(c); !errors.Is(err, ErrNoVersion) {
			t.Errorf("%s: %v, want ErrNoVersion", name, err)
		}
	}
	for name, c := range map[string]*tls.Config{"MaxVersion 1.2": {MaxVersion: tls.VersionTLS12}, "1.3 only": {MinVersion: tls.VersionTLS13, MaxVersion: tls.VersionTLS13}} {
		if err := Check(c); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestCloneForHost: the caller's configuration is never changed; the copy
// has TLS 1.2 at least and names the host unless a name was given.
func TestCloneForHost(t *testing.T) {
	orig := &tls.Config{MinVersion: tls.VersionTLS10}
	c := ForHost(Clone(orig), "db.example")
	if orig.MinVersion != tls.VersionTLS10 || orig.ServerName != "" {
		t.Errorf("the caller's configuration changed: %+v", orig)
	}
	if c.MinVersion != tls.VersionTLS12 || c.ServerName != "db.example" {
		t.Errorf("MinVersion %x, ServerName %q", c.MinVersion, c.ServerName)
	}
	if c := ForHost(Clone(&tls.Config{ServerName: "other", MinVersion: tls.VersionTLS13}), "h"); c.ServerName != "other" || c.MinVersion != tls.VersionTLS13 {
		t.Errorf("kept: MinVersion %x, ServerName %q", c.MinVersion, c.ServerName)
	}
	if c := Clone(nil); c == nil || c.MinVersion != tls.VersionTLS12 {
		t.Errorf("Clone(nil) = %+v", c)
	}
}
