// Package apiregistration holds the Go types of apiregistration.k8s.io/v1
// (APIService), written from the published API because k8s.io/kube-aggregator
// is not a dependency of Canopy. Only the wire shape matters here: the types
// exist so that strategic merge patch and strict decoding see the same fields,
// tags and merge keys as kube-aggregator's.
package apiregistration

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// APIService represents a server for a particular GroupVersion.
type APIService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   APIServiceSpec   `json:"spec,omitempty"`
	Status APIServiceStatus `json:"status,omitempty"`
}

// APIServiceList is a list of APIService objects.
type APIServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []APIService `json:"items"`
}

// APIServiceSpec describes where an API server lives and how much to trust it.
type APIServiceSpec struct {
	// Service references the service that serves the group version; nil
	// means the group version is served locally.
	Service *ServiceReference `json:"service,omitempty"`
	// Group is the API group name this server hosts.
	Group string `json:"group,omitempty"`
	// Version is the API version this server hosts.
	Version string `json:"version,omitempty"`
	// InsecureSkipTLSVerify disables TLS certificate verification.
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`
	// CABundle is a PEM encoded CA bundle to validate the server's certificate.
	CABundle []byte `json:"caBundle,omitempty"`
	// GroupPriorityMinimum is the priority this group should have at least.
	GroupPriorityMinimum int32 `json:"groupPriorityMinimum"`
	// VersionPriority orders this version within its group.
	VersionPriority int32 `json:"versionPriority"`
}

// ServiceReference holds a reference to a Service.
type ServiceReference struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	Port      *int32 `json:"port,omitempty"`
}

// APIServiceStatus contains derived information about an API server.
type APIServiceStatus struct {
	// Conditions is keyed by type, as kube-aggregator declares it
	// (listType=map, patchMergeKey=type, patchStrategy=merge).
	Conditions []APIServiceCondition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// ConditionStatus is "True", "False" or "Unknown".
type ConditionStatus string

// APIServiceConditionType names a condition of an APIService.
type APIServiceConditionType string

// Available is the condition type kubectl prints in the AVAILABLE column.
const Available APIServiceConditionType = "Available"

// APIServiceCondition describes the state of an APIService at a point in time.
type APIServiceCondition struct {
	Type               APIServiceConditionType `json:"type"`
	Status             ConditionStatus         `json:"status"`
	LastTransitionTime metav1.Time             `json:"lastTransitionTime,omitempty"`
	Reason             string                  `json:"reason,omitempty"`
	Message            string                  `json:"message,omitempty"`
}
