import { createHash } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

import { build, transform } from 'esbuild';
import ts from 'typescript';

/**
 * Bundles the browser SDK (an ES module and a classic script exposing `Herald`) and the service
 * worker (a classic script) into dist/bundle, minified, and writes manifest.json: each file's size,
 * gzipped size and SRI hash. Fails when a bundle is over budget.
 *
 * The classic scripts run in the spec's minimum browsers (Chrome 50, Firefox 44, Safari 16, Edge
 * 17, Opera 37). esbuild cannot lower const, for-of or async functions that far, so the bundle
 * esbuild makes is lowered to ES5 by TypeScript's transpiler and then minified by esbuild again.
 * The ES module needs a browser with module scripts (Chrome 61, Firefox 60), so it stays ES2017.
 */

const packageRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const outDir = join(packageRoot, 'dist', 'bundle');

/** Browsers that load module scripts all run ES2017. */
const MODULE_TARGETS = ['chrome61', 'firefox60', 'safari11', 'edge16'];

/** Gzipped bytes each file may take (the hosted subscribe page's script is the SDK and a little more). */
export const BUDGETS: Record<string, number> = { 'herald.mjs': 8 * 1024, 'herald.js': 8 * 1024, 'herald-sw.js': 6 * 1024, 'herald-page.js': 9 * 1024 };

export interface ManifestEntry {
  bytes: number;
  gzipBytes: number;
  /** Subresource Integrity value for <script integrity="...">. */
  integrity: string;
}

/** Bundles an entry point; `es5` lowers it for the oldest minimum browsers. */
async function bundle(entry: string, outFile: string, format: 'esm' | 'iife', es5: boolean, globalName?: string): Promise<void> {
  const bundled = await build({
    entryPoints: [entry],
    bundle: true,
    format,
    ...(globalName ? { globalName } : {}),
    target: es5 ? ['es2017'] : MODULE_TARGETS,
    minify: !es5,
    legalComments: 'none',
    write: false,
    logLevel: 'warning',
  });
  let code = bundled.outputFiles[0]?.text ?? '';
  if (es5) {
    const lowered = ts.transpileModule(code, {
      compilerOptions: { target: ts.ScriptTarget.ES5, module: ts.ModuleKind.None, downlevelIteration: true, lib: ['lib.es2017.d.ts', 'lib.dom.d.ts'] },
    }).outputText;
    // TypeScript puts its helpers (__awaiter, ...) at the top level: a closure keeps them off the page's globals.
    const closed = globalName ? `var ${globalName}=function(){${lowered}\nreturn ${globalName}}();` : `!function(){${lowered}}();`;
    code = (await transform(closed, { minify: true, target: 'es5', legalComments: 'none' })).code;
  }
  await writeFile(outFile, code);
}

async function bundleAll(): Promise<Record<string, ManifestEntry>> {
  await mkdir(outDir, { recursive: true });
  const sdk = join(packageRoot, 'src', 'sdk', 'index.ts');
  await bundle(sdk, join(outDir, 'herald.mjs'), 'esm', false);
  await bundle(sdk, join(outDir, 'herald.js'), 'iife', true, 'Herald');
  await bundle(join(packageRoot, 'src', 'sw', 'sw.ts'), join(outDir, 'herald-sw.js'), 'iife', true);
  await bundle(join(packageRoot, 'src', 'page', 'page.ts'), join(outDir, 'herald-page.js'), 'iife', true);
  const manifest: Record<string, ManifestEntry> = {};
  for (const name of Object.keys(BUDGETS)) {
    const content = await readFile(join(outDir, name));
    manifest[name] = {
      bytes: content.length,
      gzipBytes: gzipSync(content, { level: 9 }).length,
      integrity: `sha384-${createHash('sha384').update(content).digest('base64')}`,
    };
  }
  return manifest;
}

const manifest = await bundleAll();
await writeFile(join(outDir, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
const over = Object.entries(manifest).filter(([name, entry]) => entry.gzipBytes > (BUDGETS[name] ?? 0));
for (const [name, entry] of Object.entries(manifest)) console.log(`${name}: ${entry.bytes} bytes, ${entry.gzipBytes} gzipped (budget ${BUDGETS[name]})`);
if (over.length > 0) {
  console.error(`over the size budget: ${over.map(([name]) => name).join(', ')}`);
  process.exitCode = 1;
}
