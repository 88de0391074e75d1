// The root's kube API, as the signed-in user: every request carries the
// user's bearer token (or, with none, the browser's client certificate), so
// the root authenticates and authorizes it as it would kubectl's.

let token = '';

export function setToken(t: string) {
  token = t;
}

export class ApiError extends Error {
  constructor(public status: number, message: string) {
    super(message);
  }
}

function headers(extra?: Record<string, string>): Record<string, string> {
  const h: Record<string, string> = { Accept: 'application/json', ...extra };
  if (token) h.Authorization = 'Bearer ' + token;
  return h;
}

async function failure(res: Response): Promise<ApiError> {
  let msg = res.statusText;
  try {
    const st = await res.json();
    if (st && st.message) msg = st.message;
  } catch {
    // not a kube Status
  }
  return new ApiError(res.status, msg || 'HTTP ' + res.status);
}

export async function get(path: string, signal?: AbortSignal): Promise<any> {
  const res = await fetch(path, { headers: headers(), signal, credentials: 'same-origin' });
  if (!res.ok) throw await failure(res);
  return res.json();
}

export async function post(path: string, body: unknown): Promise<any> {
  const res = await fetch(path, {
    method: 'POST',
    headers: headers({ 'Content-Type': 'application/json' }),
    body: JSON.stringify(body),
    credentials: 'same-origin',
  });
  if (!res.ok) throw await failure(res);
  return res.json();
}

// getText reads a plain-text answer (a pod's log).
export async function getText(path: string, signal?: AbortSignal): Promise<string> {
  const res = await fetch(path, { headers: headers({ Accept: '*/*' }), signal, credentials: 'same-origin' });
  if (!res.ok) throw await failure(res);
  return res.text();
}

// streamText calls onChunk with each piece of a streamed plain-text answer
// (a followed log) until it ends or signal aborts.
export async function streamText(path: string, onChunk: (s: string) => void, signal: AbortSignal) {
  const res = await fetch(path, { headers: headers({ Accept: '*/*' }), signal, credentials: 'same-origin' });
  if (!res.ok || !res.body) throw await failure(res);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    onChunk(dec.decode(value, { stream: true }));
  }
}

export function spacePath(space: string) {
  return '/spaces/' + encodeURIComponent(space);
}

export interface WhoAmI {
  username: string;
  groups: string[];
}

// whoami asks the root who the credentials are (SelfSubjectReview) in space.
export async function whoami(space: string): Promise<WhoAmI> {
  const r = await post(spacePath(space) + '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'SelfSubjectReview',
  });
  const u = r.status?.userInfo ?? {};
  return { username: u.username ?? '', groups: u.groups ?? [] };
}

// canI asks the root whether the user may do verb on resource in space
// (SelfSubjectAccessReview); refused credentials mean no.
export async function canI(space: string, verb: string, group: string, resource: string): Promise<boolean> {
  try {
    const r = await post(spacePath(space) + '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SelfSubjectAccessReview',
      spec: { resourceAttributes: { verb, group, resource } },
    });
    return !!r.status?.allowed;
  } catch (e) {
    if (e instanceof ApiError && (e.status === 401 || e.status === 403 || e.status === 404)) return false;
    throw e;
  }
}

export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface WatchHandler {
  // reset replaces everything with a list's items.
  reset(items: any[]): void;
  event(type: EventType, obj: any): void;
  error(err: Error | null): void;
}

// listWatch lists path and then watches it from the list's resourceVersion,
// for as long as signal is not aborted. A watch the server ends is resumed
// from the last resourceVersion seen; one whose history is gone (410) lists
// again. Nothing is polled: the browser waits on the watch's stream.
export async function listWatch(path: string, h: WatchHandler, signal: AbortSignal) {
  let rv = '';
  let backoff = 500;
  const sep = path.includes('?') ? '&' : '?';
  while (!signal.aborted) {
    try {
      if (!rv) {
        const list = await get(path, signal);
        rv = list.metadata?.resourceVersion ?? '';
        h.reset(list.items ?? []);
      }
      const res = await fetch(
        path + sep + 'watch=1&allowWatchBookmarks=true&resourceVersion=' + encodeURIComponent(rv),
        { headers: headers(), signal, credentials: 'same-origin' },
      );
      if (res.status === 410) {
        rv = '';
        continue;
      }
      if (!res.ok || !res.body) throw await failure(res);
      h.error(null);
      backoff = 500;
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (!line) continue;
          const ev = JSON.parse(line);
          if (ev.type === 'ERROR') {
            if (ev.object?.code === 410) rv = '';
            else throw new ApiError(ev.object?.code ?? 500, ev.object?.message ?? 'watch failed');
            break;
          }
          const next = ev.object?.metadata?.resourceVersion;
          if (next) rv = next;
          if (ev.type !== 'BOOKMARK') h.event(ev.type, ev.object);
        }
        if (!rv) break;
      }
    } catch (e) {
      if (signal.aborted) return;
      const err = e instanceof Error ? e : new Error(String(e));
      h.error(err);
      if (err instanceof ApiError && (err.status === 401 || err.status === 403 || err.status === 404)) return;
      // The stream broke (the root restarted, the network): try again after a
      // growing pause, from the last resourceVersion.
      await new Promise((r) => setTimeout(r, backoff));
      backoff = Math.min(backoff * 2, 10000);
    }
  }
}
