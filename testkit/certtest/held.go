package certtest

import (
	"crypto/tls"
	"path/filepath"
)

// Held is a harness's TLSFiles for the files f its server holds: *f and
// true, or the zero Files and false for a plain server (nil f).
func Held(f *Files) (Files, bool) {
	if f == nil {
		return Files{}, false
	}
	return *f, true
}

// MustClientConfig is f's ClientConfig for a harness's ClientTLS: nil for a
// plain server (nil f), and a panic prefixed with who ("pgtest: ...") when
// the files can't be read, which a harness that wrote them treats as a bug.
func MustClientConfig(f *Files, who string) *tls.Config {
	if f == nil {
		return nil
	}
	c, err := f.ClientConfig()
	if err != nil {
		panic(who + ": " + err.Error())
	}
	return c
}

// GenerateIn is Generate into dir/certs for a harness's TLS server
// (secure), returning the files for its certs field; for a plain server it
// writes nothing and returns nil.
func GenerateIn(dir string, secure bool) (*Files, error) {
	if !secure {
		return nil, nil
	}
	f, err := Generate(filepath.Join(dir, "certs"))
	if err != nil {
		return nil, err
	}
	return &f, nil
}
