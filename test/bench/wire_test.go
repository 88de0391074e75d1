package bench

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	restwatch "k8s.io/client-go/rest/watch"
)

// readWire finds the sequence numbers of watch events as client-go's own
// encoder frames them, protobuf and JSON, and stops at an ERROR event.
func TestReadWire(t *testing.T) {
	for _, mediaType := range []string{runtime.ContentTypeProtobuf, runtime.ContentTypeJSON} {
		t.Run(mediaType, func(t *testing.T) {
			info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
			if !ok || info.StreamSerializer == nil {
				t.Fatalf("no stream serializer for %s", mediaType)
			}
			var buf bytes.Buffer
			embedded := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
			frames := info.StreamSerializer.Framer.NewFrameWriter(&buf)
			enc := restwatch.NewEncoder(streaming.NewEncoder(frames, info.StreamSerializer.Serializer), embedded)
			for _, seq := range []string{seqMark + "7", "not marked", seqMark + "12", seqMark + "3"} {
				cm := ConfigMap("fanout", 0)
				cm.Data["seq"] = seq
				if err := enc.Encode(&watch.Event{Type: watch.Modified, Object: cm}); err != nil {
					t.Fatal(err)
				}
			}
			withoutError := buf.Len()
			status := &metav1.Status{Status: metav1.StatusFailure, Message: "too old", Reason: metav1.StatusReasonExpired, Code: 410}
			if err := enc.Encode(&watch.Event{Type: watch.Error, Object: status}); err != nil {
				t.Fatal(err)
			}

			var got []int
			seqs := func(frame []byte) {
				if s, ok := seqOf(frame); ok {
					got = append(got, s)
				}
			}
			err := readWire(bytes.NewReader(buf.Bytes()[:withoutError]), seqs)
			if err != io.EOF || !slices.Equal(got, []int{7, 12, 3}) {
				t.Errorf("without the error: got %v, %v; want [7 12 3], EOF", got, err)
			}
			got = nil
			err = readWire(bytes.NewReader(buf.Bytes()), seqs)
			if err == nil || !strings.Contains(err.Error(), "error event") || !slices.Equal(got, []int{7, 12, 3}) {
				t.Errorf("with the error: got %v, %v; want [7 12 3] and an error event", got, err)
			}
		})
	}
}
