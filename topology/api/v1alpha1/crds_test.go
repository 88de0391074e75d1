package v1alpha1

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/canopy-dev/canopy/relay/apiserver/crd"
	"github.com/canopy-dev/canopy/relay/apiserver/resources"
)

// decodeCRDs decodes manifests strictly: a field the CRD type does not
// know is an error.
func decodeCRDs(t *testing.T, manifests [][]byte) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, m := range manifests {
		var c apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(m, &c); err != nil {
			t.Fatalf("decoding a CRD: %v\n%s", err, m)
		}
		out = append(out, &c)
	}
	return out
}

func names(crds []*apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	for _, c := range crds {
		out = append(out, c.Name)
	}
	return out
}

// TestCRDSplit checks that every generated manifest is embedded and served
// in exactly one kind of space.
func TestCRDSplit(t *testing.T) {
	all, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	inv, err := InventoryCRDs()
	if err != nil {
		t.Fatal(err)
	}
	wl, err := WorkloadCRDs()
	if err != nil {
		t.Fatal(err)
	}
	files, err := fs.Glob(crdFS, "crds/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(files) || len(inv)+len(wl) != len(all) {
		t.Fatalf("%d manifests in crds/, CRDs() returns %d, inventory %d + workload %d", len(files), len(all), len(inv), len(wl))
	}
	gotInv, gotWL := names(decodeCRDs(t, inv)), names(decodeCRDs(t, wl))
	if want := []string{"synctargets.edge.canopy.dev", "locations.edge.canopy.dev", "relays.edge.canopy.dev"}; !slices.Equal(gotInv, want) {
		t.Errorf("InventoryCRDs: %v, want %v", gotInv, want)
	}
	if want := []string{"edgeplacements.edge.canopy.dev", "singleplacementslices.edge.canopy.dev", "customizers.edge.canopy.dev",
		"statuscollectors.edge.canopy.dev", "combinedstatuses.edge.canopy.dev", "views.edge.canopy.dev"}; !slices.Equal(gotWL, want) {
		t.Errorf("WorkloadCRDs: %v, want %v", gotWL, want)
	}
	for _, f := range files {
		res := strings.TrimSuffix(strings.TrimPrefix(path.Base(f), GroupName+"_"), ".yaml")
		if !slices.Contains(InventoryResources, res) && !slices.Contains(WorkloadResources, res) {
			t.Errorf("%s is in no space's list", f)
		}
	}
}

// TestCRDs checks each manifest's key fields, that its schema is
// structural, and that the root's CRD validation (kube's) accepts it.
func TestCRDs(t *testing.T) {
	manifests, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, c := range decodeCRDs(t, manifests) {
		t.Run(c.Spec.Names.Kind, func(t *testing.T) {
			if c.Spec.Group != GroupName || c.Name != CRDName(c.Spec.Names.Plural) {
				t.Errorf("group %q, name %q", c.Spec.Group, c.Name)
			}
			wantScope := apiextensionsv1.ClusterScoped
			if c.Spec.Names.Kind == KindCustomizer || c.Spec.Names.Kind == KindCombinedStatus {
				wantScope = apiextensionsv1.NamespaceScoped
			}
			if c.Spec.Scope != wantScope {
				t.Errorf("scope %s, want %s", c.Spec.Scope, wantScope)
			}
			if len(c.Spec.Versions) != 1 {
				t.Fatalf("%d versions, want 1", len(c.Spec.Versions))
			}
			v := c.Spec.Versions[0]
			if v.Name != Version || !v.Served || !v.Storage {
				t.Errorf("version %s served=%t storage=%t, want %s served and storage", v.Name, v.Served, v.Storage, Version)
			}
			gvk := SchemeGroupVersion.WithKind(c.Spec.Names.Kind)
			if !scheme.Recognizes(gvk) || !scheme.Recognizes(SchemeGroupVersion.WithKind(c.Spec.Names.ListKind)) {
				t.Errorf("the scheme does not know %s or its list", gvk)
			}
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				t.Fatal("no schema")
			}
			var internal apiextensions.JSONSchemaProps
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
				t.Fatal(err)
			}
			s, err := structuralschema.NewStructural(&internal)
			if err != nil {
				t.Fatalf("not structural: %v", err)
			}
			if errs := structuralschema.ValidateStructural(field.NewPath("schema"), s); len(errs) > 0 {
				t.Fatalf("not structural: %v", errs.ToAggregate())
			}
			cc := c.DeepCopy()
			crd.Default(cc)
			if _, errs := crd.Compile(cc, nil); len(errs) > 0 {
				t.Fatalf("the root would refuse it: %v", errs.ToAggregate())
			}
		})
	}
}

// TestNamesFree: no plural, singular or short name of the group shadows a
// built-in kind's, or kubectl would resolve it to the built-in (as "ep"
// would to endpoints).
func TestNamesFree(t *testing.T) {
	manifests, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	taken := map[string]string{}
	for _, b := range resources.Builtins() {
		for _, n := range append([]string{b.Resource, b.Singular}, b.ShortNames...) {
			taken[n] = b.Group + "/" + b.Resource
		}
	}
	for _, c := range decodeCRDs(t, manifests) {
		n := c.Spec.Names
		for _, name := range append([]string{n.Plural, n.Singular}, n.ShortNames...) {
			if by, ok := taken[name]; ok {
				t.Errorf("%s: name %q is already %s's", c.Name, name, by)
			}
			taken[name] = c.Name
		}
	}
}

// TestSyncTargetShape keeps the SyncTarget status and columns the relay
// tree writes and kubectl shows (relay/server/inventory.go).
func TestSyncTargetShape(t *testing.T) {
	c := compiled(t, ResourceSyncTargets)
	v := c.Spec.Versions[0]
	var cols []string
	for _, col := range v.AdditionalPrinterColumns {
		cols = append(cols, col.Name+" "+col.Type+" "+col.JSONPath)
	}
	want := []string{"Path string .status.path", "Connected boolean .status.connected",
		"Last-Seen date .status.lastSeen", "Age date .metadata.creationTimestamp"}
	if !slices.Equal(cols, want) {
		t.Errorf("columns %q, want %q", cols, want)
	}
	st := v.Schema.OpenAPIV3Schema.Properties["status"].Properties
	for name, typ := range map[string]string{"path": "string", "connected": "boolean", "lastSeen": "string"} {
		if st[name].Type != typ {
			t.Errorf("status.%s has type %q, want %q", name, st[name].Type, typ)
		}
	}
	if st["lastSeen"].Format != "date-time" {
		t.Errorf("status.lastSeen format %q", st["lastSeen"].Format)
	}
	if v.Subresources == nil || v.Subresources.Status == nil {
		t.Error("no status subresource")
	}
	if !slices.Contains(c.Spec.Names.ShortNames, "st") {
		t.Error("short name st is gone")
	}
}

// TestStatusShapes keeps the columns kubectl get shows for the reported-
// state kinds.
func TestStatusShapes(t *testing.T) {
	for res, want := range map[string][]string{
		ResourceStatusCollectors: {"Filter string .spec.filter", "Limit integer .spec.limit", "Age date .metadata.creationTimestamp"},
		ResourceCombinedStatuses: {"Resource string .object.resource", "Object string .object.name", "Placement string .placement",
			"Destinations integer .destinations", "Failing integer .failingCount", "Revision string .observedRevision", "Age date .metadata.creationTimestamp"},
	} {
		var cols []string
		for _, col := range compiled(t, res).Spec.Versions[0].AdditionalPrinterColumns {
			cols = append(cols, col.Name+" "+col.Type+" "+col.JSONPath)
		}
		if !slices.Equal(cols, want) {
			t.Errorf("%s: columns %q, want %q", res, cols, want)
		}
	}
}

// TestBounds keeps the documented constants and the schemas in step.
func TestBounds(t *testing.T) {
	sps := compiled(t, ResourceSinglePlacementSlices).Spec.Versions[0].Schema.OpenAPIV3Schema
	if m := sps.Properties["destinations"].MaxItems; m == nil || *m != MaxDestinationsPerSlice {
		t.Errorf("destinations maxItems %v, want %d", m, MaxDestinationsPerSlice)
	}
	if m := sps.Properties["destinationCount"].Maximum; m == nil || *m != MaxDestinationsPerSlice {
		t.Errorf("destinationCount maximum %v, want %d", m, MaxDestinationsPerSlice)
	}
	ep := compiled(t, ResourceEdgePlacements).Spec.Versions[0].Schema.OpenAPIV3Schema
	if m := ep.Properties["status"].Properties["conflicts"].MaxItems; m == nil || *m != MaxReportedConflicts {
		t.Errorf("conflicts maxItems %v, want %d", m, MaxReportedConflicts)
	}
	sc := compiled(t, ResourceStatusCollectors).Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	if l := sc.Properties["limit"]; l.Maximum == nil || *l.Maximum != MaxStatusCollectorLimit || l.Default == nil || string(l.Default.Raw) != strconv.Itoa(DefaultStatusCollectorLimit) {
		t.Errorf("limit maximum %v default %v, want %d and %d", l.Maximum, l.Default, MaxStatusCollectorLimit, DefaultStatusCollectorLimit)
	}
	for _, list := range []string{"groupBy", "combinedFields", "select"} {
		if m := sc.Properties[list].MaxItems; m == nil || *m != MaxStatusExpressions {
			t.Errorf("%s maxItems %v, want %d", list, m, MaxStatusExpressions)
		}
	}
	cs := compiled(t, ResourceCombinedStatuses).Spec.Versions[0].Schema.OpenAPIV3Schema
	if m := cs.Properties["failing"].MaxItems; m == nil || *m != MaxFailingDestinations {
		t.Errorf("failing maxItems %v, want %d", m, MaxFailingDestinations)
	}
	if m := cs.Properties["failing"].Items.Schema.Properties["reason"].MaxLength; m == nil || *m != MaxFailingReasonLength {
		t.Errorf("failing reason maxLength %v, want %d", m, MaxFailingReasonLength)
	}
	res := cs.Properties["results"].Items.Schema
	if m := res.Properties["rows"].MaxItems; m == nil || *m != MaxStatusCollectorLimit {
		t.Errorf("rows maxItems %v, want %d", m, MaxStatusCollectorLimit)
	}
	if m := res.Properties["columnNames"].MaxItems; m == nil || *m != 2*MaxStatusExpressions {
		t.Errorf("columnNames maxItems %v, want %d", m, 2*MaxStatusExpressions)
	}
	if m := cs.Properties["results"].MaxItems; m == nil || *m != *ep.Properties["spec"].Properties["statusCollectors"].MaxItems {
		t.Errorf("results maxItems %v, want the placement's statusCollectors maxItems", m)
	}
}

func compiled(t *testing.T, resource string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := crdManifests([]string{resource})
	if err != nil {
		t.Fatal(err)
	}
	return decodeCRDs(t, b)[0]
}

// version compiles a resource's CRD as the root does.
func version(t *testing.T, resource string) *crd.Version {
	t.Helper()
	c := compiled(t, resource)
	crd.Default(c)
	d, errs := crd.Compile(c, nil)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	return d.Version(Version)
}

func strptr(s string) *string { return &s }

// TestTypesMatchSchemas writes full typed objects through their schemas:
// the root must accept them and prune nothing, so the Go types and the
// CRDs agree.
func TestTypesMatchSchemas(t *testing.T) {
	now := metav1.Now()
	sel := metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"edge"}}}}
	objs := map[string]runtime.Object{
		ResourceSyncTargets: &SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: "edge-1", Labels: map[string]string{"zone": "a"}},
			Status: SyncTargetStatus{Path: "root/region-a/edge-1", Connected: true, LastSeen: &now}},
		ResourceLocations: &Location{ObjectMeta: metav1.ObjectMeta{Name: "zone-a"}, Spec: LocationSpec{InstanceSelector: sel}},
		ResourceEdgePlacements: &EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: EdgePlacementSpec{
			LocationSelectors: []metav1.LabelSelector{sel},
			Downsync: []DownsyncClause{
				{APIGroup: strptr("apps"), Resources: []string{"deployments"}, Namespaces: []string{"web"},
					NamespaceSelector: &sel, ObjectNames: []string{"*"}, LabelSelectors: []metav1.LabelSelector{sel}},
				{APIGroup: strptr("apiextensions.k8s.io"), Resources: []string{"customresourcedefinitions"}, ObjectNames: []string{"widgets.example.com"}, Customizer: "web/per-zone"},
				{APIGroup: strptr(""), Resources: []string{"configmaps", "secrets"}},
			},
			Upsync:                     []UpsyncClause{{APIGroup: strptr("example.com"), Resources: []string{"reports"}, Namespaces: []string{"*"}, Names: []string{"r1"}}},
			WantSingletonReportedState: true,
			StatusCollectors:           []string{"ready-count"},
		}, Status: EdgePlacementStatus{
			ObservedGeneration: 1, MatchedDestinations: 3, SyncedDestinations: 2, FailedDestinations: 1, SyncedRevision: "42",
			Conflicts: []Conflict{{Object: ObjectReference{Group: "apps", Resource: "deployments", Namespace: "web", Name: "web"},
				Destination: "edge-1", Placements: []string{"web", "web2"}, Winner: "web", Message: "spec.replicas differs"}},
			ConflictCount: 1,
			Conditions: []metav1.Condition{{Type: ConditionSynced, Status: metav1.ConditionFalse, Reason: ReasonFailed, Message: "1 failed", LastTransitionTime: now, ObservedGeneration: 1},
				{Type: ConditionReady, Status: metav1.ConditionUnknown, Reason: ReasonPending, LastTransitionTime: now}},
		}},
		ResourceSinglePlacementSlices: &SinglePlacementSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Labels: map[string]string{PlacementLabel: "web"}},
			EdgePlacement: "web", DestinationCount: 1,
			Destinations: []Destination{{SyncTargetName: "edge-1", SyncTargetUID: "u-1", LocationName: "zone-a", Labels: map[string]string{"zone": "a"}}}},
		ResourceStatusCollectors: &StatusCollector{ObjectMeta: metav1.ObjectMeta{Name: "ready-count"}, Spec: StatusCollectorSpec{
			Filter:         "obj.metadata.namespace == 'web'",
			GroupBy:        []NamedExpression{{Name: "zone", Def: "destination.labels['zone']"}},
			CombinedFields: []CombinedField{{Name: "count", Type: AggregationCount}, {Name: "ready", Type: AggregationSum, Subject: "obj.status.readyReplicas"}},
			Limit:          20,
		}},
		ResourceCombinedStatuses: &CombinedStatus{ObjectMeta: metav1.ObjectMeta{Name: "deployments.apps-web-web", Namespace: "web",
			Labels: map[string]string{PlacementLabel: "web", ObjectResourceLabel: "deployments.apps", ObjectNameLabel: "web"}},
			Object: ObjectReference{Group: "apps", Resource: "deployments", Namespace: "web", Name: "web"}, Placement: "web",
			Results: []NamedStatusCombination{
				{Name: "ready-count", ColumnNames: []string{"zone", "count", "ready", "avg", "up"},
					Rows:     []StatusRow{{Columns: []Value{StringValue("eu"), IntValue(3), FloatValue(2.5), NullValue(), BoolValue(true)}}},
					Overflow: &StatusRow{Columns: []Value{NullValue(), IntValue(1), IntValue(0), NullValue(), BoolValue(false)}}},
				{Name: "versions", ColumnNames: []string{"destination"}, Rows: []StatusRow{{Columns: []Value{StringValue("edge-1")}}}, OmittedRows: 4},
				{Name: "missing", Error: "StatusCollector missing not found"},
			},
			Destinations: 7, Failing: []FailingDestination{{Name: "edge-9", Reason: "no such key: status"}}, FailingCount: 1, ObservedRevision: "42"},
		ResourceCustomizers: &Customizer{ObjectMeta: metav1.ObjectMeta{Name: "per-zone", Namespace: "web"},
			Replacements: []Replacement{{Path: "/spec/replicas", Value: "3"}, {Path: "/data/zone", Value: `"%(zone)"`}, {Path: "/a~1b/-", Value: `{"x": "%(syncTargetName)"}`, DestinationSelector: &sel}}},
	}
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for res, obj := range objs {
		t.Run(res, func(t *testing.T) {
			gvks, _, err := scheme.ObjectKinds(obj)
			if err != nil {
				t.Fatal(err)
			}
			obj.GetObjectKind().SetGroupVersionKind(gvks[0])
			u := toUnstructured(t, obj)
			orig := u.DeepCopy()
			v := version(t, res)
			var (
				pruned []string
				errs   field.ErrorList
			)
			if v.Status {
				// Spec and status are written separately, as a client does.
				if pruned, errs = v.Prepare(u, nil); len(errs) == 0 && len(pruned) == 0 {
					u.Object["status"] = orig.Object["status"]
					u.SetResourceVersion("1")
					pruned, errs = v.PrepareStatus(u, u.DeepCopy())
				}
			} else {
				pruned, errs = v.Prepare(u, nil)
			}
			if len(errs) > 0 {
				t.Fatalf("refused: %v", errs.ToAggregate())
			}
			if len(pruned) > 0 {
				t.Fatalf("pruned %v: the schema does not know these fields of the Go type", pruned)
			}
		})
	}
}

// TestValidation shows the schemas refusing bad input with the errors
// kubectl users see.
func TestValidation(t *testing.T) {
	cases := []struct {
		name, resource, yaml, want string
	}{
		{"wrong type", ResourceEdgePlacements, `spec: {wantSingletonReportedState: "yes"}`, "spec.wantSingletonReportedState: Invalid value"},
		{"no spec", ResourceEdgePlacements, `locationSelectors: [{}]`, "spec: Required value"},
		{"clause without resources", ResourceEdgePlacements, `spec: {downsync: [{namespaces: [web]}]}`, "spec.downsync[0].resources: Required value"},
		{"empty resources", ResourceEdgePlacements, `spec: {downsync: [{resources: []}]}`, "spec.downsync[0].resources: Invalid value"},
		{"bad resource", ResourceEdgePlacements, `spec: {downsync: [{resources: [Deployments]}]}`, "spec.downsync[0].resources[0]: Invalid value"},
		{"bad group", ResourceEdgePlacements, `spec: {downsync: [{apiGroup: "Apps", resources: ["*"]}]}`, "spec.downsync[0].apiGroup: Invalid value"},
		{"duplicate resource", ResourceEdgePlacements, `spec: {upsync: [{resources: [pods, pods]}]}`, "spec.upsync[0].resources[1]: Duplicate value"},
		{"bad selector operator", ResourceEdgePlacements, `spec: {locationSelectors: [{matchExpressions: [{key: zone}]}]}`, "spec.locationSelectors[0].matchExpressions[0].operator: Required value"},
		{"no selector", ResourceLocations, `spec: {}`, "spec.instanceSelector: Required value"},
		{"count mismatch", ResourceSinglePlacementSlices, `{edgePlacement: web, destinationCount: 2, destinations: [{syncTargetName: e, locationName: l}]}`, "destinationCount must equal the number of destinations"},
		{"destination without location", ResourceSinglePlacementSlices, `{edgePlacement: web, destinationCount: 1, destinations: [{syncTargetName: e}]}`, "destinations[0].locationName: Required value"},
		{"relative path", ResourceCustomizers, `{replacements: [{path: spec/replicas, value: "3"}]}`, "replacements[0].path: Invalid value"},
		{"long clause customizer", ResourceEdgePlacements, `spec: {downsync: [{resources: ["*"], customizer: ` + strings.Repeat("c", 254) + `}]}`, "spec.downsync[0].customizer: Too long"},
		{"bad destination selector", ResourceCustomizers, `{replacements: [{path: /a, value: "3", destinationSelector: {matchExpressions: [{key: zone}]}}]}`, "replacements[0].destinationSelector.matchExpressions[0].operator: Required value"},
		{"bad escape", ResourceCustomizers, `{replacements: [{path: /a~2b, value: "3"}]}`, "replacements[0].path: Invalid value"},
		{"select and groupBy", ResourceStatusCollectors, `spec: {select: [{name: a, def: "1"}], groupBy: [{name: b, def: "2"}]}`, "select cannot be combined with groupBy or combinedFields"},
		{"empty collector", ResourceStatusCollectors, `spec: {filter: "true"}`, "one of groupBy, combinedFields or select is required"},
		{"same column twice", ResourceStatusCollectors, `spec: {groupBy: [{name: a, def: "1"}], combinedFields: [{name: a, type: COUNT}]}`, "groupBy and combinedFields names must differ"},
		{"duplicate groupBy", ResourceStatusCollectors, `spec: {groupBy: [{name: a, def: "1"}, {name: a, def: "2"}]}`, "spec.groupBy[1]: Duplicate value"},
		{"unknown aggregation", ResourceStatusCollectors, `spec: {combinedFields: [{name: a, type: MEDIAN, subject: "1"}]}`, "spec.combinedFields[0].type: Unsupported value"},
		{"sum without subject", ResourceStatusCollectors, `spec: {combinedFields: [{name: a, type: SUM}]}`, "spec.combinedFields[0].subject: Required value: subject is required"},
		{"count with subject", ResourceStatusCollectors, `spec: {combinedFields: [{name: a, type: COUNT, subject: "1"}]}`, "spec.combinedFields[0].subject: Forbidden: COUNT counts objects"},
		{"limit too big", ResourceStatusCollectors, `spec: {select: [{name: a, def: "1"}], limit: 1001}`, "spec.limit: Invalid value"},
		{"too many failing", ResourceCombinedStatuses, `{object: {resource: deployments, name: web}, placement: web, failing: [` + failing(101) + `]}`, "failing: Too many"},
		{"combined status without object", ResourceCombinedStatuses, `{placement: web}`, "object: Required value"},
	}
	kinds := map[string]string{ResourceEdgePlacements: KindEdgePlacement, ResourceLocations: KindLocation,
		ResourceSinglePlacementSlices: KindSinglePlacementSlice, ResourceCustomizers: KindCustomizer,
		ResourceStatusCollectors: KindStatusCollector, ResourceCombinedStatuses: KindCombinedStatus}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body map[string]any
			if err := yaml.Unmarshal([]byte(tc.yaml), &body); err != nil {
				t.Fatal(err)
			}
			meta := map[string]any{"name": "x"}
			if tc.resource == ResourceCustomizers || tc.resource == ResourceCombinedStatuses {
				meta["namespace"] = "default"
			}
			body["apiVersion"], body["kind"], body["metadata"] = SchemeGroupVersion.String(), kinds[tc.resource], meta
			u := toUnstructured(t, &unstructured.Unstructured{Object: body})
			_, errs := version(t, tc.resource).Prepare(u, nil)
			if got := errs.ToAggregate(); got == nil || !strings.Contains(got.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", got, tc.want)
			}
		})
	}
}

// failing renders n failing destinations as YAML flow items.
func failing(n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf("{name: edge-%d}", i)
	}
	return strings.Join(items, ", ")
}

// toUnstructured round-trips obj through JSON as the server decodes a
// request body (integers as int64).
func toUnstructured(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	return u
}
