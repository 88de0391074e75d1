// The relay tree as the inventory shows it: every SyncTarget's status.path
// (root/region-a/edge-1) names the relays above its destination, so the
// tree of relays is the union of the paths. A relay's state is what its
// destinations show: a SyncTarget is connected when every link on its path
// is up, so a relay none of whose destinations is connected is down, or
// cut off above.

export interface TreeNode {
  id: string;
  name: string;
  // destination: a SyncTarget (possibly also the edge relay serving it).
  kind: 'root' | 'relay' | 'destination' | 'group';
  depth: number;
  children: TreeNode[];
  parent?: TreeNode;
  st?: any;
  total: number;
  connected: number;
  lastSeen: number; // ms since the epoch, 0: never
}

export const noPath = '(not in the tree)';

function node(id: string, name: string, kind: TreeNode['kind'], parent?: TreeNode): TreeNode {
  const n: TreeNode = { id, name, kind, depth: parent ? parent.depth + 1 : 0, children: [], parent, total: 0, connected: 0, lastSeen: 0 };
  parent?.children.push(n);
  return n;
}

export function buildTree(synctargets: any[]): TreeNode[] {
  const byId = new Map<string, TreeNode>();
  const tops: TreeNode[] = [];
  let unplaced: TreeNode | undefined;
  const child = (parent: TreeNode | undefined, name: string, kind: TreeNode['kind']) => {
    const id = (parent ? parent.id + '/' : '') + name;
    let n = byId.get(id);
    if (!n) {
      n = node(id, name, kind, parent);
      byId.set(id, n);
      if (!parent) tops.push(n);
    }
    return n;
  };
  for (const st of synctargets) {
    const name: string = st.metadata?.name ?? '';
    const path: string = st.status?.path ?? '';
    let leaf: TreeNode;
    if (!path) {
      unplaced ??= node('(none)', noPath, 'group');
      leaf = node('(none)/' + name, name, 'destination', unplaced);
    } else {
      const segs = path.split('/');
      let p = child(undefined, segs[0], 'root');
      for (let i = 1; i < segs.length - 1; i++) p = child(p, segs[i], 'relay');
      const last = segs[segs.length - 1];
      if (segs.length > 1 && last !== name) p = child(p, last, 'relay');
      leaf = child(p, name, 'destination');
    }
    leaf.st = st;
  }
  if (unplaced) tops.push(unplaced);
  const sum = (n: TreeNode) => {
    if (n.st) {
      n.total = 1;
      n.connected = n.st.status?.connected ? 1 : 0;
      n.lastSeen = Date.parse(n.st.status?.lastSeen ?? '') || 0;
    }
    n.children.sort((a, b) => a.name.localeCompare(b.name, 'en', { numeric: true }));
    for (const c of n.children) {
      sum(c);
      n.total += c.total;
      n.connected += c.connected;
      n.lastSeen = Math.max(n.lastSeen, c.lastSeen);
    }
  };
  tops.forEach(sum);
  return tops;
}

// state is how a node shows: connected (every destination below is),
// disconnected (none is), partial otherwise.
export function state(n: TreeNode): 'connected' | 'disconnected' | 'partial' | 'empty' {
  if (n.total === 0) return 'empty';
  if (n.connected === n.total) return 'connected';
  if (n.connected === 0) return 'disconnected';
  return 'partial';
}

export interface Row {
  node: TreeNode;
  expanded: boolean;
  hasChildren: boolean;
  posinset: number;
  setsize: number;
}

// flatten lists the rows to show: the children of expanded nodes, or, with
// a query, every node whose name holds it and the nodes above them.
export function flatten(tops: TreeNode[], expanded: Set<string>, query: string): Row[] {
  const q = query.trim().toLowerCase();
  const keep = new Set<string>();
  if (q) {
    const mark = (n: TreeNode): boolean => {
      let any = n.name.toLowerCase().includes(q);
      for (const c of n.children) if (mark(c)) any = true;
      if (any) keep.add(n.id);
      return any;
    };
    tops.forEach(mark);
  }
  const rows: Row[] = [];
  const walk = (list: TreeNode[]) => {
    const shown = q ? list.filter((n) => keep.has(n.id)) : list;
    shown.forEach((n, i) => {
      const open = q ? n.children.some((c) => keep.has(c.id)) : expanded.has(n.id);
      rows.push({ node: n, expanded: open, hasChildren: n.children.length > 0, posinset: i + 1, setsize: shown.length });
      if (open) walk(n.children);
    });
  };
  walk(tops);
  return rows;
}

// ago says how long ago ms was, for people.
export function ago(ms: number, now: number): string {
  if (!ms) return 'never';
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return s + ' s ago';
  if (s < 3600) return Math.floor(s / 60) + ' min ago';
  if (s < 86400) return Math.floor(s / 3600) + ' h ago';
  return Math.floor(s / 86400) + ' d ago';
}

// lagText says how far a relay trails its parent (a Relay's status.lag),
// as of now (the page's clock may be a tick behind the event that drew
// the row).
export function lagText(lag: { revisions: number; since: string }): string {
  const secs = Math.max(0, Math.round((Date.now() - Date.parse(lag.since)) / 1000));
  return `behind ${lag.revisions} rev, ${secs} s`;
}
