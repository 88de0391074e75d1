package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"strconv"

	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/fields"
)

// commandVersion leads every command; Apply rejects other versions.
const commandVersion = 1

// minOpSize is the smallest encoding of one op: a type byte, five empty key
// strings, a zero ExpectRevision, an empty ExpectUID and empty data.
const minOpSize = 9

// encodeCommand encodes ops as one command: the version byte, the op count,
// then per op its type, key, ExpectRevision, ExpectUID and data. The encoding
// is deterministic. validateOps must have accepted ops.
func encodeCommand(ops []Op) []byte {
	e := encoder{buf: make([]byte, 0, commandSize(ops))}
	e.byte(commandVersion)
	e.uvarint(uint64(len(ops)))
	for _, op := range ops {
		e.byte(byte(op.Type))
		e.key(op.Key)
		e.varint(op.ExpectRevision)
		e.str(op.ExpectUID)
		e.bytes(op.Data)
	}
	return e.buf
}

// commandSize bounds the size of encodeCommand(ops).
func commandSize(ops []Op) int {
	n := 16
	for _, op := range ops {
		n += 64 + len(op.Key.Space) + len(op.Key.Resource.Group) + len(op.Key.Resource.Resource) +
			len(op.Key.Namespace) + len(op.Key.Name) + len(op.ExpectUID) + len(op.Data)
	}
	return n
}

// decodeCommand decodes a command of encodeCommand. The ops' Data alias cmd.
func decodeCommand(cmd []byte) ([]Op, error) {
	d := decoder{buf: cmd}
	if v := d.byte(); d.err == nil && v != commandVersion {
		return nil, fmt.Errorf("%w: command version %d", ErrInvalid, v)
	}
	n := d.uvarint()
	if n > uint64(len(d.buf)/minOpSize) {
		d.fail()
	}
	var ops []Op
	if d.err == nil {
		ops = make([]Op, n)
	}
	for i := range ops {
		ops[i] = Op{
			Type:           OpType(d.byte()),
			Key:            d.key(),
			ExpectRevision: d.varint(),
			ExpectUID:      d.str(),
			Data:           d.bytes(),
		}
	}
	if d.err == nil && len(d.buf) > 0 {
		return nil, fmt.Errorf("%w: %d bytes after the command", ErrInvalid, len(d.buf))
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: command: %v", ErrInvalid, d.err)
	}
	return ops, nil
}

// validateOps checks what can be checked without the store's state: op
// types, keys (a resource and a name are required) and that no key appears
// twice, so that a Txn produces at most one event per key.
func validateOps(ops []Op) error {
	var seen map[Key]struct{}
	if len(ops) > 1 {
		seen = make(map[Key]struct{}, len(ops))
	}
	for i, op := range ops {
		var err error
		switch {
		case op.Type < OpCreate || op.Type > OpCheck:
			err = fmt.Errorf("%w: op type %d", ErrInvalid, op.Type)
		case op.Key.Resource.Resource == "" || op.Key.Name == "":
			err = fmt.Errorf("%w: a key needs a resource and a name", ErrInvalid)
		case seen != nil:
			if _, dup := seen[op.Key]; dup {
				err = fmt.Errorf("%w: key appears twice in one txn", ErrInvalid)
			}
			seen[op.Key] = struct{}{}
		}
		if err != nil {
			return &OpError{Index: i, Key: op.Key, Err: err}
		}
	}
	return nil
}

// Apply implements FSM: it applies the command cmd, proposed by Txn, at
// revision index and returns a Result or an error. It is the store's only
// state transition and is deterministic: replicas that apply the same
// commands at the same indexes hold the same objects. Apply must be called
// from one goroutine at a time with increasing indexes (gaps are fine).
//
// Every command advances the revision to index, even one that fails: the
// index is consumed. A failed command changes nothing else. Apply never
// blocks on watchers and never panics on malformed commands.
func (s *Store) Apply(index uint64, cmd []byte) any {
	return s.ApplyBatch([]Entry{{Index: index, Cmd: cmd}})[0]
}

// ApplyBatch implements BatchFSM: it applies entries in order, each as
// Apply would, under one acquisition of the store's lock and with one
// fan-out to the watchers. A root under load takes its lock once per
// batch of commands rather than once per command: every acquisition waits
// for the readers in flight, and with thousands of them that wait, not the
// commands, limited the root's writes.
func (s *Store) ApplyBatch(entries []Entry) []any {
	out := make([]any, len(entries))
	// Decode and build the new versions before taking the lock: it is
	// the costly part and needs no state.
	ps := make([]preparedCommand, len(entries))
	for i, e := range entries {
		ps[i] = s.prepareCommand(e)
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		for i := range out {
			out[i] = ErrClosed
		}
		return out
	}
	var evs []Event
	for i := range ps {
		p := &ps[i]
		if p.overflow {
			out[i] = p.err
			continue
		}
		if p.rev <= s.rev {
			out[i] = fmt.Errorf("%w: log index %d is not after revision %d", ErrInvalid, p.rev, s.rev)
			continue
		}
		results := make([]any, len(p.txns))
		for j := range p.txns {
			t := &p.txns[j]
			if t.err == nil {
				var e []Event
				e, t.err = s.commit(t.ops, t.objs, p.rev)
				evs = append(evs, e...)
			}
			if t.err != nil {
				results[j] = t.err
			} else {
				results[j] = Result{Revision: p.rev, Objects: t.objs}
			}
		}
		switch {
		case p.err != nil:
			out[i] = p.err
		case p.group:
			out[i] = results
		default:
			out[i] = results[0]
		}
		s.rev = p.rev
		s.revision.Store(p.rev)
	}
	s.wakeWaiters()
	s.fanMu.Lock()
	s.mu.Unlock()
	s.fanOut(evs)
	s.fanRev = s.revision.Load()
	s.fanMu.Unlock()
	s.dropExpiredPages()
	return out
}

// preparedCommand is a command decoded, with the versions it would store.
type preparedCommand struct {
	rev      int64
	group    bool          // a group command: a result per Txn
	txns     []preparedTxn // one unless group
	err      error         // the whole command is malformed
	overflow bool          // the index is no revision: it consumes nothing
}

type preparedTxn struct {
	ops  []Op
	objs []*Object
	err  error
}

// prepareCommand decodes e and builds the versions of its Txns.
func (s *Store) prepareCommand(e Entry) preparedCommand {
	if e.Index > math.MaxInt64 {
		return preparedCommand{overflow: true, err: fmt.Errorf("%w: log index %d overflows a revision", ErrInvalid, e.Index)}
	}
	p := preparedCommand{rev: int64(e.Index)}
	if len(e.Cmd) > 0 && e.Cmd[0] == groupVersion {
		p.group = true
		txns, errs, err := decodeGroup(e.Cmd[1:])
		if err != nil {
			p.err = err
			return p
		}
		p.txns = make([]preparedTxn, len(txns))
		for i, ops := range txns {
			p.txns[i] = preparedTxn{ops: ops, err: errs[i]}
		}
	} else {
		ops, err := decodeCommand(e.Cmd)
		if err == nil {
			err = validateOps(ops)
		}
		if err != nil {
			p.err = err
			return p
		}
		p.txns = []preparedTxn{{ops: ops}}
	}
	for i := range p.txns {
		t := &p.txns[i]
		if t.err == nil {
			t.objs, t.err = s.prepare(t.ops, p.rev)
		}
	}
	return p
}

// prepare builds the versions that the creates and updates of ops store at
// rev; the entries of deletes and checks stay nil.
func (s *Store) prepare(ops []Op, rev int64) ([]*Object, error) {
	objs := make([]*Object, len(ops))
	for i, op := range ops {
		if op.Type == OpDelete || op.Type == OpCheck {
			continue
		}
		o, err := s.newVersion(op.Key, op.Data, rev)
		if err != nil {
			return nil, &OpError{Index: i, Key: op.Key, Err: err}
		}
		objs[i] = o
	}
	return objs, nil
}

// commit checks ops against the current state, then applies them all,
// records their events in history and returns the events. On failure it
// changes nothing. For deletes it fills objs with the deleted versions,
// for checks with the current ones. s.mu must be held for writing.
func (s *Store) commit(ops []Op, objs []*Object, rev int64) ([]Event, error) {
	for i, op := range ops {
		cur := lookup(s.tables, op.Key)
		if err := check(op, cur); err != nil {
			return nil, &OpError{Index: i, Key: op.Key, Err: err}
		}
		switch op.Type {
		case OpUpdate:
			objs[i].CreateRevision = cur.CreateRevision
		case OpCheck:
			objs[i] = cur
		}
	}

	evs := make([]Event, 0, len(ops))
	for i, op := range ops {
		if op.Type == OpCheck {
			continue
		}
		k := op.Key
		t := s.writable(k.Space, k.Resource)
		e := entry{ns: k.Namespace, name: k.Name, obj: objs[i]}
		var ev Event
		switch op.Type {
		case OpCreate:
			t.objs.ReplaceOrInsert(e)
			s.objects++
			s.bytes += int64(len(e.obj.Data))
			ev = Event{Type: Added, Revision: rev, Object: e.obj}
		case OpUpdate:
			old, _ := t.objs.ReplaceOrInsert(e)
			s.bytes += int64(len(e.obj.Data) - len(old.obj.Data))
			ev = Event{Type: Modified, Revision: rev, Object: e.obj, Prev: old.obj}
		case OpDelete:
			old, _ := t.objs.Delete(e)
			if t.objs.Len() == 0 {
				s.tables.Delete(tableRef{space: k.Space, res: k.Resource})
			}
			objs[i] = old.obj
			s.objects--
			s.bytes -= int64(len(old.obj.Data))
			ev = Event{Type: Deleted, Revision: rev, Object: old.obj, Prev: old.obj}
		}
		s.hist.add(ev)
		evs = append(evs, ev)
	}
	return evs, nil
}

// check checks op's preconditions against cur, the current version (nil
// when there is none).
func check(op Op, cur *Object) error {
	if op.Type == OpCreate {
		if cur != nil {
			return ErrExists
		}
		return nil
	}
	switch {
	case cur == nil:
		return ErrNotFound
	case op.ExpectRevision != 0 && op.ExpectRevision != cur.Revision:
		return fmt.Errorf("%w: revision is %d, expected %d", ErrConflict, cur.Revision, op.ExpectRevision)
	case op.ExpectUID != "" && op.ExpectUID != cur.UID:
		return fmt.Errorf("%w: uid is %q, expected %q", ErrConflict, cur.UID, op.ExpectUID)
	}
	return nil
}

// writable returns the table of (space, res) for modification, creating it,
// or replacing it by a clone when a snapshot or a state retained for paged
// lists shares it. s.mu must be held for writing.
func (s *Store) writable(space string, res Resource) *table {
	ref, ok := s.tables.Get(tableRef{space: space, res: res})
	if ok && ref.t.gen == s.gen {
		return ref.t
	}
	t := &table{gen: s.gen}
	if ok {
		t.objs = ref.t.objs.Clone()
	} else {
		t.objs = btree.NewG(treeDegree, entryLess)
	}
	s.tables.ReplaceOrInsert(tableRef{space: space, res: res, t: t})
	return t
}

// newVersion builds the version of k that a write at rev stores: data with
// metadata.resourceVersion set to rev, re-encoded (object keys sorted).
func (s *Store) newVersion(k Key, data []byte, rev int64) (*Object, error) {
	rv := strconv.AppendInt([]byte{'"'}, rev, 10)
	rv = append(rv, '"')
	if out, md, ok := spliceVersion(data, rv); ok {
		// Spliced into a checked form: the metadata's members are read
		// where they are, not decoded again. Its values alias data, and
		// newObject keeps none of them.
		meta := make(map[string]json.RawMessage, len(md.all)+1)
		for _, f := range md.all {
			meta[string(data[f.key[0]:f.key[1]])] = data[f.value[0]:f.value[1]:f.value[1]]
		}
		meta["resourceVersion"] = rv
		return s.newObject(k, rev, rev, out, meta)
	}
	return s.newVersionDecoded(k, data, rev)
}

// newVersionDecoded is newVersion for data in any form: decoded one
// level deep and encoded again.
func (s *Store) newVersionDecoded(k Key, data []byte, rev int64) (*Object, error) {
	top, meta, err := parseObject(data)
	if err != nil {
		return nil, err
	}
	rv := strconv.AppendInt([]byte{'"'}, rev, 10)
	meta["resourceVersion"] = append(rv, '"')
	if top["metadata"], err = json.Marshal(meta); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	out, err := json.Marshal(top)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return s.newObject(k, rev, rev, out, meta)
}

// parseObject decodes data, which must be a JSON object with a metadata
// object, one level deep, and that metadata object.
func parseObject(data []byte) (top, meta map[string]json.RawMessage, err error) {
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if top == nil {
		return nil, nil, fmt.Errorf("%w: object is null", ErrInvalid)
	}
	if err := json.Unmarshal(top["metadata"], &meta); err != nil || meta == nil {
		return nil, nil, fmt.Errorf("%w: metadata is missing or not an object", ErrInvalid)
	}
	return top, meta, nil
}

// newObject returns the object version stored at k with its UID, labels and
// field set extracted from data and meta, its parsed metadata.
func (s *Store) newObject(k Key, rev, createRev int64, data []byte, meta map[string]json.RawMessage) (*Object, error) {
	o := &Object{Key: k, Revision: rev, CreateRevision: createRev, Data: data}
	if raw, ok := meta["uid"]; ok {
		if err := unmarshalPlain(raw, &o.UID); err != nil {
			return nil, fmt.Errorf("%w: metadata.uid: %v", ErrInvalid, err)
		}
	}
	if raw, ok := meta["labels"]; ok {
		if err := unmarshalLabels(raw, &o.Labels); err != nil {
			return nil, fmt.Errorf("%w: metadata.labels: %v", ErrInvalid, err)
		}
	}
	o.Fields = fields.Set{}
	if s.opts.Fields != nil {
		v := &FieldSource{data: data, meta: meta}
		extra := s.opts.Fields(k.Resource, v)
		if v.err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, v.err)
		}
		maps.Copy(o.Fields, extra)
	}
	o.Fields["metadata.name"] = k.Name
	o.Fields["metadata.namespace"] = k.Namespace
	return o, nil
}

// FieldSource is an object version as Options.Fields reads it, decoded as
// far as it is read.
type FieldSource struct {
	data        []byte
	meta        map[string]json.RawMessage
	obj         map[string]any
	annotations map[string]string
	err         error
}

// Object returns the whole object, decoded on the first call (numbers are
// json.Number). A decoding error fails the write with ErrInvalid.
func (v *FieldSource) Object() map[string]any {
	if v.obj == nil && v.err == nil {
		d := json.NewDecoder(bytes.NewReader(v.data))
		d.UseNumber()
		v.err = d.Decode(&v.obj)
	}
	return v.obj
}

// Annotation returns the value of the annotation name, "" if it is not
// set. metadata.annotations is decoded on the first call; if it is not a
// map of strings, no annotation is read (kube's API does not store such).
func (v *FieldSource) Annotation(name string) string {
	if v.annotations == nil {
		if raw, ok := v.meta["annotations"]; !ok || json.Unmarshal(raw, &v.annotations) != nil || v.annotations == nil {
			v.annotations = map[string]string{}
		}
	}
	return v.annotations[name]
}
