// k6/data: SharedArray. k6 shares one copy between VUs; here each VU's worker builds its own from
// the same function, in the init context, frozen as in k6.
import { vu } from '../context.js';

export class SharedArray<T> {
  constructor(name: string, build: () => T[]) {
    if (!vu.inInit) throw new Error(`SharedArray "${name}" must be created in the init context`);
    const items = build();
    if (!Array.isArray(items)) throw new Error(`SharedArray "${name}": the function must return an array`);
    return Object.freeze(items.map((item) => Object.freeze(item))) as unknown as SharedArray<T>;
  }
}

export default { SharedArray };
