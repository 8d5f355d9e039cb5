package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

// TestQuorumReplicaEndpointsOnOneNode: grow and shrink answer 400 on a
// single node, and for a node name that is not one; a quorum queue there
// has no leader or members fields, and its node is this one's.
func TestQuorumReplicaEndpointsOnOneNode(t *testing.T) {
	srv, _ := newAPI(t)
	for _, c := range []struct{ method, path, body, want string }{
		{http.MethodPost, "/api/queues/quorum/replicas/on/wharf@2/grow", `{"strategy":"all"}`, "need a cluster"},
		{http.MethodDelete, "/api/queues/quorum/replicas/on/2/shrink", "", "need a cluster"},
		{http.MethodPost, "/api/queues/quorum/replicas/on/rabbit@x/grow", "{}", "no node named rabbit@x"},
		{http.MethodPost, "/api/queues/quorum/replicas/on/wharf@2/grow", `{"strategy":"odd"}`, "strategy must be all or even"},
	} {
		if status, body := call(t, srv, c.method, c.path, c.body); status != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("%s %s: %d %s; want 400 with %q", c.method, c.path, status, body, c.want)
		}
	}
	if status, body := call(t, srv, http.MethodPut, "/api/queues/%2F/qq", `{"durable":true,"arguments":{"x-queue-type":"quorum"}}`); status != http.StatusCreated {
		t.Fatalf("declare: %d %s", status, body)
	}
	status, body := call(t, srv, http.MethodGet, "/api/queues/%2F/qq", "")
	if status != http.StatusOK || strings.Contains(body, `"members"`) || strings.Contains(body, `"leader"`) || !strings.Contains(body, `"node":"wharf@`) {
		t.Fatalf("a quorum queue of one node: %d %s", status, body)
	}
}
