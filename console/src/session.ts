import { isRole, roleAllows, type Scope } from '@herald/domain/scopes';
import type { Me } from '@herald/sdk';
import { createContext, useContext } from 'react';

/**
 * The signed-in member, and what their role allows: the same table the gateway checks
 * (@herald/domain's roleAllows), so a button is shown exactly when the API would accept its call.
 */

export const SessionContext = createContext<Me | undefined>(undefined);

export function useMe(): Me {
  const me = useContext(SessionContext);
  if (!me) throw new Error('useMe outside a signed-in page');
  return me;
}

export function useCan(): (scope: Scope, method: 'GET' | 'POST' | 'PUT' | 'DELETE') => boolean {
  const { role } = useMe();
  return (scope, method) => isRole(role) && roleAllows(role, scope, method);
}
