// k6/timers: the VU's own event loop timers.
export const { setTimeout, clearTimeout, setInterval, clearInterval } = globalThis;
export default { setTimeout, clearTimeout, setInterval, clearInterval };
