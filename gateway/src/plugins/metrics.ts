import { setHttpRoute } from '@herald/telemetry';
import fp from 'fastify-plugin';

/** Labels each request's `http.server.request.duration` with its route's template (unmatched paths stay unlabelled). */
export const routeMetrics = fp(
  async (app) => {
    app.addHook('onRequest', async (request) => {
      const route = request.routeOptions.url;
      if (route !== undefined) setHttpRoute(route);
    });
  },
  { name: 'route-metrics' },
);
