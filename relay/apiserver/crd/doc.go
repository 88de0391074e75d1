// Package crd owns compiling and validating CustomResourceDefinitions
// (apiextensions.k8s.io/v1) and the custom resources they define, so that a
// space serves a CRD's resource the way kube-apiserver does.
//
// The work is done by the apiextensions-apiserver module's own packages; this
// package arranges them in the order kube-apiserver applies them:
//
//   - For a CRD: Default applies the v1 defaulting funcs, Compile runs
//     ValidateCustomResourceDefinition (or ...Update) and builds a Definition,
//     CheckNames does what the naming controller does and Established sets the
//     status the naming and establishing controllers write.
//   - For a custom resource: Version.Prepare does what the decoder and the
//     custom resource strategy do on create and update (type check, pruning
//     with unknown-field tracking, defaulting, metadata, OpenAPI schema,
//     scale and x-kubernetes-validations rules with ratcheting);
//     Version.PrepareStatus does the same for the status subresource.
//   - Version.Table renders rows from additionalPrinterColumns.
//
// The package must not store or serve anything: it has no I/O, no clock and
// no state beyond the compiled Definitions. Request handling (status and spec
// resetting between the main resource and the status subresource, generation,
// uid, resourceVersion, name generation, conversion between versions, turning
// field errors into a Status) belongs to the server.
//
// Definitions and Versions are immutable once compiled and safe for
// concurrent use.
package crd
