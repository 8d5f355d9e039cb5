package main

import (
	"flag"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/tlsconf"
)

// securityFlags are wharf serve's user-store and TLS flags.
type securityFlags struct {
	adminUser, adminPassword *string
	tlsCert, tlsKey, tlsCA   *string
}

func securityServeFlags(fs *flag.FlagSet) securityFlags {
	return securityFlags{
		adminUser:     fs.String("admin-user", "", "administrator to create if missing (with --admin-password); a new node also gets guest/guest, loopback only"),
		adminPassword: fs.String("admin-password", "", "password of --admin-user when it is created (stored salted, never in the clear)"),
		tlsCert:       fs.String("tls-cert", "", "PEM certificate chain of every TLS listener (reloaded on SIGHUP)"),
		tlsKey:        fs.String("tls-key", "", "PEM private key of --tls-cert"),
		tlsCA:         fs.String("tls-client-ca", "", "PEM CAs that sign client certificates; when set, TLS clients must present one"),
	}
}

// securityEnv names the flags bindEnv maps to WHARF_ variables.
var securityEnv = []string{"admin-user", "admin-password", "tls-cert", "tls-key", "tls-client-ca"}

func (f securityFlags) config() (node.SecurityConfig, error) {
	cfg := node.SecurityConfig{
		AdminUser:     *f.adminUser,
		AdminPassword: *f.adminPassword,
		TLS:           tlsconf.Files{Cert: *f.tlsCert, Key: *f.tlsKey, ClientCA: *f.tlsCA},
	}
	switch {
	case cfg.AdminUser != "" && cfg.AdminPassword == "":
		return cfg, usagef("--admin-user needs --admin-password (or WHARF_ADMIN_PASSWORD)")
	case (cfg.TLS.Cert == "") != (cfg.TLS.Key == ""):
		return cfg, usagef("--tls-cert and --tls-key go together")
	case cfg.TLS.ClientCA != "" && cfg.TLS.Cert == "":
		return cfg, usagef("--tls-client-ca needs --tls-cert and --tls-key")
	}
	return cfg, nil
}
