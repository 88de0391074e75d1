package kubeapi

// Protobuf responses.
//
// client-go's typed clients ask for
// "application/vnd.kubernetes.protobuf,application/json"; kube-apiserver
// answers them in protobuf for the kinds of its own scheme, and so does the
// root (docs/compat.md, Protobuf). Objects are stored as JSON, so an answer
// in protobuf costs a conversion JSON → Go type → protobuf. The conversion
// of a stored version is kept in a protoCache by (store key, revision): a
// list of unchanged objects re-encodes nothing, and a watch event sent to
// many watchers is encoded once. A list is its envelope written around the
// items' cached encodings; custom resources, Table and
// PartialObjectMetadata forms and error Statuses stay JSON (client-go
// decodes a response by its Content-Type).
//
// Wire forms, as kube's protobuf serializer writes them
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf):
//
//	object:      "k8s\x00" + runtime.Unknown{TypeMeta{apiVersion, kind}, Raw: <type's protobuf>, "", ""}
//	list:        the same, Raw = ListMeta (field 1) + items (field 2, repeated)
//	watch frame: 4-byte big-endian length + metav1.WatchEvent{Type, Object: RawExtension{Raw: <object form>}}

import (
	"bytes"
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kjson "sigs.k8s.io/json"

	"github.com/canopy-dev/canopy/relay/store"
)

// Media types of protobuf answers.
const (
	contentTypeProtobuf      = runtime.ContentTypeProtobuf
	contentTypeProtobufWatch = runtime.ContentTypeProtobuf + ";stream=watch"
)

// DefaultProtobufCacheBytes bounds the protobuf encodings a Server keeps
// (Config.ProtobufCacheBytes).
const DefaultProtobufCacheBytes = 64 << 20

// protoMagic starts every protobuf object kube writes.
var protoMagic = []byte{0x6b, 0x38, 0x73, 0x00} // "k8s\x00"

// negotiate reads Accept as kube's negotiation does for the forms served
// here: the first acceptable entry wins; "*/*" and "application/*" mean
// JSON; protobuf is acceptable only when protoOK (a kind of kube's
// scheme), and only as the object itself (Table and
// PartialObjectMetadata are served in JSON). It returns the form and
// whether to answer in protobuf.
func negotiate(accept string, protoOK bool) (outputForm, bool) {
	if accept == "" {
		return formObject, false
	}
	for part := range strings.SplitSeq(accept, ",") {
		fieldsOf := strings.Split(part, ";")
		mt := strings.TrimSpace(fieldsOf[0])
		var as, g, v string
		for _, p := range fieldsOf[1:] {
			k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "as":
				as = val
			case "g":
				g = val
			case "v":
				v = val
			}
		}
		switch mt {
		case contentTypeProtobuf:
			if protoOK && as == "" {
				return formObject, true
			}
			continue
		case "application/json", "*/*", "application/*":
		default:
			continue
		}
		switch as {
		case "":
			return formObject, false
		case "Table":
			if g == "meta.k8s.io" && (v == "v1" || v == "v1beta1") {
				return formTable, false
			}
		case "PartialObjectMetadata", "PartialObjectMetadataList":
			if g == "meta.k8s.io" && (v == "v1" || v == "v1beta1") {
				return formPartial, false
			}
		}
	}
	return formObject, false
}

// negotiate is the form of the answer for an object of sv, and whether
// it is protobuf.
func (rq *request) negotiate(sv *served) (outputForm, bool) {
	return negotiate(rq.r.Header.Get("Accept"), protobufKind(sv))
}

// acceptsProtobuf reports whether an answer of a kind of kube's scheme
// (a Scale, a review, a Status) is wanted in protobuf.
func (rq *request) acceptsProtobuf() bool {
	f, proto := negotiate(rq.r.Header.Get("Accept"), true)
	return proto && f == formObject
}

// protobufKind reports whether kube serves sv in protobuf: a built-in kind
// of client-go's scheme (custom resources, and kinds such as CRDs and
// APIServices that client-go does not know, are JSON).
func protobufKind(sv *served) bool {
	return sv != nil && sv.crd == nil && sv.newTyped != nil && clientgoscheme.Scheme.Recognizes(sv.gvk())
}

// protoMarshaler is what the generated protobuf code of kube's types has.
type protoMarshaler interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// protoEncoding is an object in kube's protobuf form (protoMagic and the
// runtime.Unknown envelope); raw is the type's own encoding inside it.
type protoEncoding struct {
	b        []byte
	rawStart int
	rawEnd   int
}

func (e protoEncoding) raw() []byte { return e.b[e.rawStart:e.rawEnd] }

// unknownTail is the two empty strings (contentEncoding, contentType) that
// end every runtime.Unknown kube writes.
var unknownTail = []byte{0x1a, 0x00, 0x22, 0x00}

// appendUnknownHead appends protoMagic and a runtime.Unknown up to its Raw
// field of rawSize bytes, which the caller appends next, then unknownTail.
func appendUnknownHead(b []byte, apiVersion, kind string, rawSize int) []byte {
	tmSize := 1 + uvarintSize(uint64(len(apiVersion))) + len(apiVersion) + 1 + uvarintSize(uint64(len(kind))) + len(kind)
	b = append(b, protoMagic...)
	b = append(b, 0x0a)
	b = binary.AppendUvarint(b, uint64(tmSize))
	b = append(b, 0x0a)
	b = binary.AppendUvarint(b, uint64(len(apiVersion)))
	b = append(b, apiVersion...)
	b = append(b, 0x12)
	b = binary.AppendUvarint(b, uint64(len(kind)))
	b = append(b, kind...)
	b = append(b, 0x12)
	return binary.AppendUvarint(b, uint64(rawSize))
}

// unknownSize is the length of appendUnknownHead's output, the Raw and
// unknownTail.
func unknownSize(apiVersion, kind string, rawSize int) int {
	tmSize := 1 + uvarintSize(uint64(len(apiVersion))) + len(apiVersion) + 1 + uvarintSize(uint64(len(kind))) + len(kind)
	return len(protoMagic) + 1 + uvarintSize(uint64(tmSize)) + tmSize + 1 + uvarintSize(uint64(rawSize)) + rawSize + len(unknownTail)
}

func uvarintSize(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// encodeProto encodes a typed object of kind gvk in kube's protobuf form.
func encodeProto(gvk schema.GroupVersionKind, obj runtime.Object) (protoEncoding, error) {
	m, ok := obj.(protoMarshaler)
	if !ok {
		return protoEncoding{}, fmt.Errorf("kubeapi: %T has no protobuf encoding", obj)
	}
	apiVersion := gvk.GroupVersion().String()
	size := m.Size()
	b := make([]byte, 0, unknownSize(apiVersion, gvk.Kind, size))
	b = appendUnknownHead(b, apiVersion, gvk.Kind, size)
	start := len(b)
	b = b[:start+size]
	n, err := m.MarshalToSizedBuffer(b[start:])
	if err != nil {
		return protoEncoding{}, err
	}
	if n != size {
		return protoEncoding{}, fmt.Errorf("kubeapi: %T encoded %d bytes, expected %d", obj, n, size)
	}
	b = append(b, unknownTail...)
	return protoEncoding{b: b, rawStart: start, rawEnd: start + size}, nil
}

// jsonToProto converts a stored object of sv to protobuf, decoding its
// JSON as client-go's JSON decoder does (case-sensitive, ints kept).
func jsonToProto(sv *served, data []byte) (protoEncoding, error) {
	obj := sv.newTyped()
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, obj); err != nil {
		return protoEncoding{}, fmt.Errorf("kubeapi: stored %s cannot be decoded: %w", sv.kind, err)
	}
	return encodeProto(sv.gvk(), obj)
}

// protoStored is the protobuf form of a stored version, from the cache.
func (s *Server) protoStored(sv *served, obj *store.Object) (protoEncoding, error) {
	return s.protoCache.get(protoKey{sv: sv, key: obj.Key, rev: obj.Revision}, func() (protoEncoding, error) {
		return jsonToProto(sv, obj.Data)
	})
}

// protoDeleted is the protobuf form of a DELETED event's object: last, the
// last version the watcher could see, with the revision of the event.
func (s *Server) protoDeleted(sv *served, last *store.Object, rev int64) (protoEncoding, error) {
	return s.protoCache.get(protoKey{sv: sv, key: last.Key, rev: rev, deleted: true}, func() (protoEncoding, error) {
		return jsonToProto(sv, withResourceVersion(last.Data, rev))
	})
}

// writeProtoObject answers with one object in protobuf.
func (rq *request) writeProtoObject(sv *served, code int, data []byte) {
	var enc protoEncoding
	var err error
	if o := rq.stored; o != nil && bytes.Equal(o.Data, data) {
		enc, err = rq.srv.protoStored(sv, o)
	} else {
		enc, err = jsonToProto(sv, data)
	}
	if err != nil {
		rq.writeError(err)
		return
	}
	writeRaw(rq.w, code, contentTypeProtobuf, enc.b)
}

// writeStored answers a get with a stored version.
func (rq *request) writeStored(sv *served, obj *store.Object) {
	if form, proto := rq.negotiate(sv); proto && form == formObject {
		enc, err := rq.srv.protoStored(sv, obj)
		if err != nil {
			rq.writeError(err)
			return
		}
		writeRaw(rq.w, http.StatusOK, contentTypeProtobuf, enc.b)
		return
	}
	rq.writeObject(sv, http.StatusOK, obj.Data)
}

// writeTyped answers with an object of kube's scheme that carries its
// apiVersion and kind (a Scale, a review, a Status), in protobuf when
// asked, else JSON.
func (rq *request) writeTyped(code int, obj runtime.Object) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind != "" && clientgoscheme.Scheme.Recognizes(gvk) && rq.acceptsProtobuf() {
		if enc, err := encodeProto(gvk, obj); err == nil {
			writeRaw(rq.w, code, contentTypeProtobuf, enc.b)
			return
		}
	}
	writeJSON(rq, code, obj)
}

// encodeProtoList writes a list of sv in protobuf around the items'
// encodings (raw forms, without envelope).
func encodeProtoList(sv *served, rev int64, cont string, remaining *int64, items [][]byte) ([]byte, error) {
	lm := metav1.ListMeta{ResourceVersion: strconv.FormatInt(rev, 10), Continue: cont, RemainingItemCount: remaining}
	lmSize := lm.Size()
	size := 1 + uvarintSize(uint64(lmSize)) + lmSize
	for _, it := range items {
		size += 1 + uvarintSize(uint64(len(it))) + len(it)
	}
	apiVersion := sv.apiVersion()
	b := make([]byte, 0, unknownSize(apiVersion, sv.listKind, size))
	b = appendUnknownHead(b, apiVersion, sv.listKind, size)
	b = append(b, 0x0a)
	b = binary.AppendUvarint(b, uint64(lmSize))
	start := len(b)
	b = b[:start+lmSize]
	if _, err := lm.MarshalToSizedBuffer(b[start:]); err != nil {
		return nil, err
	}
	for _, it := range items {
		b = append(b, 0x12)
		b = binary.AppendUvarint(b, uint64(len(it)))
		b = append(b, it...)
	}
	return append(b, unknownTail...), nil
}

// protoList is the protobuf list of stored objects, their encodings from
// the cache.
func (s *Server) protoList(sv *served, rev int64, cont string, remaining *int64, objs []*store.Object) ([]byte, error) {
	items := make([][]byte, len(objs))
	// Items missing from the cache (a first list, a list after many
	// writes) are converted on several CPUs.
	workers := min(goruntime.GOMAXPROCS(0), len(objs)/protoListChunk+1)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(objs); i += workers {
				enc, err := s.protoStored(sv, objs[i])
				if err != nil {
					errs[w] = err
					return
				}
				items[i] = enc.raw()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return encodeProtoList(sv, rev, cont, remaining, items)
}

// protoListChunk is how many items of a list make one more goroutine.
const protoListChunk = 256

// protoListOf is the protobuf list of objects that are not (or no longer)
// stored: deletecollection's answer.
func protoListOf(sv *served, rev int64, datas [][]byte) ([]byte, error) {
	items := make([][]byte, len(datas))
	for i, d := range datas {
		enc, err := jsonToProto(sv, d)
		if err != nil {
			return nil, err
		}
		items[i] = enc.raw()
	}
	return encodeProtoList(sv, rev, "", nil, items)
}

// protoBookmark is a BOOKMARK event's object: an empty object of sv's type
// carrying the revision (and, ending the initial events of a watch-list,
// the initial-events-end annotation).
func protoBookmark(sv *served, rev int64, initialEnd bool) (protoEncoding, error) {
	obj := sv.newTyped()
	acc, err := meta.Accessor(obj)
	if err != nil {
		return protoEncoding{}, err
	}
	acc.SetResourceVersion(strconv.FormatInt(rev, 10))
	if initialEnd {
		acc.SetAnnotations(map[string]string{initialEventsEndAnnotation: "true"})
	}
	return encodeProto(sv.gvk(), obj)
}

var statusGVK = schema.GroupVersionKind{Version: "v1", Kind: "Status"}

// protoStatus is an ERROR event's object.
func protoStatus(err error) protoEncoding {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	status := st.Status()
	enc, _ := encodeProto(statusGVK, &status)
	return enc
}

// appendWatchFrame appends one frame of kube's protobuf watch stream: the
// length-delimited metav1.WatchEvent{Type: typ, Object: {Raw: obj}}.
func appendWatchFrame(b []byte, typ string, obj []byte) []byte {
	ext := 1 + uvarintSize(uint64(len(obj))) + len(obj) // RawExtension{Raw}
	ev := 1 + uvarintSize(uint64(len(typ))) + len(typ) + 1 + uvarintSize(uint64(ext)) + ext
	b = binary.BigEndian.AppendUint32(b, uint32(ev))
	b = append(b, 0x0a)
	b = binary.AppendUvarint(b, uint64(len(typ)))
	b = append(b, typ...)
	b = append(b, 0x12)
	b = binary.AppendUvarint(b, uint64(ext))
	b = append(b, 0x0a)
	b = binary.AppendUvarint(b, uint64(len(obj)))
	return append(b, obj...)
}

// protoKey names a cached encoding: a stored version as served by sv, or
// (deleted) the object of the DELETED event at rev.
type protoKey struct {
	sv      *served
	key     store.Key
	rev     int64
	deleted bool
}

// protoCacheShards spreads the cache's lock.
const protoCacheShards = 16

// protoEntryOverhead is what an entry costs beyond its bytes (map slot,
// list element, key), counted against the bound.
const protoEntryOverhead = 256

// protoCache keeps protobuf encodings of stored versions, least recently
// used first out, within a bound in bytes. Concurrent requests for the
// same missing version encode it once. It is safe for concurrent use; a
// nil *protoCache caches nothing.
type protoCache struct {
	seed    maphash.Seed
	encodes atomic.Int64 // misses, for tests
	shards  [protoCacheShards]protoShard
}

type protoShard struct {
	mu    sync.Mutex
	max   int64
	bytes int64
	m     map[protoKey]*protoEntry
	lru   list.List // of *protoEntry, most recent first
}

type protoEntry struct {
	key  protoKey
	once sync.Once
	enc  protoEncoding
	err  error
	size int64 // counted in the shard's bytes; 0 until encoded
	elem *list.Element
}

// newProtoCache returns a cache of at most maxBytes, or nil (no cache)
// when maxBytes < 0.
func newProtoCache(maxBytes int64) *protoCache {
	if maxBytes < 0 {
		return nil
	}
	if maxBytes == 0 {
		maxBytes = DefaultProtobufCacheBytes
	}
	c := &protoCache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].max = maxBytes / protoCacheShards
		c.shards[i].m = map[protoKey]*protoEntry{}
	}
	return c
}

func (c *protoCache) shard(k protoKey) *protoShard {
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(k.key.Namespace)
	h.WriteString(k.key.Name)
	var rev [8]byte
	binary.LittleEndian.PutUint64(rev[:], uint64(k.rev))
	h.Write(rev[:])
	return &c.shards[h.Sum64()%protoCacheShards]
}

// get returns the encoding of k, made by encode when it is not cached.
func (c *protoCache) get(k protoKey, encode func() (protoEncoding, error)) (protoEncoding, error) {
	if c == nil {
		return encode()
	}
	sh := c.shard(k)
	sh.mu.Lock()
	e, ok := sh.m[k]
	if ok {
		sh.lru.MoveToFront(e.elem)
	} else {
		e = &protoEntry{key: k}
		e.elem = sh.lru.PushFront(e)
		sh.m[k] = e
	}
	sh.mu.Unlock()

	e.once.Do(func() {
		c.encodes.Add(1)
		e.enc, e.err = encode()
		sh.mu.Lock()
		defer sh.mu.Unlock()
		if sh.m[k] != e {
			return // evicted meanwhile
		}
		size := int64(len(e.enc.b)) + protoEntryOverhead
		if e.err != nil || size > sh.max {
			sh.remove(e)
			return
		}
		e.size = size
		sh.bytes += size
		for sh.bytes > sh.max {
			sh.remove(sh.lru.Back().Value.(*protoEntry))
		}
	})
	return e.enc, e.err
}

// remove drops e; the shard's lock is held.
func (sh *protoShard) remove(e *protoEntry) {
	sh.lru.Remove(e.elem)
	delete(sh.m, e.key)
	sh.bytes -= e.size
}

// protoCacheStats are the cache's figures, for tests.
type protoCacheStats struct {
	Entries int
	Bytes   int64
	Encodes int64
}

func (c *protoCache) stats() protoCacheStats {
	var st protoCacheStats
	if c == nil {
		return st
	}
	st.Encodes = c.encodes.Load()
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		st.Entries += len(sh.m)
		st.Bytes += sh.bytes
		sh.mu.Unlock()
	}
	return st
}
