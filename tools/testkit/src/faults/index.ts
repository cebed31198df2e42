import { campaignKill } from './campaign-kill.js';
import { decisionKill } from './decision-kill.js';
import { deliveryKill } from './delivery-kill.js';
import type { Fault, FaultName } from './drill.js';
import { flowKill } from './flow-kill.js';
import { gatewayKill } from './gateway-kill.js';
import { kafkaCrash, kafkaRestart } from './kafka.js';
import { postgresCrash, postgresRestart } from './postgres.js';
import { push429, push503, pushReset } from './push-service.js';
import { redisCrash, redisRestart } from './redis.js';

/** Every fault of the drill, by name (the order the drill injects them in is FAULTS). */
export const FAULT_MODULES: Record<FaultName, Fault> = {
  'delivery-kill': deliveryKill,
  'campaign-kill': campaignKill,
  'decision-kill': decisionKill,
  'flow-kill': flowKill,
  'gateway-kill': gatewayKill,
  'postgres-restart': postgresRestart,
  'postgres-crash': postgresCrash,
  'kafka-restart': kafkaRestart,
  'kafka-crash': kafkaCrash,
  'redis-restart': redisRestart,
  'redis-crash': redisCrash,
  'push-429': push429,
  'push-503': push503,
  'push-reset': pushReset,
};
