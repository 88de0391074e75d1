import { defineConfig } from 'vite';

// The console is served by the root at /console/ (relay/console embeds
// ../dist): no CDN, no external fonts, one script and one stylesheet.
export default defineConfig({
  base: '/console/',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: '../dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    sourcemap: false,
    modulePreload: { polyfill: false },
  },
});
