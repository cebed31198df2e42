import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

import { grpcUrlVariable, loopbackEnv, readComponents, repositoryRoot } from '../src/index.js';

// The chart's `components` is the one list of Herald's processes. The supervisor and the test
// stacks read it; what cannot read it (folders, TypeScript project references, each process's
// config) is checked against it here, so a list that disagrees fails the suite.

const components = readComponents();
const byName = new Map(components.map((component) => [component.name, component]));
const folders = (parent: string) =>
  readdirSync(join(repositoryRoot, parent), { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort();
const sourceOf = (entry: string) => entry.replace(/^(.*)\/dist\/src\/(.*)\.js$/, '$1/src/$2.ts');

test('every folder of services/ is a component, and every component but the gateway is a folder of services/', () => {
  assert.deepEqual(
    folders('services'),
    components
      .filter((component) => component.protocol === 'grpc')
      .map((component) => component.name)
      .sort(),
  );
  assert.deepEqual(
    components.filter((component) => component.protocol === 'http').map((component) => component.name),
    ['gateway'],
  );
});

test("each component's entry is built from a source file of its folder", () => {
  for (const component of components) {
    assert.ok(existsSync(join(repositoryRoot, sourceOf(component.entry))), `${component.name}: ${sourceOf(component.entry)} does not exist`);
  }
});

test('ports are distinct and every call names a gRPC component', () => {
  assert.equal(new Set(components.map((component) => component.port)).size, components.length);
  for (const component of components) {
    for (const callee of component.calls) assert.equal(byName.get(callee)?.protocol, 'grpc', `${component.name} calls ${callee}`);
  }
});

test('the root tsconfig.json builds every package, service and the gateway', () => {
  const root = JSON.parse(readFileSync(join(repositoryRoot, 'tsconfig.json'), 'utf8')) as { references: { path: string }[] };
  const referenced = new Set(root.references.map((reference) => reference.path));
  const projects = [
    ...folders('services').map((name) => `services/${name}`),
    ...['packages', 'sdks', 'tools'].flatMap((kind) => folders(kind).map((name) => `${kind}/${name}`)),
    'gateway',
    'loadtest',
    'charts',
    'proto',
  ].filter((path) => existsSync(join(repositoryRoot, path, 'tsconfig.json')));
  for (const project of projects) assert.ok(referenced.has(project), `tsconfig.json does not reference ${project}`);
});

test("each component's configuration reads the gRPC address of exactly the components it calls", () => {
  for (const component of components) {
    const config = readFileSync(join(repositoryRoot, sourceOf(component.entry).replace(/main\.ts$/, 'config.ts')), 'utf8');
    const read = [...config.matchAll(/'([A-Z_]+_GRPC_URL)'/g)].map((match) => match[1]).sort();
    assert.deepEqual(read, component.calls.map(grpcUrlVariable).sort(), `${component.name}: its config.ts and its chart calls disagree`);
  }
});

test('the loopback environment gives each component its port and the addresses of its callees', () => {
  const ports = Object.fromEntries(components.map((component, index) => [component.name, 20_000 + index]));
  const gateway = byName.get('gateway');
  assert.ok(gateway);
  assert.deepEqual(loopbackEnv(gateway, ports), {
    PORT: String(ports.gateway),
    ...Object.fromEntries(gateway.calls.map((callee) => [grpcUrlVariable(callee), `127.0.0.1:${ports[callee]}`])),
  });
  assert.throws(() => loopbackEnv({ ...gateway, calls: ['nowhere'] }, ports), /gateway calls nowhere, which is not a component/);
  assert.equal(grpcUrlVariable('push-delivery'), 'PUSH_DELIVERY_GRPC_URL');
});

test('an entry is `default` merged with its own settings; a disabled one is left out; one without a port is refused', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'herald-registry-'));
  try {
    const values = join(dir, 'values.yaml');
    await writeFile(values, 'default:\n  uses: [postgres]\n  calls: []\ncomponents:\n  alpha:\n    port: 1\n  beta:\n    port: 2\n    uses: [kafka]\n    calls: [alpha]\n  gamma:\n    port: 3\n    enabled: false\n');
    assert.deepEqual(readComponents(values), [
      { name: 'alpha', port: 1, protocol: 'grpc', entry: 'services/alpha/dist/src/main.js', calls: [], uses: ['postgres'] },
      { name: 'beta', port: 2, protocol: 'grpc', entry: 'services/beta/dist/src/main.js', calls: ['alpha'], uses: ['kafka'] },
    ]);
    await writeFile(values, 'default: {}\ncomponents:\n  alpha: {}\n');
    assert.throws(() => readComponents(values), new RegExp(`${values.replaceAll('/', '\\/')}: component alpha has no port`));
  } finally {
    await rm(dir, { recursive: true });
  }
});
