package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/zookeeper"
)

// envAuth holds ZooKeeper digest credentials, "user:password": the
// environment is one of the two places a secret may come from (the other
// is --auth-file); never the command line, which every local user can
// read in ps.
const envAuth = "ZK_AUTH"

// ACL modes of --acl: the ACL of the znodes zkrecipes creates (lock and
// election nodes and their missing directories).
const (
	aclOpen    = "open"    // world:anyone, all permissions (ZooKeeper's and the library's default)
	aclCreator = "creator" // the digest user all permissions, anyone read (the default with credentials)
	aclPrivate = "private" // the digest user all permissions, nobody else anything
)

// secFlags are the flags about secrets and permissions: ZooKeeper's
// credentials and ACL, and the secrets the command may inherit.
type secFlags struct {
	authFile string
	acl      string
	passEnv  passEnv
	digest   []byte   // "user:password" from authFile or envAuth; nil: none
	user     string   // its user part, for the log
	file     flagFile // authFile as read, without its data (warnLoose)
}

// register registers --auth-file, and with withOwnership (lock, elect:
// the commands that create nodes and run a command) --acl and --pass-env.
func (f *secFlags) register(fs *flag.FlagSet, withOwnership bool) {
	fs.StringVar(&f.authFile, "auth-file", "", "ZooKeeper: read digest credentials, user:password, from the `file`'s first line (default $"+envAuth+"; never on the command line)")
	if !withOwnership {
		return
	}
	fs.StringVar(&f.acl, "acl", "", "ZooKeeper: the ACL of the nodes zkrecipes creates: open (anyone may do anything), creator (the credentials' user may do everything, anyone may read) or private (only that user); default creator with credentials, open without")
	fs.Var(&f.passEnv, "pass-env", "give the command the secret-bearing `variable` zkrecipes withholds ("+envServers+", "+envAuth+"; PGPASSWORD, PGSSLPASSWORD under a PostgreSQL lock); comma-separated or repeated")
}

// load reads the credentials (--auth-file, else $ZK_AUTH) and checks them
// against --acl. Its errors are usage errors; they never show the secret.
func (f *secFlags) load() error {
	var raw []byte
	switch {
	case f.authFile != "":
		ff, err := readFlagFile("--auth-file", f.authFile)
		if err != nil {
			return err
		}
		raw, _, _ = bytes.Cut(ff.data, []byte("\n"))
		raw = bytes.TrimSuffix(raw, []byte("\r"))
		ff.data = nil
		f.file = ff
	default:
		if v, ok := os.LookupEnv(envAuth); ok {
			raw = []byte(v)
		}
	}
	if raw != nil {
		user, pass, ok := bytes.Cut(raw, []byte(":"))
		if !ok || len(user) == 0 || len(pass) == 0 {
			return errors.New("ZooKeeper credentials (--auth-file or " + envAuth + ") are not user:password with both parts non-empty")
		}
		f.digest, f.user = raw, string(user)
	}
	switch f.acl {
	case "":
		f.acl = aclOpen
		if f.digest != nil {
			f.acl = aclCreator
		}
	case aclOpen:
	case aclCreator, aclPrivate:
		if f.digest == nil {
			return fmt.Errorf("--acl %s needs ZooKeeper credentials: --auth-file or %s", f.acl, envAuth)
		}
	default:
		return fmt.Errorf("--acl %q: want open, creator or private", f.acl)
	}
	return nil
}

// options returns Connect's options for the credentials and the ACL, and
// logs what they are (the user, never the password). common.logger warns
// about a loose --auth-file.
func (f *secFlags) options(log *slog.Logger) []zookeeper.Option {
	var opts []zookeeper.Option
	if f.digest != nil {
		opts = append(opts, zookeeper.WithAuth("digest", f.digest))
		log.Debug("ZooKeeper digest authentication", "user", f.user, "acl", f.acl)
	}
	if acl := f.zkACL(); acl != nil {
		opts = append(opts, zookeeper.WithACL(acl))
	}
	return opts
}

// zkACL is the ACL of --acl (nil: the library's default, open).
func (f *secFlags) zkACL() []zk.ACL {
	if f.acl != aclCreator && f.acl != aclPrivate {
		return nil
	}
	user, pass, _ := bytes.Cut(f.digest, []byte(":"))
	acl := zk.DigestACL(zk.PermAll, string(user), string(pass))
	if f.acl == aclCreator {
		acl = append(acl, zk.WorldACL(zk.PermRead)...)
	}
	return acl
}
