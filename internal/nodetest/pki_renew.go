package nodetest

import "os"

// RenewWith writes other's server certificate and key over p's files, as
// an operator renewing a certificate in place does: a node reading p's
// files gets a certificate only other's CA trusts when it reloads them.
func (p *PKI) RenewWith(other *PKI) {
	p.t.Helper()
	for from, to := range map[string]string{other.CertFile: p.CertFile, other.KeyFile: p.KeyFile} {
		data, err := os.ReadFile(from)
		if err != nil {
			p.t.Fatal(err)
		}
		if err := os.WriteFile(to, data, 0o600); err != nil {
			p.t.Fatal(err)
		}
	}
}
