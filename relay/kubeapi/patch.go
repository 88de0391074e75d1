package kubeapi

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
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
	data, err := s.guaranteedUpdate(rq, sv, rq.info.Name, "", func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return applyPatch(sv, pt, cur, patch)
	})
	if err != nil {
		rq.writeError(err)
		return
	}
	rq.writeObject(sv, http.StatusOK, data)
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
		Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %v", supported),
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
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", sv.gr(), cur.GetName(), err.Error(), 0, false)
		}
	case types.MergePatchType:
		if out, err = jsonpatch.MergePatch(orig, patch); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	case types.StrategicMergePatchType:
		var pm map[string]any
		if err := json.Unmarshal(patch, &pm); err != nil {
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
