import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, canI, get, setToken, spacePath, WhoAmI, whoami } from './api';
import { Collection, subscribe } from './store';
import { useRoute } from './route';
import { TreePage } from './treeview';
import { DestinationPage, FeedPage, LogPage, PlacementsPage, PodsPage, StatusDetail, StatusPage } from './pages';
import './style.css';

const edge = '/apis/edge.canopy.dev/v1alpha1/';
const inventory = 'inventory';

// Fleet is what the signed-in user may see: the workload description
// spaces whose placements they may list, and the inventory if they may
// list its SyncTargets (and its Relays: the links, with their lag).
// Everything in it is watched until sign-out.
export interface Fleet {
  user: WhoAmI;
  spaces: string[];
  synctargets?: Collection;
  relays?: Collection;
  placements: Map<string, Collection>;
  statuses: Map<string, Collection>;
  slices: Map<string, Collection>;
  abort: AbortController;
}

function placementSummary(o: any): string {
  const s = o.status ?? {};
  return `matched ${s.matchedDestinations ?? 0}, synced ${s.syncedDestinations ?? 0}, failed ${s.failedDestinations ?? 0}`;
}

function syncTargetSummary(o: any): string {
  const s = o.status ?? {};
  return (s.connected ? 'connected' : 'disconnected') + (s.path ? ' at ' + s.path : '');
}

function relaySummary(o: any): string {
  const s = o.status ?? {};
  if (!s.connected) return 'disconnected';
  return s.lag ? `behind by ${s.lag.revisions} revisions since ${s.lag.since}` : 'up to date';
}

// signIn checks the credentials with the root and finds what they may read.
// hint names the spaces to try when the user may not list spaces (a
// ServiceAccount token is valid only in its own space).
async function signIn(token: string, hint: string[]): Promise<Fleet> {
  setToken(token);
  let user: WhoAmI | undefined;
  let lastErr: unknown;
  for (const s of hint) {
    try {
      user = await whoami(s);
      break;
    } catch (e) {
      lastErr = e;
    }
  }
  if (!user) {
    if (lastErr instanceof ApiError && lastErr.status === 401) throw new Error('The root refused these credentials.');
    throw lastErr instanceof Error ? lastErr : new Error('The root did not answer.');
  }
  let candidates = hint;
  try {
    const l = await get(spacePath('system') + '/apis/canopy.dev/v1alpha1/spaces');
    candidates = (l.items ?? [])
      .filter((s: any) => (s.spec?.kind ?? 'wds') === 'wds')
      .map((s: any) => s.metadata.name);
  } catch {
    // Not allowed to list spaces: look only where the user said.
  }
  const allowed = await Promise.all(candidates.map((s) => canI(s, 'list', 'edge.canopy.dev', 'edgeplacements')));
  const spaces = candidates.filter((_, i) => allowed[i]).sort();
  const abort = new AbortController();
  const fleet: Fleet = { user, spaces, placements: new Map(), statuses: new Map(), slices: new Map(), abort };
  const sig = abort.signal;
  if (await canI(inventory, 'list', 'edge.canopy.dev', 'synctargets')) {
    fleet.synctargets = new Collection(inventory, 'SyncTarget', spacePath(inventory) + edge + 'synctargets', sig, syncTargetSummary);
  }
  if (await canI(inventory, 'list', 'edge.canopy.dev', 'relays')) {
    fleet.relays = new Collection(inventory, 'Relay', spacePath(inventory) + edge + 'relays', sig, relaySummary);
  }
  for (const s of spaces) {
    fleet.placements.set(s, new Collection(s, 'EdgePlacement', spacePath(s) + edge + 'edgeplacements', sig, placementSummary));
    fleet.statuses.set(s, new Collection(s, 'CombinedStatus', spacePath(s) + edge + 'combinedstatuses', sig, (o) =>
      `${o.destinations ?? 0} destinations, ${o.failingCount ?? 0} failing`,
    ));
    fleet.slices.set(s, new Collection(s, 'SinglePlacementSlice', spacePath(s) + edge + 'singleplacementslices', sig, (o) =>
      `${o.destinationCount ?? 0} destinations`,
    ));
  }
  return fleet;
}

const tokenKey = 'canopy-console-token';
const spacesKey = 'canopy-console-spaces';

function Login(props: { onFleet: (f: Fleet) => void; error?: string }) {
  const [token, setTok] = useState('');
  const [spaces, setSpaces] = useState(sessionStorage.getItem(spacesKey) ?? 'default');
  const [error, setError] = useState(props.error ?? '');
  const [busy, setBusy] = useState(false);
  const go = async (t: string) => {
    setBusy(true);
    setError('');
    try {
      const hint = spaces.split(',').map((s) => s.trim()).filter(Boolean);
      const f = await signIn(t, hint.length ? hint : ['default']);
      sessionStorage.setItem(tokenKey, t);
      sessionStorage.setItem(spacesKey, spaces);
      props.onFleet(f);
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="login">
      <h1>Canopy console</h1>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          go(token.trim());
        }}
      >
        <label for="token">Bearer token</label>
        <input id="token" type="password" autocomplete="off" value={token} onInput={(e) => setTok((e.target as HTMLInputElement).value)} required />
        <label for="spaces">Spaces to look in, when you may not list spaces</label>
        <input id="spaces" type="text" value={spaces} onInput={(e) => setSpaces((e.target as HTMLInputElement).value)} />
        <div class="buttons">
          <button type="submit" disabled={busy}>Sign in</button>
          <button type="button" disabled={busy} onClick={() => go('')}>Use my client certificate</button>
        </div>
        {error ? <p role="alert" class="error">{error}</p> : null}
      </form>
      <p class="hint">
        The admin's token is in <code>pki/admin.token</code> of the root's data directory; <code>kubectl create token NAME</code> makes a
        ServiceAccount's. Every request the console makes is the root's kube API, as you.
      </p>
    </main>
  );
}

function App() {
  const [fleet, setFleet] = useState<Fleet | null>(null);
  const [restoring, setRestoring] = useState(sessionStorage.getItem(tokenKey) !== null);
  const [error, setError] = useState('');
  const [, setVersion] = useState(0);
  const [now, setNow] = useState(Date.now());
  const route = useRoute();

  useEffect(() => subscribe(() => setVersion((v) => v + 1)), []);
  // A clock for "seen 5 s ago"; it reads nothing from the root.
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 5000);
    return () => clearInterval(t);
  }, []);
  useEffect(() => {
    const t = sessionStorage.getItem(tokenKey);
    if (t === null) return;
    const hint = (sessionStorage.getItem(spacesKey) ?? 'default').split(',').map((s) => s.trim()).filter(Boolean);
    signIn(t, hint)
      .then(setFleet)
      .catch((e) => setError(e instanceof Error ? e.message : String(e)))
      .finally(() => setRestoring(false));
  }, []);

  if (restoring) return <p class="loading">Signing in…</p>;
  if (!fleet) return <Login onFleet={setFleet} error={error} />;

  const signOut = () => {
    fleet.abort.abort();
    sessionStorage.removeItem(tokenKey);
    setToken('');
    setFleet(null);
  };
  const page = route[0] ?? 'tree';
  let body;
  switch (page) {
    case 'placements':
      body = <PlacementsPage fleet={fleet} />;
      break;
    case 'status':
      body = route.length >= 4 ? <StatusDetail fleet={fleet} space={route[1]} ns={route[2]} name={route[3]} /> : <StatusPage fleet={fleet} />;
      break;
    case 'destination':
      if (route[2] === 'pods') body = <PodsPage name={route[1]} />;
      else if (route[2] === 'logs') body = <LogPage name={route[1]} ns={route[3]} pod={route[4]} />;
      else body = <DestinationPage fleet={fleet} name={route[1]} now={now} />;
      break;
    case 'feed':
      body = <FeedPage />;
      break;
    default:
      body = <TreePage synctargets={fleet.synctargets} relays={fleet.relays} now={now} />;
  }
  const nav = [
    ['tree', 'Tree'],
    ['placements', 'Placements'],
    ['status', 'Combined status'],
    ['feed', 'Live feed'],
  ];
  return (
    <>
      <header>
        <span class="brand">Canopy</span>
        <nav aria-label="Pages">
          {nav.map(([k, label]) => (
            <a href={'#/' + k} aria-current={page === k || (k === 'tree' && !route.length) ? 'page' : undefined}>
              {label}
            </a>
          ))}
        </nav>
        <span class="user" data-testid="user">
          {fleet.user.username}
        </span>
        <span class="spaces" data-testid="spaces">
          spaces: {fleet.spaces.length ? fleet.spaces.join(', ') : 'none'}
        </span>
        <button type="button" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main>{body}</main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
