package kubeapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/canopy-dev/canopy/consensus"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

var spacesGR = schema.GroupResource{Group: layout.SpaceResource.Group, Resource: layout.SpaceResource.Resource}

// errNoResource is kube's 404 for a path that serves nothing.
func errNoResource() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
		Message: "the server could not find the requested resource", Details: &metav1.StatusDetails{},
	}}
}

// forbiddenMessager is implemented by auth errors that carry kube's text.
type forbiddenMessager interface{ ForbiddenMessage() string }

// writeError answers with a metav1.Status. Errors that are not
// apierrors.APIStatus become 500s, except store sentinels which map to their
// kube equivalents.
func (rq *request) writeError(err error) {
	err = consensusError(err)
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
		rq.srv.log.Error("internal error", "space", rq.space, "path", rq.r.URL.Path, "error", err)
	}
	status := st.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	if status.Status == "" {
		status.Status = metav1.StatusFailure
	}
	code := int(status.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	if d := status.Details; d != nil && d.RetryAfterSeconds > 0 {
		rq.w.Header().Set("Retry-After", strconv.Itoa(int(d.RetryAfterSeconds)))
	}
	writeJSON(rq, code, &status)
}

// asForbidden turns an impersonation refusal into a 403.
func asForbidden(err error) error {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return err
	}
	msg := err.Error()
	var fm forbiddenMessager
	if errors.As(err, &fm) {
		msg = fm.ForbiddenMessage()
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: msg,
	}}
}

// storeError maps a store error for object gr/name to its API error.
func storeError(err error, gr schema.GroupResource, name string) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return apierrors.NewNotFound(gr, name)
	case errors.Is(err, store.ErrExists):
		return apierrors.NewAlreadyExists(gr, name)
	case errors.Is(err, store.ErrConflict):
		return apierrors.NewConflict(gr, name, errors.New(registryConflictMessage))
	case errors.Is(err, store.ErrExpired):
		return apierrors.NewResourceExpired("too old resource version")
	}
	return consensusError(err)
}

// consensusError maps the errors of a replicated root's log (docs/ha.md):
// a write whose outcome is unknown is a 504 Timeout, as kube-apiserver
// answers when etcd times out (the client reads back; no Retry-After, so
// client-go does not blindly repeat it); no leader is a 503 with
// Retry-After (nothing was written: retrying is safe); a log that cannot
// be written is a 507 Insufficient Storage when the disk is full, a 500
// otherwise, naming the cause (nothing was written). Other errors are
// returned as they are.
func consensusError(err error) error {
	var st apierrors.APIStatus
	switch {
	case err == nil || errors.As(err, &st):
		return err
	case errors.Is(err, consensus.ErrOutcomeUnknown):
		return apierrors.NewTimeoutError("the outcome of the write is unknown (the leader changed or could not be reached); read the object back", 0)
	case errors.Is(err, consensus.ErrNoLeader):
		e := apierrors.NewServiceUnavailable("no leader: the replicated root is electing one; retry")
		e.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: 1}
		return e
	case errors.Is(err, consensus.ErrStorage):
		code := http.StatusInternalServerError
		if errors.Is(err, syscall.ENOSPC) {
			code = http.StatusInsufficientStorage
		}
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: int32(code), Reason: metav1.StatusReasonInternalError,
			Message: "nothing was written: " + err.Error(),
		}}
	}
	return err
}

// registryConflictMessage is kube's text for an optimistic-concurrency failure.
const registryConflictMessage = "the object has been modified; please apply your changes to the latest version and try again"

func writeJSON(rq *request, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(rq.w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeRaw(rq.w, code, "application/json", b)
}

func writeRaw(w http.ResponseWriter, code int, contentType string, b []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-cache, private")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func writeText(w http.ResponseWriter, code int, s string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(s))
}

// addWarning adds a kube warning header (299) that kubectl prints, once
// per text as kube's warning recorder (a write retried on a conflict warns
// again).
func addWarning(w http.ResponseWriter, msg string) {
	msg = strings.ReplaceAll(msg, `"`, `\"`)
	v := `299 - "` + msg + `"`
	for _, have := range w.Header().Values("Warning") {
		if have == v {
			return
		}
	}
	w.Header().Add("Warning", v)
}
