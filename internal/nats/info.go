package nats

import (
	"encoding/json"
	"runtime"
)

// compatVersion is the nats-server release whose client protocol this
// front end reproduces. INFO announces it as the server version because
// clients gate features on that number.
const compatVersion = "2.15.2"

// serverInfo is the INFO a client gets on connecting (and again, with
// ConnectInfo, after its first PING). Field names are nats-server's.
type serverInfo struct {
	ServerID     string `json:"server_id"`
	ServerName   string `json:"server_name"`
	Version      string `json:"version"`
	Proto        int    `json:"proto"`
	Go           string `json:"go"`
	Host         string `json:"host"`
	Port         int    `json:"port"`
	Headers      bool   `json:"headers"`
	AuthRequired bool   `json:"auth_required,omitempty"`
	MaxPayload   int    `json:"max_payload"`
	JetStream    bool   `json:"jetstream,omitempty"` // JetStream API served; nats-server leaves it out with JetStream off
	ClientID     uint64 `json:"client_id,omitempty"`
	ClientIP     string `json:"client_ip,omitempty"`
	ConnectInfo  bool   `json:"connect_info,omitempty"`
	// RemoteAccount is the account a connected client is bound to:
	// always nats-server's global account "$G" here.
	RemoteAccount string `json:"remote_account,omitempty"`
}

// infoLine returns "INFO {...}\r\n" for info.
func infoLine(info serverInfo) []byte {
	b, err := json.Marshal(info)
	if err != nil {
		panic(err) // a struct of strings, numbers and bools always marshals
	}
	line := make([]byte, 0, len(b)+len("INFO  \r\n"))
	line = append(line, "INFO "...)
	line = append(line, b...)
	return append(line, " \r\n"...)
}

// connectOptions is a client's CONNECT. A client that sends none, or
// leaves a field out, gets nats-server's defaults: verbose, pedantic and
// echo on.
type connectOptions struct {
	Verbose      bool   `json:"verbose"`
	Pedantic     bool   `json:"pedantic"`
	Echo         bool   `json:"echo"`
	Headers      bool   `json:"headers"`
	NoResponders bool   `json:"no_responders"`
	Protocol     int    `json:"protocol"`
	User         string `json:"user,omitempty"`
	Pass         string `json:"pass,omitempty"`
	Token        string `json:"auth_token,omitempty"`
	Name         string `json:"name,omitempty"`
	Lang         string `json:"lang,omitempty"`
	Version      string `json:"version,omitempty"`
}

var defaultConnectOptions = connectOptions{Verbose: true, Pedantic: true, Echo: true}

var goVersion = runtime.Version()
