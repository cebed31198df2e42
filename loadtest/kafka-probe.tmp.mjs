import { Kafka, logLevel } from 'kafkajs';
import { infraComponent } from '/work/wt-durable/packages/testkit/dist/src/index.js';
let tUp = 0;
const lines = [];
const kafka = new Kafka({ clientId: 'probe', brokers: process.env.KAFKA_BROKERS.split(','), logLevel: logLevel.DEBUG,
  retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: Number.MAX_SAFE_INTEGER },
  logCreator: () => ({ level, log }) => { const { message, timestamp, ...rest } = log; lines.push([Date.now(), level, message, JSON.stringify(rest).slice(0, 160)]); } });
const c = kafka.consumer({ groupId: `probe-${Date.now()}`, sessionTimeout: 6000, heartbeatInterval: 600, retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: Number.MAX_SAFE_INTEGER } });
c.on(c.events.GROUP_JOIN, (e) => lines.push([Date.now(), 'JOIN', e.payload.memberId, '']));
await c.connect(); await c.subscribe({ topics: ['herald.delivery.jobs'] }); await c.run({ eachMessage: async () => {} });
await new Promise((r) => setTimeout(r, 3000));
await infraComponent('crash', 'kafka');
await new Promise((r) => setTimeout(r, 2000));
await infraComponent('start', 'kafka');
tUp = Date.now();
await new Promise((r) => setTimeout(r, 12000));
for (const [t, level, msg, rest] of lines) if (t >= tUp - 40000) console.log(((t - tUp) / 1000).toFixed(2), level, msg, rest);
await c.disconnect(); process.exit(0);
