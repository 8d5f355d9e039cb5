package httpapi

import (
	"crypto/tls"
	"strings"
)

// putTLS adds what RabbitMQ's connection objects say of TLS: ssl, the
// protocol and cipher, and the client certificate's subject, issuer and
// validity (null on a plain TCP connection).
func putTLS(obj map[string]any, st *tls.ConnectionState) {
	obj["ssl"] = st != nil
	for _, k := range []string{"ssl_protocol", "ssl_key_exchange", "ssl_cipher", "ssl_hash",
		"peer_cert_subject", "peer_cert_issuer", "peer_cert_validity"} {
		obj[k] = nil
	}
	if st == nil {
		return
	}
	// RabbitMQ names the protocol as Erlang's ssl does: tlsv1.3.
	obj["ssl_protocol"] = strings.ToLower(strings.ReplaceAll(tls.VersionName(st.Version), " ", "v"))
	obj["ssl_cipher"] = tls.CipherSuiteName(st.CipherSuite)
	if len(st.PeerCertificates) > 0 {
		c := st.PeerCertificates[0]
		obj["peer_cert_subject"] = c.Subject.String()
		obj["peer_cert_issuer"] = c.Issuer.String()
		obj["peer_cert_validity"] = c.NotBefore.UTC().Format("2006-01-02T15:04:05Z") + " - " + c.NotAfter.UTC().Format("2006-01-02T15:04:05Z")
	}
}
