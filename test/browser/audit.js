// The accessibility audit of browser.Accessibility: it returns a list of
// problems (strings), empty when the page passes.
(() => {
  const problems = [];
  const visible = (el) => {
    const r = el.getBoundingClientRect();
    const cs = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && cs.visibility !== 'hidden' && cs.display !== 'none';
  };
  const text = (el) => (el ? el.textContent || '' : '').replace(/\s+/g, ' ').trim();
  const accessibleName = (el) => {
    const label = el.getAttribute('aria-label');
    if (label && label.trim()) return label.trim();
    const by = el.getAttribute('aria-labelledby');
    if (by) return by.split(/\s+/).map((id) => text(document.getElementById(id))).join(' ').trim();
    if (el.labels && el.labels.length) return [...el.labels].map(text).join(' ').trim();
    const role = el.getAttribute('role');
    if (['A', 'BUTTON', 'OPTION', 'SUMMARY'].includes(el.tagName) || role === 'treeitem' || role === 'tab') return text(el);
    return (el.getAttribute('title') || '').trim();
  };
  const describe = (el) => el.outerHTML.slice(0, 160);
  const controls = 'a[href], button, input, select, textarea, [role=tree], [role=treeitem], [role=button], [tabindex]';
  for (const el of document.querySelectorAll(controls)) {
    if (el.type === 'hidden' || !visible(el)) continue;
    if (!accessibleName(el)) problems.push('no accessible name: ' + describe(el));
  }

  const parse = (c) => {
    const m = /rgba?\(([^)]+)\)/.exec(c);
    if (!m) return null;
    const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const luminance = (rgb) => {
    const f = (v) => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    };
    return 0.2126 * f(rgb[0]) + 0.7152 * f(rgb[1]) + 0.0722 * f(rgb[2]);
  };
  const over = (top, bottom) => bottom.map((v, i) => top[i] * top[3] + v * (1 - top[3]));
  // background composites the backgrounds from the element up to the first
  // opaque one, over white.
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) {
        layers.push(c);
        if (c[3] >= 1) break;
      }
    }
    let out = [255, 255, 255];
    for (const c of layers.reverse()) out = over(c, out);
    return out;
  };
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const seen = new Set();
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!el || seen.has(el) || !n.textContent.trim() || !visible(el)) continue;
    if (el.closest('[aria-hidden=true]')) continue;
    seen.add(el);
    const cs = getComputedStyle(el);
    const bg = background(el);
    const fgc = parse(cs.color);
    if (!fgc) continue;
    const fg = over(fgc, bg);
    const l1 = luminance(fg), l2 = luminance(bg);
    const ratio = (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05);
    if (ratio < 4.5) {
      problems.push(`contrast ${ratio.toFixed(2)}:1 < 4.5:1 for "${n.textContent.trim().slice(0, 40)}" (${cs.color} on rgb(${bg.map(Math.round).join(', ')})): ` + describe(el));
    }
  }
  return problems;
})()
