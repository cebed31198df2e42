// Writes charts/herald/README.md (what chart hubs show): its text, then a table of every value of
// charts/herald/values.yaml with its default and the comment above it, generated so it cannot
// drift from the values (`npm run generate` runs this; the chart test fails when the committed
// file differs from what this writes).
//   node scripts/chart-readme.mjs            write it
//   node scripts/chart-readme.mjs --print    print it instead
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { isMap, isScalar, parseDocument } from 'yaml';

const chart = fileURLToPath(new URL('../charts/herald/', import.meta.url));

/** The comment text of a node, its lines joined. */
const text = (comment) =>
  (comment ?? '')
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean)
    .join(' ');

/** A default as the table shows it: YAML's own inline form, JSON for collections. */
function shown(node) {
  if (node === null || node === undefined) return '`null`';
  const value = node.toJSON();
  if (isScalar(node) && typeof value === 'string') return value === '' ? '`""`' : `\`${value}\``;
  return `\`${JSON.stringify(value)}\``;
}

const cell = (value) => value.replaceAll('|', '\\|');

/** Every value: a map with entries is opened (its own row carries its comment), anything else is one row. */
function rows(map, path, inherited = '') {
  const out = [];
  map.items.forEach((pair, index) => {
    const key = String(pair.key.value);
    const name = [...path, key].join('.');
    // A map's first entry's comment is held by the map itself.
    const description = [index === 0 ? inherited : '', text(pair.key.commentBefore), text(pair.value?.comment ?? pair.key.comment)].filter(Boolean).join(' ');
    if (isMap(pair.value) && pair.value.items.length > 0 && !pair.value.flow) {
      if (description) out.push(`| \`${name}\` | | ${cell(description)} |`);
      out.push(...rows(pair.value, [...path, key], text(pair.value.commentBefore)));
    } else {
      out.push(`| \`${name}\` | ${cell(shown(pair.value))} | ${cell(description)} |`);
    }
  });
  return out;
}

const values = parseDocument(readFileSync(`${chart}values.yaml`, 'utf8'));
const { version, appVersion } = parseDocument(readFileSync(`${chart}Chart.yaml`, 'utf8')).toJSON();

const readme = `# Herald Helm chart

Herald, the open-source push-notification and human-approval service, on Kubernetes: the gateway
and the gRPC services (account, audience, campaign, delivery, policy, decision, flow) from one
image, each with its ConfigMap, Deployment, Service, PodDisruptionBudget and NetworkPolicy, and
autoscalers for the gateway and the delivery fleet. PostgreSQL, Redis, Kafka and the SMTP server are
yours (no subcharts). Chart ${version}, Herald ${appVersion}.

## Install

Create the Secret the chart reads (it never creates one), then install:

\`\`\`sh
kubectl create namespace herald
kubectl -n herald create secret generic herald \\
  --from-literal=DATABASE_URL='postgres://herald:…@postgres:5432/herald' \\
  --from-literal=REDIS_URL='redis://redis:6379' \\
  --from-literal=ANSWER_TOKEN_SECRET="$(openssl rand -base64 32)" \\
  --from-literal=CHANNEL_SECRET_KEYS="k1:$(openssl rand -base64 32)" \\
  --from-literal=ENGAGEMENT_TOKEN_SECRET="$(openssl rand -base64 32)" \\
  --from-literal=SMTP_URL='smtp://user:pass@smtp.example.com:587'
helm install herald charts/herald -n herald \\
  --set publicOrigin=https://push.example.com --set kafka.brokers='{kafka:9092}'
\`\`\`

The Secret's keys: \`DATABASE_URL\` (every service keeps its schema there; PostgreSQL must commit
durably), \`REDIS_URL\` (gateway, decision), \`ANSWER_TOKEN_SECRET\` (decision: signs answer links), \`CHANNEL_SECRET_KEYS\` (decision: seals Slack secrets; may be empty),
\`ENGAGEMENT_TOKEN_SECRET\` (delivery and gateway: signs and checks engagement tokens), \`SMTP_URL\`
(account: sign-in links and invites). \`existingSecret\` names it.

## Upgrade

\`helm upgrade herald charts/herald -n herald --reuse-values\`. Each service applies its numbered,
additive migrations at start, so old and new replicas run side by side while the Deployments roll
(a new pod is ready before an old one goes); \`helm rollback\` goes back, leaving the added columns.

## Monitoring

Every component serves Prometheus metrics on \`metrics.port\` (9464). \`metrics.podMonitor\`,
\`metrics.prometheusRule\` (alerts with runbooks), \`metrics.scrapeAnnotations\` and
\`metrics.dashboard\` (Grafana) are off by default: see Operating Herald (\`docs/operating.md\`, served
by Herald at \`/docs/operating\`).

## Values

Generated from \`values.yaml\` by \`scripts/chart-readme.mjs\` (\`npm run generate\`); \`values.schema.json\`
checks them. Each component's settings are \`default\` merged with its entry under \`components\`.

| Key | Default | Description |
|---|---|---|
${rows(values.contents, []).join('\n')}
`;

if (process.argv.includes('--print')) process.stdout.write(readme);
else writeFileSync(`${chart}README.md`, readme);
