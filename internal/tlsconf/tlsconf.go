// Package tlsconf holds the one rule by which the backends' WithTLS options
// turn a caller's *tls.Config into the configuration of their connections:
// verification stays on, the server name is the host dialled, TLS 1.2 at
// least. etcdlock, pglock and redislock all use it, so that the option means
// the same in each.
package tlsconf

import (
	"crypto/tls"
	"errors"
)

// ErrNoVerification is returned by Check for a configuration that would
// accept any server certificate.
var ErrNoVerification = errors.New("InsecureSkipVerify without VerifyConnection or VerifyPeerCertificate: the server would not be verified")

// ErrNoVersion is returned by Check for a configuration whose MaxVersion
// is below TLS 1.2 (the least Clone allows) or below its own MinVersion: no
// handshake could succeed ("no supported versions satisfy MinVersion and
// MaxVersion"), and the backends would retry it until their connect
// timeout.
var ErrNoVersion = errors.New("MaxVersion is below TLS 1.2 or below MinVersion: no TLS version is left to speak (TLS 1.2 at least)")

// Check refuses a configuration that turns certificate verification off
// without doing its own (VerifyConnection or VerifyPeerCertificate)
// (ErrNoVerification), or that allows no version from TLS 1.2 up
// (ErrNoVersion). A nil cfg is fine: it stands for the system's roots and
// no client certificate. The backends wrap its error in
// recipe.ErrBadOption.
func Check(cfg *tls.Config) error {
	switch {
	case cfg == nil:
		return nil
	case cfg.InsecureSkipVerify && cfg.VerifyConnection == nil && cfg.VerifyPeerCertificate == nil:
		return ErrNoVerification
	case cfg.MaxVersion != 0 && cfg.MaxVersion < max(cfg.MinVersion, tls.VersionTLS12):
		return ErrNoVersion
	}
	return nil
}

// Clone returns a copy of cfg (an empty configuration for nil) with
// MinVersion raised to TLS 1.2: the caller's value is never changed, and a
// later change to it has no effect on connections already configured.
func Clone(cfg *tls.Config) *tls.Config {
	c := &tls.Config{}
	if cfg != nil {
		c = cfg.Clone()
	}
	if c.MinVersion < tls.VersionTLS12 {
		c.MinVersion = tls.VersionTLS12
	}
	return c
}

// ForHost returns cfg for a connection to host (a name or an IP address,
// without port): cfg itself when it names a server already, else a copy
// with ServerName host, so that the certificate is checked against the host
// dialled.
func ForHost(cfg *tls.Config, host string) *tls.Config {
	if cfg.ServerName != "" {
		return cfg
	}
	c := cfg.Clone()
	c.ServerName = host
	return c
}
