import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import type { Fleet } from './main';
import { Collection, feed } from './store';
import { getText, listWatch, streamText } from './api';
import { ago, lagText } from './tree';

function condition(o: any, type: string): any {
  return (o.status?.conditions ?? []).find((c: any) => c.type === type);
}

function CondCell(props: { c: any }) {
  const c = props.c;
  if (!c) return <td>—</td>;
  const cls = c.status === 'True' ? 'ok' : c.status === 'False' ? 'bad' : '';
  return (
    <td class={cls} title={c.message ?? ''}>
      {c.status}
      {c.reason ? ' (' + c.reason + ')' : ''}
    </td>
  );
}

function WatchError(props: { c?: Collection }) {
  return props.c?.error ? <p class="warn">Watch: {props.c.error}</p> : null;
}

function byName(a: any, b: any) {
  const x = (a.metadata?.namespace ?? '') + '/' + a.metadata?.name;
  const y = (b.metadata?.namespace ?? '') + '/' + b.metadata?.name;
  return x < y ? -1 : x > y ? 1 : 0;
}

function objRef(o: any): string {
  if (!o) return '';
  return (o.group ? o.resource + '.' + o.group : o.resource) + ' ' + (o.namespace ? o.namespace + '/' : '') + o.name;
}

export function PlacementsPage(props: { fleet: Fleet }) {
  const { fleet } = props;
  const [open, setOpen] = useState<string>('');
  if (!fleet.spaces.length) {
    return (
      <section aria-labelledby="pl-h">
        <h1 id="pl-h">Placements</h1>
        <p>You may not list placements in any space.</p>
      </section>
    );
  }
  return (
    <section aria-labelledby="pl-h">
      <h1 id="pl-h">Placements</h1>
      {fleet.spaces.map((space) => {
        const c = fleet.placements.get(space)!;
        const statuses = fleet.statuses.get(space)!.list();
        return (
          <section aria-labelledby={'pl-' + space}>
            <h2 id={'pl-' + space}>Space {space}</h2>
            <WatchError c={c} />
            <table data-testid={'placements-' + space}>
              <caption class="sr-only">EdgePlacements of space {space}</caption>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Matched</th>
                  <th scope="col">Synced</th>
                  <th scope="col">Failed</th>
                  <th scope="col">Conflicts</th>
                  <th scope="col">Synced condition</th>
                  <th scope="col">Ready condition</th>
                  <th scope="col">Details</th>
                </tr>
              </thead>
              <tbody>
                {c.list().sort(byName).map((p) => {
                  const s = p.status ?? {};
                  const id = space + '/' + p.metadata.name;
                  const failing = statuses.filter((cs) => cs.placement === p.metadata.name && (cs.failingCount ?? 0) > 0);
                  return [
                    <tr data-placement={p.metadata.name}>
                      <th scope="row">{p.metadata.name}</th>
                      <td data-testid="matched">{s.matchedDestinations ?? 0}</td>
                      <td>{s.syncedDestinations ?? 0}{s.syncedRevision ? ' at ' + s.syncedRevision : ''}</td>
                      <td class={(s.failedDestinations ?? 0) > 0 ? 'bad' : ''}>{s.failedDestinations ?? 0}</td>
                      <td class={(s.conflictCount ?? 0) > 0 ? 'bad' : ''}>{s.conflictCount ?? 0}</td>
                      <CondCell c={condition(p, 'Synced')} />
                      <CondCell c={condition(p, 'Ready')} />
                      <td>
                        <button type="button" aria-expanded={open === id} aria-label={'Details of ' + p.metadata.name} onClick={() => setOpen(open === id ? '' : id)}>
                          {open === id ? 'Hide' : 'Show'}
                        </button>
                      </td>
                    </tr>,
                    open === id ? (
                      <tr class="details">
                        <td colSpan={8}>
                          <PlacementDetails p={p} failing={failing} space={space} />
                        </td>
                      </tr>
                    ) : null,
                  ];
                })}
              </tbody>
            </table>
          </section>
        );
      })}
    </section>
  );
}

function PlacementDetails(props: { p: any; failing: any[]; space: string }) {
  const { p, failing, space } = props;
  const s = p.status ?? {};
  return (
    <div>
      <h3>Conditions</h3>
      <ul>
        {(s.conditions ?? []).map((c: any) => (
          <li>
            <strong>{c.type}</strong> {c.status} {c.reason ? '(' + c.reason + ')' : ''} {c.message}
          </li>
        ))}
      </ul>
      <h3>Conflicts</h3>
      {(s.conflicts ?? []).length ? (
        <table>
          <thead>
            <tr>
              <th scope="col">Object</th>
              <th scope="col">Destination</th>
              <th scope="col">Placements</th>
              <th scope="col">Winner</th>
              <th scope="col">Why</th>
            </tr>
          </thead>
          <tbody>
            {s.conflicts.map((c: any) => (
              <tr>
                <td>{objRef(c.object)}</td>
                <td><a href={'#/destination/' + encodeURIComponent(c.destination)}>{c.destination}</a></td>
                <td>{(c.placements ?? []).join(', ')}</td>
                <td>{c.winner}</td>
                <td>{c.message}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <p>None.</p>
      )}
      <h3>Failing destinations</h3>
      {failing.length ? (
        <ul>
          {failing.map((cs) =>
            (cs.failing ?? []).map((f: any) => (
              <li>
                <a href={'#/destination/' + encodeURIComponent(f.name)}>{f.name}</a>: {f.reason} (
                <a href={`#/status/${encodeURIComponent(space)}/${encodeURIComponent(cs.metadata.namespace)}/${encodeURIComponent(cs.metadata.name)}`}>
                  {objRef(cs.object)}
                </a>
                )
              </li>
            )),
          )}
        </ul>
      ) : (
        <p>None reported.</p>
      )}
    </div>
  );
}

export function StatusPage(props: { fleet: Fleet }) {
  const { fleet } = props;
  return (
    <section aria-labelledby="st-h">
      <h1 id="st-h">Combined status</h1>
      {!fleet.spaces.length ? <p>You may not read any workload description space.</p> : null}
      {fleet.spaces.map((space) => {
        const c = fleet.statuses.get(space)!;
        const items = c.list().sort(byName);
        return (
          <section aria-labelledby={'st-' + space}>
            <h2 id={'st-' + space}>Space {space}</h2>
            <WatchError c={c} />
            {items.length ? (
              <table>
                <thead>
                  <tr>
                    <th scope="col">Object</th>
                    <th scope="col">Placement</th>
                    <th scope="col">Destinations</th>
                    <th scope="col">Failing</th>
                    <th scope="col">Revision</th>
                  </tr>
                </thead>
                <tbody>
                  {items.map((cs) => (
                    <tr>
                      <th scope="row">
                        <a href={`#/status/${encodeURIComponent(space)}/${encodeURIComponent(cs.metadata.namespace)}/${encodeURIComponent(cs.metadata.name)}`}>
                          {objRef(cs.object)}
                        </a>
                      </th>
                      <td>{cs.placement}</td>
                      <td>{cs.destinations ?? 0}</td>
                      <td class={(cs.failingCount ?? 0) > 0 ? 'bad' : ''}>{cs.failingCount ?? 0}</td>
                      <td>{cs.observedRevision}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            ) : (
              <p>No CombinedStatus yet.</p>
            )}
          </section>
        );
      })}
    </section>
  );
}

function cell(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

export function StatusDetail(props: { fleet: Fleet; space: string; ns: string; name: string }) {
  const { fleet, space, ns, name } = props;
  const cs = fleet.statuses.get(space)?.items.get(ns + '/' + name);
  if (!cs) {
    return (
      <section aria-labelledby="sd-h">
        <h1 id="sd-h">CombinedStatus {name}</h1>
        <p>Not found in space {space} (or not readable).</p>
      </section>
    );
  }
  return (
    <section aria-labelledby="sd-h">
      <h1 id="sd-h">{objRef(cs.object)}</h1>
      <p>
        Placement <strong>{cs.placement}</strong> in space {space}: {cs.destinations ?? 0} destinations reported, {cs.failingCount ?? 0} failing, at
        revision {cs.observedRevision ?? '—'}.
      </p>
      {(cs.results ?? []).map((r: any) => (
        <table data-testid={'result-' + r.name}>
          <caption>
            {r.name}
            {r.error ? ': ' + r.error : ''}
            {r.omittedRows ? ` (${r.omittedRows} rows omitted)` : ''}
          </caption>
          <thead>
            <tr>
              {(r.columnNames ?? []).map((c: string) => (
                <th scope="col">{c}</th>
              ))}
            </tr>
          </thead>
          <tbody>
            {(r.rows ?? []).map((row: any) => (
              <tr>
                {(row.columns ?? []).map((v: unknown) => (
                  <td>{cell(v)}</td>
                ))}
              </tr>
            ))}
            {r.overflow ? (
              <tr class="overflow">
                {(r.overflow.columns ?? []).map((v: unknown) => (
                  <td>{cell(v)}</td>
                ))}
              </tr>
            ) : null}
          </tbody>
        </table>
      ))}
      <h2>Failing destinations</h2>
      {(cs.failing ?? []).length ? (
        <ul>
          {cs.failing.map((f: any) => (
            <li>
              <a href={'#/destination/' + encodeURIComponent(f.name)}>{f.name}</a>: {f.reason}
            </li>
          ))}
        </ul>
      ) : (
        <p>None.</p>
      )}
    </section>
  );
}

export function DestinationPage(props: { fleet: Fleet; name: string; now: number }) {
  const { fleet, name, now } = props;
  const st = fleet.synctargets?.items.get(name);
  const relay = fleet.relays?.items.get(name)?.status;
  const placed: Array<{ space: string; placement: any; location: string }> = [];
  for (const space of fleet.spaces) {
    const pls = fleet.placements.get(space)!;
    for (const sl of fleet.slices.get(space)!.list()) {
      const d = (sl.destinations ?? []).find((x: any) => x.syncTargetName === name);
      if (d) placed.push({ space, placement: pls.items.get(sl.edgePlacement) ?? { metadata: { name: sl.edgePlacement } }, location: d.locationName });
    }
  }
  const s = st?.status ?? {};
  const labels = Object.entries(st?.metadata?.labels ?? {});
  return (
    <section aria-labelledby="d-h">
      <h1 id="d-h">Destination {name}</h1>
      {st ? (
        <dl class="facts">
          <dt>Path</dt>
          <dd>{s.path || 'not in the tree'}</dd>
          <dt>Connected</dt>
          <dd class={s.connected ? 'ok' : 'bad'} data-testid="connected">{s.connected ? 'yes' : 'no'}</dd>
          <dt>Last seen</dt>
          <dd>{s.lastSeen ? ago(Date.parse(s.lastSeen), now) + ' (' + s.lastSeen + ')' : 'never'}</dd>
          {relay ? (
            <>
              <dt>Its relay's link</dt>
              <dd class={relay.connected && !relay.lag ? 'ok' : 'bad'} data-testid="link">
                {!relay.connected ? 'down' : relay.lag ? lagText(relay.lag) + ' (since ' + relay.lag.since + ')' : 'up to date'}
              </dd>
            </>
          ) : null}
          <dt>Labels</dt>
          <dd>{labels.length ? labels.map(([k, v]) => <code class="label">{k}={String(v)}</code>) : 'none'}</dd>
        </dl>
      ) : (
        <p>No SyncTarget of this name that you may read.</p>
      )}
      <p>
        <a href={'#/destination/' + encodeURIComponent(name) + '/pods'}>Pods and logs of {name}</a> (through the root's destination proxy)
      </p>
      <h2>Placed here</h2>
      {placed.length ? (
        <table>
          <thead>
            <tr>
              <th scope="col">Space</th>
              <th scope="col">Placement</th>
              <th scope="col">Location</th>
              <th scope="col">Synced</th>
              <th scope="col">Ready</th>
            </tr>
          </thead>
          <tbody>
            {placed.map((x) => (
              <tr>
                <td>{x.space}</td>
                <th scope="row">{x.placement.metadata.name}</th>
                <td>{x.location}</td>
                <CondCell c={condition(x.placement, 'Synced')} />
                <CondCell c={condition(x.placement, 'Ready')} />
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <p>No placement you may read selects it.</p>
      )}
    </section>
  );
}

function destinationPath(name: string) {
  return '/destinations/' + encodeURIComponent(name);
}

export function PodsPage(props: { name: string }) {
  const { name } = props;
  const [pods, setPods] = useState<Map<string, any>>(new Map());
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const ab = new AbortController();
    let m = new Map<string, any>();
    const k = (o: any) => o.metadata.namespace + '/' + o.metadata.name;
    listWatch(
      destinationPath(name) + '/api/v1/pods',
      {
        reset: (items) => {
          m = new Map(items.map((o) => [k(o), o]));
          setPods(new Map(m));
        },
        event: (type, o) => {
          if (type === 'DELETED') m.delete(k(o));
          else m.set(k(o), o);
          setPods(new Map(m));
        },
        error: (e) => setError(e ? e.message : null),
      },
      ab.signal,
    );
    return () => ab.abort();
  }, [name]);
  const list = [...pods.values()].sort(byName);
  return (
    <section aria-labelledby="p-h">
      <h1 id="p-h">Pods of {name}</h1>
      <p>
        <a href={'#/destination/' + encodeURIComponent(name)}>Back to {name}</a>
      </p>
      {error ? <p class="warn">{error}</p> : null}
      <table>
        <thead>
          <tr>
            <th scope="col">Namespace</th>
            <th scope="col">Name</th>
            <th scope="col">Phase</th>
            <th scope="col">Logs</th>
          </tr>
        </thead>
        <tbody>
          {list.map((p) => (
            <tr>
              <td>{p.metadata.namespace}</td>
              <th scope="row">{p.metadata.name}</th>
              <td>{p.status?.phase}</td>
              <td>
                <a href={`#/destination/${encodeURIComponent(name)}/logs/${encodeURIComponent(p.metadata.namespace)}/${encodeURIComponent(p.metadata.name)}`}>
                  Logs of {p.metadata.name}
                </a>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

export function LogPage(props: { name: string; ns: string; pod: string }) {
  const { name, ns, pod } = props;
  const [text, setText] = useState('');
  const [error, setError] = useState('');
  const [follow, setFollow] = useState(false);
  const pre = useRef<HTMLPreElement>(null);
  const path = `${destinationPath(name)}/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(pod)}/log?tailLines=500`;
  useEffect(() => {
    const ab = new AbortController();
    setError('');
    if (follow) {
      setText('');
      streamText(path + '&follow=true', (s) => setText((t) => (t + s).slice(-200000)), ab.signal).catch((e) => {
        if (!ab.signal.aborted) setError(String(e.message ?? e));
      });
    } else {
      getText(path, ab.signal).then(setText, (e) => !ab.signal.aborted && setError(String(e.message ?? e)));
    }
    return () => ab.abort();
  }, [path, follow]);
  useEffect(() => {
    if (pre.current) pre.current.scrollTop = pre.current.scrollHeight;
  }, [text]);
  return (
    <section aria-labelledby="l-h">
      <h1 id="l-h">
        Logs of {ns}/{pod} on {name}
      </h1>
      <p>
        <a href={'#/destination/' + encodeURIComponent(name) + '/pods'}>Back to the pods of {name}</a>
      </p>
      <label>
        <input type="checkbox" checked={follow} onChange={(e) => setFollow((e.target as HTMLInputElement).checked)} /> Follow
      </label>
      {error ? <p class="warn">{error}</p> : null}
      <pre ref={pre} class="log" tabIndex={0} aria-label={'Log of ' + pod}>
        {text}
      </pre>
    </section>
  );
}

export function FeedPage() {
  const [kind, setKind] = useState('');
  const kinds = useMemo(() => ['SyncTarget', 'Relay', 'EdgePlacement', 'CombinedStatus', 'SinglePlacementSlice'], []);
  const shown = feed.filter((e) => !kind || e.kind === kind).slice(0, 200);
  return (
    <section aria-labelledby="f-h">
      <h1 id="f-h">Live feed</h1>
      <label for="feed-kind">Kind</label>{' '}
      <select id="feed-kind" value={kind} onChange={(e) => setKind((e.target as HTMLSelectElement).value)}>
        <option value="">every kind</option>
        {kinds.map((k) => (
          <option value={k}>{k}</option>
        ))}
      </select>
      <table role="log" aria-label="Changes, newest first">
        <thead>
          <tr>
            <th scope="col">Time</th>
            <th scope="col">Space</th>
            <th scope="col">Kind</th>
            <th scope="col">Change</th>
            <th scope="col">Name</th>
            <th scope="col">Now</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((e) => (
            <tr key={e.seq} data-feed-kind={e.kind} data-feed-name={e.name}>
              <td>{e.time.toLocaleTimeString()}</td>
              <td>{e.space}</td>
              <td>{e.kind}</td>
              <td>{e.type.toLowerCase()}</td>
              <td>{e.name}</td>
              <td>{e.summary}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {!shown.length ? <p>No change since you signed in.</p> : null}
    </section>
  );
}
