package integration

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// ScreenshotsEnv, when set to a directory, makes the console's browser test
// write its screenshots there (docs/console.md shows them).
const ScreenshotsEnv = "LODESTAR_CONSOLE_SCREENSHOTS"

// The console in a real browser (Debian's Chromium, driven by chromedp), run
// by `kubectl lodestar console` as a tenant of the debug fleet: it lists the
// namespace's Placements, shows a staged rollout waiting for approval,
// approves it with the button (the members get the new revision), opens a
// pod's logs and its events through the debug API, and shows no clusters to a tenant who may
// not read them; as the hub's admin, the clusters with their labels.
func TestConsoleInABrowser(t *testing.T) {
	browser := chromium(t)
	f := newDebugFleet(t)
	bindUser(t, f.ns, f.user, "lodestar:approver")
	g := NewWithT(t)
	p := greetingPlacement(f.ns, []string{member1, member2}, placementv1alpha1.RolloutStrategy{
		Type: placementv1alpha1.RolloutStaged,
		Stages: []placementv1alpha1.RolloutStage{
			{Name: "staging", ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "staging"}}},
			{Name: "production", ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "production"}}, Approval: placementv1alpha1.ApprovalRequired},
		},
	})
	p.Name = "release"
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	expectRolledOut(t, key, 1, "v1", member1, member2)
	setGreeting(t, f.ns, "v2")
	g.Eventually(func(g Gomega) {
		_, c := progressing(g, key)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonWaitingForApproval), c.Message)
	}).Should(Succeed())

	url := startConsole(t, "--kubeconfig", f.kubeconfig, "--as", f.user, "-n", f.ns)
	b := newBrowser(t, browser)
	b.run(chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`tr[data-placement="release"]`)), chromedp.WaitVisible(chromedp.CSS(`tr[data-placement="web"]`)))
	b.screenshot("placements")

	// The staged rollout waits; the button approves it, as the CLI would.
	b.run(chromedp.Navigate(url+"#/placement/"+f.ns+"/release"), chromedp.WaitVisible(chromedp.CSS(`#waiting`)))
	b.screenshot("rollout")
	b.click(`#approve-production`)
	b.run(chromedp.WaitVisible(chromedp.CSS(`#note`)))
	g.Expect(b.text(`#note`)).To(ContainSubstring("stage production approved for revision"))
	g.Eventually(func(g Gomega) {
		g.Expect(greetingOn(g, member1, f.ns)).To(Equal("v2"), "production has the approved revision")
	}).Should(Succeed())
	// The page follows the rollout by itself (watches): no reload.
	g.Eventually(func() string { return b.text(`#rollout-state`) }).Should(HavePrefix(placementv1alpha1.ReasonRolloutComplete))

	// Pause and resume, as `kubectl lodestar rollout pause|resume` do.
	b.click(`#pause`)
	g.Eventually(func() string { return b.text(`#note`) }).Should(Equal("placement release paused"))
	g.Eventually(func(g Gomega) {
		got, _ := progressing(g, key)
		g.Expect(got.Spec.Strategy.Paused).To(BeTrue())
	}).Should(Succeed())
	b.click(`#resume`)
	g.Eventually(func() string { return b.text(`#note`) }).Should(Equal("placement release resumed"))
	g.Eventually(func(g Gomega) {
		got, _ := progressing(g, key)
		g.Expect(got.Spec.Strategy.Paused).To(BeFalse())
	}).Should(Succeed())

	// A pod's logs, through the hub's debug API.
	b.run(chromedp.Navigate(url+"#/placement/"+f.ns+"/web"), chromedp.WaitVisible(chromedp.CSS(`#conditions`)))
	b.click(`#load-pods`)
	b.run(chromedp.WaitVisible(chromedp.CSS(`button.logs`)))
	b.click(`button.logs`)
	g.Eventually(func() string { return b.text(`#logs`) }).ShouldNot(Or(BeEmpty(), Equal("reading…"), Equal("(empty)")))
	b.screenshot("logs")
	// Its events: the members' (the pods scheduled and started there).
	b.click(`#load-events`)
	b.run(chromedp.WaitVisible(chromedp.CSS(`#event-list`)))
	g.Eventually(func() string { return b.text(`#event-list tbody`) }).Should(ContainSubstring(member1))

	// What the tenant may not read is absent.
	b.run(chromedp.Navigate(url+"#/clusters"), chromedp.WaitVisible(chromedp.CSS(`#forbidden`)))

	// The hub's admin sees every cluster with its labels.
	admin := startConsole(t, "--kubeconfig", f.kubeconfig, "-n", f.ns, "--all-cluster-sets")
	b.run(chromedp.Navigate(admin+"#/clusters"), chromedp.WaitVisible(chromedp.CSS(`#clusters tr[data-cluster="`+member1+`"]`)))
	g.Expect(b.text(`#clusters tr[data-cluster="` + member1 + `"]`)).To(And(ContainSubstring("env=production"), ContainSubstring("True")))
	b.run(chromedp.SendKeys(chromedp.CSS(`#filter`), "staging"))
	g.Eventually(func() string { return b.text(`#range`) }).Should(HaveSuffix("of 1"))
	g.Expect(b.text(`#clusters tbody`)).To(ContainSubstring(member2))
	b.run(chromedp.Navigate(admin+"#/placements"), chromedp.WaitVisible(chromedp.CSS(`#placements`)),
		chromedp.Navigate(admin+"#/clusters"), chromedp.WaitVisible(chromedp.CSS(`#clusters tr[data-cluster="`+member3+`"]`)))
	g.Expect(b.text(`#range`)).NotTo(HaveSuffix("of 1"), "a new view starts unfiltered")
	b.screenshot("clusters")
}

// chromium is the browser the console's test drives: Debian's package
// (.ci/run installs it). Without one the test says so and skips.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Skip("no Chromium on this machine: the console's browser test needs Debian's chromium package (apt-get install chromium; .ci/run installs it)")
	return ""
}

var consoleURL = regexp.MustCompile(`http://127\.0\.0\.1:\d+/\?token=[0-9a-f]+`)

// startConsole runs `kubectl lodestar console` with args until the test ends
// and returns the URL it prints.
func startConsole(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(os.Getenv(testenv.BinEnv), "kubectl-lodestar"), append([]string{"console"}, args...)...)
	out, err := cmd.StdoutPipe()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	cmd.Stderr = os.Stderr
	NewWithT(t).Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if u := consoleURL.FindString(s.Text()); u != "" {
				found <- u
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case u := <-found:
		return u
	case <-time.After(testenv.EventuallyTimeout):
		t.Fatal("kubectl lodestar console printed no URL")
		return ""
	}
}

// browser is a headless Chromium tab.
type browser struct {
	t   *testing.T
	ctx context.Context
}

func newBrowser(t *testing.T, exe string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 900),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-gpu", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first call starts the browser, which lives as long as its context:
	// it has no timeout of its own.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	return &browser{t: t, ctx: ctx}
}

// run runs actions, bounded like an Eventually.
func (b *browser) run(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, testenv.EventuallyTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		page, _ := chromedp.Run(b.ctx, chromedp.OuterHTML(chromedp.CSS("body")))
		b.t.Fatalf("in the browser: %v\nthe page:\n%s", err, page)
	}
}

// click clicks the first element sel matches once one is there and enabled.
// The console redraws its view on every change on the hub, so an element
// found by one command may be gone by the next: the click is one script.
func (b *browser) click(sel string) {
	b.t.Helper()
	script := `(() => { const e = document.querySelector(` + jsString(sel) + `); if (!e || e.disabled) return false; e.click(); return true; })()`
	NewWithT(b.t).Eventually(func() (bool, error) {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		defer cancel()
		return chromedp.Run(ctx, chromedp.Evaluate[bool](script))
	}).Should(BeTrue(), "no enabled %s to click", sel)
}

// text is the text of the first element sel matches ("" when none does yet).
func (b *browser) text(sel string) string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	nodes, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+jsString(sel)+`).length`))
	if err != nil || nodes == 0 {
		return ""
	}
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(s)
}

func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// screenshot writes the page (PNG: quality 100) to $LODESTAR_CONSOLE_SCREENSHOTS/console-<name>.png
// when that is set (docs/console.md).
func (b *browser) screenshot(name string) {
	b.t.Helper()
	dir := os.Getenv(ScreenshotsEnv)
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, testenv.EventuallyTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "console-"+name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}
