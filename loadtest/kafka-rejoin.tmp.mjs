import { startStack, infraComponent } from '/work/wt-durable/packages/testkit/dist/src/index.js';
const mode = process.argv[2] ?? 'stop';
const stack = await startStack({ sending: true, decisions: true, services: ['flow'] });
const procs = [...stack.services, ...stack.gateways];
const names = ['account','audience','campaign','delivery','decision','flow','gateway'];
await new Promise((r) => setTimeout(r, 3000));
const marks = procs.map((p) => p.output().length);
const t0 = Date.now();
if (mode === 'crash') await infraComponent('crash', 'kafka'); else await infraComponent('stop', 'kafka');
const tDown = Date.now();
await new Promise((r) => setTimeout(r, 3000));
await infraComponent('start', 'kafka');
const tUp = Date.now();
import('kafkajs').then(async ({ Kafka, logLevel }) => {
  const kafka = new Kafka({ clientId: 'probe', brokers: process.env.KAFKA_BROKERS.split(','), logLevel: logLevel.NOTHING });
  const c = kafka.consumer({ groupId: `probe-${Date.now()}` });
  c.on(c.events.GROUP_JOIN, () => console.log(`${((Date.now() - tUp)/1000).toFixed(2)}s PROBE fresh consumer joined`));
  await c.connect(); await c.subscribe({ topics: [stack.topicPrefix + 'herald.delivery.jobs'] }); await c.run({ eachMessage: async () => {} });
  setTimeout(() => c.disconnect(), 30000);
}).catch((e) => console.log('probe failed', e.message));
console.log(`kafka ${mode} took ${tDown - t0} ms; down ${tUp - tDown} ms (start returned at +0)`);
const seen = new Map();
const deadline = Date.now() + 60000;
while (Date.now() < deadline) {
  for (const [i, p] of procs.entries()) {
    const lines = p.output().slice(marks[i]).split('\n').filter(Boolean);
    for (const line of lines) {
      let j; try { j = JSON.parse(line); } catch { continue; }
      const key = `${i}:${j.time}:${j.msg}:${j.groupId ?? ''}`;
      if (seen.has(key)) continue;
      seen.set(key, true);
      if (/joined|crash|reachable|Kafka|consumer/i.test(j.msg)) console.log(`${(((typeof j.time === "number" ? j.time : Date.parse(j.time)) - tUp)/1000).toFixed(2)}s ${p.child.spawnargs.at(-1)} ${j.msg} ${j.groupId ?? ''} ${j.err?.message?.slice(0,80) ?? ''}`);
    }
  }
  await new Promise((r) => setTimeout(r, 500));
}
await stack.stop();
process.exit(0);
