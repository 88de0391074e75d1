// Package status summarizes the reported state of placed objects
// (DESIGN.md section 4, StatusCollector and CombinedStatus; section 5,
// steps 6 and 7): it compiles StatusCollectors, evaluates them at a
// destination, and merges the partial results of many destinations into
// the tables of a CombinedStatus.
//
// # What it owns
//
//   - Compiling (Compile, Validate): every CEL expression of a
//     StatusCollector is compiled and type-checked once, with errors that
//     carry the field path (spec.groupBy[1].def), so the API can refuse a
//     bad collector with 422.
//   - Evaluating (Collector.Evaluate, EvaluateAll): one destination's
//     Partial, from the object as the destination has it, the objects it
//     owns and the destination's name and labels.
//   - Merging (Merge): Partials combine per group (COUNT and SUM add, MIN
//     and MAX compare, AVG carries sum and count), select rows keep the
//     first limit by destination name, failing destinations keep the first
//     v1alpha1.MaxFailingDestinations by name plus a count. Merge is
//     commutative and associative, and its size is bounded by the
//     collector, never by the number of destinations, so each tier merges
//     its children's Partials and forwards one.
//   - Rendering (Partial.Result, Fill): the final tables of a
//     CombinedStatus.
//
// # The CEL environment
//
// Expressions see three variables:
//
//	obj          map(string, dyn)        the placed object, status included
//	associated   list(map(string, dyn))  objects it owns (a Deployment's ReplicaSets and Pods)
//	destination  map(string, dyn)        name (string) and labels (map(string, string))
//
// with the CEL standard library, optional types (obj.?status.?readyReplicas.orValue(0)),
// cel-go's strings, sets and math extensions and Kubernetes' lists
// (sum, min, max, indexOf), regex, quantity and URL libraries. A field that
// may be missing must be guarded (has(), optionals): a missing key is an
// evaluation error, and the destination then counts as failing. Each
// evaluation of an expression is limited to MaxCost.
//
// # Values and numbers
//
//   - groupBy and select values are strings, numbers, booleans or null;
//     strings are cut to v1alpha1.MaxStatusValueLength bytes. Numbers are
//     kept as int64 when integral and in range (2.0 groups with 2); a uint
//     above the int64 range becomes a double.
//   - SUM and AVG take numbers; MIN and MAX take numbers or strings. A null
//     value is left out (not counted by AVG), as in SQL. SUM adds ints
//     exactly while every value is an int; once a double is added, or the
//     int sum leaves the int64 range, the sum is a double (rounding then
//     depends on the order of merging). SUM of no values is 0; AVG, MIN
//     and MAX of no values are null.
//   - MIN and MAX order values null < booleans < numbers < strings, numbers
//     by value and strings by bytes (UTF-8), so a collector whose subject
//     is sometimes a number and sometimes a string is still deterministic:
//     MAX then picks a string. Timestamps compare as strings only when
//     written in one fixed width; int(timestamp(...)) compares seconds.
//   - A double subject that is NaN or infinite is an evaluation error.
//
// # Partials, tiers and double counting
//
// A Partial covers a set of destinations of one (object, placement,
// collector). Merge assumes the two sets are disjoint: merging a
// destination twice counts it twice. So a tier keeps the latest Partial of
// each child and re-merges them (replacing a child's Partial, never merging
// a new one into the old total); after a reconnect or a re-home, the child
// re-sends its current Partial, which replaces the previous one. Partials
// of different versions of a collector (metadata.generation, then a hash of
// the spec) are not combined: Merge keeps the newer one.
//
// # What it must not do
//
// It is pure computation: no clients, no I/O, no clock, no logging, no
// goroutines. It never changes its inputs. Lookups (which collectors a
// placement names, the objects a placed object owns) belong to the caller.
//
// # Concurrency
//
// A Collector is immutable and safe for concurrent use. Partials are values:
// Merge and Result never change their arguments, but the result of Merge
// may share memory with them, so a Partial must not be changed once
// handed to Merge.
package status
