package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// rabbitCluster is clusterNodes RabbitMQ nodes on this machine joined into
// one cluster: distinct node names (rabbit1@localhost, ...), AMQP,
// distribution and management API ports, one Erlang cookie and one epmd;
// the management plugin is the only one (the section reads quorum
// queues' leaders from its /api/queues, as it does Wharf's).
type rabbitCluster struct {
	s     *suite
	nodes []*rabbitServer
}

// rabbitClusterNodes describes the nodes of a cluster under dir: ports[0]
// is the epmd port they share, then an AMQP, a distribution and a
// management port per node.
func rabbitClusterNodes(dir string, ports []int) []rabbitNode {
	home := filepath.Join(dir, "home")
	var nodes []rabbitNode
	for i := 0; 1+3*i+2 < len(ports); i++ {
		name := fmt.Sprintf("rabbit%d", i+1)
		nodes = append(nodes, rabbitNode{name: name + "@localhost", dir: filepath.Join(dir, name), home: home,
			amqpPort: ports[1+3*i], distPort: ports[2+3*i], mgmtPort: ports[3+3*i], epmdPort: ports[0]})
	}
	return nodes
}

// startRabbitCluster starts clusterNodes RabbitMQ nodes in dir, joins the
// second and later ones to the first (stop_app, join_cluster, start_app)
// and checks that the first reports them all running. On failure every
// node started is stopped.
func (s *suite) startRabbitCluster(ctx context.Context, dir string) (*rabbitCluster, error) {
	ports, err := freePorts(1 + 3*clusterNodes)
	if err != nil {
		return nil, err
	}
	specs := rabbitClusterNodes(dir, ports)
	if err := writeErlangCookie(specs[0].home); err != nil {
		return nil, err
	}
	c := &rabbitCluster{s: s}
	for i, n := range specs {
		// The first node starts the shared epmd and is stopped last
		// (here and by the suite's stopAll), so its cleanup stops epmd.
		var cleanup func()
		if i == 0 {
			cleanup = func() { killEpmd(n.epmdPort) }
		}
		r, err := s.startRabbitNode(ctx, n, cleanup)
		if err != nil {
			c.stop()
			return nil, fmt.Errorf("start %s: %w", n.name, err)
		}
		c.nodes = append(c.nodes, r)
	}
	if err := c.join(ctx); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// join makes every node but the first a member of the first's cluster and
// waits until the first lists them all as running.
func (c *rabbitCluster) join(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	first := c.nodes[0].nodeName
	for _, r := range c.nodes[1:] {
		for _, args := range [][]string{{"stop_app"}, {"join_cluster", first}, {"start_app"}} {
			if out, err := r.ctl(ctx, args...); err != nil {
				return fmt.Errorf("rabbitmqctl -n %s %s: %v: %s", r.nodeName, strings.Join(args, " "), err, strings.TrimSpace(out))
			}
		}
	}
	for {
		out, err := c.nodes[0].ctl(ctx, "cluster_status", "--formatter", "json")
		running, perr := runningNodes(out)
		if err == nil && perr == nil && len(running) == len(c.nodes) {
			return nil
		}
		if err := sleepUntil(ctx, time.Now().Add(time.Second)); err != nil {
			return fmt.Errorf("%s never listed %d running nodes (last: %v %v): %w", first, len(c.nodes), running, perr, err)
		}
	}
}

// runningNodes reads running_nodes from `rabbitmqctl cluster_status
// --formatter json`.
func runningNodes(statusJSON string) ([]string, error) {
	var status struct {
		Running []string `json:"running_nodes"`
	}
	// rabbitmqctl may print a line of its own before the document.
	i := strings.Index(statusJSON, "{")
	if i < 0 {
		return nil, fmt.Errorf("no JSON in %q", statusJSON)
	}
	if err := json.Unmarshal([]byte(statusJSON[i:]), &status); err != nil {
		return nil, err
	}
	slices.Sort(status.Running)
	return status.Running, nil
}

// stop stops the nodes, last first (the first one's cleanup stops epmd).
func (c *rabbitCluster) stop() {
	for i := len(c.nodes) - 1; i >= 0; i-- {
		r := c.nodes[i]
		c.s.procs.forget(r.child)
		if err := r.terminate(2 * time.Minute); err != nil {
			c.s.logf("stopping RabbitMQ %s: %v", r.nodeName, err)
		}
	}
}
