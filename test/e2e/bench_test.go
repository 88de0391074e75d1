package e2e

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The API benchmarks drive a real root over HTTPS with client-go's typed
// clientset, as controllers do. Run them with
//
//	go test ./test/e2e -run '^$' -bench API -benchmem
func benchClient(b *testing.B) (*kubernetes.Clientset, string) {
	b.Helper()
	r := startRoot(b)
	cs, err := kubernetes.NewForConfig(r.restConfig(b, "default"))
	if err != nil {
		b.Fatal(err)
	}
	return cs, "default"
}

func benchConfigMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench": "true"}},
		Data:       map[string]string{"key": "value", "other": "some longer value to make the object realistic"},
	}
}

func BenchmarkAPICreate(b *testing.B) {
	cs, ns := benchClient(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, benchConfigMap(fmt.Sprintf("cm-%d", i)), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAPICreateParallel16(b *testing.B) {
	cs, ns := benchClient(b)
	ctx := context.Background()
	var n atomic.Int64
	b.SetParallelism(8) // 8 x GOMAXPROCS(2) = 16 writers
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			name := fmt.Sprintf("cm-%d", n.Add(1))
			if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, benchConfigMap(name), metav1.CreateOptions{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkAPIGet(b *testing.B) {
	cs, ns := benchClient(b)
	ctx := context.Background()
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, benchConfigMap("target"), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "target", metav1.GetOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAPIList(b *testing.B) {
	for _, n := range []int{100, 3000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			cs, ns := benchClient(b)
			ctx := context.Background()
			for i := 0; i < n; i++ {
				if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, benchConfigMap(fmt.Sprintf("cm-%d", i)), metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if len(list.Items) != n {
					b.Fatalf("listed %d, want %d", len(list.Items), n)
				}
			}
		})
	}
}
