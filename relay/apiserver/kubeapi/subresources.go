package kubeapi

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

var scaleGR = schema.GroupResource{Group: "autoscaling", Resource: "scale"}

// fieldPath splits a JSON path such as ".spec.replicas".
func fieldPath(p string) []string {
	return strings.Split(strings.TrimPrefix(p, "."), ".")
}

// scaleOf builds the Scale view of an object.
func scaleOf(sv *served, u *unstructured.Unstructured) (*autoscalingv1.Scale, error) {
	sc := &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{Kind: "Scale", APIVersion: "autoscaling/v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(),
			ResourceVersion: u.GetResourceVersion(), CreationTimestamp: u.GetCreationTimestamp(),
		},
	}
	if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, fieldPath(sv.scale.SpecReplicasPath)...); ok {
		sc.Spec.Replicas = int32(toInt64(v))
	}
	if sv.scale.StatusReplicasPath != "" {
		if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, fieldPath(sv.scale.StatusReplicasPath)...); ok {
			sc.Status.Replicas = int32(toInt64(v))
		}
	}
	if sv.scale.LabelSelectorPath != "" {
		if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, fieldPath(sv.scale.LabelSelectorPath)...); ok {
			switch sel := v.(type) {
			case string:
				sc.Status.Selector = sel
			case map[string]any:
				var ls metav1.LabelSelector
				b, _ := json.Marshal(sel)
				if err := json.Unmarshal(b, &ls); err == nil {
					if s, err := metav1.LabelSelectorAsSelector(&ls); err == nil {
						sc.Status.Selector = s.String()
					}
				}
			}
		}
	}
	return sc, nil
}

func toInt64(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case int:
		return int64(n)
	}
	return 0
}

func (s *Server) serveScale(rq *request, sv *served) {
	key := rq.key(sv, rq.info.Name)
	switch rq.info.Verb {
	case "get":
		obj, err := rq.sp.Get(key)
		var u *unstructured.Unstructured
		if err == nil {
			u, err = parseObject(obj.Data)
		}
		if err != nil {
			rq.writeError(storeError(err, sv.gr(), rq.info.Name))
			return
		}
		sc, _ := scaleOf(sv, u)
		rq.writeTyped(http.StatusOK, sc)
	case "update", "patch":
		body, err := rq.readBody()
		if err != nil {
			rq.writeError(err)
			return
		}
		if rq.info.Verb == "update" {
			err = rq.validateWriteOptions()
		} else {
			mt, _, _ := mime.ParseMediaType(rq.r.Header.Get("Content-Type"))
			err = rq.validatePatchOptions(types.PatchType(mt))
		}
		if err != nil {
			rq.writeError(err)
			return
		}
		var pinned string
		mutate := func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			sc, _ := scaleOf(sv, cur)
			var want autoscalingv1.Scale
			if rq.info.Verb == "update" {
				if err := json.Unmarshal(body, &want); err != nil {
					return nil, apierrors.NewBadRequest(err.Error())
				}
			} else {
				mt, _, _ := mime.ParseMediaType(rq.r.Header.Get("Content-Type"))
				scaleServed := &served{group: "autoscaling", version: "v1", resource: "scale", kind: "Scale", newTyped: func() runtime.Object { return &autoscalingv1.Scale{} }}
				cu, err := toUnstructuredMap(sc)
				if err != nil {
					return nil, err
				}
				pu, err := applyPatch(scaleServed, types.PatchType(mt), &unstructured.Unstructured{Object: cu}, body)
				if err != nil {
					return nil, err
				}
				b, _ := json.Marshal(pu.Object)
				if err := json.Unmarshal(b, &want); err != nil {
					return nil, apierrors.NewBadRequest(err.Error())
				}
			}
			if want.Spec.Replicas < 0 {
				return nil, apierrors.NewInvalid(schema.GroupKind{Group: "autoscaling", Kind: "Scale"}, rq.info.Name,
					fieldErrors("spec.replicas", want.Spec.Replicas, "must be greater than or equal to 0"))
			}
			if want.ResourceVersion != "" && want.ResourceVersion != cur.GetResourceVersion() {
				return nil, apierrors.NewConflict(scaleGR, rq.info.Name, fmt.Errorf("%s", registryConflictMessage))
			}
			if err := unstructured.SetNestedField(cur.Object, int64(want.Spec.Replicas), fieldPath(sv.scale.SpecReplicasPath)...); err != nil {
				return nil, err
			}
			cur.SetResourceVersion("")
			return cur, nil
		}
		data, err := s.guaranteedUpdate(rq, sv, rq.info.Name, pinned, mutate)
		if err != nil {
			rq.writeError(err)
			return
		}
		u, err := parseObject(data)
		if err != nil {
			rq.writeError(err)
			return
		}
		sc, _ := scaleOf(sv, u)
		rq.writeTyped(http.StatusOK, sc)
	default:
		rq.writeError(apierrors.NewMethodNotSupported(scaleGR, rq.info.Verb))
	}
}

func (s *Server) serveTokenRequest(rq *request, sv *served) {
	body, err := rq.readBody()
	if err != nil {
		rq.writeError(err)
		return
	}
	var tr authenticationv1.TokenRequest
	if len(body) > 0 {
		if err := json.Unmarshal(body, &tr); err != nil {
			rq.writeError(apierrors.NewBadRequest(err.Error()))
			return
		}
	}
	_, u, err := getObject(rq.sp, rq.key(sv, rq.info.Name))
	if err != nil {
		rq.writeError(storeError(err, sv.gr(), rq.info.Name))
		return
	}
	ttl := time.Hour
	if tr.Spec.ExpirationSeconds != nil {
		ttl = time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	}
	if ttl < 10*time.Minute {
		rq.writeError(apierrors.NewInvalid(schema.GroupKind{Group: "authentication.k8s.io", Kind: "TokenRequest"}, rq.info.Name,
			fieldErrors("spec.expirationSeconds", int64(ttl/time.Second), "may not specify a duration less than 10 minutes")))
		return
	}
	tok, exp, err := s.cfg.Tokens.IssueServiceAccountToken(rq.space, rq.info.Namespace, rq.info.Name, string(u.GetUID()), tr.Spec.Audiences, ttl)
	if err != nil {
		rq.writeError(apierrors.NewInvalid(schema.GroupKind{Group: "authentication.k8s.io", Kind: "TokenRequest"}, rq.info.Name,
			fieldErrors("spec", "", err.Error())))
		return
	}
	out := authenticationv1.TokenRequest{
		TypeMeta:   metav1.TypeMeta{Kind: "TokenRequest", APIVersion: "authentication.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: rq.info.Name, Namespace: rq.info.Namespace, CreationTimestamp: metav1.Now()},
		Spec:       tr.Spec,
		Status:     authenticationv1.TokenRequestStatus{Token: tok, ExpirationTimestamp: metav1.NewTime(exp)},
	}
	secs := int64(time.Until(exp).Round(time.Second) / time.Second)
	out.Spec.ExpirationSeconds = &secs
	rq.writeTyped(http.StatusCreated, &out)
}

// virtualResources are create-only resources that are answered, not stored.
var virtualResources = map[schema.GroupResource]func(*Server, *request, *served){
	{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}:  (*Server).serveSelfSubjectAccessReview,
	{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}:      (*Server).serveSubjectAccessReview,
	{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"}: (*Server).serveSubjectAccessReview,
	{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"}:   (*Server).serveSelfSubjectRulesReview,
	{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"}:       (*Server).serveSelfSubjectReview,
	{Group: "authentication.k8s.io", Resource: "tokenreviews"}:             (*Server).serveTokenReview,
}

// readVirtual decodes the body of a create on a virtual resource.
func (rq *request) readVirtual(sv *served, into any) bool {
	if rq.info.Verb != "create" {
		rq.writeError(apierrors.NewMethodNotSupported(sv.gr(), rq.info.Verb))
		return false
	}
	body, err := rq.readBody()
	if err != nil {
		rq.writeError(err)
		return false
	}
	if err := json.Unmarshal(body, into); err != nil {
		rq.writeError(apierrors.NewBadRequest(fmt.Sprintf("error decoding request body: %v", err)))
		return false
	}
	return true
}

func reviewAttributes(u user.Info, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) authorizer.AttributesRecord {
	if ra != nil {
		return authorizer.AttributesRecord{
			User: u, Verb: ra.Verb, Namespace: ra.Namespace, APIGroup: ra.Group, APIVersion: ra.Version,
			Resource: ra.Resource, Subresource: ra.Subresource, Name: ra.Name, ResourceRequest: true,
		}
	}
	a := authorizer.AttributesRecord{User: u}
	if nra != nil {
		a.Verb, a.Path = nra.Verb, nra.Path
	}
	return a
}

func (s *Server) review(rq *request, u user.Info, spec authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus {
	attrs := reviewAttributes(u, spec.ResourceAttributes, spec.NonResourceAttributes)
	dec, reason, err := s.cfg.Authorizer.Authorize(rq.r.Context(), rq.space, attrs)
	st := authorizationv1.SubjectAccessReviewStatus{Allowed: dec == authorizer.DecisionAllow, Denied: dec == authorizer.DecisionDeny, Reason: reason}
	if err != nil {
		st.EvaluationError = err.Error()
	}
	return st
}

func (s *Server) serveSelfSubjectAccessReview(rq *request, sv *served) {
	var r authorizationv1.SelfSubjectAccessReview
	if !rq.readVirtual(sv, &r) {
		return
	}
	if r.Spec.ResourceAttributes == nil && r.Spec.NonResourceAttributes == nil {
		rq.writeError(apierrors.NewInvalid(schema.GroupKind{Group: "authorization.k8s.io", Kind: "SelfSubjectAccessReview"}, "",
			fieldErrors("spec.resourceAttributes", "", "exactly one of nonResourceAttributes or resourceAttributes must be specified")))
		return
	}
	r.Status = s.review(rq, rq.user, authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: r.Spec.ResourceAttributes, NonResourceAttributes: r.Spec.NonResourceAttributes,
	})
	r.TypeMeta = metav1.TypeMeta{Kind: "SelfSubjectAccessReview", APIVersion: "authorization.k8s.io/v1"}
	r.CreationTimestamp = metav1.Time{}
	rq.writeTyped(http.StatusCreated, &r)
}

func (s *Server) serveSubjectAccessReview(rq *request, sv *served) {
	var r authorizationv1.SubjectAccessReview
	if !rq.readVirtual(sv, &r) {
		return
	}
	extra := map[string][]string{}
	for k, v := range r.Spec.Extra {
		extra[k] = v
	}
	u := &user.DefaultInfo{Name: r.Spec.User, UID: r.Spec.UID, Groups: r.Spec.Groups, Extra: extra}
	if sv.resource == "localsubjectaccessreviews" {
		if r.Spec.ResourceAttributes == nil || r.Spec.ResourceAttributes.Namespace != rq.info.Namespace {
			rq.writeError(apierrors.NewBadRequest("spec.resourceAttributes.namespace must match metadata.namespace"))
			return
		}
	}
	r.Status = s.review(rq, u, r.Spec)
	r.TypeMeta = metav1.TypeMeta{Kind: sv.kind, APIVersion: "authorization.k8s.io/v1"}
	rq.writeTyped(http.StatusCreated, &r)
}

func (s *Server) serveSelfSubjectRulesReview(rq *request, sv *served) {
	var r authorizationv1.SelfSubjectRulesReview
	if !rq.readVirtual(sv, &r) {
		return
	}
	res, nonRes, incomplete := s.cfg.Authorizer.RulesFor(rq.space, rq.user, r.Spec.Namespace)
	r.Status = authorizationv1.SubjectRulesReviewStatus{ResourceRules: res, NonResourceRules: nonRes, Incomplete: incomplete}
	r.TypeMeta = metav1.TypeMeta{Kind: "SelfSubjectRulesReview", APIVersion: "authorization.k8s.io/v1"}
	rq.writeTyped(http.StatusCreated, &r)
}

func (s *Server) serveSelfSubjectReview(rq *request, sv *served) {
	var r authenticationv1.SelfSubjectReview
	if !rq.readVirtual(sv, &r) {
		return
	}
	r.TypeMeta = metav1.TypeMeta{Kind: "SelfSubjectReview", APIVersion: "authentication.k8s.io/v1"}
	r.Status.UserInfo = userInfo(rq.user)
	rq.writeTyped(http.StatusCreated, &r)
}

func (s *Server) serveTokenReview(rq *request, sv *served) {
	var r authenticationv1.TokenReview
	if !rq.readVirtual(sv, &r) {
		return
	}
	probe, _ := http.NewRequestWithContext(rq.r.Context(), http.MethodGet, "/", nil)
	probe.Header.Set("Authorization", "Bearer "+r.Spec.Token)
	r.TypeMeta = metav1.TypeMeta{Kind: "TokenReview", APIVersion: "authentication.k8s.io/v1"}
	if u, err := s.cfg.Authenticator.Authenticate(probe, rq.space); err == nil {
		r.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: userInfo(u), Audiences: r.Spec.Audiences}
	} else {
		r.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
	}
	rq.writeTyped(http.StatusCreated, &r)
}

func userInfo(u user.Info) authenticationv1.UserInfo {
	ui := authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	if ex := u.GetExtra(); len(ex) > 0 {
		ui.Extra = map[string]authenticationv1.ExtraValue{}
		for k, v := range ex {
			ui.Extra[k] = v
		}
	}
	return ui
}
