package kubeapi

import (
	"testing"
)

// lifecycleMeta.read decodes what the lifecycle acts on, and skips the
// decoding of an object that has none of it.
func TestLifecycleMetaRead(t *testing.T) {
	for _, c := range []struct {
		data                  string
		owners, fins, deleted int
		bad                   bool
	}{
		{data: `{"data":{"k":"v"},"metadata":{"name":"a"}}`},
		{data: `{"data":{"k":"ownerReferences"},"metadata":{"name":"a"}}`},
		{data: `{"metadata":{"name":"a","ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"o","uid":"u1"}]}}`, owners: 1},
		{data: `{"metadata":{"deletionTimestamp":"2026-01-01T00:00:00Z","finalizers":["foregroundDeletion"],"name":"a"}}`, fins: 1, deleted: 1},
		{data: `{"metadata":{"finalizers":{}}}`, bad: true},
	} {
		var m lifecycleMeta
		err := m.read([]byte(c.data))
		deleted := 0
		if m.Metadata.DeletionTimestamp != nil {
			deleted = 1
		}
		if (err != nil) != c.bad || len(m.Metadata.OwnerReferences) != c.owners || len(m.Metadata.Finalizers) != c.fins || deleted != c.deleted {
			t.Errorf("%s: %+v, %v", c.data, m.Metadata, err)
		}
	}
}
