package httpapi

import (
	"context"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/rate"
	"github.com/wharf-mq/wharf/internal/users"
)

// exchangeTypes are the exchange types mq routes, as /api/overview and
// /api/nodes list them.
var exchangeTypes = []map[string]any{
	{"name": "direct", "description": "AMQP direct exchange, as per the AMQP specification", "enabled": true},
	{"name": "fanout", "description": "AMQP fanout exchange, as per the AMQP specification", "enabled": true},
	{"name": "headers", "description": "AMQP headers exchange, as per the AMQP specification", "enabled": true},
	{"name": "topic", "description": "AMQP topic exchange, as per the AMQP specification", "enabled": true},
	{"name": "x-consistent-hash", "description": "Consistent Hashing Exchange", "enabled": true},
}

// overview is GET /api/overview: versions, the node's message totals and
// rates, queue totals, object counts and listeners. As in RabbitMQ a user
// who is not a monitor sees the totals of the vhosts and connections it
// may see, and no node-wide message rates. The connections, channels and
// consumers, queues and exchanges counted are every node's, but those of
// nodes that did not answer in time, which unansweredHeader names.
func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	u := requester(r)
	// The other nodes are asked for their clients while the queues'
	// serving nodes, and the other nodes for their own queues and
	// exchanges, are asked: a node that does not answer costs the
	// request one wait, not two.
	var (
		clients           mq.ClientTotals
		clientsUnanswered []int32
		asked             sync.WaitGroup
	)
	asked.Go(func() { clients, clientsUnanswered = s.clientTotals(r.Context(), u) })
	var sum mq.VHostTotals
	vhostTotals, unanswered := s.reg.Totals(r.Context(), s.visibleVHosts(r))
	for _, t := range vhostTotals {
		sum.Add(t)
	}
	asked.Wait()
	unanswered = append(unanswered, clientsUnanswered...)
	slices.Sort(unanswered)
	s.nameUnanswered(w, slices.Compact(unanswered))
	totals := []rate.Stat{
		{Name: "messages", Value: int64(sum.Messages)},
		{Name: "messages_ready", Value: int64(sum.Ready)},
		{Name: "messages_unacknowledged", Value: int64(sum.Unacked)},
	}
	messageStats := map[string]any{}
	if isMonitor(u) {
		// The sampler follows the node's totals: a narrower user's
		// would make rates of nonsense.
		s.queueTotals.Sample(time.Now(), totals)
		messageStats = statsObject(s.amqp.MessageStats())
	}
	listeners := make([]map[string]any, 0, len(s.cfg.Listeners))
	for _, l := range s.cfg.Listeners {
		host, port := "", 0
		if a, ok := l.Addr.(*net.TCPAddr); ok {
			host, port = a.IP.String(), a.Port
		}
		listeners = append(listeners, map[string]any{
			"node": s.cfg.NodeName, "protocol": l.Protocol, "ip_address": host, "port": port, "socket_opts": map[string]any{},
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"product_name":              "Wharf",
		"product_version":           s.cfg.Version,
		"management_version":        s.cfg.Version,
		"rabbitmq_version":          s.cfg.Version,
		"rates_mode":                "basic",
		"cluster_name":              s.cfg.ClusterName,
		"node":                      s.cfg.NodeName,
		"exchange_types":            exchangeTypes,
		"disable_stats":             false,
		"enable_queue_totals":       false,
		"statistics_db_event_queue": 0,
		"message_stats":             messageStats,
		"queue_totals":              statsObject(totals),
		"object_totals": map[string]any{
			"connections": clients.Connections, "channels": clients.Channels, "consumers": clients.Consumers,
			"queues": sum.Queues, "exchanges": sum.Exchanges,
		},
		"listeners": listeners,
		"contexts":  []any{},
	})
}

// clientTotals counts the connections, channels and consumers of every
// node's clients that u may see (seesConnection), and returns the nodes
// that did not answer.
func (s *Server) clientTotals(ctx context.Context, u users.User) (mq.ClientTotals, []int32) {
	elsewhere, unanswered := s.reg.ClientTotalsElsewhere(ctx)
	var sum mq.ClientTotals
	for _, t := range append(mq.TotalsByUser(s.amqp.ConnectionDetails()), elsewhere...) {
		if seesConnection(u, t.User) {
			sum.Connections += t.Connections
			sum.Channels += t.Channels
			sum.Consumers += t.Consumers
		}
	}
	return sum, unanswered
}

// nodeJSON is the one node, as /api/nodes shows it. mem_used and
// mem_limit are what the memory alarm compares: message bodies held in
// memory, against the high-water mark.
func (s *Server) nodeJSON() map[string]any {
	res := s.amqp.Resources()
	fdUsed := 0
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		fdUsed = len(fds)
	}
	return map[string]any{
		"name": s.cfg.NodeName, "type": "disc", "running": true, "being_drained": false,
		"os_pid":          strconv.Itoa(os.Getpid()),
		"uptime":          time.Since(s.started).Milliseconds(),
		"processors":      runtime.NumCPU(),
		"proc_used":       runtime.NumGoroutine(),
		"fd_used":         fdUsed,
		"fd_total":        openFileLimit(),
		"mem_used":        res.MemoryUsed,
		"mem_limit":       max(res.MemoryLimit, 0),
		"mem_alarm":       res.MemoryAlarm,
		"disk_free":       res.DiskFree,
		"disk_free_limit": max(res.DiskFreeLimit, 0),
		"disk_free_alarm": res.DiskAlarm,
		"sockets_used":    len(s.amqp.ConnectionDetails()),
		"run_queue":       0,
		"partitions":      []any{},
		"rates_mode":      "basic",
		"exchange_types":  exchangeTypes,
		"applications":    []any{},
		"contexts":        []any{},
	}
}

// listNodes is GET /api/nodes.
func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) {
	writeList(w, r, []map[string]any{s.nodeJSON()})
}

// getNode is GET /api/nodes/{node}.
func (s *Server) getNode(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("node") != s.cfg.NodeName {
		writeNotFound(w)
		return
	}
	writeJSON(w, http.StatusOK, s.nodeJSON())
}

// alarmsCheck is GET /api/health/checks/alarms (and local-alarms, the
// same on a single node): 200 while no resource alarm is raised, 503
// listing them otherwise.
func (s *Server) alarmsCheck(w http.ResponseWriter, r *http.Request) {
	res := s.amqp.Resources()
	var alarms []map[string]any
	if res.MemoryAlarm {
		alarms = append(alarms, map[string]any{"node": s.cfg.NodeName, "resource": "memory"})
	}
	if res.DiskAlarm {
		alarms = append(alarms, map[string]any{"node": s.cfg.NodeName, "resource": "disk"})
	}
	if len(alarms) == 0 {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
		return
	}
	writeJSON(w, http.StatusServiceUnavailable, map[string]any{
		"status": "failed", "reason": "There are alarms in effect in the cluster", "alarms": alarms,
	})
}

// alivenessTest is GET /api/aliveness-test/{vhost}. RabbitMQ 4.x made it
// a no-op that only checks the vhost (its round trip through a queue is
// what the health checks replaced), and so does Wharf.
func (s *Server) alivenessTest(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.vhostsOf(w, r); ok {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	}
}
