import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { access, constants, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { readComponents } from '@herald/components';
import { Env } from '@herald/config';
import { parse, parseAllDocuments, stringify } from 'yaml';

// The Helm chart, checked with the real tools: helm lint and template (values.schema.json
// included), kubeconform against the Kubernetes JSON schemas, then facts of the rendered objects.
// deploy/tools.sh builds the tools (npm test runs it).

const root = fileURLToPath(new URL('../../../', import.meta.url));
const chart = join(root, 'charts/herald');
const productionValues = join(chart, 'ci/production-values.yaml');

// The component registry (the chart's own `components`), as the supervisor and the test stacks read it.
const PORTS: Record<string, number> = Object.fromEntries(readComponents().map((component) => [component.name, component.port]));
const COMPONENTS = Object.keys(PORTS);
const SERVICES = COMPONENTS.filter((name) => name !== 'gateway');

interface Metadata {
  name: string;
  labels: Record<string, string>;
  annotations?: Record<string, string>;
}
interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: Metadata;
}
interface Probe {
  grpc?: { port: number };
  tcpSocket?: { port: number | string };
  httpGet?: { path: string; port: number | string };
  periodSeconds: number;
}
interface Container {
  name: string;
  image: string;
  args: string[];
  ports: { name: string; containerPort: number }[];
  envFrom: { configMapRef: { name: string } }[];
  env?: { name: string; valueFrom: { secretKeyRef: { name: string; key: string } } }[];
  startupProbe: Probe;
  readinessProbe: Probe;
  livenessProbe: Probe;
  lifecycle?: { preStop: { sleep: { seconds: number } } };
  resources: { requests: Record<string, string>; limits: Record<string, string> };
  securityContext: {
    runAsNonRoot: boolean;
    allowPrivilegeEscalation: boolean;
    readOnlyRootFilesystem: boolean;
    privileged: boolean;
    capabilities: { drop: string[]; add?: string[] };
  };
}
interface Deployment extends K8sObject {
  spec: {
    replicas?: number;
    template: {
      metadata: Metadata;
      spec: {
        automountServiceAccountToken: boolean;
        securityContext: { runAsNonRoot: boolean; runAsUser: number; seccompProfile: { type: string } };
        containers: Container[];
        imagePullSecrets?: { name: string }[];
      };
    };
  };
}
interface JobContainer extends Pick<Container, 'name' | 'image' | 'args' | 'resources' | 'securityContext'> {
  env?: Array<{ name: string; value?: string; valueFrom?: unknown }>;
  imagePullPolicy: string;
  restartPolicy?: string;
  startupProbe?: { exec: { command: string[] }; periodSeconds: number; failureThreshold: number };
  volumeMounts: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
}
interface Job extends K8sObject {
  spec: {
    backoffLimit: number;
    activeDeadlineSeconds: number;
    template: {
      metadata: Metadata;
      spec: {
        restartPolicy: string;
        automountServiceAccountToken: boolean;
        securityContext: Record<string, unknown>;
        imagePullSecrets?: { name: string }[];
        initContainers: JobContainer[];
        containers: JobContainer[];
        volumes: Array<{ name: string; configMap?: { name: string; items: Array<{ key: string; path: string }> }; emptyDir?: { sizeLimit: string } }>;
      };
    };
  };
}
interface ConfigMap extends K8sObject {
  data: Record<string, string>;
}
interface Service extends K8sObject {
  spec: { type: string; ports: { name: string; port: number; targetPort: string }[] };
}
interface Autoscaler extends K8sObject {
  spec: { scaleTargetRef: { kind: string; name: string }; minReplicas: number; maxReplicas: number };
}
type Peer = Record<string, unknown>;
interface Rule {
  ports: { port: number; protocol: string }[];
  from?: Peer[];
  to?: Peer[];
}
interface NetworkPolicy extends K8sObject {
  spec: { podSelector: { matchLabels: Record<string, string> }; policyTypes: string[]; ingress: Rule[]; egress: Rule[] };
}

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

let helm: string;
let kubeconform: string;
let promtool: string;
let schemaDir: string;
let crdSchemaDir: string;
let helmHome: string;

function run(command: string, args: string[], input?: string): Promise<Result> {
  return new Promise((resolve, reject) => {
    // Helm keeps caches and repository lists under these; each run of this file gets its own.
    const env = { ...process.env, HELM_CACHE_HOME: join(helmHome, 'cache'), HELM_CONFIG_HOME: join(helmHome, 'config'), HELM_DATA_HOME: join(helmHome, 'data') };
    const child = spawn(command, args, { cwd: root, env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input ?? '');
  });
}

async function executable(path: string): Promise<boolean> {
  return access(path, constants.X_OK).then(
    () => true,
    () => false,
  );
}

before(async () => {
  helmHome = await mkdtemp(join(tmpdir(), 'herald-helm-'));
  // deploy/tools.sh knows where it puts things; ask it rather than repeat the paths here.
  const paths = await run('bash', ['deploy/tools.sh', 'env']);
  const exported = new Map([...paths.stdout.matchAll(/^export (\w+)=(.*)$/gm)].map((match) => [match[1], match[2] ?? '']));
  const bin = exported.get('HERALD_TOOLS_BIN') ?? '';
  helm = join(bin, 'helm');
  kubeconform = join(bin, 'kubeconform');
  promtool = join(bin, 'promtool');
  schemaDir = exported.get('KUBERNETES_SCHEMA_DIR') ?? '';
  crdSchemaDir = exported.get('CRD_SCHEMA_DIR') ?? '';
  const schemas = schemaDir === '' ? [] : await readdir(schemaDir).catch(() => []);
  const crdSchemas = crdSchemaDir === '' ? [] : await readdir(crdSchemaDir).catch(() => []);
  if (!(await executable(helm)) || !(await executable(kubeconform)) || !(await executable(promtool)) || schemas.length === 0 || crdSchemas.length === 0) {
    throw new Error('helm, kubeconform, promtool or the Kubernetes and CRD JSON schemas are missing under .local: run deploy/tools.sh (npm test runs it)');
  }
});
after(() => rm(helmHome, { recursive: true, force: true }));

/** `helm template herald charts/herald` with the given arguments; fails the test on an error. */
async function render(...args: string[]): Promise<{ yaml: string; objects: K8sObject[] }> {
  const result = await run(helm, ['template', 'herald', chart, '--namespace', 'herald', ...args]);
  assert.equal(result.code, 0, result.stderr);
  const objects = parseAllDocuments(result.stdout)
    .map((document) => document.toJS() as K8sObject | null)
    .filter((object): object is K8sObject => object !== null);
  return { yaml: result.stdout, objects };
}

/** Validates stdin against deploy/tools.sh's schemas (Kubernetes', then the Prometheus Operator's CRDs'), named <kind>[-<group>]-<version>.json. */
const kubeconformArgs = () => [
  '-strict',
  '-summary',
  '-schema-location',
  join(schemaDir, '{{ .ResourceKind }}{{ .KindSuffix }}.json'),
  '-schema-location',
  join(crdSchemaDir, '{{ .ResourceKind }}{{ .KindSuffix }}.json'),
  '-',
];

async function assertValidKubernetes(yaml: string, count: number): Promise<void> {
  const result = await run(kubeconform, kubeconformArgs(), yaml);
  assert.equal(result.code, 0, result.stdout + result.stderr);
  assert.match(result.stdout, new RegExp(`Summary: ${count} resources found parsing stdin - Valid: ${count}, Invalid: 0, Errors: 0, Skipped: 0`));
}

function all<T extends K8sObject>(objects: K8sObject[], kind: string): T[] {
  return objects.filter((object) => object.kind === kind) as T[];
}

function one<T extends K8sObject>(objects: K8sObject[], kind: string, name: string): T {
  const found = objects.filter((object) => object.kind === kind && object.metadata.name === name);
  assert.equal(found.length, 1, `${kind} ${name}`);
  return found[0] as T;
}

const container = (objects: K8sObject[], name: string): Container => {
  const [first, ...others] = one<Deployment>(objects, 'Deployment', `herald-${name}`).spec.template.spec.containers;
  assert.equal(others.length, 0);
  assert.ok(first);
  return first;
};
const env = (objects: K8sObject[], name: string): Record<string, string> => one<ConfigMap>(objects, 'ConfigMap', `herald-${name}`).data;
const selects = (name: string) => ({ 'app.kubernetes.io/name': 'herald', 'app.kubernetes.io/instance': 'herald', 'app.kubernetes.io/component': name });
const fromComponent = (name: string): Peer => ({ podSelector: { matchLabels: selects(name) } });
const tcp = (...ports: number[]) => ports.map((port) => ({ port, protocol: 'TCP' }));

test('kubeconform refuses what Kubernetes would: the validation is real', async () => {
  const probeTypo = [
    'apiVersion: apps/v1',
    'kind: Deployment',
    'metadata: { name: typo }',
    'spec:',
    '  selector: { matchLabels: { app: typo } }',
    '  template:',
    '    metadata: { labels: { app: typo } }',
    '    spec:',
    '      containers:',
    '        - { name: typo, image: "herald:1", readinessProbe: { grpc: { port: 50051 }, periodSecond: 5 } }',
    '',
  ].join('\n');
  const result = await run(kubeconform, kubeconformArgs(), probeTypo);
  assert.equal(result.code, 1);
  assert.match(result.stdout, /additional properties 'periodSecond' not allowed/);
  assert.match(result.stdout, /Valid: 0, Invalid: 1, Errors: 0/);
});

test('charts/herald/README.md is what scripts/chart-readme.mjs makes of values.yaml: every value, its default and its comment', async () => {
  const generated = await run(process.execPath, ['scripts/chart-readme.mjs', '--print']);
  assert.equal(generated.code, 0, generated.stderr);
  assert.equal(await readFile(join(chart, 'README.md'), 'utf8'), generated.stdout, 'the chart README drifted from values.yaml: run npm run generate');
  assert.match(generated.stdout, /^\| `metrics\.port` \| `9464` \| 0: no endpoint \(and none of the objects below\)\. \|$/m);
  assert.match(generated.stdout, /^\| `components\.gateway\.port` \| `8080` \| {2}\|$/m);
});

test('helm lint --strict accepts the chart with its defaults and with ci/production-values.yaml', async () => {
  for (const args of [[], ['--values', productionValues]]) {
    const result = await run(helm, ['lint', '--strict', chart, ...args]);
    assert.equal(result.code, 0, result.stdout + result.stderr);
    assert.match(result.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
  }
});

describe('the default values', () => {
  let objects: K8sObject[];
  before(async () => {
    const rendered = await render();
    objects = rendered.objects;
    // A ServiceAccount; per component a ConfigMap, Deployment, Service, PDB and NetworkPolicy; two HPAs.
    await assertValidKubernetes(rendered.yaml, 1 + 5 * COMPONENTS.length + 2);
  });

  test('render exactly the expected objects', () => {
    const names = (kind: string) => all(objects, kind).map((object) => object.metadata.name).sort();
    const each = COMPONENTS.map((name) => `herald-${name}`).sort();
    assert.deepEqual(names('Deployment'), each);
    assert.deepEqual(names('Service'), each);
    assert.deepEqual(names('ConfigMap'), each);
    assert.deepEqual(names('PodDisruptionBudget'), each);
    assert.deepEqual(names('NetworkPolicy'), each);
    assert.deepEqual(names('HorizontalPodAutoscaler'), ['herald-delivery', 'herald-gateway']);
    assert.deepEqual(names('ServiceAccount'), ['herald']);
    assert.deepEqual(names('Secret'), [], 'credentials come from an existing Secret, never from the chart');
    assert.deepEqual(names('Job'), [], 'the load test is off unless loadTest.enabled');
  });

  test('every pod runs non-root with a read-only root filesystem, no capabilities and seccomp RuntimeDefault', () => {
    for (const name of COMPONENTS) {
      const pod = one<Deployment>(objects, 'Deployment', `herald-${name}`).spec.template.spec;
      assert.deepEqual(
        { runAsNonRoot: pod.securityContext.runAsNonRoot, runAsUser: pod.securityContext.runAsUser, seccomp: pod.securityContext.seccompProfile.type },
        { runAsNonRoot: true, runAsUser: 1000, seccomp: 'RuntimeDefault' },
        name,
      );
      assert.equal(pod.automountServiceAccountToken, false, name);
      const { securityContext, resources } = container(objects, name);
      assert.deepEqual(
        securityContext,
        { runAsNonRoot: true, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, privileged: false, capabilities: { drop: ['ALL'] } },
        name,
      );
      assert.deepEqual(Object.keys(resources.requests).sort(), ['cpu', 'memory'], name);
      assert.deepEqual(Object.keys(resources.limits).sort(), ['cpu', 'memory'], name);
    }
  });

  test('each component runs its own script from the one image, on its port', () => {
    for (const name of COMPONENTS) {
      const main = container(objects, name);
      assert.equal(main.image, 'ghcr.io/herald-dev/herald:0.1.0');
      assert.deepEqual(main.args, [name === 'gateway' ? 'gateway/dist/src/main.js' : `services/${name}/dist/src/main.js`]);
      assert.deepEqual(main.ports, [
        { name: name === 'gateway' ? 'http' : 'grpc', containerPort: PORTS[name], protocol: 'TCP' },
        { name: 'metrics', containerPort: 9464, protocol: 'TCP' },
      ]);
      const service = one<Service>(objects, 'Service', `herald-${name}`);
      assert.deepEqual(
        service.spec.ports.map(({ name: portName, port, targetPort }) => ({ portName, port, targetPort })),
        [{ portName: name === 'gateway' ? 'http' : 'grpc', port: PORTS[name], targetPort: name === 'gateway' ? 'http' : 'grpc' }],
      );
    }
  });

  test('the gateway pauses before draining, so load balancers stop sending to it first; services drain at once', () => {
    assert.deepEqual(container(objects, 'gateway').lifecycle, { preStop: { sleep: { seconds: 5 } } });
    for (const name of SERVICES) assert.equal(container(objects, name).lifecycle, undefined, name);
  });

  test('services are probed with the gRPC health protocol on their port; the gateway over HTTP, /healthz for liveness and /readyz for readiness', () => {
    for (const name of SERVICES) {
      const { startupProbe, readinessProbe, livenessProbe } = container(objects, name);
      for (const probe of [startupProbe, readinessProbe, livenessProbe]) assert.deepEqual(probe.grpc, { port: PORTS[name] }, name);
    }
    const gateway = container(objects, 'gateway');
    assert.deepEqual(gateway.startupProbe.httpGet, { path: '/healthz', port: 'http' });
    assert.deepEqual(gateway.livenessProbe.httpGet, { path: '/healthz', port: 'http' });
    assert.deepEqual(gateway.readinessProbe.httpGet, { path: '/readyz', port: 'http' });
    for (const probe of [gateway.startupProbe, gateway.readinessProbe, gateway.livenessProbe]) assert.equal(probe.grpc, undefined);
  });

  test('credentials come from the existing Secret, each only to the components that need it', () => {
    const secretsOf = (name: string) => (container(objects, name).env ?? []).map(({ name: variable, valueFrom }) => ({ variable, ...valueFrom.secretKeyRef }));
    const from = (variable: string) => ({ variable, name: 'herald', key: variable });
    assert.deepEqual(secretsOf('gateway'), [from('REDIS_URL'), from('ENGAGEMENT_TOKEN_SECRET')]);
    for (const name of ['audience', 'campaign', 'policy', 'flow']) assert.deepEqual(secretsOf(name), [from('DATABASE_URL')], name);
    assert.deepEqual(secretsOf('account'), [from('DATABASE_URL'), from('SMTP_URL')]);
    assert.deepEqual(secretsOf('delivery'), [from('DATABASE_URL'), from('ENGAGEMENT_TOKEN_SECRET')]);
    assert.deepEqual(secretsOf('decision'), [from('REDIS_URL'), from('DATABASE_URL'), from('ANSWER_TOKEN_SECRET'), from('CHANNEL_SECRET_KEYS'), from('SMTP_URL')]);
    for (const name of COMPONENTS) {
      assert.deepEqual(container(objects, name).envFrom, [{ configMapRef: { name: `herald-${name}` } }]);
      for (const variable of ['DATABASE_URL', 'REDIS_URL', 'ANSWER_TOKEN_SECRET', 'CHANNEL_SECRET_KEYS', 'ENGAGEMENT_TOKEN_SECRET', 'SMTP_URL']) assert.equal(env(objects, name)[variable], undefined, `${name} ${variable}`);
    }
  });

  test("the ConfigMaps hold README.md's configuration with its defaults", () => {
    const common = (name: string) => ({
      HERALD_SERVICE: name,
      OTEL_SERVICE_NAME: `herald-${name}`,
      HERALD_NAMESPACE: '',
      LOG_LEVEL: 'info',
      SHUTDOWN_GRACE_MS: '10000',
      METRICS_HOST: '0.0.0.0',
      METRICS_PORT: '9464',
    });
    const grpc = (name: string) => ({ ...common(name), GRPC_HOST: '0.0.0.0', GRPC_PORT: String(PORTS[name]), DATABASE_POOL_SIZE: '10' });
    const kafka = { KAFKA_BROKERS: 'kafka:9092', KAFKA_CLIENT_ID: 'herald', KAFKA_SESSION_TIMEOUT_MS: '30000' };
    assert.deepEqual(env(objects, 'gateway'), {
      ...common('gateway'),
      ...kafka,
      HOST: '0.0.0.0',
      PORT: '8080',
      PUBLIC_ORIGIN: 'http://localhost:8080',
      UPGRADE_URL: 'https://herald.dev/pricing',
      ACCOUNT_GRPC_URL: 'herald-account:50051',
      AUDIENCE_GRPC_URL: 'herald-audience:50052',
      CAMPAIGN_GRPC_URL: 'herald-campaign:50053',
      DELIVERY_GRPC_URL: 'herald-delivery:50054',
      POLICY_GRPC_URL: 'herald-policy:50055',
      DECISION_GRPC_URL: 'herald-decision:50056',
      FLOW_GRPC_URL: 'herald-flow:50057',
      GRPC_DEADLINE_MS: '5000',
      KEY_CACHE_TTL_MS: '5000',
      // The HPA's maximum: while Redis is unreachable the whole fleet stays within a plan's limit.
      RATE_LIMIT_FALLBACK_REPLICAS: '10',
      RATE_LIMIT_WINDOW_MS: '60000',
      BODY_LIMIT_BYTES: '1048576',
      REQUEST_TIMEOUT_MS: '70000',
      HEADERS_TIMEOUT_MS: '10000',
      ALLOW_LOCALHOST_SITES: 'false',
      ALLOW_ANY_PUSH_SERVICE: 'false',
      IP_RATE_LIMIT_PER_MINUTE: '100',
      // The ingress controller's pods (private addresses) are trusted for X-Forwarded-For.
      TRUST_PROXY: 'uniquelocal',
    });
    assert.deepEqual(env(objects, 'account'), {
      ...grpc('account'),
      ...kafka,
      PUBLIC_ORIGIN: 'http://localhost:8080',
      VAPID_SUBJECT: 'mailto:push-operator@herald.dev',
      ENROLLMENT_TTL_SECONDS: '900',
      MAIL_FROM: 'Herald <no-reply@herald.localhost>',
    });
    assert.deepEqual(env(objects, 'audience'), { ...grpc('audience'), ...kafka });
    assert.deepEqual(env(objects, 'campaign'), {
      ...grpc('campaign'),
      ...kafka,
      ACCOUNT_GRPC_URL: 'herald-account:50051',
      AUDIENCE_GRPC_URL: 'herald-audience:50052',
      FANOUT_BATCH_SIZE: '500',
      PUSH_TTL_SECONDS: '86400',
    });
    assert.deepEqual(env(objects, 'flow'), {
      ...grpc('flow'),
      ...kafka,
      CAMPAIGN_GRPC_URL: 'herald-campaign:50053',
      FLOW_RUN_BATCH_SIZE: '500',
      FLOW_RUN_CONCURRENCY: '2000',
    });
    assert.deepEqual(env(objects, 'delivery'), {
      ...grpc('delivery'),
      ...kafka,
      ACCOUNT_GRPC_URL: 'herald-account:50051',
      PUSH_STREAMS_PER_ORIGIN: '100',
      PUSH_TIMEOUT_MS: '10000',
      DELIVERY_JOB_CONCURRENCY: '4',
      PUSH_MAX_ATTEMPTS: '5',
      PUSH_RETRY_BASE_MS: '1000',
      PUSH_RETRY_CAP_MS: '600000',
      RETRY_POLL_MS: '250',
    });
    assert.deepEqual(env(objects, 'policy'), { ...grpc('policy'), POLICY_CACHE_SIZE: '10000' });
    assert.deepEqual(env(objects, 'decision'), {
      ...grpc('decision'),
      ...kafka,
      ACCOUNT_GRPC_URL: 'herald-account:50051',
      AUDIENCE_GRPC_URL: 'herald-audience:50052',
      CAMPAIGN_GRPC_URL: 'herald-campaign:50053',
      PUBLIC_ORIGIN: 'http://localhost:8080',
      QUESTION_DELIVERY_RETRY_BASE_MS: '1000',
      QUESTION_DELIVERY_RETRY_CAP_MS: '60000',
      QUESTION_DELIVERY_POLL_MS: '1000',
      QUESTION_DELIVERY_LEASE_MS: '30000',
      MAIL_FROM: 'Herald <no-reply@herald.localhost>',
      ASK_LIFETIME_SECONDS: '600',
      EXPIRY_SWEEP_MS: '1000',
      WEBHOOK_TIMEOUT_MS: '10000',
      WEBHOOK_MAX_ATTEMPTS: '8',
      WEBHOOK_RETRY_BASE_MS: '600000',
      WEBHOOK_RETRY_CAP_MS: '28800000',
      WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'false',
    });
  });

  test("each component's own config parser accepts its rendered environment, which differs from the code's defaults only where it must", async () => {
    // What a pod gets from the Secret, and what the code requires without a default.
    const secrets: Record<string, string> = {
      DATABASE_URL: 'postgres://herald@db/herald',
      REDIS_URL: 'redis://redis:6379',
      ANSWER_TOKEN_SECRET: 'answer-secret',
      CHANNEL_SECRET_KEYS: `k1:${Buffer.alloc(32).toString('base64')}`,
      ENGAGEMENT_TOKEN_SECRET: 'engagement-secret',
    };
    const required: Record<string, string> = { ...secrets, KAFKA_BROKERS: 'kafka:9092' };
    const differences: Record<string, Record<string, unknown>> = {
      gateway: {
        host: '0.0.0.0',
        ...Object.fromEntries(SERVICES.map((name) => [`${name}GrpcUrl`, `herald-${name}:${PORTS[name]}`])),
        rateLimitFallbackReplicas: 10,
        allowLocalhostSites: false,
        trustProxy: ['uniquelocal'],
      },
      campaign: { accountGrpcUrl: 'herald-account:50051', audienceGrpcUrl: 'herald-audience:50052' },
      flow: { campaignGrpcUrl: 'herald-campaign:50053' },
      delivery: { accountGrpcUrl: 'herald-account:50051' },
      decision: { accountGrpcUrl: 'herald-account:50051', audienceGrpcUrl: 'herald-audience:50052', campaignGrpcUrl: 'herald-campaign:50053' },
    };
    for (const name of COMPONENTS) {
      const script = name === 'gateway' ? 'gateway/dist/src/config.js' : `services/${name}/dist/src/config.js`;
      const { readConfig } = (await import(join(root, script))) as { readConfig: (env: Env) => Record<string, unknown> };
      const parse = (source: Record<string, string>) => {
        const parsed = new Env(source);
        const config = readConfig(parsed);
        parsed.done();
        return config;
      };
      const fromSecret = Object.fromEntries((container(objects, name).env ?? []).map(({ name: variable }) => [variable, secrets[variable] ?? '']));
      const rendered = parse({ ...env(objects, name), ...fromSecret });
      const grpc = name === 'gateway' ? {} : { grpcHost: '0.0.0.0' };
      assert.deepEqual(rendered, { ...parse(required), ...grpc, ...differences[name] }, name);
    }
  });

  test('autoscalers scale the gateway and the delivery fleet; their Deployments leave replicas to them', () => {
    for (const [name, max] of [
      ['gateway', 10],
      ['delivery', 24],
    ] as const) {
      const hpa = one<Autoscaler>(objects, 'HorizontalPodAutoscaler', `herald-${name}`);
      assert.deepEqual(hpa.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: `herald-${name}` });
      assert.deepEqual([hpa.spec.minReplicas, hpa.spec.maxReplicas], [2, max]);
      assert.equal(one<Deployment>(objects, 'Deployment', `herald-${name}`).spec.replicas, undefined);
    }
    for (const name of ['account', 'audience', 'campaign', 'policy', 'decision', 'flow']) {
      assert.equal(one<Deployment>(objects, 'Deployment', `herald-${name}`).spec.replicas, 2, name);
    }
  });

  test('NetworkPolicies: only the gateway reaches the services, which reach each other only as the architecture says', () => {
    const policy = (name: string) => one<NetworkPolicy>(objects, 'NetworkPolicy', `herald-${name}`).spec;
    const dns = {
      to: [{ namespaceSelector: {}, podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } }],
      ports: [
        { port: 53, protocol: 'UDP' },
        { port: 53, protocol: 'TCP' },
      ],
    };
    const postgres = { ports: tcp(5432) };
    const kafka = { ports: tcp(9092) };
    // Browser push services, webhook receivers and OpenID providers: public addresses only.
    const internet = {
      ports: tcp(443),
      to: [
        { ipBlock: { cidr: '0.0.0.0/0', except: ['10.0.0.0/8', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12', '192.168.0.0/16'] } },
        { ipBlock: { cidr: '::/0', except: ['::1/128', 'fc00::/7', 'fe80::/10'] } },
      ],
    };
    const call = (name: string) => ({ to: [fromComponent(name)], ports: tcp(PORTS[name] ?? 0) });
    // Every component's metrics port, from anywhere (metrics.from is empty), comes last.
    const scraped = { ports: tcp(9464) };
    const calledBy = (port: number, ...callers: string[]) => [...callers.map((caller) => ({ from: [fromComponent(caller)], ports: tcp(port) })), scraped];

    for (const name of COMPONENTS) {
      assert.deepEqual(policy(name).podSelector.matchLabels, selects(name));
      assert.deepEqual(policy(name).policyTypes, ['Ingress', 'Egress']);
    }
    assert.deepEqual(policy('gateway').ingress, [{ ports: tcp(8080) }, scraped]);
    assert.deepEqual(policy('gateway').egress, [dns, ...SERVICES.map(call), { ports: tcp(6379) }, kafka]);
    assert.deepEqual(policy('account').ingress, calledBy(50051, 'campaign', 'decision', 'delivery', 'gateway'));
    // The operator's SMTP server (SMTP_URL): submission and implicit-TLS ports, any address; the
    // workspaces' OpenID providers (single sign-on).
    assert.deepEqual(policy('account').egress, [dns, postgres, kafka, { ports: tcp(587, 465) }, internet]);
    assert.deepEqual(policy('audience').ingress, calledBy(50052, 'campaign', 'decision', 'gateway'));
    assert.deepEqual(policy('audience').egress, [dns, postgres, kafka]);
    assert.deepEqual(policy('campaign').ingress, calledBy(50053, 'decision', 'flow', 'gateway'));
    assert.deepEqual(policy('campaign').egress, [dns, call('account'), call('audience'), postgres, kafka]);
    assert.deepEqual(policy('delivery').ingress, calledBy(50054, 'gateway'));
    assert.deepEqual(policy('delivery').egress, [dns, call('account'), postgres, kafka, internet]);
    assert.deepEqual(policy('policy').ingress, calledBy(50055, 'gateway'));
    assert.deepEqual(policy('policy').egress, [dns, postgres]);
    assert.deepEqual(policy('decision').ingress, calledBy(50056, 'gateway'));
    assert.deepEqual(policy('decision').egress, [dns, call('account'), call('audience'), call('campaign'), postgres, { ports: tcp(6379) }, kafka, { ports: tcp(587, 465) }, internet]);
    assert.deepEqual(policy('flow').ingress, calledBy(50057, 'gateway'));
    assert.deepEqual(policy('flow').egress, [dns, call('campaign'), postgres, kafka]);
  });
});

describe('ci/production-values.yaml', () => {
  let objects: K8sObject[];
  before(async () => {
    const rendered = await render('--values', productionValues);
    objects = rendered.objects;
    await assertValidKubernetes(rendered.yaml, 1 + 5 * COMPONENTS.length + 2);
  });

  test('the image, pull secret, Secret name and namespace apply to every component', () => {
    for (const name of COMPONENTS) {
      assert.equal(env(objects, name).HERALD_NAMESPACE, 'production', name);
      const deployment = one<Deployment>(objects, 'Deployment', `herald-${name}`);
      assert.equal(container(objects, name).image, 'registry.example.com/herald:1.4.2');
      assert.deepEqual(deployment.spec.template.spec.imagePullSecrets, [{ name: 'registry-credentials' }]);
      for (const variable of container(objects, name).env ?? []) assert.equal(variable.valueFrom.secretKeyRef.name, 'herald-production');
      assert.equal(deployment.spec.template.metadata.annotations?.['example.com/team'], 'messaging');
    }
  });

  test('overriding one variable keeps the others: env merges default, component and override', () => {
    const delivery = env(objects, 'delivery');
    assert.equal(delivery.DELIVERY_JOB_CONCURRENCY, '8');
    assert.equal(delivery.PUSH_MAX_ATTEMPTS, '5');
    assert.equal(delivery.LOG_LEVEL, 'info');
    assert.equal(delivery.SHUTDOWN_GRACE_MS, '10000');
    assert.equal(delivery.KAFKA_BROKERS, 'kafka-0.kafka.data.svc:9092,kafka-1.kafka.data.svc:9092,kafka-2.kafka.data.svc:9092');
    assert.equal(delivery.OTEL_EXPORTER_OTLP_ENDPOINT, 'http://otel-collector.observability.svc:4318');
    assert.equal(env(objects, 'policy').LOG_LEVEL, 'warn');
    assert.equal(env(objects, 'policy').POLICY_CACHE_SIZE, '50000');
    assert.equal(env(objects, 'policy').DATABASE_POOL_SIZE, '20');
    const gateway = env(objects, 'gateway');
    assert.deepEqual(
      [gateway.PUBLIC_ORIGIN, gateway.UPGRADE_URL, gateway.RATE_LIMIT_FALLBACK_REPLICAS, gateway.ALLOW_LOCALHOST_SITES],
      ['https://push.example.com', 'https://push.example.com/billing', '20', 'false'],
    );
    assert.equal(env(objects, 'account').PUBLIC_ORIGIN, 'https://push.example.com');
  });

  test('replicas, autoscaler bounds and resources follow the overrides', () => {
    for (const name of ['account', 'audience', 'campaign', 'policy', 'decision', 'flow']) {
      assert.equal(one<Deployment>(objects, 'Deployment', `herald-${name}`).spec.replicas, 3, name);
    }
    const bounds = (name: string) => {
      const { minReplicas, maxReplicas } = one<Autoscaler>(objects, 'HorizontalPodAutoscaler', `herald-${name}`).spec;
      return [minReplicas, maxReplicas];
    };
    assert.deepEqual(bounds('gateway'), [3, 20]);
    assert.deepEqual(bounds('delivery'), [4, 24]);
    assert.deepEqual(container(objects, 'delivery').resources, { requests: { cpu: '1', memory: '512Mi' }, limits: { cpu: '2', memory: '1Gi' } });
  });

  test('NetworkPolicies send infrastructure traffic only to the given peers', () => {
    const policy = (name: string) => one<NetworkPolicy>(objects, 'NetworkPolicy', `herald-${name}`).spec;
    const namespace = (name: string) => [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': name } } }];
    assert.deepEqual(policy('gateway').ingress, [{ ports: tcp(8080), from: namespace('ingress-nginx') }, { ports: tcp(9464) }]);
    const collector = { ports: tcp(4317, 4318), to: namespace('observability') };
    assert.deepEqual(policy('gateway').egress.slice(-3), [{ ports: tcp(6379), to: namespace('redis') }, { ports: tcp(9092), to: namespace('data') }, collector]);
    assert.deepEqual(policy('account').egress.slice(-5, -2), [
      { ports: tcp(5432), to: [{ ipBlock: { cidr: '10.20.0.0/24' } }] },
      { ports: tcp(9092), to: namespace('data') },
      { ports: tcp(587), to: [{ ipBlock: { cidr: '10.30.0.25/32' } }] },
    ]);
    // The internet (OpenID providers) as the default values give it, then the collector.
    assert.deepEqual(policy('account').egress.slice(-2).map((rule) => rule.ports), [tcp(443), collector.ports]);
    assert.deepEqual(policy('account').egress.at(-1), collector);
  });
});

describe('loadTest.enabled: a helm test Job per journey, k6 running the journey\'s script', () => {
  let objects: K8sObject[];
  const JOURNEYS = ['identity', 'authorize', 'approval', 'mcp'];
  before(async () => {
    const rendered = await render('--values', productionValues, '--set', 'loadTest.enabled=true');
    objects = rendered.objects;
    // The production objects, the scripts' ConfigMap, one Job per default journey and the test pods' NetworkPolicy.
    await assertValidKubernetes(rendered.yaml, 1 + 5 * COMPONENTS.length + 2 + 1 + JOURNEYS.length + 1);
  });

  test('the ConfigMap holds loadtest/k6 exactly: every script and lib module, byte for byte', async () => {
    const scripts = one<ConfigMap>(objects, 'ConfigMap', 'herald-load-scripts');
    assert.equal(scripts.metadata.annotations?.['helm.sh/hook'], 'test');
    const sources = (await readdir(join(root, 'loadtest/k6'), { recursive: true })).filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts')).sort();
    assert.deepEqual(Object.keys(scripts.data).sort(), sources.map((file) => file.replace('/', '_')).sort());
    for (const file of sources) assert.equal(scripts.data[file.replace('/', '_')], (await readFile(join(root, 'loadtest/k6', file), 'utf8')).replace(/\n$/, ''), file);
  });

  test("each Job runs its journey's smoke form with grafana/k6 against the gateway Service, in turn, as a test hook", () => {
    const jobs = all<Job>(objects, 'Job');
    assert.deepEqual(
      jobs.map((job) => job.metadata.name),
      JOURNEYS.map((journey) => `herald-load-${journey}`),
    );
    for (const [index, job] of jobs.entries()) {
      const journey = JOURNEYS[index] as string;
      assert.deepEqual(job.metadata.annotations, { 'helm.sh/hook': 'test', 'helm.sh/hook-weight': String(index), 'helm.sh/hook-delete-policy': 'before-hook-creation' });
      assert.deepEqual(job.metadata.labels['app.kubernetes.io/component'], 'load-test');
      assert.deepEqual([job.spec.backoffLimit, job.spec.activeDeadlineSeconds, job.spec.template.spec.restartPolicy], [0, 300, 'Never']);
      const pod = job.spec.template.spec;
      assert.equal(pod.automountServiceAccountToken, false);
      assert.deepEqual(pod.imagePullSecrets, [{ name: 'registry-credentials' }]);
      assert.deepEqual(pod.securityContext, one<Deployment>(objects, 'Deployment', 'herald-gateway').spec.template.spec.securityContext);
      const [k6, ...others] = pod.containers;
      assert.equal(others.length, 0);
      assert.deepEqual(
        { name: k6?.name, image: k6?.image, pull: k6?.imagePullPolicy, args: k6?.args, env: k6?.env, mounts: k6?.volumeMounts },
        {
          name: 'k6',
          image: 'grafana/k6:1.0.0',
          pull: 'IfNotPresent',
          args: ['run', '--no-color', '-e', 'HERALD_SMOKE=1', '-e', 'HERALD_URL=http://herald-gateway:8080', '-e', 'HERALD_PROVISION=/work/provision.json', '-e', 'HERALD_SUMMARY_DIR=/tmp', `/scripts/${journey}.ts`],
          env: undefined,
          mounts: [
            { name: 'scripts', mountPath: '/scripts', readOnly: true },
            { name: 'work', mountPath: '/work', readOnly: true },
            { name: 'tmp', mountPath: '/tmp' },
          ],
        },
      );
      // The provisioning sidecar: Herald's image, the operator CLI's database, started once the file exists.
      const [provision, ...moreInit] = pod.initContainers;
      assert.equal(moreInit.length, 0);
      assert.deepEqual(
        { name: provision?.name, image: provision?.image, restart: provision?.restartPolicy, args: provision?.args, env: provision?.env, probe: provision?.startupProbe, mounts: provision?.volumeMounts },
        {
          name: 'provision',
          image: 'registry.example.com/herald:1.4.2',
          restart: 'Always',
          args: ['loadtest/dist/run.js', 'provision', '--out', '/work/provision.json', '--hold'],
          env: [{ name: 'DATABASE_URL', valueFrom: { secretKeyRef: { name: 'herald-production', key: 'DATABASE_URL' } } }],
          probe: { exec: { command: ['node', '-e', "fs.accessSync('/work/provision.json')"] }, periodSeconds: 2, failureThreshold: 60 },
          mounts: [{ name: 'work', mountPath: '/work' }],
        },
      );
      for (const each of [k6, provision]) {
        assert.deepEqual(each?.securityContext, container(objects, 'gateway').securityContext);
        assert.deepEqual(each?.resources, { requests: { cpu: '100m', memory: '128Mi' }, limits: { cpu: '1', memory: '512Mi' } });
      }
      const scripts = pod.volumes.find((volume) => volume.name === 'scripts')?.configMap;
      assert.equal(scripts?.name, 'herald-load-scripts');
      assert.ok(scripts?.items.some((item) => item.key === 'lib_config.ts' && item.path === 'lib/config.ts'));
      assert.ok(scripts?.items.some((item) => item.key === `${journey}.ts` && item.path === `${journey}.ts`));
      assert.deepEqual(
        pod.volumes.filter((volume) => volume.emptyDir).map((volume) => [volume.name, volume.emptyDir?.sizeLimit]),
        [
          ['work', '1Mi'],
          ['tmp', '64Mi'],
        ],
      );
    }
  });

  test('the test pods reach only DNS, the gateway and PostgreSQL; the gateway lets them in beside gatewayFrom', () => {
    const policy = one<NetworkPolicy>(objects, 'NetworkPolicy', 'herald-load-test');
    assert.equal(policy.metadata.annotations?.['helm.sh/hook'], 'test');
    assert.deepEqual(policy.spec.podSelector.matchLabels, selects('load-test'));
    assert.deepEqual(policy.spec.ingress, []);
    assert.deepEqual(policy.spec.egress.slice(1), [
      { to: [fromComponent('gateway')], ports: tcp(8080) },
      { ports: tcp(5432), to: [{ ipBlock: { cidr: '10.20.0.0/24' } }] },
    ]);
    assert.deepEqual(one<NetworkPolicy>(objects, 'NetworkPolicy', 'herald-gateway').spec.ingress, [
      { ports: tcp(8080), from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } }] },
      { from: [fromComponent('load-test')], ports: tcp(8080) },
      { ports: tcp(9464) },
    ]);
  });

  test('with the default values (gatewayFrom empty: anyone) the gateway needs no extra rule; engagement\'s k6 also gets the token secret; the k6 image can be pinned elsewhere', async () => {
    const { yaml, objects: rendered } = await render(
      '--set',
      'loadTest.enabled=true',
      '--set',
      'loadTest.journeys={send,engagement}',
      '--set',
      'loadTest.activeDeadlineSeconds=60',
      '--set',
      'loadTest.k6Image.repository=mirror.example.com/grafana/k6',
      '--set',
      'loadTest.k6Image.tag=1.1.0',
    );
    await assertValidKubernetes(yaml, 1 + 5 * COMPONENTS.length + 2 + 1 + 2 + 1);
    assert.deepEqual(one<NetworkPolicy>(rendered, 'NetworkPolicy', 'herald-gateway').spec.ingress, [{ ports: tcp(8080) }, { ports: tcp(9464) }]);
    const secrets = (container: JobContainer | undefined) => container?.env?.filter((variable) => variable.valueFrom !== undefined).map((variable) => variable.name);
    assert.deepEqual(
      all<Job>(rendered, 'Job').map((job) => {
        const pod = job.spec.template.spec;
        return [job.metadata.name, job.spec.activeDeadlineSeconds, pod.containers[0]?.image, pod.containers[0]?.args.at(-1), secrets(pod.containers[0]), secrets(pod.initContainers[0])];
      }),
      [
        ['herald-load-send', 60, 'mirror.example.com/grafana/k6:1.1.0', '/scripts/send.ts', undefined, ['DATABASE_URL']],
        // It signs report tokens as the delivery fleet does.
        ['herald-load-engagement', 60, 'mirror.example.com/grafana/k6:1.1.0', '/scripts/engagement.ts', ['ENGAGEMENT_TOKEN_SECRET'], ['DATABASE_URL']],
      ],
    );
  });

  test("loadTest.journeys accepts exactly the journeys of loadtest/k6", async () => {
    const schema = JSON.parse(await readFile(join(chart, 'values.schema.json'), 'utf8')) as {
      properties: { loadTest: { properties: { journeys: { items: { enum: string[] } } } } };
    };
    const scripts = (await readdir(join(root, 'loadtest/k6'))).filter((file) => file.endsWith('.ts')).map((file) => file.replace(/\.ts$/, ''));
    assert.deepEqual(schema.properties.loadTest.properties.journeys.items.enum.sort(), scripts.sort());
  });
});

test('a false or 0 in a component overrides the default; a null variable is unset', async () => {
  const { yaml, objects } = await render(
    '--set',
    'components.delivery.autoscaling.enabled=false',
    '--set',
    'components.policy.podDisruptionBudget.enabled=false',
    '--set',
    'default.replicas=0',
    '--set',
    'components.policy.env.LOG_LEVEL=null',
    '--set',
    'components.gateway.env.UPGRADE_URL=null',
  );
  await assertValidKubernetes(yaml, 1 + 5 * COMPONENTS.length + 2 - 2);
  assert.deepEqual(
    all(objects, 'HorizontalPodAutoscaler').map((object) => object.metadata.name),
    ['herald-gateway'],
  );
  assert.equal(one<Deployment>(objects, 'Deployment', 'herald-delivery').spec.replicas, 0);
  assert.equal(all(objects, 'PodDisruptionBudget').filter((object) => object.metadata.name === 'herald-policy').length, 0);
  assert.equal(env(objects, 'policy').LOG_LEVEL, undefined);
  assert.equal(env(objects, 'policy').POLICY_CACHE_SIZE, '10000');
  assert.equal(env(objects, 'gateway').UPGRADE_URL, undefined);
  assert.equal(env(objects, 'gateway').LOG_LEVEL, 'info');
});

interface PodMonitor extends K8sObject {
  spec: { selector: { matchLabels: Record<string, string> }; podMetricsEndpoints: { port: string; path: string; interval: string; relabelings: unknown[] }[] };
}
interface PrometheusRule extends K8sObject {
  spec: { groups: { name: string; rules: { alert: string; expr: string; for?: string; labels: Record<string, string>; annotations: Record<string, string> }[] }[] };
}

describe('metrics: scrape annotations, PodMonitor, PrometheusRule and the dashboard, when asked for', () => {
  let objects: K8sObject[];
  const monitoring = [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }];
  before(async () => {
    const rendered = await render(
      ...['metrics.scrapeAnnotations=true', 'metrics.podMonitor.enabled=true', 'metrics.prometheusRule.enabled=true', 'metrics.dashboard.enabled=true'].flatMap((value) => ['--set', value]),
      '--set-json',
      `metrics.from=${JSON.stringify(monitoring)}`,
      '--set',
      'metrics.podMonitor.labels.release=prometheus',
    );
    objects = rendered.objects;
    // The defaults' objects, and a PodMonitor, a PrometheusRule and the dashboard's ConfigMap (the CRDs' schemas check the first two).
    await assertValidKubernetes(rendered.yaml, 1 + 5 * COMPONENTS.length + 2 + 3);
  });

  test('every pod carries the scrape annotations and a metrics port only the monitoring namespace reaches', () => {
    for (const name of COMPONENTS) {
      const annotations = one<Deployment>(objects, 'Deployment', `herald-${name}`).spec.template.metadata.annotations ?? {};
      assert.deepEqual([annotations['prometheus.io/scrape'], annotations['prometheus.io/port'], annotations['prometheus.io/path']], ['true', '9464', '/metrics'], name);
      assert.deepEqual(one<NetworkPolicy>(objects, 'NetworkPolicy', `herald-${name}`).spec.ingress.at(-1), { ports: tcp(9464), from: monitoring }, name);
    }
  });

  test('the PodMonitor scrapes the metrics port of every component of the release, naming the component', () => {
    const monitor = one<PodMonitor>(objects, 'PodMonitor', 'herald');
    assert.equal(monitor.metadata.labels.release, 'prometheus');
    assert.deepEqual(monitor.spec.selector.matchLabels, { 'app.kubernetes.io/name': 'herald', 'app.kubernetes.io/instance': 'herald' });
    assert.deepEqual(monitor.spec.podMetricsEndpoints, [
      {
        port: 'metrics',
        path: '/metrics',
        interval: '30s',
        relabelings: [{ sourceLabels: ['__meta_kubernetes_pod_label_app_kubernetes_io_component'], targetLabel: 'component' }],
      },
    ]);
  });

  test("the PrometheusRule holds the issue's alerts, each with a runbook section in docs/operating.md", async () => {
    const rules = one<PrometheusRule>(objects, 'PrometheusRule', 'herald').spec.groups.flatMap((group) => group.rules);
    assert.deepEqual(
      rules.map((rule) => rule.alert),
      ['HeraldConsumerLagGrowing', 'HeraldOutboxStuck', 'HeraldDeadLetters', 'HeraldWorkLoopLate', 'HeraldPushFailures', 'HeraldWakeUpSlow', 'HeraldComponentRestarting'],
    );
    // The anchors the docs pages get (gateway/src/docs.ts): the heading, lower-cased.
    const operating = await readFile(join(root, 'docs/operating.md'), 'utf8');
    const anchors = new Set([...operating.matchAll(/^#+ (.+)$/gm)].map((match) => (match[1] ?? '').toLowerCase().replace(/[`*]/g, '').replace(/[^a-z0-9_ -]/g, '').trim().replace(/\s+/g, '-')));
    for (const rule of rules) {
      assert.equal(rule.annotations.runbook_url, `http://localhost:8080/docs/operating#${rule.alert.toLowerCase()}`);
      assert.ok(anchors.has(rule.alert.toLowerCase()), `docs/operating.md has no section ${rule.alert}`);
      assert.ok(['warning', 'critical'].includes(rule.labels.severity ?? ''), rule.alert);
    }
    const restarting = rules.find((rule) => rule.alert === 'HeraldComponentRestarting');
    assert.ok(restarting);
    assert.match(restarting?.expr ?? '', new RegExp(`container=~"${[...COMPONENTS].sort().join('\\|')}"`));
  });

  test('promtool: each alert fires on the series that should raise it and stays quiet on the others (charts/test/alerts.promtool.yaml)', async () => {
    const folder = await mkdtemp(join(tmpdir(), 'herald-rules-'));
    try {
      const groups = one<PrometheusRule>(objects, 'PrometheusRule', 'herald').spec.groups;
      await writeFile(join(folder, 'herald-rules.yaml'), stringify({ groups }));
      await writeFile(join(folder, 'alerts.promtool.yaml'), await readFile(join(root, 'charts/test/alerts.promtool.yaml'), 'utf8'));
      const checked = await run(promtool, ['check', 'rules', join(folder, 'herald-rules.yaml')]);
      assert.equal(checked.code, 0, checked.stdout + checked.stderr);
      assert.match(checked.stdout, /SUCCESS: 7 rules found/);
      const tested = await run(promtool, ['test', 'rules', join(folder, 'alerts.promtool.yaml')]);
      assert.equal(tested.code, 0, tested.stdout + tested.stderr);
      assert.match(tested.stdout, /SUCCESS/);
      // Every alert has a test.
      const tests = await readFile(join(folder, 'alerts.promtool.yaml'), 'utf8');
      for (const { rules } of groups) for (const rule of rules) assert.match(tests, new RegExp(`alertname: ${rule.alert}$`, 'm'), rule.alert);
    } finally {
      await rm(folder, { recursive: true, force: true });
    }
  });

  test('the dashboard ConfigMap holds charts/herald/files/grafana/herald.json, for the Grafana sidecar', async () => {
    const dashboard = one<ConfigMap>(objects, 'ConfigMap', 'herald-dashboard');
    assert.equal(dashboard.metadata.labels.grafana_dashboard, '1');
    const file = await readFile(join(chart, 'files/grafana/herald.json'), 'utf8');
    assert.equal(dashboard.data['herald.json'], file);
    const parsed = JSON.parse(file) as { uid: string; panels: { title: string; targets?: { expr: string }[] }[] };
    assert.equal(parsed.uid, 'herald-overview');
    const titles = parsed.panels.map((panel) => panel.title);
    for (const title of ['Delivery', 'Kafka and outboxes', 'Work loops (timers, retries, expiries)', 'Approvals', 'Edge', 'HTTP and gRPC (rate, errors, duration) per component']) {
      assert.ok(titles.includes(title), title);
    }
  });

  test('metrics.port 0: no endpoint, so no port, annotation, PodMonitor or rule either', async () => {
    const { objects: off } = await render('--set', 'metrics.port=0', '--set', 'metrics.scrapeAnnotations=true', '--set', 'metrics.podMonitor.enabled=true', '--set', 'metrics.prometheusRule.enabled=true');
    assert.equal(all(off, 'PodMonitor').length + all(off, 'PrometheusRule').length, 0);
    for (const name of COMPONENTS) {
      assert.equal(env(off, name).METRICS_PORT, '0');
      assert.equal(env(off, name).METRICS_HOST, undefined);
      assert.deepEqual(container(off, name).ports.map((port) => port.name), [name === 'gateway' ? 'http' : 'grpc']);
      assert.equal(one<Deployment>(off, 'Deployment', `herald-${name}`).spec.template.metadata.annotations?.['prometheus.io/scrape'], undefined);
    }
  });
});

describe('values.schema.json refuses bad values', () => {
  let badValues: string;
  before(async () => {
    badValues = join(helmHome, 'bad-values.yaml');
    await writeFile(badValues, 'components:\n  gateway:\n    replicas: two\n  delivery:\n    env:\n      PUSH_MAX_ATTEMPTS: 5\n');
  });

  test('helm lint and helm template name each wrong field', async () => {
    for (const command of [['lint', '--strict', chart], ['template', 'herald', chart]]) {
      const result = await run(helm, [...command, '--values', badValues]);
      assert.equal(result.code, 1, result.stdout);
      const output = result.stdout + result.stderr;
      assert.match(output, /values don't meet the specifications of the schema/);
      assert.ok(output.includes("- at '/components/gateway/replicas': got string, want integer"), output);
      assert.ok(output.includes("- at '/components/delivery/env/PUSH_MAX_ATTEMPTS': got number, want null or string"), output);
    }
  });

  test('unknown settings and components without a port are refused', async () => {
    for (const [setting, problem] of [
      ['components.gateway.replica=3', "- at '/components/gateway': additional properties 'replica' not allowed"],
      ['components.journeys.replicas=1', "- at '/components/journeys': missing property 'port'"],
      ['components.delivery.uses={postgres,mysql}', "- at '/components/delivery/uses/1': value must be one of 'postgres', 'redis', 'kafka', 'internet', 'smtp'"],
      ['existingSecret=', "- at '/existingSecret': minLength: got 0, want 1"],
      ['trustProxy=everyone', "- at '/trustProxy': 'everyone' does not match pattern"],
      ['loadTest.journeys={identity,checkout}', "- at '/loadTest/journeys/1': value must be one of 'identity', 'subscribe', 'send', 'campaign', 'engagement', 'approval', 'authorize', 'mcp'"],
      ['loadTest.journeys={mcp,mcp}', "- at '/loadTest/journeys': items at 0 and 1 are equal"],
      ['loadTest.activeDeadlineSeconds=5', "- at '/loadTest/activeDeadlineSeconds': minimum: got 5, want 30"],
    ] as const) {
      const result = await run(helm, ['template', 'herald', chart, '--set', setting]);
      assert.equal(result.code, 1, setting);
      assert.match(result.stderr, /values don't meet the specifications of the schema/);
      assert.ok(result.stderr.includes(problem), result.stderr);
    }
  });
});

test('deploy/otel-collector.yaml takes OTLP in, batches, and exports to debug and OTLP; every name it uses is defined', async () => {
  type Section = Record<string, unknown>;
  const config = parse(await readFile(join(root, 'deploy/otel-collector.yaml'), 'utf8')) as {
    receivers: Section;
    processors: Section;
    exporters: Section;
    extensions: Section;
    service: { extensions: string[]; pipelines: Record<string, { receivers: string[]; processors: string[]; exporters: string[] }> };
  };
  assert.deepEqual(Object.keys(config.service.pipelines), ['traces']);
  const traces = config.service.pipelines.traces;
  assert.deepEqual(traces, { receivers: ['otlp'], processors: ['memory_limiter', 'batch'], exporters: ['debug', 'otlp'] });
  assert.deepEqual(config.receivers.otlp, { protocols: { grpc: { endpoint: '0.0.0.0:4317' }, http: { endpoint: '0.0.0.0:4318' } } });
  for (const name of traces?.processors ?? []) assert.ok(name in config.processors, name);
  for (const name of traces?.exporters ?? []) assert.ok(name in config.exporters, name);
  for (const name of config.service.extensions) assert.ok(name in config.extensions, name);
});
