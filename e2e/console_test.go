package e2e

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

var consoleScreenshots = flag.String("e2e.console-screenshots", "",
	"directory to save PNG screenshots of the console's main pages in (docs/ keeps them); empty: none")

// requireChromium fails the test when Debian's chromium is not installed.
func requireChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Fatal("chromium not installed: apt-get install chromium (.ci/run installs it)")
	return ""
}

// newBrowser starts headless Chromium with a fresh profile and the flags
// that keep it off the network, and returns a context driving one tab.
func newBrowser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1440, 1000),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	// The first run starts the browser for as long as ctx lives; the
	// steps' timeouts must not end it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return ctx
}

// browse runs steps in the tab, each within half a minute.
func browse(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	for _, step := range steps {
		stepCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := runStep(stepCtx, step)
		cancel()
		if err != nil {
			page, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#main")))
			t.Fatalf("%s: %v\npage: %s", what, err, page)
		}
	}
}

// runStep runs one step, again if the page re-rendered the element between
// finding it and acting on it (the console redraws its live views every
// few seconds; Chrome then says the node it found is gone). That error
// comes before anything is clicked or typed, so running the step again
// does it once.
func runStep(ctx context.Context, step chromedp.Action[chromedp.Void]) error {
	for {
		_, err := chromedp.Run(ctx, step)
		if err == nil || !strings.Contains(err.Error(), "No node with given id found") || ctx.Err() != nil {
			return err
		}
	}
}

// waitText waits until the text of the element sel matches want.
func waitText(sel string, want func(string) bool) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		for {
			text, err := chromedp.Text(chromedp.CSS(sel))(ctx, tgt)
			if err != nil && !strings.Contains(err.Error(), "No node with given id found") {
				return err // a redrawn element is read again below
			}
			if want(text) {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s reads %q: %w", sel, text, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
}

func contains(s string) func(string) bool {
	return func(text string) bool { return strings.Contains(text, s) }
}
func equals(s string) func(string) bool {
	return func(text string) bool { return strings.TrimSpace(text) == s }
}

// screenshot saves the page as name.png when -e2e.console-screenshots is set.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if *consoleScreenshots == "" {
		return
	}
	browse(t, ctx, "settle before the screenshot", chromedp.Sleep(300*time.Millisecond))
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*consoleScreenshots, "console-"+name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConsoleInChromium drives the web console in headless Chromium as a
// person would: log in, browse a topic, watch a group's lag appear after
// records are produced, reset the group's offsets after a preview, get
// and purge a queue, move a dead-letter queue's message back to its
// exchange, publish to a queue and close a connection. Each step is
// checked through the stock clients too.
func TestConsoleInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker and a browser")
	}
	chromium := requireChromium(t)
	n := nodetest.Start(t, nodetest.WithConfig(func(c *node.Config) { c.Groups.InitialRebalanceDelay = -1 }))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint("customer-", i%2)), Value: []byte(fmt.Sprintf(`{"order":%d}`, i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, 6)
	commits := kadm.Offsets{}
	commits.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 6, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "billing", commits); err != nil {
		t.Fatal(err)
	}
	conn, err := amqp.Dial(nodetest.AMQPURL(n))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = ch.QueueDeclare("tasks", true, false, false, false, nil)
	must(err)
	_, err = ch.QueueDeclare("work", true, false, false, false, amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "work.dlq"})
	must(err)
	_, err = ch.QueueDeclare("work.dlq", true, false, false, false, nil)
	must(err)
	for i := range 3 {
		must(ch.PublishWithContext(ctx, "", "tasks", false, false, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(fmt.Sprint("task-", i+1))}))
	}
	must(ch.PublishWithContext(ctx, "", "work", false, false, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("failed job")}))
	d, ok, err := ch.Get("work", false)
	must(err)
	if !ok {
		t.Fatal("no message in work")
	}
	must(d.Nack(false, false)) // to work.dlq

	tab := newBrowser(t, chromium)
	// The console is reached through a proxy that can add what a node of
	// a cluster adds when another did not answer: a single node never does.
	var unanswered atomic.Bool
	base := unansweringProxy(t, nodetest.HTTPURL(n), &unanswered)
	browse(t, tab, "log in",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#login-password")),
		chromedp.SendKeys(chromedp.CSS("#login-password"), "guest"),
		chromedp.Click(chromedp.CSS("#login-go")),
		waitText("#count-topics", equals("1")),
		waitText("#count-queues", equals("3")))

	browse(t, tab, "browse a topic",
		chromedp.Navigate(base+"/#/topics/orders"),
		chromedp.WaitVisible(chromedp.CSS("#browse-read")),
		chromedp.SetValue(chromedp.CSS("#browse-key"), "customer-1"),
		chromedp.SetValue(chromedp.CSS("#browse-format"), "json"),
		chromedp.Click(chromedp.CSS("#browse-read")),
		waitText("#browse-result", contains(`"order": 5`)))
	shown, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#browse-result")))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(shown, `"order": 4`) || !strings.Contains(shown, `"order": 1`) {
		t.Fatalf("the key filter let through or lost records:\n%s", shown)
	}
	screenshot(t, tab, "topic")

	browse(t, tab, "the group caught up",
		chromedp.Navigate(base+"/#/groups/billing"),
		waitText(`[data-lag="orders/0"]`, equals("0")))
	produce(6, 10)
	browse(t, tab, "lag appears after producing", waitText(`[data-lag="orders/0"]`, equals("4")))
	screenshot(t, tab, "group")

	browse(t, tab, "preview a reset",
		chromedp.SetValue(chromedp.CSS("#reset-mode"), "to-earliest"),
		chromedp.Click(chromedp.CSS("#reset-preview")),
		waitText(`[data-new-offset="orders/0"]`, equals("0")))
	if at := committed(t, adm, "billing"); at != 6 {
		t.Fatalf("the preview moved the committed offset to %d", at)
	}
	browse(t, tab, "apply the reset",
		chromedp.Click(chromedp.CSS("#reset-apply")),
		waitText("#reset-result", contains("Committed new offsets")),
		waitText(`[data-lag="orders/0"]`, equals("10")))
	if at := committed(t, adm, "billing"); at != 0 {
		t.Fatalf("after the reset the group is at %d, want 0", at)
	}

	browse(t, tab, "get messages from a queue",
		chromedp.Navigate(base+"/#/queues/%2F/tasks"),
		waitText("#queue-ready", equals("3")),
		chromedp.SetValue(chromedp.CSS("#get-count"), "2"),
		chromedp.Click(chromedp.CSS("#get-go")),
		waitText("#get-result", contains("task-2")))
	screenshot(t, tab, "queue")
	browse(t, tab, "purge the queue",
		waitText("#queue-ready", equals("3")), // the get requeued them
		chromedp.Click(chromedp.Search(`//button[text()="Purge"]`)),
		chromedp.Click(chromedp.CSS(`[data-confirm="Purge"]`)),
		waitText("#purge-result", contains("Purged")),
		waitText("#queue-ready", equals("0")))
	if q, err := ch.QueueDeclarePassive("tasks", true, false, false, false, nil); err != nil || q.Messages != 0 {
		t.Fatalf("tasks after the purge: %+v %v", q, err)
	}
	browse(t, tab, "publish to the queue",
		chromedp.SetValue(chromedp.CSS("#publish-payload"), "from the console"),
		chromedp.Click(chromedp.CSS("#publish-go")),
		waitText("#publish-result", contains("Published and routed")),
		waitText("#queue-ready", equals("1")))
	if got, ok, err := ch.Get("tasks", true); err != nil || !ok || string(got.Body) != "from the console" {
		t.Fatalf("tasks after publishing from the console: %q %v %v", got.Body, ok, err)
	}

	browse(t, tab, "replay the dead-letter queue",
		chromedp.Navigate(base+"/#/queues/%2F/work.dlq"),
		waitText("#queue-ready", equals("1")),
		chromedp.Click(chromedp.CSS("#replay-go")),
		waitText("#replay-result", contains("Moved 1 message(s) back")),
		waitText("#queue-ready", equals("0")))
	back, ok, err := ch.Get("work", true)
	if err != nil || !ok || string(back.Body) != "failed job" {
		t.Fatalf("work after the replay: %q %v %v", back.Body, ok, err)
	}

	browse(t, tab, "the connections' node and the notice of nodes that did not answer",
		chromedp.Navigate(base+"/#/connections"),
		waitText("#main thead th:nth-child(2)", contains("NODE")), // as the style shows it
		waitText("#main tbody td:nth-child(2)", contains("wharf@")))
	if _, err := chromedp.Run(tab, chromedp.WaitNotPresent(chromedp.CSS("#unanswered"))); err != nil {
		t.Fatal(err)
	}
	unanswered.Store(true)
	browse(t, tab, "a listing with a node that did not answer",
		chromedp.Navigate(base+"/#/queues"),
		waitText("#unanswered", contains("wharf@3")),
		chromedp.Navigate(base+"/#/connections"),
		waitText("#unanswered", contains("No answer in time from wharf@3")))
	unanswered.Store(false)

	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	browse(t, tab, "close the AMQP connection",
		chromedp.Navigate(base+"/#/connections"),
		chromedp.Click(chromedp.Search(`//button[text()="Close"]`)),
		chromedp.Click(chromedp.CSS(`[data-confirm="Close"]`)),
		waitText("#main", contains("Closed ")))
	select {
	case e := <-closed:
		if e == nil || e.Code != amqp.ConnectionForced {
			t.Fatalf("the client saw the connection close with %v, want 320 CONNECTION_FORCED", e)
		}
	case <-ctx.Done():
		t.Fatal("the connection closed from the console stayed open")
	}
	if conn, err = amqp.Dial(nodetest.AMQPURL(n)); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if ch, err = conn.Channel(); err != nil {
		t.Fatal(err)
	}

	if *consoleScreenshots != "" {
		// The overview's charts need a few samples of traffic.
		browse(t, tab, "open the overview", chromedp.Navigate(base+"/#/"), waitText("#count-topics", equals("1")))
		for i := range 8 {
			produce(10+i*20, 30+i*20)
			must(ch.PublishWithContext(ctx, "", "tasks", false, false, amqp.Publishing{Body: []byte("tick")}))
			time.Sleep(time.Second)
		}
		screenshot(t, tab, "overview")
	}
}

// unansweringProxy serves target's HTTP API and console at the URL it
// returns, adding Wharf-Unanswered-Nodes: wharf@3 to the API's answers
// while unanswered is set.
func unansweringProxy(t *testing.T, target string, unanswered *atomic.Bool) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ModifyResponse = func(r *http.Response) error {
		if unanswered.Load() && strings.HasPrefix(r.Request.URL.Path, "/api/") {
			r.Header.Set("Wharf-Unanswered-Nodes", "wharf@3")
		}
		return nil
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv.URL
}

func committed(t *testing.T, adm *kadm.Client, group string) int64 {
	t.Helper()
	offsets, err := adm.FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offsets.Lookup("orders", 0)
	if !ok {
		return -1
	}
	return o.At
}
