package httpapi

import "github.com/wharf-mq/wharf/internal/mq"

// putTLS adds what RabbitMQ's connection objects say of TLS: ssl, the
// protocol and cipher, and the client certificate's subject, issuer and
// validity (null on a plain TCP connection, or without a certificate).
func putTLS(obj map[string]any, d *mq.TLSDetail) {
	obj["ssl"] = d != nil
	for _, k := range []string{"ssl_protocol", "ssl_key_exchange", "ssl_cipher", "ssl_hash",
		"peer_cert_subject", "peer_cert_issuer", "peer_cert_validity"} {
		obj[k] = nil
	}
	if d == nil {
		return
	}
	obj["ssl_protocol"], obj["ssl_cipher"] = d.Protocol, d.Cipher
	if d.PeerCertValidity != "" {
		obj["peer_cert_subject"], obj["peer_cert_issuer"], obj["peer_cert_validity"] = d.PeerCertSubject, d.PeerCertIssuer, d.PeerCertValidity
	}
}
