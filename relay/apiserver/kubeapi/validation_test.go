package kubeapi

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// causes renders the causes of an API error as "field: message" lines,
// sorted (kube lists map keys in map order).
func causes(t *testing.T, err error) []string {
	t.Helper()
	var st *apierrors.StatusError
	if !errors.As(err, &st) {
		t.Fatalf("want an API error, got %v", err)
	}
	if st.ErrStatus.Details == nil {
		return nil
	}
	var out []string
	for _, c := range st.ErrStatus.Details.Causes {
		out = append(out, c.Field+": "+c.Message)
	}
	slices.Sort(out)
	return out
}

func podTemplate(labels map[string]string, restart corev1.RestartPolicy, containers ...corev1.Container) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{RestartPolicy: restart, Containers: containers},
	}
}

// Workloads are validated as kube-apiserver validates them: the same
// causes, with kube's field paths and messages (kube-apiserver 1.37's
// answers, recorded by test/differential for the Deployment).
func TestWorkloadValidation(t *testing.T) {
	cs, _, _ := applyClients(t)
	ctx := t.Context()
	app := map[string]string{"app": "x"}
	good := corev1.Container{Name: "app", Image: "nginx:1.27"}

	for _, c := range []struct {
		name   string
		create func() error
		want   []string
	}{{
		name: "Deployment",
		create: func() error {
			_, err := cs.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "broken"},
				Spec: appsv1.DeploymentSpec{
					Replicas: ptr.To[int32](-1),
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
					Template: podTemplate(map[string]string{"app": "broken"}, "", corev1.Container{Name: "app"}),
				},
			}, metav1.CreateOptions{})
			return err
		},
		want: []string{
			"spec.replicas: Invalid value: -1: must be greater than or equal to 0",
			"spec.template.metadata.labels: Invalid value: {\"app\":\"broken\"}: `selector` does not match template `labels`",
			"spec.template.spec.containers[0].image: Required value",
		},
	}, {
		name: "Deployment strategy and counts",
		create: func() error {
			zero := intstr.FromInt32(0)
			_, err := cs.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "counts"},
				Spec: appsv1.DeploymentSpec{
					Selector:                &metav1.LabelSelector{MatchLabels: app},
					Template:                podTemplate(app, "", good),
					MinReadySeconds:         10,
					ProgressDeadlineSeconds: ptr.To[int32](5),
					Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
						RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &zero, MaxSurge: &zero}},
				},
			}, metav1.CreateOptions{})
			return err
		},
		want: []string{
			"spec.progressDeadlineSeconds: Invalid value: 5: must be greater than minReadySeconds",
			"spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0",
		},
	}, {
		name: "Deployment strategy type",
		create: func() error {
			_, err := cs.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "strategy"},
				Spec: appsv1.DeploymentSpec{
					Selector: &metav1.LabelSelector{MatchLabels: app},
					Template: podTemplate(app, "", good),
					Strategy: appsv1.DeploymentStrategy{Type: "Bogus"},
				},
			}, metav1.CreateOptions{})
			return err
		},
		// kube shows its internal type, which has no json tags.
		want: []string{`spec.strategy: Unsupported value: {"Type":"Bogus","RollingUpdate":null}: supported values: "Recreate", "RollingUpdate"`},
	}, {
		name: "ReplicaSet",
		create: func() error {
			_, err := cs.AppsV1().ReplicaSets("default").Create(ctx, &appsv1.ReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Name: "rs"},
				Spec: appsv1.ReplicaSetSpec{
					Selector: &metav1.LabelSelector{},
					Template: podTemplate(app, corev1.RestartPolicyNever, good, corev1.Container{Name: "app", Image: "busybox"}),
				},
			}, metav1.CreateOptions{})
			return err
		},
		want: []string{
			"spec.selector: Invalid value: {}: empty selector is invalid for deployment",
			`spec.template.spec.containers[1].name: Duplicate value: "app"`,
			`spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"`,
		},
	}, {
		name: "StatefulSet",
		create: func() error {
			_, err := cs.AppsV1().StatefulSets("default").Create(ctx, &appsv1.StatefulSet{
				ObjectMeta: metav1.ObjectMeta{Name: "ss"},
				Spec: appsv1.StatefulSetSpec{
					ServiceName: "Bad_Service",
					Selector:    &metav1.LabelSelector{MatchLabels: app},
					Template: podTemplate(app, "", corev1.Container{Name: "app", Image: "db",
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "missing", MountPath: "/m"}}}),
					VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}},
				},
			}, metav1.CreateOptions{})
			return err
		},
		want: []string{
			`spec.serviceName: Invalid value: "Bad_Service": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
			`spec.template.spec.containers[0].volumeMounts[1].name: Not found: "missing"`,
		},
	}, {
		name: "DaemonSet",
		create: func() error {
			_, err := cs.AppsV1().DaemonSets("default").Create(ctx, &appsv1.DaemonSet{
				ObjectMeta: metav1.ObjectMeta{Name: "ds"},
				Spec: appsv1.DaemonSetSpec{
					Selector: &metav1.LabelSelector{MatchLabels: app},
					Template: podTemplate(map[string]string{"app": "y"}, "", corev1.Container{Name: "Agent", Image: "agent",
						Ports: []corev1.ContainerPort{{ContainerPort: 70000}}, Env: []corev1.EnvVar{{Name: ""}}}),
				},
			}, metav1.CreateOptions{})
			return err
		},
		want: []string{
			`spec.template.metadata.labels: Invalid value: {"app":"y"}: ` + "`selector` does not match template `labels`",
			`spec.template.spec.containers[0].env[0].name: Required value`,
			`spec.template.spec.containers[0].name: Invalid value: "Agent": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
			`spec.template.spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive`,
		},
	}, {
		name: "Job",
		create: func() error {
			_, err := cs.BatchV1().Jobs("default").Create(ctx, &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: "job"},
				Spec: batchv1.JobSpec{
					BackoffLimit: ptr.To[int32](-2),
					Template: podTemplate(nil, "", corev1.Container{Name: "run", Image: "busybox", Resources: corev1.ResourceRequirements{
						Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")},
					}}),
				},
			}, metav1.CreateOptions{})
			return err
		},
		want: []string{
			`spec.backoffLimit: Invalid value: -2: must be greater than or equal to 0`,
			`spec.template.spec.containers[0].resources.requests: Invalid value: "200m": must be less than or equal to cpu limit of 100m`,
			`spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"`,
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			err := c.create()
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want 422 Invalid, got %v", err)
			}
			if got := causes(t, err); !slices.Equal(got, c.want) {
				t.Errorf("causes:\n got %q\nwant %q", got, c.want)
			}
		})
	}

	// Valid workloads are stored, and an update that changes the selector
	// is refused.
	d, err := cs.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: app}, Template: podTemplate(app, "", good)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Selector.MatchLabels = map[string]string{"app": "x", "tier": "web"}
	d.Spec.Template.Labels = d.Spec.Selector.MatchLabels
	_, err = cs.AppsV1().Deployments("default").Update(ctx, d, metav1.UpdateOptions{})
	if want := []string{`spec.selector: Invalid value: {"matchLabels":{"app":"x","tier":"web"}}: field is immutable`}; !slices.Equal(causes(t, err), want) {
		t.Errorf("selector update: %v, want %q", err, want)
	}
	ss, err := cs.AppsV1().StatefulSets("default").Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			ServiceName: "db", Selector: &metav1.LabelSelector{MatchLabels: app}, Template: podTemplate(app, "", good),
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ss.Spec.Replicas = ptr.To[int32](3)
	if ss, err = cs.AppsV1().StatefulSets("default").Update(ctx, ss, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("scaling a StatefulSet: %v", err)
	}
	ss.Spec.ServiceName = "other"
	_, err = cs.AppsV1().StatefulSets("default").Update(ctx, ss, metav1.UpdateOptions{})
	if want := []string{`spec.serviceName: Invalid value: "other": field is immutable`}; !slices.Equal(causes(t, err), want) {
		t.Errorf("serviceName update: %v, want %q", err, want)
	}
	if _, err := cs.BatchV1().Jobs("default").Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "job"},
		Spec:       batchv1.JobSpec{Template: podTemplate(nil, corev1.RestartPolicyNever, good)},
	}, metav1.CreateOptions{}); err != nil {
		t.Errorf("valid Job: %v", err)
	}
}

// ConfigMap keys are validated with the metadata (all causes at once), and
// an immutable ConfigMap keeps its data.
func TestConfigMapValidation(t *testing.T) {
	cs, _, _ := applyClients(t)
	ctx := t.Context()
	cms := cs.CoreV1().ConfigMaps("default")
	_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "Bad_Name"}, Data: map[string]string{"bad key!": "x"}}, metav1.CreateOptions{})
	want := []string{
		`data[bad key!]: Invalid value: "bad key!": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`,
		`metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
	}
	if !apierrors.IsInvalid(err) || !slices.Equal(causes(t, err), want) {
		t.Errorf("create: %v\nwant causes %q", err, want)
	}

	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "frozen"}, Data: map[string]string{"a": "1"}, Immutable: ptr.To(true)}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["a"] = "2"
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	if want := []string{"data: Forbidden: field is immutable when `immutable` is set"}; !slices.Equal(causes(t, err), want) {
		t.Errorf("update of an immutable ConfigMap: %v, want %q", err, want)
	}
}

// Validation errors of the main resource do not block status writes,
// which kube validates separately.
func TestValidationSkipsStatus(t *testing.T) {
	cs, _, _ := applyClients(t)
	ctx := t.Context()
	app := map[string]string{"app": "s"}
	d, err := cs.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: app}, Template: podTemplate(app, "", corev1.Container{Name: "a", Image: "b"})},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Status.Replicas = 1
	if _, err := cs.AppsV1().Deployments("default").UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Errorf("status update: %v", err)
	}
}

// volumeSources names every source of VolumeSource once: a source missing
// from it would never be counted, so a volume with only that source would
// be refused and one with two would pass.
func TestVolumeSourcesCoverVolumeSource(t *testing.T) {
	typ := reflect.TypeFor[corev1.VolumeSource]()
	var fields []string
	for i := range typ.NumField() {
		if typ.Field(i).Type.Kind() == reflect.Pointer {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			fields = append(fields, name)
		}
	}
	got := slices.Sorted(slices.Values(volumeSources))
	slices.Sort(fields)
	if !slices.Equal(got, fields) {
		t.Errorf("volumeSources %q\nVolumeSource's sources %q", got, fields)
	}
	for i, f := range volumeSourceFields() {
		name, _, _ := strings.Cut(typ.Field(f).Tag.Get("json"), ",")
		if name != volumeSources[i] {
			t.Errorf("volumeSourceFields()[%d] is %q, want %q", i, name, volumeSources[i])
		}
	}
}
