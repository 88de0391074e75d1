// The tree page: a virtualized ARIA tree. Only the rows in view (and a
// margin) are in the DOM, so 10 000 destinations scroll and search as fast
// as 10. Focus stays on the tree; the active row is its
// aria-activedescendant; arrows move, Enter and Space expand or collapse a
// relay (or open a destination), Right and Left open and close.

import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { ago, buildTree, flatten, lagText, Row, state, TreeNode } from './tree';
import { Collection } from './store';
import { navigate } from './route';

const rowHeight = 30;
const margin = 10;

// expanded and the query outlive the page, so coming back finds the tree as
// it was left.
const expanded = new Set<string>();
let expandedInit = false;
let savedQuery = '';

const domIds = new Map<string, string>();
function domId(id: string): string {
  let d = domIds.get(id);
  if (!d) {
    d = 'tn-' + domIds.size;
    domIds.set(id, d);
  }
  return d;
}

export function TreePage(props: { synctargets?: Collection; relays?: Collection; now: number }) {
  const { synctargets, relays, now } = props;
  const tops = useMemo(() => buildTree(synctargets?.list() ?? []), [synctargets?.version]);
  if (!expandedInit && tops.length) {
    expandedInit = true;
    for (const t of tops) if (t.kind === 'root') expanded.add(t.id);
  }
  const [query, setQuery] = useState(savedQuery);
  const [tick, setTick] = useState(0);
  const rows = useMemo(() => flatten(tops, expanded, query), [tops, query, tick]);
  const [active, setActive] = useState<string>('');
  const [scrollTop, setScrollTop] = useState(0);
  const box = useRef<HTMLDivElement>(null);
  const [height, setHeight] = useState(600);

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const ro = new ResizeObserver(() => setHeight(el.clientHeight));
    ro.observe(el);
    return () => ro.disconnect();
  }, []);

  if (!synctargets) {
    return (
      <section aria-labelledby="tree-h">
        <h1 id="tree-h">Tree</h1>
        <p>You may not read the inventory space, where the tree is.</p>
      </section>
    );
  }

  let activeIndex = rows.findIndex((r) => r.node.id === active);
  if (activeIndex < 0 && rows.length) activeIndex = 0;
  const activeRow = rows[activeIndex];

  const toggle = (r: Row) => {
    if (!r.hasChildren) return;
    if (query.trim()) return; // a search shows every match open
    if (expanded.has(r.node.id)) expanded.delete(r.node.id);
    else expanded.add(r.node.id);
    setTick((t) => t + 1);
  };
  const open = (r: Row) => {
    if (r.node.kind === 'destination') navigate('#/destination/' + encodeURIComponent(r.node.name));
    else toggle(r);
  };
  const moveTo = (i: number) => {
    if (!rows.length) return;
    i = Math.max(0, Math.min(rows.length - 1, i));
    setActive(rows[i].node.id);
    const el = box.current;
    if (el) {
      const top = i * rowHeight;
      if (top < el.scrollTop) el.scrollTop = top;
      else if (top + rowHeight > el.scrollTop + el.clientHeight) el.scrollTop = top + rowHeight - el.clientHeight;
    }
  };
  const onKey = (e: KeyboardEvent) => {
    const r = activeRow;
    switch (e.key) {
      case 'ArrowDown':
        moveTo(activeIndex + 1);
        break;
      case 'ArrowUp':
        moveTo(activeIndex - 1);
        break;
      case 'Home':
        moveTo(0);
        break;
      case 'End':
        moveTo(rows.length - 1);
        break;
      case 'PageDown':
        moveTo(activeIndex + Math.floor(height / rowHeight));
        break;
      case 'PageUp':
        moveTo(activeIndex - Math.floor(height / rowHeight));
        break;
      case 'ArrowRight':
        if (!r) return;
        if (r.hasChildren && !r.expanded) toggle(r);
        else if (r.expanded) moveTo(activeIndex + 1);
        break;
      case 'ArrowLeft':
        if (!r) return;
        if (r.expanded) toggle(r);
        else if (r.node.parent) moveTo(rows.findIndex((x) => x.node.id === r.node.parent!.id));
        break;
      case 'Enter':
      case ' ':
        if (r) open(r);
        break;
      default:
        return;
    }
    e.preventDefault();
  };

  const first = Math.max(0, Math.floor(scrollTop / rowHeight) - margin);
  const last = Math.min(rows.length, Math.ceil((scrollTop + height) / rowHeight) + margin);
  const total = tops.reduce((n, t) => n + t.total, 0);
  const up = tops.reduce((n, t) => n + t.connected, 0);
  const behind = relays ? relays.list().filter((r) => r.status?.lag).length : 0;

  return (
    <section aria-labelledby="tree-h" class="tree-page">
      <h1 id="tree-h">Tree</h1>
      <p class="summary" data-testid="tree-summary">
        {total} destinations, {up} connected, {total - up} disconnected
        {relays ? `, ${behind} relay${behind === 1 ? '' : 's'} behind` : null}
        {synctargets.error ? <span class="warn"> · watch: {synctargets.error}</span> : null}
      </p>
      <div class="toolbar">
        <label for="tree-search">Search</label>
        <input
          id="tree-search"
          type="search"
          value={query}
          placeholder="relay or destination name"
          onInput={(e) => {
            savedQuery = (e.target as HTMLInputElement).value;
            setQuery(savedQuery);
          }}
        />
        <button type="button" onClick={() => { for (const r of rows) if (r.hasChildren) expanded.add(r.node.id); setTick((t) => t + 1); }}>
          Expand all shown
        </button>
        <button type="button" onClick={() => { expanded.clear(); for (const t of tops) if (t.kind === 'root') expanded.add(t.id); setTick((t) => t + 1); }}>
          Collapse all
        </button>
      </div>
      <div
        ref={box}
        class="tree"
        role="tree"
        aria-label="Relays and destinations"
        tabIndex={0}
        aria-activedescendant={activeRow ? domId(activeRow.node.id) : undefined}
        onKeyDown={onKey}
        onScroll={(e) => setScrollTop((e.target as HTMLDivElement).scrollTop)}
      >
        <div style={{ height: rows.length * rowHeight + 'px', position: 'relative' }} role="presentation">
          {rows.slice(first, last).map((r, i) => (
            <TreeRow
              key={r.node.id}
              row={r}
              top={(first + i) * rowHeight}
              active={r === activeRow}
              relay={r.node.kind === 'root' || r.node.kind === 'group' ? undefined : relays?.items.get(r.node.name)}
              now={now}
              onClick={() => {
                setActive(r.node.id);
                open(r);
              }}
            />
          ))}
        </div>
      </div>
    </section>
  );
}

function TreeRow(props: { row: Row; top: number; active: boolean; relay?: any; now: number; onClick: () => void }) {
  const { row, top, active, relay, now } = props;
  const n: TreeNode = row.node;
  const st = state(n);
  const stateText = st === 'partial' ? `${n.connected}/${n.total} connected` : st === 'empty' ? 'no destinations' : st;
  const lag = relay?.status?.connected ? relay.status.lag : undefined;
  return (
    <div
      id={domId(n.id)}
      role="treeitem"
      aria-level={n.depth + 1}
      aria-setsize={row.setsize}
      aria-posinset={row.posinset}
      aria-expanded={row.hasChildren ? row.expanded : undefined}
      aria-selected={active}
      class={'row ' + (active ? 'active' : '')}
      style={{ top: top + 'px', height: rowHeight + 'px', paddingLeft: 8 + n.depth * 20 + 'px' }}
      data-node={n.name}
      data-kind={n.kind}
      data-state={st}
      data-lag={lag ? lag.revisions : undefined}
      onClick={props.onClick}
    >
      <span class="twisty" aria-hidden="true">{row.hasChildren ? (row.expanded ? '▾' : '▸') : '·'}</span>
      <span class="name">{n.name}</span>
      <span class={'badge ' + st}>{stateText}</span>
      {lag ? <span class="badge behind">{lagText(lag)}</span> : null}
      {n.kind !== 'destination' && n.total > 0 ? (
        <span class="meta">{n.total} destination{n.total === 1 ? '' : 's'}</span>
      ) : null}
      <span class="meta">seen {ago(n.lastSeen, now)}</span>
    </div>
  );
}

