package console

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// Topics the page listens to: what changed, so that it reads its view again.
const (
	topicClusters   = "clusters"
	topicPlacements = "placements"
)

// flushEvery is how often changes are sent: a fleet of thousands renewing
// statuses sends the page one notice per topic at most this often.
const flushEvery = 500 * time.Millisecond

// broadcaster fans topics out to the pages that listen, coalesced.
type broadcaster struct {
	mu      sync.Mutex
	pending map[string]bool
	subs    map[chan string]struct{}
}

func newBroadcaster() *broadcaster {
	return &broadcaster{pending: map[string]bool{}, subs: map[chan string]struct{}{}}
}

func (b *broadcaster) publish(topic string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending[topic] = true
}

func (b *broadcaster) subscribe() chan string {
	ch := make(chan string, 8)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.subs[ch] = struct{}{}
	return ch
}

func (b *broadcaster) unsubscribe(ch chan string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.subs, ch)
}

// flush sends every pending topic to every page; a page that is behind
// misses it (it reads everything again on the next one).
func (b *broadcaster) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for topic := range b.pending {
		for ch := range b.subs {
			select {
			case ch <- topic:
			default:
			}
		}
	}
	clear(b.pending)
}

// Run watches the hub, as the user, until ctx ends: ClusterProfiles (of the
// set) and Placements (of every namespace, or of the console's when the user
// may not watch them all). What the user may not watch is not watched; the
// page still reads it when asked.
func (s *Server) Run(ctx context.Context) {
	var in []client.ListOption
	if s.opts.ClusterSet != "" {
		in = append(in, client.InNamespace(s.opts.ClusterSet))
	}
	go s.watchLoop(ctx, topicClusters, &cpv1alpha1.ClusterProfileList{}, in, nil)
	go s.watchLoop(ctx, topicPlacements, &placementv1alpha1.PlacementList{}, nil, []client.ListOption{client.InNamespace(s.opts.Namespace)})
	ticker := time.NewTicker(flushEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			s.events.flush()
		}
	}
}

// watchLoop watches list with opts (fallback when forbidden) and publishes
// topic on every event, starting again when a watch ends.
func (s *Server) watchLoop(ctx context.Context, topic string, list client.ObjectList, opts, fallback []client.ListOption) {
	for ctx.Err() == nil {
		w, err := s.c.Watch(ctx, list, opts...)
		if apierrors.IsForbidden(err) && fallback != nil {
			opts, fallback = fallback, nil
			continue
		}
		if err != nil {
			wait := 5 * time.Second
			if apierrors.IsForbidden(err) {
				wait = time.Minute
			}
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type != watch.Bookmark {
				s.events.publish(topic)
			}
		}
		w.Stop()
		// A watch the server ended: what changed meanwhile is read again.
		s.events.publish(topic)
	}
}

// watch streams topics to the page as server-sent events.
func (s *Server) watch(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	ch := s.events.subscribe()
	defer s.events.unsubscribe(ch)
	_, _ = fmt.Fprint(w, ": connected\n\n")
	flusher.Flush()
	keepAlive := time.NewTicker(25 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case topic := <-ch:
			_, _ = fmt.Fprintf(w, "data: %s\n\n", topic)
		case <-keepAlive.C:
			_, _ = fmt.Fprint(w, ": keep-alive\n\n")
		}
		flusher.Flush()
	}
}
