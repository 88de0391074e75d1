// What the console holds: one Collection per watched resource, the feed of
// changes, and a signal that something changed (rendering follows it at
// most once per animation frame, so a burst of events costs one render).

import { EventType, listWatch } from './api';

let listeners: Array<() => void> = [];
let scheduled = false;

export function subscribe(f: () => void): () => void {
  listeners.push(f);
  return () => {
    listeners = listeners.filter((g) => g !== f);
  };
}

export function changed() {
  if (scheduled) return;
  scheduled = true;
  requestAnimationFrame(() => {
    scheduled = false;
    for (const f of listeners) f();
  });
}

export interface FeedEntry {
  seq: number;
  time: Date;
  space: string;
  kind: string;
  type: EventType;
  name: string;
  summary: string;
}

const feedLimit = 500;
export const feed: FeedEntry[] = [];
let feedSeq = 0;

function key(o: any): string {
  const m = o.metadata ?? {};
  return (m.namespace ? m.namespace + '/' : '') + m.name;
}

// Collection is one resource of one space, listed and then watched.
export class Collection {
  items = new Map<string, any>();
  version = 0;
  loaded = false;
  error: string | null = null;

  constructor(
    public space: string,
    public kind: string,
    path: string,
    signal: AbortSignal,
    private summarize: (o: any) => string = () => '',
  ) {
    listWatch(
      path,
      {
        reset: (items) => {
          this.items = new Map(items.map((o) => [key(o), o]));
          this.loaded = true;
          this.bump();
        },
        event: (type, obj) => {
          const k = key(obj);
          if (type === 'DELETED') this.items.delete(k);
          else this.items.set(k, obj);
          feed.unshift({
            seq: ++feedSeq,
            time: new Date(),
            space: this.space,
            kind: this.kind,
            type,
            name: k,
            summary: type === 'DELETED' ? '' : this.summarize(obj),
          });
          if (feed.length > feedLimit) feed.length = feedLimit;
          this.bump();
        },
        error: (err) => {
          const msg = err ? err.message : null;
          if (msg !== this.error) {
            this.error = msg;
            this.bump();
          }
        },
      },
      signal,
    );
  }

  private bump() {
    this.version++;
    changed();
  }

  list(): any[] {
    return [...this.items.values()];
  }
}
