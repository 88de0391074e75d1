// Package customize expands a workload object for one destination
// (DESIGN.md section 4, "Customization"; section 5, step 5). The edge relay
// runs it on every object it is about to apply, since only the edge is
// sure of its own properties; the root runs it to show a destination's
// result on request.
//
// # What it owns
//
//   - Parameters: Params holds what a destination knows about itself
//     (SyncTarget and Location names, labels and annotations) and Lookup
//     resolves a parameter name in the documented order.
//   - Templates: %(NAME) references and %% escapes, in the strings of an
//     object marked with v1alpha1.ExpandParametersAnnotation and in every
//     Replacement.Value.
//   - Customizers: applying a Customizer's replacements in order, each
//     limited by its DestinationSelector, at a JSON Pointer (RFC 6901) with
//     JSON Patch "add" semantics.
//   - Which Customizer an object uses (CustomizerRef): the downsync
//     clause's, else the object's CustomizerAnnotation.
//   - Validating a Customizer at write time (Validate): what would fail at
//     every destination alike (a malformed template or pointer, a value
//     that is not JSON, a bad destination selector), with the field path,
//     so that the API refuses it with 422.
//
// # What it must not do
//
// It is pure computation on unstructured objects (map[string]any as
// decoded from JSON): no clients, no lookups of Customizers or inventory
// objects (the caller passes them in), no logging, no goroutines. It never
// changes its inputs, and never returns a half-expanded object: on any
// error it returns nil and an error naming the parameter and the place it
// was used, or the replacement at fault. It does not decide conflicts
// between placements; it only produces each destination's version.
//
// # Concurrency
//
// Every function is safe for concurrent use, provided the caller does not
// change the object, Params maps or Customizer during the call.
package customize
