package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"syscall"
)

// noEmptyFlags are the flags whose empty value would quietly weaken what
// the flag asks for: `--tls-ca "$CA"` with CA unset would connect without
// TLS, `--auth-file ""` without credentials (nodes open to anyone), `--acl
// ""` with the default ACL. Given with an empty value, each is a usage
// error naming it (noEmpty); left out, each has its documented default.
var noEmptyFlags = []string{"tls-ca", "tls-cert", "tls-key", "tls-server-name", "auth-file", "acl"}

// noEmpty returns a usage error naming the first flag of noEmptyFlags that
// was given with an empty value.
func noEmpty(set *flag.FlagSet) error {
	var err error
	set.Visit(func(f *flag.Flag) {
		if err == nil && slices.Contains(noEmptyFlags, f.Name) && f.Value.String() == "" {
			err = fmt.Errorf("--%s was given an empty value (an unset variable?): give a value, or leave the flag out for its default", f.Name)
		}
	})
	return err
}

// maxFlagFile bounds what a flag's file may hold: PEM certificates and
// keys, a line of credentials. A larger file is a mistake (a device, a
// log), not something to read into memory.
const maxFlagFile = 1 << 20

// flagFile is a file a flag named, as readFlagFile read it.
type flagFile struct {
	flag, name string
	data       []byte
	loose      bool // group or others may read it (permission bits 077)
}

// readFlagFile reads the regular file name given to the flag opt (e.g.
// "--tls-key"). A FIFO, a device or a directory is refused before it is
// read (a FIFO without a writer, /dev/zero or a terminal would block or
// never end), and so is a file over maxFlagFile. Errors name the flag and
// the file, never the content.
func readFlagFile(opt, name string) (flagFile, error) {
	// Not even opened when not regular (opening a device can do things);
	// a Stat that fails is left to the open to report.
	if st, err := os.Stat(name); err == nil {
		if err := regular(opt, name, st); err != nil {
			return flagFile{}, err
		}
	}
	// O_NONBLOCK: should the name be swapped for a FIFO after the Stat,
	// the open does not wait for a writer, and the Stat below refuses it.
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return flagFile{}, fmt.Errorf("%s: %w", opt, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err == nil {
		err = regular(opt, name, st)
	}
	if err != nil {
		return flagFile{}, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFlagFile+1))
	switch {
	case err != nil:
		return flagFile{}, fmt.Errorf("%s: %w", opt, err)
	case len(data) > maxFlagFile:
		return flagFile{}, fmt.Errorf("%s %s: larger than %d KiB, which no file for this flag is", opt, name, maxFlagFile>>10)
	}
	return flagFile{flag: opt, name: name, data: data, loose: st.Mode().Perm()&0o077 != 0}, nil
}

// regular returns an error unless st is a regular file's.
func regular(opt, name string, st fs.FileInfo) error {
	if st.Mode().IsRegular() {
		return nil
	}
	what := "not a regular file"
	switch t := st.Mode().Type(); {
	case t&fs.ModeDir != 0:
		what = "a directory"
	case t&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case t&fs.ModeDevice != 0:
		what = "a device"
	case t&fs.ModeSocket != 0:
		what = "a socket"
	}
	return errors.New(opt + " " + name + ": " + what + ", not a regular file: give the file itself")
}

// warnLoose warns about secret files that others than their owner may
// read (--auth-file, --tls-key): one warning per file, the same words.
func warnLoose(log *slog.Logger, files ...flagFile) {
	for _, f := range files {
		if f.loose {
			log.Warn("the "+f.flag+" can be read by other users: chmod 600 it", "file", f.name)
		}
	}
}
