import { pageRequest, type Pool } from '@herald/db';
import { PLACEHOLDER, randomId, SUBSCRIBER_PREFIX, subscriberFieldProblem } from '@herald/domain';
import { HeraldError, invalidFields, type FieldProblem } from '@herald/errors';
import { implementService } from '@herald/grpc';
import type { Logger } from '@herald/logging';
import { TemplateServiceService, type Template } from '@herald/proto/herald/campaign/v1/templates';

import * as store from './store.js';

/** /templates: reusable content with {{placeholders}}, newest-first pages of a workspace's own. */

/** Problems of the `{{...}}` in `text`: every `{{` opens a well-formed placeholder, and per-subscriber ones name a field. */
export function placeholderProblem(text: string): string | undefined {
  const rest = text.replace(PLACEHOLDER, '');
  if (rest.includes('{{') || rest.includes('}}')) return 'has a malformed placeholder: write {{name}} or {{name|fallback}}';
  for (const [, name] of text.matchAll(PLACEHOLDER)) {
    const problem = name?.startsWith(SUBSCRIBER_PREFIX) ? subscriberFieldProblem(name.slice(SUBSCRIBER_PREFIX.length)) : undefined;
    if (problem) return `holds ${problem}`;
  }
  return undefined;
}

/**
 * A template's text with its variables filled from `variables` (a campaign copies the result). A
 * placeholder with no value takes its fallback; one with neither is a problem naming it.
 * Per-subscriber placeholders stay: the fleet fills them for each recipient.
 */
export function fillPlaceholders(text: string, variables: Readonly<Record<string, string>>, field: string, problems: FieldProblem[]): string {
  const problem = placeholderProblem(text);
  if (problem) {
    problems.push({ field, in: 'body', problem });
    return text;
  }
  return text.replace(PLACEHOLDER, (whole, name: string, fallback: string | undefined) => {
    if (name.startsWith(SUBSCRIBER_PREFIX)) return whole;
    const value = variables[name];
    if (value !== undefined) return value;
    if (fallback !== undefined) return fallback.trim();
    problems.push({ field: `variables.${name}`, in: 'body', problem: `is required by the template's ${field} ({{${name}}} has no default)` });
    return whole;
  });
}

const notFound = (id: string): HeraldError => new HeraldError('not_found', `No template ${id}.`, { title: 'Not found' });

function toTemplate(row: store.TemplateRow): Template {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    name: row.name,
    title: row.title,
    body: row.body,
    iconUrl: row.icon_url ?? '',
    imageUrl: row.image_url ?? '',
    actionUrl: row.action_url ?? '',
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/** Checks the placeholders of the fields given; every problem in one 400. */
function checkContent(content: Partial<store.TemplateContent>): void {
  const problems: FieldProblem[] = [];
  for (const [column, field] of [
    ['title', 'title'],
    ['body', 'body'],
    ['action_url', 'actionUrl'],
  ] as const) {
    const value = content[column];
    const problem = value ? placeholderProblem(value) : undefined;
    if (problem) problems.push({ field, in: 'body', problem });
  }
  if (problems.length > 0) throw invalidFields('body', problems);
}

/** An empty proto string is an unset column. */
export const orNull = (value: string): string | null => (value === '' ? null : value);

export function templateHandlers(pool: Pool, logger: Logger) {
  return implementService(
    TemplateServiceService,
    {
      async listTemplates({ workspaceId, limit, cursor }) {
        const request = pageRequest(limit, cursor);
        const { rows, nextCursor } = request.page(await store.listTemplates(pool, workspaceId, request.after, request.fetch));
        return { templates: rows.map(toTemplate), nextCursor };
      },

      async createTemplate(request) {
        const content: store.TemplateContent = {
          name: request.name,
          title: request.title,
          body: request.body,
          icon_url: orNull(request.iconUrl),
          image_url: orNull(request.imageUrl),
          action_url: orNull(request.actionUrl),
        };
        checkContent(content);
        const row = await store.insertTemplate(pool, `tpl_${randomId(24)}`, request.workspaceId, content);
        logger.info({ workspaceId: row.workspace_id, templateId: row.id }, 'template created');
        return { template: toTemplate(row) };
      },

      async getTemplate({ workspaceId, templateId }) {
        const row = await store.findTemplate(pool, workspaceId, templateId);
        if (!row) throw notFound(templateId);
        return { template: toTemplate(row) };
      },

      async updateTemplate(request) {
        const changes: Partial<store.TemplateContent> = {
          ...(request.name !== undefined ? { name: request.name } : {}),
          ...(request.title !== undefined ? { title: request.title } : {}),
          ...(request.body !== undefined ? { body: request.body } : {}),
          ...(request.iconUrl !== undefined ? { icon_url: orNull(request.iconUrl) } : {}),
          ...(request.imageUrl !== undefined ? { image_url: orNull(request.imageUrl) } : {}),
          ...(request.actionUrl !== undefined ? { action_url: orNull(request.actionUrl) } : {}),
        };
        checkContent(changes);
        const row = Object.keys(changes).length === 0 ? await store.findTemplate(pool, request.workspaceId, request.templateId) : await store.updateTemplate(pool, request.workspaceId, request.templateId, changes);
        if (!row) throw notFound(request.templateId);
        return { template: toTemplate(row) };
      },

      async deleteTemplate({ workspaceId, templateId }) {
        if (!(await store.deleteTemplate(pool, workspaceId, templateId))) throw notFound(templateId);
        logger.info({ workspaceId, templateId }, 'template deleted');
        return {};
      },
    },
    logger,
  );
}
