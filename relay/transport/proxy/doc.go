// Package proxy carries requests from the root to a destination's cluster
// through the tree, over streams that each parent opens on the link its
// child dialed: no relay below the root listens for anything.
//
// # What it owns
//
//   - The life of one proxy stream (wire protocol version 5): the opener
//     ([Dial], at the root) sends ProxyOpen naming the destination and the
//     user; each region passes it on toward the child that leads there
//     ([Forward]); the edge answers ProxyReady ([Accept]) or any relay on
//     the way refuses with an [Error] (not found, unavailable, too many
//     streams) and closes the stream.
//   - [Conn], the byte stream both ends then hold (a net.Conn), with flow
//     control of its own: each direction may have wire.ProxyWindow bytes
//     in flight, and each end reads the link's stream at once into that
//     window. A stream nobody reads (a watch whose client went quiet, a
//     paused port-forward) therefore never holds bytes in the link's
//     buffers, and never slows the link's desired state, its reports or
//     other streams. Relays between the two ends copy bytes unparsed.
//
// # What it must not do
//
// It knows nothing about HTTP or Kubernetes: what a stream carries after
// ProxyReady is the two ends' business (relay/destproxy serves HTTP on
// it). It decides no access: the root authorizes a request before it
// dials, and the user in ProxyOpen is whom the root authenticated. It does
// not choose the child toward a destination nor count a link's streams:
// an [Opener] (session.Downlink) does.
package proxy
