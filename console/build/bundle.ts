import { createHash } from 'node:crypto';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

import { build } from 'esbuild';

import { iconPng } from './icons.js';

/**
 * Builds the console into dist/app: index.html and assets/<name>-<hash>.js|css (content-hashed,
 * so the gateway serves them as immutable), and manifest.json (each asset's size, gzipped size and
 * SRI hash). Fails when the initial JS is over budget. The installable app's files sit beside
 * index.html, at fixed names: app.webmanifest (the web app manifest), sw.js (the service worker,
 * which names this build's shell, so a new build updates it) and the icons.
 */

const packageRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const outDir = join(packageRoot, 'dist', 'app');
const assetsDir = join(outDir, 'assets');

/** The bar: the JS a first visit loads, gzipped. */
export const INITIAL_JS_BUDGET = 150 * 1024;

export interface ConsoleManifest {
  /** The entry's script and style sheet, as index.html loads them (/console/assets/...). */
  script: string;
  style: string;
  assets: Record<string, { bytes: number; gzipBytes: number; integrity: string }>;
  initialJsGzipBytes: number;
}

const integrity = (content: Buffer) => `sha384-${createHash('sha384').update(content).digest('base64')}`;

await rm(outDir, { recursive: true, force: true });
await mkdir(assetsDir, { recursive: true });
const result = await build({
  entryPoints: [join(packageRoot, 'src', 'main.tsx')],
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: ['chrome111', 'firefox115', 'safari16.4', 'edge111'],
  jsx: 'automatic',
  minify: true,
  legalComments: 'none',
  define: { 'process.env.NODE_ENV': '"production"' },
  entryNames: '[name]-[hash]',
  assetNames: '[name]-[hash]',
  outdir: assetsDir,
  metafile: true,
  logLevel: 'warning',
});

const outputs = Object.keys(result.metafile.outputs).map((path) => basename(path));
const script = outputs.find((name) => name.endsWith('.js'));
const style = outputs.find((name) => name.endsWith('.css'));
if (!script || !style) throw new Error(`esbuild wrote no script or style sheet: ${outputs.join(', ')}`);

const assets: ConsoleManifest['assets'] = {};
for (const name of outputs) {
  const content = await readFile(join(assetsDir, name));
  assets[name] = { bytes: content.length, gzipBytes: gzipSync(content, { level: 9 }).length, integrity: integrity(content) };
}
const manifest: ConsoleManifest = { script, style, assets, initialJsGzipBytes: assets[script]?.gzipBytes ?? 0 };

/** The icons beside index.html: sizes Chromium and Android ask for, and iOS's home-screen icon. */
const ICONS = { 'icon-192.png': 192, 'icon-512.png': 512, 'apple-touch-icon.png': 180 } as const;
for (const [name, size] of Object.entries(ICONS)) await writeFile(join(outDir, name), iconPng(size));

const THEME = '#0b57d0';
const webManifest = {
  name: 'Herald Console',
  short_name: 'Herald',
  description: 'Answer the questions your agents ask, and run Herald.',
  id: '/console/',
  start_url: '/console/inbox',
  scope: '/console/',
  display: 'standalone',
  background_color: '#ffffff',
  theme_color: THEME,
  icons: [
    { src: '/console/icon-192.png', sizes: '192x192', type: 'image/png', purpose: 'any' },
    { src: '/console/icon-512.png', sizes: '512x512', type: 'image/png', purpose: 'any' },
    { src: '/console/icon-512.png', sizes: '512x512', type: 'image/png', purpose: 'maskable' },
  ],
};
await writeFile(join(outDir, 'app.webmanifest'), `${JSON.stringify(webManifest, null, 2)}\n`);

const shell = ['/console/', `/console/assets/${script}`, `/console/assets/${style}`, ...Object.keys(ICONS).map((name) => `/console/${name}`)];
const buildId = createHash('sha256').update(shell.join('\n')).digest('base64url').slice(0, 12);
await build({
  entryPoints: [join(packageRoot, 'src', 'sw.ts')],
  bundle: true,
  format: 'iife',
  platform: 'browser',
  target: ['chrome111', 'firefox115', 'safari16.4', 'edge111'],
  minify: true,
  legalComments: 'none',
  define: { SHELL: JSON.stringify(shell), BUILD: JSON.stringify(buildId) },
  outfile: join(outDir, 'sw.js'),
  logLevel: 'warning',
});

// No inline script or style: the page only names its two files (and their SRI hashes).
const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<meta name="theme-color" content="${THEME}">
<title>Herald Console</title>
<link rel="manifest" href="/console/app.webmanifest">
<link rel="icon" href="/console/icon-192.png" type="image/png">
<link rel="apple-touch-icon" href="/console/apple-touch-icon.png">
<link rel="stylesheet" href="/console/assets/${style}" integrity="${assets[style]?.integrity}">
<script type="module" src="/console/assets/${script}" integrity="${assets[script]?.integrity}"></script>
</head>
<body>
<div id="root"></div>
<noscript><p>The Herald Console needs JavaScript.</p></noscript>
</body>
</html>
`;
await writeFile(join(outDir, 'index.html'), html);
await writeFile(join(outDir, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);

for (const [name, entry] of Object.entries(assets)) console.log(`console ${name}: ${entry.bytes} bytes, ${entry.gzipBytes} gzipped`);
console.log(`console initial JS: ${manifest.initialJsGzipBytes} bytes gzipped (budget ${INITIAL_JS_BUDGET})`);
if (manifest.initialJsGzipBytes > INITIAL_JS_BUDGET) {
  console.error(`the console's initial JS is over its budget: ${manifest.initialJsGzipBytes} > ${INITIAL_JS_BUDGET} bytes gzipped`);
  process.exitCode = 1;
}
