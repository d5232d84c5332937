import type { RoutingLogic } from '../config/config.js';
import type { RoutingPolicy } from './policy.js';
import { RoundRobinPolicy } from './roundrobin.js';

export function createPolicy(name: RoutingLogic): RoutingPolicy {
  switch (name) {
    case 'roundrobin':
      return new RoundRobinPolicy();
  }
}
