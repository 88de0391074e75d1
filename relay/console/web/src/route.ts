// Pages are addressed by the URL's fragment (#/tree, #/destination/NAME),
// so the root serves one page and a reload stays where it was.

import { useEffect, useState } from 'preact/hooks';

export function navigate(hash: string) {
  location.hash = hash;
}

export function useRoute(): string[] {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const f = () => setHash(location.hash);
    addEventListener('hashchange', f);
    return () => removeEventListener('hashchange', f);
  }, []);
  return hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
}
