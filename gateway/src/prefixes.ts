/** Where the gateway's APIs live: the server API (API keys) and the browser SDK's endpoints (site keys). */
export const API_PREFIX = '/api/v1/server';
export const PUBLIC_PREFIX = '/api/v1';
