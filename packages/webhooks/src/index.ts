export { assertWebhookUrl } from './address.js';
export { startWebhookDispatcher, type WebhookDispatcherOptions } from './dispatcher.js';
export { enqueueWebhook, webhookMigrations, type WebhookEvent } from './queue.js';
export { dispatcherSettings, webhookSettings } from './settings.js';
