package vcluster

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/sets"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// RejectWebhook is the admission webhook a rejection is reported as, in
// the message of the 403 (kube's words for a webhook's denial).
const RejectWebhook = "reject.vcluster.canopy.dev"

// maxRejectBody bounds the body a rejecter reads to find a created
// object's name (the API server's own limit: larger bodies are refused
// there anyway).
const maxRejectBody = 3 << 20

// rejecter sits in front of the cluster's API and asks reject about every
// write of an object (Options.Reject). It is safe for concurrent use.
type rejecter struct {
	next   http.Handler
	reject func(resource, namespace, name string) error
	info   *genericrequest.RequestInfoFactory
}

func newRejecter(next http.Handler, reject func(resource, namespace, name string) error) *rejecter {
	return &rejecter{next: next, reject: reject, info: &genericrequest.RequestInfoFactory{
		APIPrefixes:          sets.NewString("api", "apis"),
		GrouplessAPIPrefixes: sets.NewString("api"),
	}}
}

func (h *rejecter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		h.next.ServeHTTP(w, r)
		return
	}
	// The API serves other spaces under /spaces/<name>/...; the path
	// after it is an ordinary kube path.
	r2 := r
	if rest, ok := strings.CutPrefix(r.URL.Path, "/spaces/"); ok {
		r2 = r.Clone(r.Context())
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			r2.URL.Path = rest[i:]
		} else {
			r2.URL.Path = "/"
		}
	}
	info, err := h.info.NewRequestInfo(r2)
	if err != nil || !info.IsResourceRequest || info.Subresource != "" {
		h.next.ServeHTTP(w, r)
		return
	}
	name := info.Name
	switch info.Verb {
	case "create":
		body, err := io.ReadAll(io.LimitReader(r.Body, maxRejectBody+1))
		r.Body.Close()
		if err != nil {
			writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "unable to read request body: "+err.Error(), nil)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		name = createdName(body, r.Header.Get("Content-Type"))
	case "update", "patch":
	default:
		h.next.ServeHTTP(w, r)
		return
	}
	gr := schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}
	if err := h.reject(gr.String(), info.Namespace, name); err != nil {
		writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden,
			"admission webhook \""+RejectWebhook+"\" denied the request: "+err.Error(),
			&metav1.StatusDetails{Name: name, Group: gr.Group, Kind: gr.Resource})
		return
	}
	h.next.ServeHTTP(w, r)
}

// createdName finds metadata.name in a create's body ("" when it has
// none or cannot be read: the API server then answers for itself).
func createdName(body []byte, contentType string) string {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch mt {
	case runtime.ContentTypeProtobuf:
		obj, _, err := protobufCodec.Decode(body, nil, nil)
		if err != nil {
			return ""
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return ""
		}
		return m.GetName()
	case "application/yaml":
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			return ""
		}
		body = j
	}
	var o struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if json.Unmarshal(body, &o) != nil {
		return ""
	}
	return o.Metadata.Name
}

// protobufCodec decodes the protobuf bodies of client-go's typed clients
// (built-in kinds only: custom resources have no protobuf form).
var protobufCodec = protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme)

// writeStatus answers with a kube Status, as the API server would.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string, details *metav1.StatusDetails) {
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg, Details: details,
	}
	b, _ := json.Marshal(st)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
