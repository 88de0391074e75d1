// Package auth decides who is calling the root relay's Kubernetes-compatible
// API and what they may do there, space by space.
//
// # What it owns
//
//   - Authentication ([Authenticator]): client certificates verified against
//     the API's client CAs (CommonName is the user, Organizations the groups),
//     the admin bearer token (user "canopy:admin" in system:masters), and
//     ServiceAccount tokens: ES256 JWTs shaped like kube's bound tokens, valid
//     only in the space they were issued for and only while their
//     ServiceAccount exists there with the same UID. There is no anonymous
//     access: a request without valid credentials gets [ErrUnauthenticated].
//   - Token issuing for the TokenRequest subresource
//     ([Authenticator.IssueServiceAccountToken]).
//   - Authorization ([Authorizer]) with the RBAC objects (Roles, RoleBindings,
//     ClusterRoles, ClusterRoleBindings) of each space, evaluated as kube's RBAC
//     authorizer does, including aggregated ClusterRoles. Members of
//     system:masters may do everything. Every user in system:authenticated
//     also holds, in every space, what kube's default system:discovery,
//     system:basic-user and system:public-info-viewer ClusterRoleBindings grant
//     (get on /api, /api/*, /apis, /apis/*, /healthz, /livez, /readyz,
//     /version, /version/, /openapi, /openapi/*; create on
//     selfsubjectaccessreviews, selfsubjectrulesreviews and
//     selfsubjectreviews); these grants are built in and need no object in the
//     store. Non-resource paths are the paths inside the space, without the
//     /spaces/<name> prefix.
//   - Impersonation ([Authorizer.Impersonate]) with kube's Impersonate-*
//     headers and kube's "impersonate" checks.
//   - Kube's RBAC escalation checks on writes of RBAC objects
//     ([Authorizer.ConfirmNoEscalation]): a Role or ClusterRole needs the
//     permissions it grants or the escalate verb, a binding the permissions
//     of its role or the bind verb. Only objects that take effect in their
//     space are checked; the RBAC objects of a workload description space
//     that are workload for the destinations ([Authorizer.Inert]) are not.
//   - The texts of kube's 403 answers ([ForbiddenMessage], [NewForbidden]).
//
// # What it must not do
//
// It serves no HTTP and writes nothing: it reads requests handed to it and
// reads the store through [store.Reader]. Turning its errors into HTTP
// answers (401 for [ErrUnauthenticated], 403 for a Forbidden
// *apierrors.StatusError, 400 for a BadRequest one) is the API server's job.
//
// # Concurrency
//
// An Authenticator is immutable after [NewAuthenticator] and safe for
// concurrent use. All methods of an Authorizer are safe for concurrent use;
// [Authorizer.Start] must be called once. The Authorizer keeps one in-memory
// index per space behind a single RWMutex: decisions take it for reading,
// watch events and first loads of a space take it for writing. It is the only
// lock in the package.
package auth
