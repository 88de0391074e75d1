package kubeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/canopy-dev/canopy/relay/store"
)

// initialEventsEndAnnotation marks the bookmark that ends the initial
// events of a watch-list (sendInitialEvents=true).
const initialEventsEndAnnotation = "k8s.io/initial-events-end"

func (s *Server) serveWatch(rq *request, sv *served) {
	q := rq.r.URL.Query()
	lo, err := rq.listOptions(sv)
	if err != nil {
		rq.writeError(err)
		return
	}
	rv := q.Get("resourceVersion")
	match := q.Get("resourceVersionMatch")
	bookmarks := q.Get("allowWatchBookmarks") == "true"

	var sendInitial *bool
	if v := q.Get("sendInitialEvents"); v != "" {
		b := v == "true"
		sendInitial = &b
	}
	// kube's checks of a watch's options (the WatchList feature on). As
	// kube 1.37, sendInitialEvents does not need allowWatchBookmarks: the
	// initial events then come without the bookmark that ends them.
	opts := metainternalversion.ListOptions{
		Watch: true, ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatch(match),
		SendInitialEvents: sendInitial, Continue: q.Get("continue"),
	}
	if errs := metainternalversionvalidation.ValidateListOptions(&opts, true); len(errs) > 0 {
		rq.writeError(apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs))
		return
	}

	ctx := rq.r.Context()
	timeout := s.cfg.MinWatchTimeout + time.Duration(rand.Int64N(int64(s.cfg.MinWatchTimeout)))
	if v := q.Get("timeoutSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			rq.writeError(apierrors.NewBadRequest("invalid timeoutSeconds: " + v))
			return
		}
		if n > 0 {
			timeout = time.Duration(n) * time.Second
		}
	}

	// Decide where the watch starts and which synthetic events come first.
	var initial []*store.Object
	var since int64
	switch {
	case sendInitial != nil && *sendInitial, sendInitial == nil && (rv == "" || rv == "0"):
		if sendInitial != nil && rv != "" && rv != "0" {
			if err := s.waitForResourceVersion(ctx, rq); err != nil {
				rq.writeError(err)
				return
			}
		}
		lo.Limit, lo.After = 0, ""
		list, err := rq.sp.List(lo)
		if err != nil {
			rq.writeError(storeError(err, sv.gr(), ""))
			return
		}
		initial, since = list.Items, list.Revision
	default:
		if rv == "" || rv == "0" {
			since = rq.sp.Revision()
		} else {
			n, err := strconv.ParseInt(rv, 10, 64)
			if err != nil || n < 0 {
				rq.writeError(apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", rv)))
				return
			}
			since = n
		}
	}
	wopts := store.WatchOptions{
		Space: lo.Space, Resource: lo.Resource, Namespace: lo.Namespace,
		Label: lo.Label, Field: lo.Field, Match: lo.Match, Since: since, Bookmarks: bookmarks,
	}
	if since == 0 {
		// Revision 0 would mean "from now" to the store; the store's
		// revision is where "now" is when nothing was ever written.
		wopts.Since = rq.sp.Revision()
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w, werr := rq.sp.Watch(wctx, wopts)

	form, proto := rq.negotiate(sv)
	h := rq.w.Header()
	if proto {
		h.Set("Content-Type", contentTypeProtobufWatch)
	} else {
		h.Set("Content-Type", "application/json")
	}
	h.Set("Cache-Control", "no-cache, private")
	h.Set("Transfer-Encoding", "chunked")
	rq.w.WriteHeader(http.StatusOK)
	flusher, _ := rq.w.(http.Flusher)
	enc := &watchEncoder{rq: rq, sv: sv, table: form == formTable, partial: form == formPartial, proto: proto}
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	if werr != nil {
		if errors.Is(werr, store.ErrExpired) {
			enc.writeError(apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", since, rq.sp.Stats().OldestRevision)))
		} else {
			enc.writeError(werr)
		}
		flush()
		return
	}
	defer w.Stop()
	s.metrics.watchers.Inc()
	defer s.metrics.watchers.Dec()

	for _, obj := range initial {
		if err := enc.writeStored("ADDED", obj); err != nil {
			return
		}
	}
	if sendInitial != nil && *sendInitial && bookmarks {
		if err := enc.writeBookmark(since, true); err != nil {
			return
		}
	}
	flush()
	// The store closes the events when wctx ends (timeout or the client
	// gone): a plain receive, cheaper than a select per event for each of
	// thousands of watchers.
	for {
		ev, ok := <-w.Events()
		if !ok {
			if err := w.Err(); errors.Is(err, store.ErrExpired) {
				enc.writeError(apierrors.NewResourceExpired("too old resource version"))
				flush()
			}
			return
		}
		var err error
		switch ev.Type {
		case store.Bookmark:
			err = enc.writeBookmark(ev.Revision, false)
		case store.Deleted:
			// Like kube: the last version the watcher could see (for an
			// object leaving the selection, the one before the change),
			// carrying the revision of the event.
			last := ev.Object
			if ev.Prev != nil {
				last = ev.Prev
			}
			err = enc.writeDeleted(last, ev.Revision)
		default:
			err = enc.writeStored(string(ev.Type), ev.Object)
		}
		if err != nil {
			return
		}
		// Each event is sent at once: the store's channel is unbuffered,
		// so there is no queued burst to wait for.
		flush()
	}
}

// watchEncoder writes watch events as kube's JSON stream (one
// {"type":...,"object":...} document per line) or, with proto, as its
// protobuf stream (length-delimited metav1.WatchEvents, protobuf.go).
type watchEncoder struct {
	rq      *request
	sv      *served
	table   bool
	partial bool
	proto   bool
	buf     bytes.Buffer
	frame   []byte // the protobuf frame being written
}

// writeStored writes an event of a stored version.
func (e *watchEncoder) writeStored(typ string, obj *store.Object) error {
	if e.proto {
		enc, err := e.rq.srv.protoStored(e.sv, obj)
		if err != nil {
			e.writeError(err)
			return err
		}
		return e.writeProto(typ, enc.b)
	}
	return e.writeObject(typ, obj.Data)
}

// writeDeleted writes a DELETED event: last, the last version the watcher
// could see, with the revision of the event.
func (e *watchEncoder) writeDeleted(last *store.Object, rev int64) error {
	if e.proto {
		enc, err := e.rq.srv.protoDeleted(e.sv, last, rev)
		if err != nil {
			e.writeError(err)
			return err
		}
		return e.writeProto("DELETED", enc.b)
	}
	return e.writeObject("DELETED", withResourceVersion(last.Data, rev))
}

// writeProto writes one frame of the protobuf stream.
func (e *watchEncoder) writeProto(typ string, obj []byte) error {
	e.frame = appendWatchFrame(e.frame[:0], typ, obj)
	_, err := e.rq.w.Write(e.frame)
	return err
}

func (e *watchEncoder) writeObject(typ string, data []byte) error {
	obj := data
	if e.table || e.partial {
		u, err := parseObject(data)
		if err != nil {
			return err
		}
		var v any
		if e.table {
			t := e.rq.srv.table(e.rq, e.sv, []*unstructured.Unstructured{u}, true)
			t.ResourceVersion = u.GetResourceVersion()
			v = t
		} else {
			v = partialMeta(u)
		}
		if obj, err = json.Marshal(v); err != nil {
			return err
		}
	}
	return e.write(typ, obj)
}

func (e *watchEncoder) writeBookmark(rev int64, initialEnd bool) error {
	if e.proto {
		enc, err := protoBookmark(e.sv, rev, initialEnd)
		if err != nil {
			return err
		}
		return e.writeProto("BOOKMARK", enc.b)
	}
	md := map[string]any{"resourceVersion": strconv.FormatInt(rev, 10)}
	if initialEnd {
		md["annotations"] = map[string]string{initialEventsEndAnnotation: "true"}
	}
	kind, apiVersion := e.sv.kind, e.sv.apiVersion()
	if e.table {
		kind, apiVersion = "Table", "meta.k8s.io/v1"
	} else if e.partial {
		kind, apiVersion = "PartialObjectMetadata", "meta.k8s.io/v1"
	}
	b, err := json.Marshal(map[string]any{"kind": kind, "apiVersion": apiVersion, "metadata": md})
	if err != nil {
		return err
	}
	return e.write("BOOKMARK", b)
}

func (e *watchEncoder) writeError(err error) {
	if e.proto {
		_ = e.writeProto("ERROR", protoStatus(err).b)
		return
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	status := st.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	b, _ := json.Marshal(&status)
	_ = e.write("ERROR", b)
}

func (e *watchEncoder) write(typ string, obj []byte) error {
	e.buf.Reset()
	e.buf.WriteString(`{"type":"`)
	e.buf.WriteString(typ)
	e.buf.WriteString(`","object":`)
	e.buf.Write(obj)
	e.buf.WriteString("}\n")
	_, err := e.rq.w.Write(e.buf.Bytes())
	return err
}

// withResourceVersion returns data with metadata.resourceVersion replaced:
// a DELETED event carries the revision of the deletion, as kube's does.
func withResourceVersion(data []byte, rev int64) []byte {
	u, err := parseObject(data)
	if err != nil {
		return data
	}
	u.SetResourceVersion(strconv.FormatInt(rev, 10))
	b, err := json.Marshal(u.Object)
	if err != nil {
		return data
	}
	return b
}
