// k6/execution: the VU's and the scenario's counters this runtime keeps; what it does not keep
// throws when read.
import { notImplemented, vu } from '../context.js';

function running(api: string): NonNullable<typeof vu.running> {
  if (!vu.running) throw new Error(`k6/execution ${api} is only defined inside an iteration`);
  return vu.running;
}

const unsupported = (api: string): PropertyDescriptor => ({
  get(): never {
    throw notImplemented(`k6/execution ${api}`);
  },
});

const vuInfo = Object.defineProperties(
  {},
  {
    idInTest: { get: () => vu.id, enumerable: true },
    idInInstance: { get: () => vu.id, enumerable: true },
    iterationInInstance: { get: () => running('vu.iterationInInstance').iteration, enumerable: true },
    iterationInScenario: { get: () => running('vu.iterationInScenario').iteration, enumerable: true },
    tags: unsupported('vu.tags'),
    metrics: unsupported('vu.metrics'),
  },
);

const scenario = Object.defineProperties(
  {},
  {
    name: { get: () => running('scenario.name').scenario, enumerable: true },
    iterationInTest: { get: () => running('scenario.iterationInTest').iterationInTest, enumerable: true },
    iterationInInstance: { get: () => running('scenario.iterationInInstance').iterationInTest, enumerable: true },
    executor: unsupported('scenario.executor'),
    startTime: unsupported('scenario.startTime'),
    progress: unsupported('scenario.progress'),
  },
);

const instance = Object.defineProperties({}, { iterationsCompleted: unsupported('instance.iterationsCompleted'), iterationsInterrupted: unsupported('instance.iterationsInterrupted'), vusActive: unsupported('instance.vusActive'), vusInitialized: unsupported('instance.vusInitialized'), currentTestRunDuration: unsupported('instance.currentTestRunDuration') });

const test = Object.defineProperties(
  {
    abort(): never {
      throw notImplemented('k6/execution test.abort()');
    },
    fail(): never {
      throw notImplemented('k6/execution test.fail()');
    },
  },
  { options: unsupported('test.options') },
);

export { vuInfo as vu, scenario, instance, test };
export default { vu: vuInfo, scenario, instance, test };
