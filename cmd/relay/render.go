package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/syncer"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

func newRenderCommand() *cobra.Command {
	var dataDir, dest, space, namespace string
	cmd := &cobra.Command{
		Use:   "render --destination=NAME [--space=S] [-n NS] RESOURCE/NAME",
		Short: "Print an object as one destination will apply it",
		Long: `render prints a placed object as the edge serving a destination will apply it:
the object as placed (the root's downsync space), customized with the destination's
SyncTarget and Location (inventory) and the Customizer chosen for it (the object's
workload description space), by the edge's own code. A missing parameter or
Customizer is reported as the edge would report it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dest == "" {
				return usageError{flagErrorf("destination", "must name a SyncTarget")}
			}
			resource, name, ok := strings.Cut(args[0], "/")
			if !ok || resource == "" || name == "" {
				return usageError{fmt.Errorf("relay render: %q: want RESOURCE/NAME", args[0])}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			out, err := render(ctx, filepath.Join(dataDir, pki.AdminKubeconfigFile), space, dest, resource, namespace, name)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&dataDir, "data-dir", defaultDataDir(defaultName), "data directory of the root relay (its admin kubeconfig)")
	fs.StringVar(&dest, "destination", "", "the destination (SyncTarget name)")
	fs.StringVar(&space, "space", layout.DefaultSpace, "the workload description space the object was placed from")
	fs.StringVarP(&namespace, "namespace", "n", "", "the object's namespace")
	return cmd
}

// render fetches what the destination's edge would hold for the object
// and expands it with syncer.Desired.
func render(ctx context.Context, kubeconfig, space, dest, resource, namespace, name string) ([]byte, error) {
	client := func(ctxName string) (dynamic.Interface, *restmapper.DeferredDiscoveryRESTMapper, error) {
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
			&clientcmd.ConfigOverrides{CurrentContext: ctxName})
		rc, err := cc.ClientConfig()
		if err != nil {
			return nil, nil, err
		}
		dc, err := dynamic.NewForConfig(rc)
		if err != nil {
			return nil, nil, err
		}
		disc, err := discovery.NewDiscoveryClientForConfig(rc)
		if err != nil {
			return nil, nil, err
		}
		return dc, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)), nil
	}
	down, mapper, err := client(layout.DownsyncSpace)
	if err != nil {
		return nil, err
	}
	wds, _, err := client(space)
	if err != nil {
		return nil, err
	}
	inv, _, err := client(layout.InventorySpace)
	if err != nil {
		return nil, err
	}
	gvr, err := mapper.ResourceFor(schema.ParseGroupResource(resource).WithVersion(""))
	if err != nil {
		return nil, fmt.Errorf("relay render: %s: %w", resource, err)
	}
	var inbox []*store.Object
	add := func(r store.Resource, u *unstructured.Unstructured) error {
		data, err := json.Marshal(u.Object)
		if err != nil {
			return err
		}
		inbox = append(inbox, &store.Object{Key: store.Key{Resource: r, Namespace: u.GetNamespace(), Name: u.GetName()}, Data: data})
		return nil
	}
	obj, err := down.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("relay render: %s/%s is not placed anywhere: %w", resource, name, err)
	}
	if !slices.Contains(strings.Split(obj.GetAnnotations()[v1alpha1.DestinationsAnnotation], ","), dest) {
		return nil, fmt.Errorf("relay render: %s/%s is not placed on %s (its destinations: %s)", resource, name, dest,
			obj.GetAnnotations()[v1alpha1.DestinationsAnnotation])
	}
	if err := add(store.Resource{Group: gvr.Group, Resource: gvr.Resource}, obj); err != nil {
		return nil, err
	}
	// The Customizers the edge would hold: every one the object may name.
	custs, err := wds.Resource(v1alpha1.CustomizersGVR).Namespace(obj.GetNamespace()).List(ctx, metav1.ListOptions{})
	if err != nil && obj.GetNamespace() != "" {
		return nil, err
	}
	if custs != nil {
		for i := range custs.Items {
			if err := add(store.Resource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceCustomizers}, &custs.Items[i]); err != nil {
				return nil, err
			}
		}
	}
	st, err := inv.Resource(v1alpha1.SyncTargetsGVR).Get(ctx, dest, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("relay render: destination %s: %w", dest, err)
	}
	locs, err := inv.Resource(v1alpha1.LocationsGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	// The SyncTarget names the first Location by name that holds it, as
	// the root's does; the object may name another for dest
	// (v1alpha1.LocationOverridesAnnotation): all of them are at hand.
	slices.SortFunc(locs.Items, func(a, b unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	found := false
	for i := range locs.Items {
		if err := add(store.Resource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceLocations}, &locs.Items[i]); err != nil {
			return nil, err
		}
		var l v1alpha1.Location
		if found || runtimeConvert(locs.Items[i].Object, &l) != nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&l.Spec.InstanceSelector)
		if err != nil || !sel.Matches(labels.Set(st.GetLabels())) {
			continue
		}
		ann := st.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[v1alpha1.LocationAnnotation] = l.Name
		st.SetAnnotations(ann)
		found = true
	}
	if err := add(store.Resource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceSyncTargets}, st); err != nil {
		return nil, err
	}
	desired, errs := syncer.Desired(inbox, dest)
	if len(errs) > 0 {
		return nil, fmt.Errorf("relay render: %s cannot apply it: %w", dest, errs[0])
	}
	if len(desired) != 1 {
		return nil, errors.New("relay render: nothing to apply")
	}
	return yaml.Marshal(desired[0].Object.Object)
}

func runtimeConvert(m map[string]any, out any) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
