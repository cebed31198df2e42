// The JSON schemas kubeconform validates the chart's Prometheus Operator objects with (PodMonitor,
// PrometheusRule), made from the operator's own CRDs: each CRD version's openAPIV3Schema, strict
// (no property the CRD does not declare), as <kind>-<group's first label>-<version>.json, the names
// kubeconform's {{ .ResourceKind }}{{ .KindSuffix }} asks for.
//   node deploy/lib/crd-schemas.mjs <folder of monitoring.coreos.com_*.yaml> <output folder> <crd file>...
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { parse } from 'yaml';

const [from, to, ...files] = process.argv.slice(2);
if (!from || !to || files.length === 0) throw new Error('usage: crd-schemas.mjs <crd folder> <output folder> <crd file>...');

/** Objects that declare properties and say nothing of others admit no others (kubeconform's -strict for CRDs). */
function strict(schema) {
  if (Array.isArray(schema)) return schema.map(strict);
  if (schema === null || typeof schema !== 'object') return schema;
  const out = Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, key === 'properties' ? Object.fromEntries(Object.entries(value).map(([name, property]) => [name, strict(property)])) : strict(value)]));
  if (out.properties !== undefined && out.additionalProperties === undefined && out['x-kubernetes-preserve-unknown-fields'] !== true) out.additionalProperties = false;
  return out;
}

mkdirSync(to, { recursive: true });
for (const file of files) {
  const crd = parse(readFileSync(join(from, file), 'utf8'));
  const group = crd.spec.group.split('.')[0];
  for (const version of crd.spec.versions) {
    const schema = strict(version.schema.openAPIV3Schema);
    const name = `${crd.spec.names.kind.toLowerCase()}-${group}-${version.name}.json`;
    writeFileSync(join(to, name), JSON.stringify(schema));
    process.stderr.write(`[tools] ${name}\n`);
  }
}
