// k6/metrics: Counter, Gauge, Rate, Trend, created in the init context; each add() is a sample
// tagged with the VU's current tags, aggregated by the host's metrics (loadtest/runner/metrics.ts).
import type { MetricType } from '../../runner/metrics.js';
import { currentTags, declareMetric, record } from '../context.js';
import type { Tags } from '../protocol.js';

abstract class Metric {
  constructor(
    readonly name: string,
    type: MetricType,
    isTime = false,
  ) {
    declareMetric(name, type, isTime);
  }

  add(value: number | boolean, tags: Tags = {}): void {
    const number = typeof value === 'boolean' ? Number(value) : value;
    if (typeof number !== 'number' || !Number.isFinite(number)) throw new Error(`metric "${this.name}": ${String(value)} is not a finite number`);
    record(this.name, number, { ...currentTags(), ...tags });
  }
}

export class Counter extends Metric {
  constructor(name: string) {
    super(name, 'counter');
  }
}

export class Gauge extends Metric {
  constructor(name: string) {
    super(name, 'gauge');
  }
}

export class Rate extends Metric {
  constructor(name: string) {
    super(name, 'rate');
  }
  override add(value: number | boolean, tags: Tags = {}): void {
    super.add(value === true || (typeof value === 'number' && value !== 0) ? 1 : 0, tags);
  }
}

export class Trend extends Metric {
  constructor(name: string, isTime = false) {
    super(name, 'trend', isTime);
  }
}

export default { Counter, Gauge, Rate, Trend };
