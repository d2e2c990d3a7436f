package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"

	"github.com/zkrecipes/zkrecipes/backend/etcdlock"
	"github.com/zkrecipes/zkrecipes/backend/pglock"
	"github.com/zkrecipes/zkrecipes/backend/redislock"
	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// tlsFlags are the TLS flags of every command, the same for every backend:
// they build one *tls.Config that each backend's WithTLS applies to every
// connection (ZooKeeper: to the servers' secureClientPort). The server's
// certificate is always verified; the private key is read from a file,
// never from the command line.
type tlsFlags struct {
	on                        bool
	ca, cert, key, serverName string
	cfg                       *tls.Config // built by check; nil when no TLS flag was given
	keyFile                   flagFile    // key as read, without its data (warnLoose)
}

// register registers the TLS flags.
func (t *tlsFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&t.on, "tls", false, "connect with TLS, verifying the servers' certificates (implied by every --tls-* flag; ZooKeeper: list the servers' secureClientPort)")
	fs.StringVar(&t.ca, "tls-ca", "", "verify the servers' certificates against the authorities in this PEM `file` (default: the system's)")
	fs.StringVar(&t.cert, "tls-cert", "", "present the client certificate in this PEM `file` (with --tls-key)")
	fs.StringVar(&t.key, "tls-key", "", "the client certificate's private key: a PEM `file`, readable by its owner only")
	fs.StringVar(&t.serverName, "tls-server-name", "", "check the servers' certificates for this `name` (default: the host of each server as given)")
}

// check builds the configuration the flags describe (none without a TLS
// flag); the error is a usage error naming the flag and the file, never a
// file's content.
func (t *tlsFlags) check() error {
	if !t.on && t.ca == "" && t.cert == "" && t.key == "" && t.serverName == "" {
		return nil
	}
	cfg := &tls.Config{ServerName: t.serverName, MinVersion: tls.VersionTLS12}
	if t.ca != "" {
		pem, err := readFlagFile("--tls-ca", t.ca)
		if err != nil {
			return err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem.data) {
			return fmt.Errorf("--tls-ca %s: no PEM certificate in the file", t.ca)
		}
	}
	switch {
	case t.cert != "" && t.key != "":
		cert, err := t.keyPair()
		if err != nil {
			return err
		}
		cfg.Certificates = []tls.Certificate{cert}
	case t.cert != "":
		return errors.New("--tls-cert needs --tls-key (the certificate's private key)")
	case t.key != "":
		return errors.New("--tls-key needs --tls-cert (the certificate of the key)")
	}
	t.cfg = cfg
	return nil
}

// keyPair reads --tls-cert and --tls-key (readFlagFile: regular files of
// bounded size) and makes the client certificate; t.keyFile keeps whether
// others may read the key, for warnLoose.
func (t *tlsFlags) keyPair() (tls.Certificate, error) {
	cert, err := readFlagFile("--tls-cert", t.cert)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := readFlagFile("--tls-key", t.key)
	if err != nil {
		return tls.Certificate{}, err
	}
	// crypto/tls's errors name the problem and PEM block types, never a
	// file's content.
	pair, err := tls.X509KeyPair(cert.data, key.data)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("--tls-cert %s, --tls-key %s: %w", t.cert, t.key, err)
	}
	key.data = nil
	t.keyFile = key
	return pair, nil
}

// tlsRejected reports whether err is a TLS handshake that failed on its
// merits, which no retry mends: a server certificate that failed
// verification, or a TLS alert from the server (a client certificate
// refused, or none presented where one is required).
func tlsRejected(err error) bool {
	var verr *tls.CertificateVerificationError
	var oerr *net.OpError
	return errors.As(err, &verr) || (errors.As(err, &oerr) && oerr.Op == "remote error")
}

// tlsStatus logs a rejected TLS handshake with b and returns its exit
// status: 70, as for a refused password (not 69: the server answered).
func tlsStatus(log *slog.Logger, b backend, servers string, err error) int {
	log.Error("the TLS handshake with "+string(b)+" failed: check --tls-ca, --tls-cert, --tls-key and --tls-server-name",
		"servers", redact(servers), "err", err)
	return exitSoftware
}

// zookeeper returns the ZooKeeper options of the flags.
func (t *tlsFlags) zookeeper() []zookeeper.Option {
	if t.cfg == nil {
		return nil
	}
	return []zookeeper.Option{zookeeper.WithTLS(t.cfg)}
}

// etcd returns opts with the flags' etcdlock option added.
func (t *tlsFlags) etcd(opts ...etcdlock.Option) []etcdlock.Option {
	if t.cfg == nil {
		return opts
	}
	return append(opts, etcdlock.WithTLS(t.cfg))
}

// postgres returns opts with the flags' pglock option added.
func (t *tlsFlags) postgres(opts ...pglock.Option) []pglock.Option {
	if t.cfg == nil {
		return opts
	}
	return append(opts, pglock.WithTLS(t.cfg))
}

// redis returns opts with the flags' redislock option added.
func (t *tlsFlags) redis(opts ...redislock.Option) []redislock.Option {
	if t.cfg == nil {
		return opts
	}
	return append(opts, redislock.WithTLS(t.cfg))
}
