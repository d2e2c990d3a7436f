package redislock

import (
	"github.com/redis/go-redis/v9"

	"github.com/zkrecipes/zkrecipes/internal/userinfo"
)

// No password reaches an error of this package: Connect's errors show the
// URL redacted (userinfo.Redact: its user information and any query
// parameter named like a password), go-redis's own parse errors (which
// quote query values) and every error of the connection's first requests
// (AUTH's among them) are scrubbed of the URL's passwords and of the
// client's Username/Password (userinfo.Hide), here where the package
// returns them. go-redis's errors for a refused password ("WRONGPASS ...")
// don't quote it; the scrub holds even if one did.

// hideClient scrubs cli's password and the secrets of the URL it was made
// from (raw; "" for NewSession's client) from err.
func hideClient(err error, cli *redis.Client, raw string) error {
	return userinfo.Hide(err, append(userinfo.Secrets(raw), cli.Options().Password)...)
}
