package kubeapi

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	kjson "sigs.k8s.io/json"
)

// maxJSONPatchOperations bounds a JSON patch, as kube-apiserver does.
const maxJSONPatchOperations = 10000

func (s *Server) servePatch(rq *request, sv *served) {
	mt, _, _ := mime.ParseMediaType(rq.r.Header.Get("Content-Type"))
	pt := types.PatchType(mt)
	switch pt {
	case types.ApplyYAMLPatchType:
		s.serveApply(rq, sv) // apply.go
		return
	case types.JSONPatchType, types.MergePatchType:
	case types.StrategicMergePatchType:
		if sv.newTyped == nil {
			rq.writeError(unsupportedPatch(pt, sv))
			return
		}
	default:
		rq.writeError(unsupportedPatch(pt, sv))
		return
	}
	if err := rq.validatePatchOptions(pt); err != nil {
		rq.writeError(err)
		return
	}
	patch, err := rq.readBody()
	if err != nil {
		rq.writeError(err)
		return
	}
	if !json.Valid(patch) {
		rq.writeError(apierrors.NewBadRequest("invalid JSON patch"))
		return
	}
	pr := &patchRequest{pt: pt, body: patch}
	if err := pr.decodeStrict(rq); err != nil {
		rq.writeError(err)
		return
	}
	rq.patch = pr
	data, err := s.guaranteedUpdate(rq, sv, rq.info.Name, "", func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return applyPatch(sv, pt, cur, patch)
	})
	if err != nil {
		rq.writeError(err)
		return
	}
	rq.writeObject(sv, http.StatusOK, data)
}

// patchRequest is a JSON, merge or strategic merge patch being applied.
type patchRequest struct {
	pt   types.PatchType
	body []byte
	smp  map[string]any // the strategic merge patch, decoded
}

// jsonPatchOp is an operation of a JSON patch, for strict decoding.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	From  string `json:"from"`
	Value any    `json:"value"`
}

// decodeStrict decodes the patch document as kube's patcher does: with
// fieldValidation Strict or Warn, its duplicate fields (and a JSON patch's
// unknown ones) go to rq.strictErrs, to be reported with the unknown
// fields of the patched object.
func (p *patchRequest) decodeStrict(rq *request) error {
	strict := rq.fieldValidation() != fieldValidationIgnore
	var errs []error
	var err error
	switch p.pt {
	case types.JSONPatchType:
		if strict {
			var ops []jsonPatchOp
			if errs, err = kjson.UnmarshalStrict(p.body, &ops); err != nil {
				return apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
			}
			for i, e := range errs {
				errs[i] = fmt.Errorf("json patch %v", e)
			}
		}
	case types.MergePatchType:
		if strict {
			m := map[string]any{}
			if errs, err = kjson.UnmarshalStrict(p.body, &m); err != nil {
				return apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
			}
		}
	case types.StrategicMergePatchType:
		p.smp = map[string]any{}
		if strict {
			errs, err = kjson.UnmarshalStrict(p.body, &p.smp)
		} else {
			err = kjson.UnmarshalCaseSensitivePreserveInts(p.body, &p.smp)
		}
		if err != nil {
			return apierrors.NewBadRequest(err.Error())
		}
	}
	rq.strictErrs = append(rq.strictErrs, errs...)
	return nil
}

// quoted is what kube's 422 for a strict decoding error of a patch quotes:
// for a strategic merge patch the patch as a Go map; otherwise the patched
// object as JSON, the patch applied to the current object encoded as kube
// encodes it (a built-in kind in the field order of its Go type).
func (p *patchRequest) quoted(sv *served, cur *unstructured.Unstructured) string {
	if p.pt == types.StrategicMergePatchType {
		return fmt.Sprintf("%+v", p.smp)
	}
	orig, err := kubeJSON(sv, cur)
	if err != nil {
		return ""
	}
	var out []byte
	switch p.pt {
	case types.JSONPatchType:
		ops, err := jsonpatch.DecodePatch(p.body)
		if err != nil {
			return ""
		}
		out, err = ops.Apply(orig)
		if err != nil {
			return ""
		}
	default:
		if out, err = jsonpatch.MergePatch(orig, p.body); err != nil {
			return ""
		}
	}
	return string(out)
}

// kubeJSON encodes an object as kube-apiserver does: a built-in kind
// through its Go type (fields in declaration order), a custom resource with
// sorted keys.
func kubeJSON(sv *served, u *unstructured.Unstructured) ([]byte, error) {
	if u == nil {
		return nil, fmt.Errorf("kubeapi: no object to encode")
	}
	if sv.newTyped == nil {
		return json.Marshal(u.Object)
	}
	typed := sv.newTyped()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
		return nil, err
	}
	return json.Marshal(typed)
}

func unsupportedPatch(pt types.PatchType, sv *served) error {
	return unsupportedPatchTypes(sv, true)
}

// unsupportedPatchTypes is the 415 of a patch, listing the types served:
// apply on the object and its status (apply.go), not on /scale.
func unsupportedPatchTypes(sv *served, apply bool) error {
	supported := []string{string(types.JSONPatchType), string(types.MergePatchType)}
	if sv.newTyped != nil {
		supported = append(supported, string(types.StrategicMergePatchType))
	}
	if apply {
		supported = append(supported, string(types.ApplyYAMLPatchType))
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
		Message: "the body of the request was in an unknown format - accepted media types include: " + strings.Join(supported, ", "),
	}}
}

// applyPatch applies one patch document to the current object.
func applyPatch(sv *served, pt types.PatchType, cur *unstructured.Unstructured, patch []byte) (*unstructured.Unstructured, error) {
	orig, err := json.Marshal(cur.Object)
	if err != nil {
		return nil, err
	}
	var out []byte
	switch pt {
	case types.JSONPatchType:
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if len(p) > maxJSONPatchOperations {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(p)))
		}
		if out, err = p.Apply(orig); err != nil {
			// As kube: the generic 422, without the resource or the reason.
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
	case types.MergePatchType:
		if out, err = jsonpatch.MergePatch(orig, patch); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	case types.StrategicMergePatchType:
		var pm map[string]any
		if err := kjson.UnmarshalCaseSensitivePreserveInts(patch, &pm); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		res, err := strategicpatch.StrategicMergeMapPatch(cur.Object, pm, sv.newTyped())
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return &unstructured.Unstructured{Object: res}, nil
	default:
		return nil, unsupportedPatchTypes(sv, false)
	}
	u, err := parseObject(out)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return u, nil
}
