package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"

	"github.com/canopy-dev/canopy/relay/session"
	"github.com/canopy-dev/canopy/relay/store"
)

// DestinationsAnnotation on an object in a mailbox lists (comma-separated)
// the destinations below that mailbox's child that the object targets. The
// root's placement translator writes it; a region reads it to route each
// object to the children whose subtrees hold those destinations.
const DestinationsAnnotation = "edge.canopy.dev/destinations"

// route keeps a region's children's mailboxes equal to its inbox, split by
// destination: an object goes to the mailbox of every child under which
// one of its destinations was announced, and leaves mailboxes that no
// longer want it. It reacts to inbox changes and to announcements, and
// returns when ctx is done.
//
// A routed object is a copy in each child's mailbox space; DESIGN.md wants
// mailboxes to be indexes over shared versions, which needs a mailbox
// implementation the tree.Sender can read instead of a store space.
func route(ctx context.Context, st *store.Store, down *session.Downlink, log *slog.Logger) error {
	for ctx.Err() == nil {
		_, changed := down.Subtree()
		list, err := st.List(store.ListOptions{Space: InboxSpace})
		if err != nil {
			return err
		}
		keys := map[store.Key]bool{}
		for _, obj := range list.Items {
			keys[inboxRelative(obj.Key)] = true
		}
		for _, child := range down.Children() {
			mb, err := st.List(store.ListOptions{Space: MailboxSpace(child.Identity.Name)})
			if err != nil {
				return err
			}
			for _, obj := range mb.Items {
				keys[inboxRelative(obj.Key)] = true
			}
		}
		for k := range keys {
			if err := routeKey(ctx, st, down, k); err != nil {
				return err
			}
		}
		w, err := st.Watch(ctx, store.WatchOptions{Space: InboxSpace, Since: list.Revision})
		if err != nil {
			return err
		}
		err = followInbox(ctx, st, down, w, changed)
		w.Stop()
		if err != nil && !errors.Is(err, errSubtreeChanged) && !errors.Is(err, store.ErrTooSlow) && !errors.Is(err, store.ErrExpired) {
			return err
		}
		log.Debug("re-routing the inbox", "reason", err)
	}
	return nil
}

var errSubtreeChanged = errors.New("server: subtree changed")

// followInbox routes each inbox change until the subtree changes (which
// needs a full pass) or the watch ends.
func followInbox(ctx context.Context, st *store.Store, down *session.Downlink, w store.Watcher, changed <-chan struct{}) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
			return errSubtreeChanged
		case ev, ok := <-w.Events():
			if !ok {
				return w.Err()
			}
			if ev.Type == store.Bookmark {
				continue
			}
			if err := routeKey(ctx, st, down, inboxRelative(ev.Object.Key)); err != nil {
				return err
			}
		}
	}
}

// inboxRelative strips the space from a key.
func inboxRelative(k store.Key) store.Key {
	k.Space = ""
	return k
}

// routeKey brings one key of every child mailbox in line with the inbox.
func routeKey(ctx context.Context, st *store.Store, down *session.Downlink, k store.Key) error {
	src := k
	src.Space = InboxSpace
	obj, err := st.Get(src)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	want := map[string]bool{}
	var content []byte // obj without resourceVersion, computed once for all children
	if obj != nil {
		content = withoutResourceVersion(obj.Data)
		for _, dest := range destinationsOf(obj.Data) {
			if child, ok := down.RouteOf(dest); ok {
				want[child] = true
			}
		}
	}
	for _, c := range down.Children() {
		dst := k
		dst.Space = MailboxSpace(c.Identity.Name)
		cur, err := st.Get(dst)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		switch {
		case want[c.Identity.Name] && cur == nil:
			_, err = st.Create(ctx, dst, obj.Data)
		case want[c.Identity.Name] && !bytes.Equal(withoutResourceVersion(cur.Data), content):
			_, err = st.Update(ctx, dst, obj.Data, cur.Revision)
		case !want[c.Identity.Name] && cur != nil:
			_, err = st.Delete(ctx, dst, cur.Revision, "")
		}
		if err != nil && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrExists) {
			return err
		}
	}
	return nil
}

// destinationsOf reads DestinationsAnnotation from an object's JSON.
func destinationsOf(data []byte) []string {
	var m struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	var out []string
	for _, d := range strings.Split(m.Metadata.Annotations[DestinationsAnnotation], ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, d)
		}
	}
	return out
}

// withoutResourceVersion is a stored version's JSON without
// metadata.resourceVersion, which each space assigns itself: two versions
// with equal results hold the same content.
func withoutResourceVersion(d []byte) []byte {
	var m map[string]any
	if json.Unmarshal(d, &m) != nil {
		return d
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "resourceVersion")
	}
	out, _ := json.Marshal(m)
	return out
}
